"""Flax (linen) definitions of the ten models, NHWC, layer for layer those of torch/models.py.

torchvision's alexnet, vgg19, resnet50 (v1.5) and mobilenet_v2 are rebuilt here
with the same layers, kernels, strides, paddings (explicit tuples, so XLA's
"SAME" never shifts a window), floor-mode pooling, dropout and adaptive average
pooling.  Convolutions are NHWC with HWIO kernels; a flattened feature map is
ordered (H, W, C) instead of PyTorch's (C, H, W), a permutation of the first
classifier's rows.  Every module takes ``dtype`` (compute) and keeps float32
parameters, so the bf16 policy is mixed precision.  Initialisers follow
PyTorch's where they are simple to state (biases start at zero here).
"""
from __future__ import annotations

from functools import partial
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import flax.linen as nn
import jax
import jax.numpy as jnp
import numpy as np

from fwkernels.models import (GNMT_HIDDEN, GNMT_VOCAB, GOOGLENET_BLOCKS, MOBILENET_V2, NCF_ITEMS,
                              NCF_USERS, RESNET50_STAGES, VGG_19, VGG_A)

Dtype = Any
PARAM_DTYPE = jnp.float32

# PyTorch's default Conv2d/Linear weight init (kaiming_uniform with a=sqrt(5)).
torch_default_init = nn.initializers.variance_scaling(1 / 3, "fan_in", "uniform")
# torchvision's ResNet, VGG and MobileNet convolutions (kaiming_normal, fan_out, relu).
kaiming_fan_out = nn.initializers.variance_scaling(2.0, "fan_out", "normal")


def conv2d(features: int, kernel: int, stride: int = 1, padding: int = 0, *, dtype: Dtype,
           use_bias: bool = True, groups: int = 1,
           kernel_init: Callable = torch_default_init) -> nn.Conv:
    """nn.Conv2d(cin, features, kernel, stride, padding, groups=groups) in NHWC."""
    return nn.Conv(features, (kernel, kernel), (stride, stride),
                   padding=((padding, padding), (padding, padding)), use_bias=use_bias,
                   feature_group_count=groups, kernel_init=kernel_init,
                   dtype=dtype, param_dtype=PARAM_DTYPE)


def dense(features: int, *, dtype: Dtype, use_bias: bool = True,
          kernel_init: Callable = torch_default_init, name: Optional[str] = None) -> nn.Dense:
    return nn.Dense(features, use_bias=use_bias, kernel_init=kernel_init, dtype=dtype,
                    param_dtype=PARAM_DTYPE, name=name)


def max_pool(x: jax.Array, kernel: int, stride: int, padding: int = 0) -> jax.Array:
    """nn.MaxPool2d(kernel, stride, padding): padding counts as -inf, output size floors."""
    return nn.max_pool(x, (kernel, kernel), (stride, stride),
                       padding=((padding, padding), (padding, padding)))


def adaptive_pool_matrix(size_in: int, size_out: int) -> np.ndarray:
    """Weights of torch's adaptive average pooling along one axis.

    Output bin i averages inputs floor(i*n/m) .. ceil((i+1)*n/m)-1, so bins may
    overlap or repeat an input (a 2x2 map pooled to 7x7 on small test images).
    """
    weights = np.zeros((size_out, size_in), np.float32)
    for i in range(size_out):
        start, end = (i * size_in) // size_out, -(-((i + 1) * size_in) // size_out)
        weights[i, start:end] = 1.0 / (end - start)
    return weights


def adaptive_avg_pool(x: jax.Array, size: int) -> jax.Array:
    """nn.AdaptiveAvgPool2d((size, size)) in NHWC; the identity where the map already fits."""
    height, width = x.shape[1:3]
    if (height, width) == (size, size):
        return x
    rows = jnp.asarray(adaptive_pool_matrix(height, size), x.dtype)
    cols = jnp.asarray(adaptive_pool_matrix(width, size), x.dtype)
    return jnp.einsum("nhwc,ih,jw->nijc", x, rows, cols)


def flatten(x: jax.Array) -> jax.Array:
    return x.reshape(x.shape[0], -1)


class Classifier(nn.Module):
    """Linear+ReLU per hidden width, then the output layer; dropout before or after each ReLU.

    ``dropout``: "" (convnet-benchmarks), "before" (torchvision AlexNet) or "after" (VGG).
    """
    hidden: Sequence[int]
    classes: int = 1000
    dropout: str = ""
    hidden_init: Callable = torch_default_init
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        drop = nn.Dropout(0.5, deterministic=not train)
        for width in self.hidden:
            if self.dropout == "before":
                x = drop(x)
            x = nn.relu(dense(width, dtype=self.dtype, kernel_init=self.hidden_init)(x))
            if self.dropout == "after":
                x = drop(x)
        return dense(self.classes, dtype=self.dtype, kernel_init=self.hidden_init)(x)


# ---- torchvision models ----

class AlexNet(nn.Module):
    """torchvision alexnet: features, AdaptiveAvgPool2d(6), dropout-linear classifier."""
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, image: jax.Array, train: bool = False) -> jax.Array:
        x = flatten(adaptive_avg_pool(alexnet_features(image, self.dtype), 6))
        return Classifier((4096, 4096), dropout="before", dtype=self.dtype)(x, train)


def alexnet_features(image: jax.Array, dtype: Dtype) -> jax.Array:
    """The five convolutions of AlexNet (torchvision's and the one-tower OWT are the same)."""
    conv = partial(conv2d, dtype=dtype)
    x = max_pool(nn.relu(conv(64, 11, 4, 2)(image)), 3, 2)
    x = max_pool(nn.relu(conv(192, 5, 1, 2)(x)), 3, 2)
    x = nn.relu(conv(384, 3, 1, 1)(x))
    x = nn.relu(conv(256, 3, 1, 1)(x))
    return max_pool(nn.relu(conv(256, 3, 1, 1)(x)), 3, 2)


class VGG19(nn.Module):
    """torchvision vgg19 (configuration E, no batch norm)."""
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, image: jax.Array, train: bool = False) -> jax.Array:
        x = vgg_features(image, VGG_19, self.dtype, kaiming_fan_out)
        x = flatten(adaptive_avg_pool(x, 7))
        return Classifier((4096, 4096), dropout="after", hidden_init=nn.initializers.normal(0.01),
                          dtype=self.dtype)(x, train)


def vgg_features(x: jax.Array, config: Sequence, dtype: Dtype, kernel_init: Callable) -> jax.Array:
    """3x3 convolutions (padding 1) + ReLU, "M" a 2x2 max pool; called inside a compact module."""
    for v in config:
        if v == "M":
            x = max_pool(x, 2, 2)
        else:
            x = nn.relu(conv2d(int(v), 3, 1, 1, dtype=dtype, kernel_init=kernel_init)(x))
    return x


def batch_norm(train: bool, dtype: Dtype) -> nn.BatchNorm:
    """nn.BatchNorm2d defaults: eps 1e-5, running averages updated with PyTorch momentum 0.1."""
    return nn.BatchNorm(use_running_average=not train, momentum=0.9, epsilon=1e-5,
                        dtype=dtype, param_dtype=PARAM_DTYPE)


class Bottleneck(nn.Module):
    """ResNet v1.5 bottleneck: the stride sits on the 3x3 convolution."""
    width: int
    stride: int = 1
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        conv = partial(conv2d, dtype=self.dtype, use_bias=False, kernel_init=kaiming_fan_out)
        norm = partial(batch_norm, train, self.dtype)
        out = nn.relu(norm()(conv(self.width, 1)(x)))
        out = nn.relu(norm()(conv(self.width, 3, self.stride, 1)(out)))
        out = norm()(conv(self.width * 4, 1)(out))
        if self.stride != 1 or x.shape[-1] != self.width * 4:
            x = norm()(conv(self.width * 4, 1, self.stride)(x))
        return nn.relu(out + x)


class ResNet50(nn.Module):
    """torchvision resnet50: stages of 3, 4, 6, 3 bottlenecks."""
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, image: jax.Array, train: bool = False) -> jax.Array:
        conv = conv2d(64, 7, 2, 3, dtype=self.dtype, use_bias=False, kernel_init=kaiming_fan_out)
        x = max_pool(nn.relu(batch_norm(train, self.dtype)(conv(image))), 3, 2, 1)
        for width, blocks, stride in RESNET50_STAGES:
            for i in range(blocks):
                x = Bottleneck(width, stride if i == 0 else 1, self.dtype)(x, train)
        return dense(1000, dtype=self.dtype)(jnp.mean(x, axis=(1, 2)))


class ConvBNReLU6(nn.Module):
    """torchvision's Conv2dNormActivation with ReLU6 (padding (kernel-1)/2, no conv bias)."""
    features: int
    kernel: int = 1
    stride: int = 1
    groups: int = 1
    activation: bool = True
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        x = conv2d(self.features, self.kernel, self.stride, (self.kernel - 1) // 2,
                   dtype=self.dtype, use_bias=False, groups=self.groups,
                   kernel_init=kaiming_fan_out)(x)
        x = batch_norm(train, self.dtype)(x)
        return nn.relu6(x) if self.activation else x


class InvertedResidual(nn.Module):
    features: int
    stride: int
    expansion: int
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array, train: bool) -> jax.Array:
        block = partial(ConvBNReLU6, dtype=self.dtype)
        hidden = x.shape[-1] * self.expansion
        out = block(hidden)(x, train) if self.expansion != 1 else x
        out = block(hidden, 3, self.stride, groups=hidden)(out, train)  # depthwise
        out = block(self.features, activation=False)(out, train)  # linear bottleneck
        if self.stride == 1 and x.shape[-1] == self.features:
            return x + out
        return out


class MobileNetV2(nn.Module):
    """torchvision mobilenet_v2, width 1.0 (every width is already a multiple of 8)."""
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, image: jax.Array, train: bool = False) -> jax.Array:
        x = ConvBNReLU6(32, 3, 2, dtype=self.dtype)(image, train)
        for expansion, features, repeats, stride in MOBILENET_V2:
            for i in range(repeats):
                x = InvertedResidual(features, stride if i == 0 else 1, expansion,
                                     self.dtype)(x, train)
        x = ConvBNReLU6(1280, dtype=self.dtype)(x, train)
        x = nn.Dropout(0.2, deterministic=not train)(jnp.mean(x, axis=(1, 2)))
        return dense(1000, dtype=self.dtype, kernel_init=nn.initializers.normal(0.01))(x)


# ---- convnet-benchmarks (no dropout, as benchmarked there) ----

class AlexNetOWT(nn.Module):
    """AlexNet, one-tower variant of "One weird trick"; input 224."""
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, image: jax.Array, train: bool = False) -> jax.Array:
        x = flatten(alexnet_features(image, self.dtype))
        return Classifier((4096, 4096), dtype=self.dtype)(x, train)


class Overfeat(nn.Module):
    """Overfeat "fast"; input 231."""
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, image: jax.Array, train: bool = False) -> jax.Array:
        conv = partial(conv2d, dtype=self.dtype)
        x = max_pool(nn.relu(conv(96, 11, 4)(image)), 2, 2)
        x = max_pool(nn.relu(conv(256, 5)(x)), 2, 2)
        x = nn.relu(conv(512, 3, 1, 1)(x))
        x = nn.relu(conv(1024, 3, 1, 1)(x))
        x = max_pool(nn.relu(conv(1024, 3, 1, 1)(x)), 2, 2)
        return Classifier((3072, 4096), dtype=self.dtype)(flatten(x), train)


class VGGA(nn.Module):
    """VGG configuration A (11 weight layers), no batch norm; input 224."""
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, image: jax.Array, train: bool = False) -> jax.Array:
        x = vgg_features(image, VGG_A, self.dtype, torch_default_init)
        return Classifier((4096, 4096), dtype=self.dtype)(flatten(x), train)


class Inception(nn.Module):
    c1: int
    c3: Tuple[int, int]
    c5: Tuple[int, int]
    cp: int
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, x: jax.Array) -> jax.Array:
        def conv_relu(features: int, kernel: int, padding: int, y: jax.Array) -> jax.Array:
            return nn.relu(conv2d(features, kernel, 1, padding, dtype=self.dtype)(y))

        branch1 = conv_relu(self.c1, 1, 0, x)
        branch3 = conv_relu(self.c3[1], 3, 1, conv_relu(self.c3[0], 1, 0, x))
        branch5 = conv_relu(self.c5[1], 5, 2, conv_relu(self.c5[0], 1, 0, x))
        branch_pool = conv_relu(self.cp, 1, 0, max_pool(x, 3, 1, 1))
        return jnp.concatenate([branch1, branch3, branch5, branch_pool], axis=-1)


class GoogLeNetV1(nn.Module):
    """GoogLeNet v1 as in convnet-benchmarks, without its final ReLU (docs/models.md)."""
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, image: jax.Array, train: bool = False) -> jax.Array:
        conv = partial(conv2d, dtype=self.dtype)
        x = max_pool(nn.relu(conv(64, 7, 2, 3)(image)), 3, 2, 1)
        x = nn.relu(conv(64, 1)(x))
        x = max_pool(nn.relu(conv(192, 3, 1, 1)(x)), 3, 2, 1)
        for block in GOOGLENET_BLOCKS:
            x = max_pool(x, 3, 2, 1) if block == "M" else Inception(*block, dtype=self.dtype)(x)
        x = nn.avg_pool(x, (7, 7), (1, 1))
        return dense(1000, dtype=self.dtype)(flatten(x))


# ---- NCF (NeuMF) ----

class NCF(nn.Module):
    users: int = NCF_USERS
    items: int = NCF_ITEMS
    mf_dim: int = 64
    mlp_sizes: Sequence[int] = (256, 256, 128, 64)
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, user: jax.Array, item: jax.Array, train: bool = False) -> jax.Array:
        embed = partial(nn.Embed, dtype=self.dtype, param_dtype=PARAM_DTYPE)
        mf = embed(self.users, self.mf_dim)(user) * embed(self.items, self.mf_dim)(item)
        half = self.mlp_sizes[0] // 2
        mlp = jnp.concatenate([embed(self.users, half)(user), embed(self.items, half)(item)], -1)
        for width in self.mlp_sizes[1:]:
            mlp = nn.relu(dense(width, dtype=self.dtype)(mlp))
        return dense(1, dtype=self.dtype)(jnp.concatenate([mf, mlp], -1))[..., 0]


# ---- GNMT v2 ----

def _uniform(low: float, high: float) -> Callable:
    def init(key: jax.Array, shape: Tuple[int, ...], dtype: Dtype = PARAM_DTYPE) -> jax.Array:
        return jax.random.uniform(key, shape, dtype, low, high)
    return init


class NormalizedBahdanauAttention(nn.Module):
    size: int
    dtype: Dtype = jnp.float32

    @nn.compact
    def __call__(self, query: jax.Array, keys: jax.Array) -> jax.Array:
        linear = partial(dense, self.size, dtype=self.dtype, use_bias=False)
        q = linear(name="linear_q")(query)[:, :, None, :]  # (b, tq, 1, n)
        k = linear(name="linear_k")(keys)[:, None, :, :]  # (b, 1, tk, n)
        att = self.param("linear_att", _uniform(-0.1, 0.1), (self.size,), PARAM_DTYPE)
        scalar = self.param("normalize_scalar", nn.initializers.constant(self.size ** -0.5),
                            (1,), PARAM_DTYPE)
        bias = self.param("normalize_bias", nn.initializers.zeros, (self.size,), PARAM_DTYPE)
        v = (att / jnp.linalg.norm(att) * scalar).astype(self.dtype)
        scores = jnp.tanh(q + k + bias.astype(self.dtype)) @ v  # (b, tq, tk)
        weights = jax.nn.softmax(scores.astype(jnp.float32), axis=-1).astype(self.dtype)
        return weights @ keys.astype(self.dtype)  # (b, tq, n)


class GNMT(nn.Module):
    """GNMT v2 on Flax's LSTM cells (one bias per gate), each scanned over time by nn.RNN."""
    vocab: int = GNMT_VOCAB
    hidden: int = GNMT_HIDDEN
    dtype: Dtype = jnp.float32

    def lstm(self) -> nn.RNN:
        # PyTorch's LSTM init, U(-1/sqrt(hidden), 1/sqrt(hidden)); Flax's default orthogonal
        # recurrent init costs a QR per gate, ~30 s of CPU for the 36 of GNMT.
        init = _uniform(-self.hidden ** -0.5, self.hidden ** -0.5)
        cell = nn.OptimizedLSTMCell(self.hidden, kernel_init=init, recurrent_kernel_init=init,
                                    dtype=self.dtype, param_dtype=PARAM_DTYPE)
        return nn.RNN(cell)

    @nn.compact
    def __call__(self, src: jax.Array, tgt: jax.Array, train: bool = False) -> jax.Array:
        embedding = nn.Embed(self.vocab, self.hidden, dtype=self.dtype, param_dtype=PARAM_DTYPE)
        x = nn.Bidirectional(self.lstm(), self.lstm())(embedding(src))  # (b, ts, 2 * hidden)
        for i in range(3):
            y = self.lstm()(x)
            x = y + x if i >= 1 else y  # residual connections from the third layer on
        keys = x
        y = self.lstm()(embedding(tgt))
        context = NormalizedBahdanauAttention(self.hidden, self.dtype)(y, keys)
        for i in range(3):
            out = self.lstm()(jnp.concatenate([y, context.astype(y.dtype)], -1))
            y = out + y if i >= 1 else out  # decoder layers 3 and 4 are residual
        return dense(self.vocab, dtype=self.dtype)(y)


MODELS: Dict[str, Callable[..., nn.Module]] = {
    "alexnet": AlexNet, "vgg19": VGG19, "resnet50": ResNet50, "mobilenet_v2": MobileNetV2,
    "gnmt_v2": GNMT, "ncf": NCF, "alexnet_owt": AlexNetOWT, "overfeat": Overfeat,
    "vgg_a": VGGA, "googlenet": GoogLeNetV1,
}


def build(name: str, dtype: Dtype = jnp.float32) -> nn.Module:
    """The Flax module of model ``name`` computing in ``dtype`` with float32 parameters."""
    return MODELS[name](dtype=dtype)
