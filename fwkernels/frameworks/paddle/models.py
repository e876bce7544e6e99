"""PaddlePaddle definitions of the ten models, layer for layer as in torch/models.py / torchvision.

``paddle.vision.models`` is not used: its VGG-19, ResNet-50 and MobileNet v2 have torchvision's
structure and counts but Paddle's initialisation (He normal over the fan in, Xavier linear
layers), and their layers take no layout; its AlexNet lacks the adaptive 6x6 pooling and uses
"downscale_in_infer" dropout.  docs/models.md gives the structure and counts.

Every image model is built in either layout, ``NCHW`` (Paddle's default) or ``NHWC`` (the
fairness policy's channels-last at tf32 and bf16 on a GPU: docs/fairness.md): convolution
weights are (out, in, kh, kw) in both, and a flattened NHWC map is ordered (H, W, C), a
permutation of the first classifier's rows.  Every layer starts from the PyTorch reference's
initial weights (docs/models.md, *Initialisation*): PyTorch's default U(+-1/sqrt(fan in)) for
convolutions and linear layers, weights and biases; torchvision's He normal (fan out)
convolutions (bias zero) and N(0, 0.01) classifiers (bias zero) for VGG-19, ResNet-50 and
MobileNet v2; batch norm scale 1, shift 0.
"""
from __future__ import annotations

from typing import Callable, Dict, List, Sequence

import paddle
from paddle import nn

from fwkernels.models import (ALEXNET_FEATURES, CONVNETS, GNMT_HIDDEN, GNMT_VOCAB, MOBILENET_V2,
                              NCF_ITEMS, NCF_USERS, RESNET50_STAGES, VGG_19, Conv, InceptionBlock,
                              Pool, realize, vgg_plan)

LAYOUTS = ("NCHW", "NHWC")
TORCH_DEFAULT, HE_FAN_OUT, SMALL_NORMAL = "torch_default", "he_fan_out", "small_normal"


def build(name: str, layout: str = "NCHW") -> nn.Layer:
    if name in CONVNETS:
        return convnet(name, Layers(layout))
    if name in IMAGE_MODELS:
        return IMAGE_MODELS[name](Layers(layout))
    return {"gnmt_v2": GNMT, "ncf": NCF}[name]()


def _uniform(fan_in: int) -> paddle.ParamAttr:
    """PyTorch's default for convolution and linear weights and biases: U(+-1/sqrt(fan_in))."""
    bound = fan_in ** -0.5
    return paddle.ParamAttr(initializer=nn.initializer.Uniform(-bound, bound))


def _normal(std: float) -> paddle.ParamAttr:
    return paddle.ParamAttr(initializer=nn.initializer.Normal(0.0, std))


def _zero() -> paddle.ParamAttr:
    return paddle.ParamAttr(initializer=nn.initializer.Constant(0.0))


def linear(cin: int, cout: int, bias: bool = True, init: str = TORCH_DEFAULT) -> nn.Linear:
    if init == SMALL_NORMAL:
        return nn.Linear(cin, cout, weight_attr=_normal(0.01), bias_attr=_zero() if bias else False)
    return nn.Linear(cin, cout, weight_attr=_uniform(cin), bias_attr=_uniform(cin) if bias else False)


def embedding(count: int, dim: int) -> nn.Embedding:
    """PyTorch's default embedding initialisation: N(0, 1)."""
    return nn.Embedding(count, dim, weight_attr=_normal(1.0))


class Layers:
    """The image layers of one layout, with the reference initial weights."""

    def __init__(self, layout: str) -> None:
        if layout not in LAYOUTS:
            raise ValueError(f"layout {layout!r}: one of {', '.join(LAYOUTS)}")
        self.layout = layout
        self.channel_axis = 1 if layout == "NCHW" else 3

    def conv(self, cin: int, cout: int, kernel: int, stride: int = 1, padding: int = 0,
             groups: int = 1, bias: bool = True, init: str = TORCH_DEFAULT) -> nn.Conv2D:
        if init == HE_FAN_OUT:  # kaiming_normal_(mode="fan_out"): fan out = cout * kh * kw
            weight, bias_attr = _normal((2.0 / (cout * kernel * kernel)) ** 0.5), _zero()
        else:
            fan_in = cin // groups * kernel * kernel
            weight, bias_attr = _uniform(fan_in), _uniform(fan_in)
        return nn.Conv2D(cin, cout, kernel, stride, padding, groups=groups, weight_attr=weight,
                         bias_attr=bias_attr if bias else False, data_format=self.layout)

    def conv_bn(self, cin: int, cout: int, kernel: int, stride: int = 1,
                groups: int = 1) -> List[nn.Layer]:
        """torchvision's convolution (no bias, He normal fan out) + BatchNorm2d(eps 1e-5, momentum
        0.1, which is Paddle's momentum 0.9)."""
        return [self.conv(cin, cout, kernel, stride, (kernel - 1) // 2, groups, bias=False,
                          init=HE_FAN_OUT),
                nn.BatchNorm2D(cout, momentum=0.9, epsilon=1e-5, data_format=self.layout)]

    def max_pool(self, kernel: int, stride: int, padding: int = 0) -> nn.MaxPool2D:
        return nn.MaxPool2D(kernel, stride, padding, data_format=self.layout)

    def average_pool(self, kernel: int, stride: int) -> nn.AvgPool2D:
        return nn.AvgPool2D(kernel, stride, data_format=self.layout)

    def adaptive_pool(self, size: int) -> nn.AdaptiveAvgPool2D:
        return nn.AdaptiveAvgPool2D(size, data_format=self.layout)

    def plan(self, plan: Sequence[object], init: str = TORCH_DEFAULT) -> List[nn.Layer]:
        """The layers of a layer plan (fwkernels.models: Conv + ReLU, Pool, InceptionBlock)."""
        def conv(c: Conv) -> List[nn.Layer]:
            return [self.conv(c.cin, c.cout, c.kernel, c.stride, c.padding, init=init), nn.ReLU()]

        def pool(p: Pool) -> nn.Layer:
            return self.max_pool(p.kernel, p.stride, p.padding)

        return realize(list(plan), conv, pool, lambda block: Inception(block, self))


class Inception(nn.Layer):
    def __init__(self, block: InceptionBlock, layers: Layers) -> None:
        super().__init__()
        self.branches = nn.LayerList([nn.Sequential(*layers.plan(b)) for b in block.branches])
        self.channel_axis = layers.channel_axis

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return paddle.concat([branch(x) for branch in self.branches], axis=self.channel_axis)


def _classifier(features: int, hidden: Sequence[int], classes: int = 1000, dropout: str = "",
                init: str = TORCH_DEFAULT) -> nn.Sequential:
    """Linear + ReLU per hidden width, then the output layer; dropout (0.5) "before" each hidden
    layer (torchvision's AlexNet), "after" each ReLU (VGG) or none (convnet-benchmarks)."""
    modules: List[nn.Layer] = [nn.Flatten()]
    for width in hidden:
        if dropout == "before":
            modules.append(nn.Dropout(0.5))
        modules += [linear(features, width, init=init), nn.ReLU()]
        if dropout == "after":
            modules.append(nn.Dropout(0.5))
        features = width
    return nn.Sequential(*modules, linear(features, classes, init=init))


def alexnet(layers: Layers) -> nn.Layer:
    """torchvision's AlexNet: adaptive 6x6 average pooling, dropout before both hidden layers."""
    return nn.Sequential(*layers.plan(ALEXNET_FEATURES), layers.adaptive_pool(6),
                         _classifier(256 * 6 * 6, [4096, 4096], dropout="before"))


def vgg19(layers: Layers) -> nn.Layer:
    """torchvision's vgg19 (configuration E, no batch norm)."""
    return nn.Sequential(*layers.plan(vgg_plan(VGG_19), init=HE_FAN_OUT), layers.adaptive_pool(7),
                         _classifier(512 * 7 * 7, [4096, 4096], dropout="after",
                                     init=SMALL_NORMAL))


class Bottleneck(nn.Layer):
    """ResNet v1.5 bottleneck: the stride sits on the 3x3 convolution (torchvision)."""

    expansion = 4

    def __init__(self, layers: Layers, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * self.expansion
        self.body = nn.Sequential(*layers.conv_bn(cin, width, 1), nn.ReLU(),
                                  *layers.conv_bn(width, width, 3, stride), nn.ReLU(),
                                  *layers.conv_bn(width, cout, 1))
        self.downsample = (nn.Sequential(*layers.conv_bn(cin, cout, 1, stride))
                           if stride != 1 or cin != cout else None)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        identity = self.downsample(x) if self.downsample is not None else x
        return nn.functional.relu(self.body(x) + identity)


def resnet50(layers: Layers) -> nn.Layer:
    net: List[nn.Layer] = [*layers.conv_bn(3, 64, 7, 2), nn.ReLU(), layers.max_pool(3, 2, 1)]
    channels = 64
    for width, blocks, stride in RESNET50_STAGES:
        for i in range(blocks):
            net.append(Bottleneck(layers, channels, width, stride if i == 0 else 1))
            channels = width * Bottleneck.expansion
    return nn.Sequential(*net, layers.adaptive_pool(1), nn.Flatten(), linear(channels, 1000))


class InvertedResidual(nn.Layer):
    def __init__(self, layers: Layers, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_residual = stride == 1 and cin == cout
        net = [*layers.conv_bn(cin, hidden, 1), nn.ReLU6()] if expand != 1 else []
        net += [*layers.conv_bn(hidden, hidden, 3, stride, groups=hidden), nn.ReLU6(),
                *layers.conv_bn(hidden, cout, 1)]
        self.body = nn.Sequential(*net)

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return x + self.body(x) if self.use_residual else self.body(x)


def mobilenet_v2(layers: Layers) -> nn.Layer:
    """torchvision's mobilenet_v2, width 1.0."""
    net: List[nn.Layer] = [*layers.conv_bn(3, 32, 3, 2), nn.ReLU6()]
    channels = 32
    for t, c, n, s in MOBILENET_V2:
        for i in range(n):
            net.append(InvertedResidual(layers, channels, c, s if i == 0 else 1, t))
            channels = c
    return nn.Sequential(*net, *layers.conv_bn(channels, 1280, 1), nn.ReLU6(),
                         layers.adaptive_pool(1), nn.Flatten(), nn.Dropout(0.2),
                         linear(1280, 1000, init=SMALL_NORMAL))


IMAGE_MODELS: Dict[str, Callable[[Layers], nn.Layer]] = {
    "alexnet": alexnet, "vgg19": vgg19, "resnet50": resnet50, "mobilenet_v2": mobilenet_v2}


def convnet(name: str, layers: Layers) -> nn.Layer:
    """A convnet-benchmarks model (``CONVNETS`` in fwkernels/models.py)."""
    net = CONVNETS[name]
    pool = [layers.average_pool(net.average_pool, 1)] if net.average_pool else []
    return nn.Sequential(*layers.plan(net.features), *pool, _classifier(net.flat, net.hidden))


# ---- NCF (NeuMF) ----

class NCF(nn.Layer):
    def __init__(self, users: int = NCF_USERS, items: int = NCF_ITEMS, mf_dim: int = 64,
                 mlp_sizes: Sequence[int] = (256, 256, 128, 64)) -> None:
        super().__init__()
        self.mf_user = embedding(users, mf_dim)
        self.mf_item = embedding(items, mf_dim)
        self.mlp_user = embedding(users, mlp_sizes[0] // 2)
        self.mlp_item = embedding(items, mlp_sizes[0] // 2)
        mlp: List[nn.Layer] = []
        for cin, cout in zip(mlp_sizes[:-1], mlp_sizes[1:]):
            mlp += [linear(cin, cout), nn.ReLU()]
        self.mlp = nn.Sequential(*mlp)
        self.final = linear(mf_dim + mlp_sizes[-1], 1)

    def forward(self, user: paddle.Tensor, item: paddle.Tensor) -> paddle.Tensor:
        mf = self.mf_user(user) * self.mf_item(item)
        mlp = self.mlp(paddle.concat([self.mlp_user(user), self.mlp_item(item)], axis=-1))
        return self.final(paddle.concat([mf, mlp], axis=-1)).squeeze(-1)


# ---- GNMT v2 ----

class NormalizedBahdanauAttention(nn.Layer):
    def __init__(self, size: int) -> None:
        super().__init__()
        init = nn.initializer
        self.linear_q = linear(size, size, bias=False)
        self.linear_k = linear(size, size, bias=False)
        self.linear_att = self.create_parameter([size], default_initializer=init.Uniform(-0.1, 0.1))
        self.normalize_scalar = self.create_parameter(
            [1], default_initializer=init.Constant(size ** -0.5))
        self.normalize_bias = self.create_parameter([size], default_initializer=init.Constant(0.0))

    def forward(self, query: paddle.Tensor, keys: paddle.Tensor) -> paddle.Tensor:
        q = self.linear_q(query).unsqueeze(2)  # (b, tq, 1, n)
        k = self.linear_k(keys).unsqueeze(1)  # (b, 1, tk, n)
        v = self.linear_att / paddle.linalg.norm(self.linear_att) * self.normalize_scalar
        scores = paddle.matmul(paddle.tanh(q + k + self.normalize_bias), v)  # (b, tq, tk)
        return paddle.matmul(nn.functional.softmax(scores, axis=-1), keys)  # (b, tq, n)


class GNMT(nn.Layer):
    """paddle.nn.LSTM carries two bias vectors per gate set, as PyTorch's does."""

    def __init__(self, vocab: int = GNMT_VOCAB, hidden: int = GNMT_HIDDEN) -> None:
        super().__init__()
        self.embedding = embedding(vocab, hidden)  # shared by source and target
        self.encoder = nn.LayerList([
            nn.LSTM(hidden, hidden, direction="bidirect"),
            nn.LSTM(2 * hidden, hidden),
            nn.LSTM(hidden, hidden),
            nn.LSTM(hidden, hidden),
        ])
        self.decoder_first = nn.LSTM(hidden, hidden)
        self.attention = NormalizedBahdanauAttention(hidden)
        self.decoder = nn.LayerList([nn.LSTM(2 * hidden, hidden) for _ in range(3)])
        self.classifier = linear(hidden, vocab)

    def forward(self, src: paddle.Tensor, tgt: paddle.Tensor) -> paddle.Tensor:
        x = self.embedding(src)
        for i, lstm in enumerate(self.encoder):
            y = lstm(x)[0]
            x = y + x if i >= 2 else y  # residual connections from the third layer on
        keys = x
        y = self.decoder_first(self.embedding(tgt))[0]
        context = self.attention(y, keys)
        for i, lstm in enumerate(self.decoder):
            out = lstm(paddle.concat([y, context], axis=-1))[0]
            y = out + y if i >= 1 else out  # decoder layers 3 and 4 are residual
        return self.classifier(y)
