"""MXNet Gluon definitions of the ten models, layer for layer those of torch/models.py / torchvision.

The Gluon model zoo is not used: no zoo model matches both the torchvision
architecture and the canonical count (docs/mxnet.md lists why).  Every layer
is given its input size, so parameter shapes are known at construction and
counting needs no forward pass.  Layout NCHW, MXNet's native one.
"""
from __future__ import annotations

from typing import Callable, Dict, Sequence

from fwkernels.frameworks.mxnet.runtime import mx  # first: MXNet's settings fixed at import

from mxnet.gluon import HybridBlock, nn, rnn  # noqa: E402

from fwkernels.models import (ALEXNET_FEATURES, CONVNETS, GNMT_HIDDEN, GNMT_VOCAB,  # noqa: E402
                              MOBILENET_V2, NCF_ITEMS, NCF_USERS, RESNET50_STAGES, VGG_19,
                              InceptionBlock, realize, vgg_plan)


def _conv_relu(cin: int, cout: int, kernel: int, stride: int = 1, padding: int = 0) -> nn.Conv2D:
    return nn.Conv2D(cout, kernel, stride, padding, in_channels=cin, activation="relu")


def _dense(cin: int, cout: int, relu: bool = False, flatten: bool = True,
           bias: bool = True) -> nn.Dense:
    return nn.Dense(cout, activation="relu" if relu else None, use_bias=bias, in_units=cin,
                    flatten=flatten)


class AdaptiveAvgPool2D(HybridBlock):
    """torchvision's AdaptiveAvgPool2d((size, size)); Gluon 1.9 has only the operator."""

    def __init__(self, size: int) -> None:
        super().__init__()
        self.size = size

    def hybrid_forward(self, F, x):
        return F.contrib.AdaptiveAvgPooling2D(x, output_size=self.size)


def _sequential(*layers: HybridBlock) -> nn.HybridSequential:
    seq = nn.HybridSequential()
    seq.add(*layers)
    return seq


def layers(plan: Sequence[object]) -> list:
    """The blocks of a layer plan (fwkernels.models: Conv + ReLU, Pool, InceptionBlock)."""
    return realize(plan, lambda c: [_conv_relu(c.cin, c.cout, c.kernel, c.stride, c.padding)],
                   lambda p: nn.MaxPool2D(p.kernel, p.stride, p.padding), Inception)


class Inception(HybridBlock):
    def __init__(self, block: InceptionBlock) -> None:
        super().__init__()
        with self.name_scope():
            self.branches = [_sequential(*layers(b)) for b in block.branches]
            for i, branch in enumerate(self.branches):
                self.register_child(branch, f"branch{i}")

    def hybrid_forward(self, F, x):
        return F.concat(*[branch(x) for branch in self.branches], dim=1)


# ---- torchvision models (with their dropout) ----

def alexnet() -> nn.HybridSequential:
    """torchvision AlexNet: features, adaptive average pool to 6x6, classifier with dropout."""
    return _sequential(
        *layers(ALEXNET_FEATURES), AdaptiveAvgPool2D(6),
        nn.Dropout(0.5), _dense(256 * 6 * 6, 4096, relu=True),
        nn.Dropout(0.5), _dense(4096, 4096, relu=True),
        _dense(4096, 1000),
    )


def vgg19() -> nn.HybridSequential:
    """torchvision vgg19 (no batch norm): adaptive average pool to 7x7, dropout after each hidden layer."""
    return _sequential(
        *layers(vgg_plan(VGG_19)), AdaptiveAvgPool2D(7),
        _dense(512 * 7 * 7, 4096, relu=True), nn.Dropout(0.5),
        _dense(4096, 4096, relu=True), nn.Dropout(0.5),
        _dense(4096, 1000),
    )


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> list:
    return [nn.Conv2D(cout, kernel, stride, (kernel - 1) // 2, groups=groups, use_bias=False,
                      in_channels=cin),
            nn.BatchNorm(epsilon=1e-5, momentum=0.9, in_channels=cout)]


class Bottleneck(HybridBlock):
    """ResNet v1.5 bottleneck: the stride sits on the 3x3 convolution (torchvision)."""

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * self.expansion
        with self.name_scope():
            self.body = _sequential(
                *_conv_bn(cin, width, 1), nn.Activation("relu"),
                *_conv_bn(width, width, 3, stride), nn.Activation("relu"),
                *_conv_bn(width, cout, 1))
            self.downsample = (_sequential(*_conv_bn(cin, cout, 1, stride))
                               if stride != 1 or cin != cout else None)

    def hybrid_forward(self, F, x):
        identity = self.downsample(x) if self.downsample is not None else x
        return F.relu(self.body(x) + identity)


def resnet50() -> nn.HybridSequential:
    layers = [*_conv_bn(3, 64, 7, 2), nn.Activation("relu"), nn.MaxPool2D(3, 2, 1)]
    channels = 64
    for width, blocks, stride in RESNET50_STAGES:
        for i in range(blocks):
            layers.append(Bottleneck(channels, width, stride if i == 0 else 1))
            channels = width * Bottleneck.expansion
    return _sequential(*layers, nn.GlobalAvgPool2D(), _dense(channels, 1000))


class ReLU6(HybridBlock):
    def hybrid_forward(self, F, x):
        return F.clip(x, 0.0, 6.0)


class InvertedResidual(HybridBlock):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_residual = stride == 1 and cin == cout
        layers = [*_conv_bn(cin, hidden, 1), ReLU6()] if expand != 1 else []
        layers += [*_conv_bn(hidden, hidden, 3, stride, groups=hidden), ReLU6(),
                   *_conv_bn(hidden, cout, 1)]
        with self.name_scope():
            self.body = _sequential(*layers)

    def hybrid_forward(self, F, x):
        return x + self.body(x) if self.use_residual else self.body(x)


def mobilenet_v2() -> nn.HybridSequential:
    layers = [*_conv_bn(3, 32, 3, 2), ReLU6()]
    channels = 32
    for t, c, n, s in MOBILENET_V2:
        for i in range(n):
            layers.append(InvertedResidual(channels, c, s if i == 0 else 1, t))
            channels = c
    layers += [*_conv_bn(channels, 1280, 1), ReLU6(), nn.GlobalAvgPool2D(),
               nn.Dropout(0.2), _dense(1280, 1000)]
    return _sequential(*layers)


def convnet(name: str) -> nn.HybridSequential:
    """A convnet-benchmarks model (``CONVNETS`` in fwkernels/models.py)."""
    net = CONVNETS[name]
    pool = [nn.AvgPool2D(net.average_pool, 1)] if net.average_pool else []
    widths = [net.flat, *net.hidden]
    hidden = [_dense(cin, cout, relu=True) for cin, cout in zip(widths, widths[1:])]
    return _sequential(*layers(net.features), *pool, *hidden, _dense(widths[-1], 1000))


# ---- NCF (NeuMF) ----

class NCF(HybridBlock):
    def __init__(self, users: int = NCF_USERS, items: int = NCF_ITEMS, mf_dim: int = 64,
                 mlp_sizes: Sequence[int] = (256, 256, 128, 64)) -> None:
        super().__init__()
        with self.name_scope():
            self.mf_user = nn.Embedding(users, mf_dim)
            self.mf_item = nn.Embedding(items, mf_dim)
            self.mlp_user = nn.Embedding(users, mlp_sizes[0] // 2)
            self.mlp_item = nn.Embedding(items, mlp_sizes[0] // 2)
            self.mlp = _sequential(*[_dense(cin, cout, relu=True)
                                     for cin, cout in zip(mlp_sizes[:-1], mlp_sizes[1:])])
            self.final = _dense(mf_dim + mlp_sizes[-1], 1)

    def hybrid_forward(self, F, user, item):
        mf = self.mf_user(user) * self.mf_item(item)
        mlp = self.mlp(F.concat(self.mlp_user(user), self.mlp_item(item), dim=-1))
        return F.reshape(self.final(F.concat(mf, mlp, dim=-1)), shape=(-1,))


# ---- GNMT v2 ----

class NormalizedBahdanauAttention(HybridBlock):
    def __init__(self, size: int) -> None:
        super().__init__()
        with self.name_scope():
            self.linear_q = _dense(size, size, flatten=False, bias=False)
            self.linear_k = _dense(size, size, flatten=False, bias=False)
        self.linear_att = self.params.get("linear_att", shape=(size,),
                                          init=mx.init.Uniform(0.1))
        self.normalize_scalar = self.params.get("normalize_scalar", shape=(1,),
                                                init=mx.init.Constant(size ** -0.5))
        self.normalize_bias = self.params.get("normalize_bias", shape=(size,), init="zeros")

    def hybrid_forward(self, F, query, keys, linear_att, normalize_scalar, normalize_bias):
        q = F.expand_dims(self.linear_q(query), axis=2)  # (b, tq, 1, n)
        k = F.expand_dims(self.linear_k(keys), axis=1)  # (b, 1, tk, n)
        v = F.broadcast_mul(F.broadcast_div(linear_att, F.norm(linear_att)), normalize_scalar)
        hidden = F.tanh(F.broadcast_add(F.broadcast_add(q, k), normalize_bias))
        scores = F.dot(hidden, v)  # (b, tq, tk)
        return F.batch_dot(F.softmax(scores, axis=-1), keys)  # (b, tq, n)


class GNMT(HybridBlock):
    def __init__(self, vocab: int = GNMT_VOCAB, hidden: int = GNMT_HIDDEN) -> None:
        super().__init__()
        def lstm(inputs: int, bidirectional: bool = False) -> rnn.LSTM:
            return rnn.LSTM(hidden, layout="NTC", bidirectional=bidirectional, input_size=inputs)

        with self.name_scope():
            self.embedding = nn.Embedding(vocab, hidden)  # shared by source and target
            self.encoder = _sequential(lstm(hidden, bidirectional=True), lstm(2 * hidden),
                                       lstm(hidden), lstm(hidden))
            self.decoder_first = lstm(hidden)
            self.attention = NormalizedBahdanauAttention(hidden)
            self.decoder = _sequential(*[lstm(2 * hidden) for _ in range(3)])
            self.classifier = _dense(hidden, vocab, flatten=False)

    def hybrid_forward(self, F, src, tgt):
        x = self.embedding(src)
        for i, layer in enumerate(self.encoder):
            y = layer(x)
            x = y + x if i >= 2 else y  # residual connections from the third layer on
        keys = x
        y = self.decoder_first(self.embedding(tgt))
        context = self.attention(y, keys)
        for i, layer in enumerate(self.decoder):
            out = layer(F.concat(y, context, dim=-1))
            y = out + y if i >= 1 else out  # decoder layers 3 and 4 are residual
        return self.classifier(y)


BUILDERS: Dict[str, Callable[[], HybridBlock]] = {
    "alexnet": alexnet, "vgg19": vgg19, "resnet50": resnet50, "mobilenet_v2": mobilenet_v2,
    "gnmt_v2": GNMT, "ncf": NCF,
}


def build(name: str) -> HybridBlock:
    return convnet(name) if name in CONVNETS else BUILDERS[name]()


def trainable_params(block: HybridBlock) -> list:
    return [p for p in block.collect_params().values() if p.grad_req != "null"]


def count_trainable(block: HybridBlock) -> int:
    """Trainable parameter count from the declared shapes (no initialisation, no forward)."""
    total = 0
    for param in trainable_params(block):
        size = 1
        for dim in param.shape:
            size *= dim
        total += size
    return total
