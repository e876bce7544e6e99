"""PyTorch definitions of the models torchvision does not define in the benchmarked form.

torchvision builds alexnet, vgg19, resnet50 and mobilenet_v2.  The rest follow
the reference definitions: GNMT v2 (MLPerf / NVIDIA DeepLearningExamples), NCF
(NeuMF) and the convnet-benchmarks models (soumith/convnet-benchmarks,
torch7/imagenet_winners).  docs/models.md gives the structure and counts.
"""
from __future__ import annotations

from typing import List, Sequence

import torch
from torch import nn

from fwkernels.models import (GNMT_HIDDEN, GNMT_VOCAB, GOOGLENET_BLOCKS, NCF_ITEMS, NCF_USERS,
                              VGG_A)

TORCHVISION_MODELS = {"alexnet": "alexnet", "vgg19": "vgg19", "resnet50": "resnet50",
                      "mobilenet_v2": "mobilenet_v2"}


def build(name: str) -> nn.Module:
    if name in TORCHVISION_MODELS:
        import torchvision

        return getattr(torchvision.models, TORCHVISION_MODELS[name])(weights=None)
    return {"gnmt_v2": GNMT, "ncf": NCF, "alexnet_owt": alexnet_owt, "overfeat": overfeat,
            "vgg_a": vgg_a, "googlenet": GoogLeNetV1}[name]()


# ---- convnet-benchmarks (no dropout, as benchmarked there) ----

def _conv_relu(cin: int, cout: int, kernel: int, stride: int = 1, padding: int = 0) -> List[nn.Module]:
    return [nn.Conv2d(cin, cout, kernel, stride, padding), nn.ReLU(inplace=True)]


def _classifier(features: int, hidden: Sequence[int], classes: int = 1000) -> nn.Sequential:
    layers: List[nn.Module] = [nn.Flatten()]
    for width in hidden:
        layers += [nn.Linear(features, width), nn.ReLU(inplace=True)]
        features = width
    return nn.Sequential(*layers, nn.Linear(features, classes))


def alexnet_owt() -> nn.Module:
    """AlexNet, one-tower variant of "One weird trick" (arXiv:1404.5997); input 224."""
    return nn.Sequential(
        *_conv_relu(3, 64, 11, 4, 2), nn.MaxPool2d(3, 2),
        *_conv_relu(64, 192, 5, 1, 2), nn.MaxPool2d(3, 2),
        *_conv_relu(192, 384, 3, 1, 1), *_conv_relu(384, 256, 3, 1, 1),
        *_conv_relu(256, 256, 3, 1, 1), nn.MaxPool2d(3, 2),
        _classifier(256 * 6 * 6, [4096, 4096]),
    )


def overfeat() -> nn.Module:
    """Overfeat "fast" model; input 231."""
    return nn.Sequential(
        *_conv_relu(3, 96, 11, 4), nn.MaxPool2d(2, 2),
        *_conv_relu(96, 256, 5), nn.MaxPool2d(2, 2),
        *_conv_relu(256, 512, 3, 1, 1), *_conv_relu(512, 1024, 3, 1, 1),
        *_conv_relu(1024, 1024, 3, 1, 1), nn.MaxPool2d(2, 2),
        _classifier(1024 * 6 * 6, [3072, 4096]),
    )


def vgg_a() -> nn.Module:
    """VGG configuration A (11 weight layers), no batch norm; input 224."""
    layers: List[nn.Module] = []
    channels = 3
    for v in VGG_A:
        if v == "M":
            layers.append(nn.MaxPool2d(2, 2))
        else:
            layers += _conv_relu(channels, int(v), 3, 1, 1)
            channels = int(v)
    return nn.Sequential(*layers, _classifier(512 * 7 * 7, [4096, 4096]))


class Inception(nn.Module):
    def __init__(self, cin: int, c1: int, c3: Sequence[int], c5: Sequence[int], cp: int) -> None:
        super().__init__()
        self.branch1 = nn.Sequential(*_conv_relu(cin, c1, 1))
        self.branch3 = nn.Sequential(*_conv_relu(cin, c3[0], 1), *_conv_relu(c3[0], c3[1], 3, 1, 1))
        self.branch5 = nn.Sequential(*_conv_relu(cin, c5[0], 1), *_conv_relu(c5[0], c5[1], 5, 1, 2))
        self.branch_pool = nn.Sequential(nn.MaxPool2d(3, 1, 1), *_conv_relu(cin, cp, 1))
        self.out_channels = c1 + c3[1] + c5[1] + cp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([self.branch1(x), self.branch3(x), self.branch5(x), self.branch_pool(x)], 1)


class GoogLeNetV1(nn.Sequential):
    """GoogLeNet v1 as in convnet-benchmarks: no LRN, no auxiliary heads, no dropout.

    The reference also puts a ReLU after the classifier; it is left out here
    (docs/models.md): it clips the logits at zero, so the network cannot learn.
    """

    def __init__(self) -> None:
        layers: List[nn.Module] = [
            *_conv_relu(3, 64, 7, 2, 3), nn.MaxPool2d(3, 2, 1),
            *_conv_relu(64, 64, 1), *_conv_relu(64, 192, 3, 1, 1), nn.MaxPool2d(3, 2, 1),
        ]
        channels = 192
        for block in GOOGLENET_BLOCKS:
            if block == "M":
                layers.append(nn.MaxPool2d(3, 2, 1))
            else:
                inception = Inception(channels, *block)
                layers.append(inception)
                channels = inception.out_channels
        layers += [nn.AvgPool2d(7, 1), nn.Flatten(), nn.Linear(channels, 1000)]
        super().__init__(*layers)


# ---- NCF (NeuMF) ----

class NCF(nn.Module):
    def __init__(self, users: int = NCF_USERS, items: int = NCF_ITEMS, mf_dim: int = 64,
                 mlp_sizes: Sequence[int] = (256, 256, 128, 64)) -> None:
        super().__init__()
        self.mf_user = nn.Embedding(users, mf_dim)
        self.mf_item = nn.Embedding(items, mf_dim)
        self.mlp_user = nn.Embedding(users, mlp_sizes[0] // 2)
        self.mlp_item = nn.Embedding(items, mlp_sizes[0] // 2)
        mlp: List[nn.Module] = []
        for cin, cout in zip(mlp_sizes[:-1], mlp_sizes[1:]):
            mlp += [nn.Linear(cin, cout), nn.ReLU()]
        self.mlp = nn.Sequential(*mlp)
        self.final = nn.Linear(mf_dim + mlp_sizes[-1], 1)

    def forward(self, user: torch.Tensor, item: torch.Tensor) -> torch.Tensor:
        mf = self.mf_user(user) * self.mf_item(item)
        mlp = self.mlp(torch.cat([self.mlp_user(user), self.mlp_item(item)], -1))
        return self.final(torch.cat([mf, mlp], -1)).squeeze(-1)


# ---- GNMT v2 ----

class NormalizedBahdanauAttention(nn.Module):
    def __init__(self, size: int) -> None:
        super().__init__()
        self.linear_q = nn.Linear(size, size, bias=False)
        self.linear_k = nn.Linear(size, size, bias=False)
        self.linear_att = nn.Parameter(torch.empty(size).uniform_(-0.1, 0.1))
        self.normalize_scalar = nn.Parameter(torch.tensor([size ** -0.5]))
        self.normalize_bias = nn.Parameter(torch.zeros(size))

    def forward(self, query: torch.Tensor, keys: torch.Tensor) -> torch.Tensor:
        q = self.linear_q(query).unsqueeze(2)  # (b, tq, 1, n)
        k = self.linear_k(keys).unsqueeze(1)  # (b, 1, tk, n)
        v = self.linear_att / self.linear_att.norm() * self.normalize_scalar
        scores = torch.tanh(q + k + self.normalize_bias) @ v  # (b, tq, tk)
        return torch.softmax(scores, -1) @ keys  # (b, tq, n)


class GNMT(nn.Module):
    def __init__(self, vocab: int = GNMT_VOCAB, hidden: int = GNMT_HIDDEN) -> None:
        super().__init__()
        self.embedding = nn.Embedding(vocab, hidden)  # shared by source and target
        self.encoder = nn.ModuleList([
            nn.LSTM(hidden, hidden, batch_first=True, bidirectional=True),
            nn.LSTM(2 * hidden, hidden, batch_first=True),
            nn.LSTM(hidden, hidden, batch_first=True),
            nn.LSTM(hidden, hidden, batch_first=True),
        ])
        self.decoder_first = nn.LSTM(hidden, hidden, batch_first=True)
        self.attention = NormalizedBahdanauAttention(hidden)
        self.decoder = nn.ModuleList(
            [nn.LSTM(2 * hidden, hidden, batch_first=True) for _ in range(3)])
        self.classifier = nn.Linear(hidden, vocab)

    def forward(self, src: torch.Tensor, tgt: torch.Tensor) -> torch.Tensor:
        x = self.embedding(src)
        for i, lstm in enumerate(self.encoder):
            y = lstm(x)[0]
            x = y + x if i >= 2 else y  # residual connections from the third layer on
        keys = x
        y = self.decoder_first(self.embedding(tgt))[0]
        context = self.attention(y, keys)
        for i, lstm in enumerate(self.decoder):
            out = lstm(torch.cat([y, context], -1))[0]
            y = out + y if i >= 1 else out  # decoder layers 3 and 4 are residual
        return self.classifier(y)

