"""Chainer definitions of the ten models, layer for layer those of torch/models.py / torchvision.

Chainer's model zoo (``chainer.links.model.vision``) is not used: it has no AlexNet, no
MobileNet v2, ResNet v1 rather than torchvision's v1.5, and its GoogLeNet carries the auxiliary
heads.  Every link is given its input size, so its parameters exist at construction (drawn by
the initialisers below, as the PyTorch reference draws them).  Layout NCHW, Chainer's only one.
"""
from __future__ import annotations

import math
from functools import partial
from typing import Callable, Dict, Sequence

from fwkernels.frameworks.chainer.runtime import chainer  # first: FTZ/DAZ before numpy's threads

import chainer.functions as F  # noqa: E402
import chainer.links as L  # noqa: E402
from chainer import initializers  # noqa: E402

from fwkernels.models import (ALEXNET_FEATURES, CONVNETS, GNMT_HIDDEN, GNMT_VOCAB,  # noqa: E402
                              MOBILENET_V2, NCF_ITEMS, NCF_USERS, RESNET50_STAGES, VGG_19, Conv,
                              InceptionBlock, Pool, realize, vgg_plan)

# The PyTorch reference's initial weights: PyTorch's default U(+-1/sqrt(fan in)) for
# convolutions and linear layers; torchvision's He normal (fan out) convolutions and N(0, 0.01)
# classifiers for VGG-19, ResNet-50 and MobileNet v2; PyTorch's N(0, 1) for NCF's embeddings;
# MLPerf GNMT's U(-0.1, 0.1) for GNMT v2's embeddings and LSTMs (their biases too).  Other biases
# start at zero (Chainer's rule; PyTorch draws them), BatchNorm gamma 1, beta 0.
TORCH_DEFAULT = initializers.LeCunUniform(scale=1 / math.sqrt(3))  # bound scale * sqrt(3 / fan in)
HE_FAN_OUT = initializers.HeNormal(fan_option="fan_out")
SMALL_NORMAL = initializers.Normal(0.01)
UNIFORM = initializers.Uniform(0.1)
STANDARD_NORMAL = initializers.Normal(1.0)


def _conv(cin: int, cout: int, kernel: int, stride: int = 1, pad: int = 0, groups: int = 1,
          nobias: bool = False, init: initializers.Initializer = TORCH_DEFAULT) -> L.Convolution2D:
    return L.Convolution2D(cin, cout, kernel, stride, pad, nobias=nobias, initialW=init,
                           groups=groups)


def _linear(cin: int, cout: int, nobias: bool = False,
            init: initializers.Initializer = TORCH_DEFAULT) -> L.Linear:
    return L.Linear(cin, cout, nobias=nobias, initialW=init)


def max_pool(kernel: int, stride: int, pad: int = 0) -> Callable:
    # cover_all=False: PyTorch's floor mode (Chainer's default adds a partial window)
    return partial(F.max_pooling_2d, ksize=kernel, stride=stride, pad=pad, cover_all=False)


def global_average_pool(x: chainer.Variable) -> chainer.Variable:
    return F.mean(x, axis=(2, 3))


def adaptive_average_pool(x: chainer.Variable, size: int) -> chainer.Variable:
    """torchvision's AdaptiveAvgPool2d((size, size)), which Chainer lacks: an identity at 224."""
    height, width = x.shape[2:]
    if (height, width) == (size, size):
        return x

    def bins(length: int) -> list:
        return [(i * length // size, -(-(i + 1) * length // size)) for i in range(size)]

    rows = [F.stack([F.mean(x[:, :, r0:r1, c0:c1], axis=(2, 3)) for c0, c1 in bins(width)], -1)
            for r0, r1 in bins(height)]
    return F.stack(rows, -2)


def layers(plan: Sequence[object], init: initializers.Initializer = TORCH_DEFAULT) -> list:
    """The links and functions of a layer plan (fwkernels.models: Conv + ReLU, Pool, Inception)."""
    def conv(c: Conv) -> list:
        return [_conv(c.cin, c.cout, c.kernel, c.stride, c.padding, init=init), F.relu]

    def pool(p: Pool) -> Callable:
        return max_pool(p.kernel, p.stride, p.padding)

    return realize(plan, conv, pool, Inception)


class Inception(chainer.Chain):
    def __init__(self, block: InceptionBlock) -> None:
        super().__init__()
        with self.init_scope():
            self.branches = chainer.ChainList(*[chainer.Sequential(*layers(b))
                                                for b in block.branches])

    def forward(self, x: chainer.Variable) -> chainer.Variable:
        return F.concat([branch(x) for branch in self.branches], axis=1)


# ---- torchvision models (with their dropout) ----

def alexnet() -> chainer.Sequential:
    """torchvision AlexNet: features, adaptive average pool to 6x6, classifier with dropout."""
    return chainer.Sequential(
        *layers(ALEXNET_FEATURES), partial(adaptive_average_pool, size=6),
        F.dropout, _linear(256 * 6 * 6, 4096), F.relu,
        F.dropout, _linear(4096, 4096), F.relu,
        _linear(4096, 1000))


def vgg19() -> chainer.Sequential:
    """torchvision vgg19 (no batch norm): adaptive average pool to 7x7, dropout after each
    hidden layer."""
    return chainer.Sequential(
        *layers(vgg_plan(VGG_19), HE_FAN_OUT), partial(adaptive_average_pool, size=7),
        _linear(512 * 7 * 7, 4096, init=SMALL_NORMAL), F.relu, F.dropout,
        _linear(4096, 4096, init=SMALL_NORMAL), F.relu, F.dropout,
        _linear(4096, 1000, init=SMALL_NORMAL))


def _conv_bn(cin: int, cout: int, kernel: int, stride: int = 1, groups: int = 1) -> list:
    return [_conv(cin, cout, kernel, stride, (kernel - 1) // 2, groups, nobias=True,
                  init=HE_FAN_OUT),
            L.BatchNormalization(cout, decay=0.9, eps=1e-5)]  # PyTorch's momentum 0.1, eps


class Bottleneck(chainer.Chain):
    """ResNet v1.5 bottleneck: the stride sits on the 3x3 convolution (torchvision)."""

    expansion = 4

    def __init__(self, cin: int, width: int, stride: int) -> None:
        super().__init__()
        cout = width * self.expansion
        with self.init_scope():
            self.body = chainer.Sequential(
                *_conv_bn(cin, width, 1), F.relu,
                *_conv_bn(width, width, 3, stride), F.relu,
                *_conv_bn(width, cout, 1))
            self.downsample = (chainer.Sequential(*_conv_bn(cin, cout, 1, stride))
                               if stride != 1 or cin != cout else None)

    def forward(self, x: chainer.Variable) -> chainer.Variable:
        identity = self.downsample(x) if self.downsample is not None else x
        return F.relu(self.body(x) + identity)


def resnet50() -> chainer.Sequential:
    net = [*_conv_bn(3, 64, 7, 2), F.relu, max_pool(3, 2, 1)]
    channels = 64
    for width, blocks, stride in RESNET50_STAGES:
        for i in range(blocks):
            net.append(Bottleneck(channels, width, stride if i == 0 else 1))
            channels = width * Bottleneck.expansion
    return chainer.Sequential(*net, global_average_pool, _linear(channels, 1000))


relu6 = partial(F.clipped_relu, z=6.0)


class InvertedResidual(chainer.Chain):
    def __init__(self, cin: int, cout: int, stride: int, expand: int) -> None:
        super().__init__()
        hidden = cin * expand
        self.use_residual = stride == 1 and cin == cout
        net = [*_conv_bn(cin, hidden, 1), relu6] if expand != 1 else []
        net += [*_conv_bn(hidden, hidden, 3, stride, groups=hidden), relu6,
                *_conv_bn(hidden, cout, 1)]
        with self.init_scope():
            self.body = chainer.Sequential(*net)

    def forward(self, x: chainer.Variable) -> chainer.Variable:
        return x + self.body(x) if self.use_residual else self.body(x)


def mobilenet_v2() -> chainer.Sequential:
    net = [*_conv_bn(3, 32, 3, 2), relu6]
    channels = 32
    for t, c, n, s in MOBILENET_V2:
        for i in range(n):
            net.append(InvertedResidual(channels, c, s if i == 0 else 1, t))
            channels = c
    net += [*_conv_bn(channels, 1280, 1), relu6, global_average_pool,
            partial(F.dropout, ratio=0.2), _linear(1280, 1000, init=SMALL_NORMAL)]
    return chainer.Sequential(*net)


def convnet(name: str) -> chainer.Sequential:
    """A convnet-benchmarks model (``CONVNETS`` in fwkernels/models.py)."""
    net = CONVNETS[name]
    pool = [partial(F.average_pooling_2d, ksize=net.average_pool, stride=1)] \
        if net.average_pool else []
    widths = [net.flat, *net.hidden]
    hidden = [f for cin, cout in zip(widths, widths[1:]) for f in (_linear(cin, cout), F.relu)]
    return chainer.Sequential(*layers(net.features), *pool, *hidden, _linear(widths[-1], 1000))


# ---- NCF (NeuMF) ----

class NCF(chainer.Chain):
    def __init__(self, users: int = NCF_USERS, items: int = NCF_ITEMS, mf_dim: int = 64,
                 mlp_sizes: Sequence[int] = (256, 256, 128, 64)) -> None:
        super().__init__()
        with self.init_scope():
            self.mf_user = L.EmbedID(users, mf_dim, initialW=STANDARD_NORMAL)
            self.mf_item = L.EmbedID(items, mf_dim, initialW=STANDARD_NORMAL)
            self.mlp_user = L.EmbedID(users, mlp_sizes[0] // 2, initialW=STANDARD_NORMAL)
            self.mlp_item = L.EmbedID(items, mlp_sizes[0] // 2, initialW=STANDARD_NORMAL)
            self.mlp = chainer.Sequential(*[f for cin, cout in zip(mlp_sizes[:-1], mlp_sizes[1:])
                                            for f in (_linear(cin, cout), F.relu)])
            self.final = _linear(mf_dim + mlp_sizes[-1], 1)

    def forward(self, user: chainer.Variable, item: chainer.Variable) -> chainer.Variable:
        mf = self.mf_user(user) * self.mf_item(item)
        mlp = self.mlp(F.concat([self.mlp_user(user), self.mlp_item(item)], axis=1))
        return F.reshape(self.final(F.concat([mf, mlp], axis=1)), (-1,))


# ---- GNMT v2 ----

class NormalizedBahdanauAttention(chainer.Chain):
    def __init__(self, size: int) -> None:
        super().__init__()
        with self.init_scope():
            self.linear_q = _linear(size, size, nobias=True)
            self.linear_k = _linear(size, size, nobias=True)
            self.linear_att = chainer.Parameter(UNIFORM, (size,))
            self.normalize_scalar = chainer.Parameter(size ** -0.5, (1,))
            self.normalize_bias = chainer.Parameter(0.0, (size,))

    def forward(self, query: chainer.Variable, keys: chainer.Variable) -> chainer.Variable:
        # Chainer's arithmetic does not broadcast: every operand is broadcast explicitly.
        (b, tq, n), tk = query.shape, keys.shape[1]
        q = F.broadcast_to(F.expand_dims(self.linear_q(query, n_batch_axes=2), 2), (b, tq, tk, n))
        k = F.broadcast_to(F.expand_dims(self.linear_k(keys, n_batch_axes=2), 1), (b, tq, tk, n))
        norm = F.reshape(F.sqrt(F.sum(self.linear_att * self.linear_att)), (1,))
        v = self.linear_att * F.broadcast_to(self.normalize_scalar / norm, (n,))
        hidden = F.tanh(q + k + F.broadcast_to(self.normalize_bias, (b, tq, tk, n)))
        scores = F.reshape(F.matmul(F.reshape(hidden, (-1, n)), F.reshape(v, (n, 1))), (b, tq, tk))
        return F.matmul(F.softmax(scores, axis=-1), keys)  # (b, tq, n)


def _lstm(inputs: int, hidden: int, bidirectional: bool = False) -> L.NStepLSTM:
    """One LSTM layer; like cuDNN (and PyTorch), two bias vectors per gate set."""
    lstm = (L.NStepBiLSTM if bidirectional else L.NStepLSTM)(1, inputs, hidden, 0.0)
    for param in lstm.params():
        UNIFORM(param.array)  # NStepLSTM takes no initialiser: redrawn in place
    return lstm


def run_lstm(lstm: L.NStepLSTM, x: chainer.Variable) -> chainer.Variable:
    """(batch, time, features) through an NStepLSTM, which takes a list of sequences."""
    _, _, ys = lstm(None, None, list(F.separate(x, axis=0)))
    return F.stack(ys, axis=0)


class GNMT(chainer.Chain):
    def __init__(self, vocab: int = GNMT_VOCAB, hidden: int = GNMT_HIDDEN) -> None:
        super().__init__()
        with self.init_scope():
            self.embedding = L.EmbedID(vocab, hidden, initialW=UNIFORM)  # source and target
            self.encoder = chainer.ChainList(
                _lstm(hidden, hidden, bidirectional=True), _lstm(2 * hidden, hidden),
                _lstm(hidden, hidden), _lstm(hidden, hidden))
            self.decoder_first = _lstm(hidden, hidden)
            self.attention = NormalizedBahdanauAttention(hidden)
            self.decoder = chainer.ChainList(*[_lstm(2 * hidden, hidden) for _ in range(3)])
            self.classifier = _linear(hidden, vocab)

    def forward(self, src: chainer.Variable, tgt: chainer.Variable) -> chainer.Variable:
        x = self.embedding(src)
        for i, lstm in enumerate(self.encoder):
            y = run_lstm(lstm, x)
            x = y + x if i >= 2 else y  # residual connections from the third layer on
        keys = x
        y = run_lstm(self.decoder_first, self.embedding(tgt))
        context = self.attention(y, keys)
        for i, lstm in enumerate(self.decoder):
            out = run_lstm(lstm, F.concat([y, context], axis=2))
            y = out + y if i >= 1 else out  # decoder layers 3 and 4 are residual
        return self.classifier(y, n_batch_axes=2)


BUILDERS: Dict[str, Callable[[], chainer.Link]] = {
    "alexnet": alexnet, "vgg19": vgg19, "resnet50": resnet50, "mobilenet_v2": mobilenet_v2,
    "gnmt_v2": GNMT, "ncf": NCF,
}


def build(name: str) -> chainer.Link:
    return convnet(name) if name in CONVNETS else BUILDERS[name]()


def count_trainable(link: chainer.Link) -> int:
    """Every parameter of a link is trained (BatchNorm's running statistics are not parameters)."""
    return sum(param.size for param in link.params())
