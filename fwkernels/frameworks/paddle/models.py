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

from fwkernels.models import (ALEXNET_FEATURES, CONVNETS, GNMT_HIDDEN, GNMT_VOCAB, NCF_ITEMS,
                              NCF_USERS, InceptionBlock, realize)

VISION_MODELS = ("vgg19", "resnet50", "mobilenet_v2")


def build(name: str) -> nn.Layer:
    if name in VISION_MODELS:
        return getattr(paddle.vision.models, name)()
    if name in CONVNETS:
        return convnet(name)
    return {"alexnet": alexnet, "gnmt_v2": GNMT, "ncf": NCF}[name]()


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


def layers(plan: Sequence[object]) -> List[nn.Layer]:
    """The layers of a layer plan (fwkernels.models: Conv + ReLU, Pool, InceptionBlock)."""
    return realize(plan, lambda c: [conv2d(c.cin, c.cout, c.kernel, c.stride, c.padding), nn.ReLU()],
                   lambda p: nn.MaxPool2D(p.kernel, p.stride, p.padding), Inception)


class Inception(nn.Layer):
    def __init__(self, block: InceptionBlock) -> None:
        super().__init__()
        self.branches = nn.LayerList([nn.Sequential(*layers(b)) for b in block.branches])

    def forward(self, x: paddle.Tensor) -> paddle.Tensor:
        return paddle.concat([branch(x) for branch in self.branches], axis=1)


def _classifier(features: int, hidden: Sequence[int], classes: int = 1000,
                dropout: float = 0.0) -> nn.Sequential:
    modules: List[nn.Layer] = [nn.Flatten()]
    for width in hidden:
        if dropout:
            modules.append(nn.Dropout(dropout))
        modules += [linear(features, width), nn.ReLU()]
        features = width
    return nn.Sequential(*modules, linear(features, classes))


def alexnet() -> nn.Layer:
    """torchvision's AlexNet: adaptive 6x6 average pooling, dropout before both hidden layers."""
    return nn.Sequential(*layers(ALEXNET_FEATURES), nn.AdaptiveAvgPool2D((6, 6)),
                         _classifier(256 * 6 * 6, [4096, 4096], dropout=0.5))


def convnet(name: str) -> nn.Layer:
    """A convnet-benchmarks model (``CONVNETS`` in fwkernels/models.py)."""
    net = CONVNETS[name]
    pool = [nn.AvgPool2D(net.average_pool, 1)] if net.average_pool else []
    return nn.Sequential(*layers(net.features), *pool, _classifier(net.flat, net.hidden))


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
