"""PaddlePaddle definitions of the ten models, layer for layer as in torch/models.py / torchvision.

``paddle.vision.models`` builds vgg19, resnet50 and mobilenet_v2 exactly as
torchvision does.  Its AlexNet has torchvision's count but not its structure
(no adaptive 6x6 pooling, so small inputs fail, and "downscale_in_infer"
dropout), so AlexNet is defined here, as are the models no zoo holds: GNMT v2,
NCF (NeuMF) and the convnet-benchmarks models.  docs/models.md gives the
structure and counts.  All image models take NCHW input, Paddle's layout.

The layers defined here start from PyTorch's default initialisation (Paddle's
defaults differ: He-normal convolutions, Xavier linear layers and embeddings),
so that they train as the torch/models.py definitions do; the zoo models keep
Paddle's initialisation.
"""
from __future__ import annotations

from typing import List, Sequence

import paddle
from paddle import nn

from fwkernels.models import (GNMT_HIDDEN, GNMT_VOCAB, GOOGLENET_BLOCKS, NCF_ITEMS, NCF_USERS,
                              VGG_A)

VISION_MODELS = ("vgg19", "resnet50", "mobilenet_v2")


def build(name: str) -> nn.Layer:
    if name in VISION_MODELS:
        return getattr(paddle.vision.models, name)()
    return {"alexnet": alexnet, "gnmt_v2": GNMT, "ncf": NCF, "alexnet_owt": alexnet_owt,
            "overfeat": overfeat, "vgg_a": vgg_a, "googlenet": GoogLeNetV1}[name]()


def _uniform(fan_in: int) -> paddle.ParamAttr:
    """PyTorch's default for convolution and linear weights and biases: U(+-1/sqrt(fan_in))."""
    bound = fan_in ** -0.5
    return paddle.ParamAttr(initializer=nn.initializer.Uniform(-bound, bound))


def conv2d(cin: int, cout: int, kernel: int, stride: int = 1, padding: int = 0) -> nn.Conv2D:
    fan_in = cin * kernel * kernel
    return nn.Conv2D(cin, cout, kernel, stride, padding,
                     weight_attr=_uniform(fan_in), bias_attr=_uniform(fan_in))


def linear(cin: int, cout: int, bias: bool = True) -> nn.Linear:
    return nn.Linear(cin, cout, weight_attr=_uniform(cin), bias_attr=_uniform(cin) if bias else False)


def embedding(count: int, dim: int) -> nn.Embedding:
    """PyTorch's default embedding initialisation: N(0, 1)."""
    return nn.Embedding(count, dim, weight_attr=paddle.ParamAttr(initializer=nn.initializer.Normal()))


def _conv_relu(cin: int, cout: int, kernel: int, stride: int = 1, padding: int = 0) -> List[nn.Layer]:
    return [conv2d(cin, cout, kernel, stride, padding), nn.ReLU()]


def _classifier(features: int, hidden: Sequence[int], classes: int = 1000,
                dropout: float = 0.0) -> nn.Sequential:
    layers: List[nn.Layer] = [nn.Flatten()]
    for width in hidden:
        if dropout:
            layers.append(nn.Dropout(dropout))
        layers += [linear(features, width), nn.ReLU()]
        features = width
    return nn.Sequential(*layers, linear(features, classes))


def _alexnet_features() -> List[nn.Layer]:
    return [
        *_conv_relu(3, 64, 11, 4, 2), nn.MaxPool2D(3, 2),
        *_conv_relu(64, 192, 5, 1, 2), nn.MaxPool2D(3, 2),
        *_conv_relu(192, 384, 3, 1, 1), *_conv_relu(384, 256, 3, 1, 1),
        *_conv_relu(256, 256, 3, 1, 1), nn.MaxPool2D(3, 2),
    ]


def alexnet() -> nn.Layer:
    """torchvision's AlexNet: adaptive 6x6 average pooling, dropout before both hidden layers."""
    return nn.Sequential(*_alexnet_features(), nn.AdaptiveAvgPool2D((6, 6)),
                         _classifier(256 * 6 * 6, [4096, 4096], dropout=0.5))


# ---- convnet-benchmarks (no dropout, as benchmarked there) ----

def alexnet_owt() -> nn.Layer:
    """AlexNet, one-tower variant of "One weird trick" (arXiv:1404.5997); input 224."""
    return nn.Sequential(*_alexnet_features(), _classifier(256 * 6 * 6, [4096, 4096]))


def overfeat() -> nn.Layer:
    """Overfeat "fast" model; input 231."""
    return nn.Sequential(
        *_conv_relu(3, 96, 11, 4), nn.MaxPool2D(2, 2),
        *_conv_relu(96, 256, 5), nn.MaxPool2D(2, 2),
        *_conv_relu(256, 512, 3, 1, 1), *_conv_relu(512, 1024, 3, 1, 1),
        *_conv_relu(1024, 1024, 3, 1, 1), nn.MaxPool2D(2, 2),
        _classifier(1024 * 6 * 6, [3072, 4096]),
    )


def vgg_a() -> nn.Layer:
    """VGG configuration A (11 weight layers), no batch norm; input 224."""
    layers: List[nn.Layer] = []
    channels = 3
    for v in VGG_A:
        if v == "M":
            layers.append(nn.MaxPool2D(2, 2))
        else:
            layers += _conv_relu(channels, int(v), 3, 1, 1)
            channels = int(v)
    return nn.Sequential(*layers, _classifier(512 * 7 * 7, [4096, 4096]))


class Inception(nn.Layer):
    def __init__(self, cin: int, c1: int, c3: Sequence[int], c5: Sequence[int], cp: int) -> None:
        super().__init__()
        self.branch1 = nn.Sequential(*_conv_relu(cin, c1, 1))
        self.branch3 = nn.Sequential(*_conv_relu(cin, c3[0], 1), *_conv_relu(c3[0], c3[1], 3, 1, 1))
        self.branch5 = nn.Sequential(*_conv_relu(cin, c5[0], 1), *_conv_relu(c5[0], c5[1], 5, 1, 2))
        self.branch_pool = nn.Sequential(nn.MaxPool2D(3, 1, 1), *_conv_relu(cin, cp, 1))
        self.out_channels = c1 + c3[1] + c5[1] + cp

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return paddle.concat([self.branch1(x), self.branch3(x), self.branch5(x),
                              self.branch_pool(x)], axis=1)


class GoogLeNetV1(nn.Sequential):
    """GoogLeNet v1 as in convnet-benchmarks, without the final ReLU (see torch/models.py)."""

    def __init__(self) -> None:
        layers: List[nn.Layer] = [
            *_conv_relu(3, 64, 7, 2, 3), nn.MaxPool2D(3, 2, 1),
            *_conv_relu(64, 64, 1), *_conv_relu(64, 192, 3, 1, 1), nn.MaxPool2D(3, 2, 1),
        ]
        channels = 192
        for block in GOOGLENET_BLOCKS:
            if block == "M":
                layers.append(nn.MaxPool2D(3, 2, 1))
            else:
                inception = Inception(channels, *block)
                layers.append(inception)
                channels = inception.out_channels
        layers += [nn.AvgPool2D(7, 1), nn.Flatten(), linear(channels, 1000)]
        super().__init__(*layers)


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
