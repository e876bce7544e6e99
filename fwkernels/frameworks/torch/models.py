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

from fwkernels.models import (CONVNETS, GNMT_HIDDEN, GNMT_VOCAB, NCF_ITEMS, NCF_USERS,
                              InceptionBlock, realize)

TORCHVISION_MODELS = {"alexnet": "alexnet", "vgg19": "vgg19", "resnet50": "resnet50",
                      "mobilenet_v2": "mobilenet_v2"}


def build(name: str) -> nn.Module:
    if name in TORCHVISION_MODELS:
        import torchvision

        return getattr(torchvision.models, TORCHVISION_MODELS[name])(weights=None)
    if name in CONVNETS:
        return convnet(name)
    return {"gnmt_v2": GNMT, "ncf": NCF}[name]()


# ---- convnet-benchmarks (no dropout, as benchmarked there) ----

def layers(plan: Sequence[object]) -> List[nn.Module]:
    """The modules of a layer plan (fwkernels.models: Conv + ReLU, Pool, InceptionBlock)."""
    return realize(plan, lambda c: [nn.Conv2d(c.cin, c.cout, c.kernel, c.stride, c.padding),
                                    nn.ReLU(inplace=True)],
                   lambda p: nn.MaxPool2d(p.kernel, p.stride, p.padding), Inception)


class Inception(nn.Module):
    def __init__(self, block: InceptionBlock) -> None:
        super().__init__()
        self.branches = nn.ModuleList(nn.Sequential(*layers(b)) for b in block.branches)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.cat([branch(x) for branch in self.branches], 1)


def _classifier(features: int, hidden: Sequence[int], classes: int = 1000) -> nn.Sequential:
    modules: List[nn.Module] = [nn.Flatten()]
    for width in hidden:
        modules += [nn.Linear(features, width), nn.ReLU(inplace=True)]
        features = width
    return nn.Sequential(*modules, nn.Linear(features, classes))


def convnet(name: str) -> nn.Module:
    """A convnet-benchmarks model (``CONVNETS`` in fwkernels/models.py)."""
    net = CONVNETS[name]
    pool = [nn.AvgPool2d(net.average_pool, 1)] if net.average_pool else []
    return nn.Sequential(*layers(net.features), *pool, _classifier(net.flat, net.hidden))


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

