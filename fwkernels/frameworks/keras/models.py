"""The ten models written once in Keras 3, for the tensorflow, jax and torch Keras backends.

Only ``keras.layers`` and ``keras.ops`` appear here, so one definition runs on
every Keras backend.  Layout is channels-last (NHWC).  The architectures are
those of ``torch/models.py`` and torchvision, layer for layer; what differs by
construction:

* Padding: PyTorch pads symmetrically; Keras "same" pads asymmetrically for
  strided layers on even inputs.  ``conv`` and ``max_pool`` therefore use "same"
  only where it equals PyTorch's padding (stride 1, odd kernel), and explicit
  ``ZeroPadding2D`` + "valid" elsewhere.  Every padded max-pool here follows a
  ReLU, so zero padding equals PyTorch's -inf padding.  Pooling floors like
  PyTorch's default (ceil_mode=False).
* Flatten order: NHWC flattens (H, W, C), NCHW (C, H, W): a permutation of the
  first classifier weights, same layer sizes.
* BatchNorm uses PyTorch's epsilon 1e-5 and momentum 0.1 (Keras momentum 0.9).
* Weights start as in the reference implementations (torchvision and PyTorch's layer defaults,
  docs/models.md, *Initialisation*), not from Keras' Glorot defaults; biases start at zero.
* LSTMs are the native ``keras.layers.LSTM`` (cuDNN-capable on the TensorFlow
  backend), which carries one bias vector per gate set, PyTorch two: GNMT has
  160,634,433 trainable parameters here (``ModelSpec.expected_params``).

``build(name)`` returns a functional ``keras.Model`` whose inputs are listed in
the order of ``ModelSpec.inputs`` (image; src, tgt; user, item).
"""
from __future__ import annotations

from functools import partial
from typing import Sequence

import keras
import numpy as np
from keras import layers, ops

from fwkernels.frameworks.base import LABEL_SMOOTHING
from fwkernels.models import (GNMT_HIDDEN, GNMT_VOCAB, GOOGLENET_BLOCKS, MOBILENET_V2, NCF_ITEMS,
                              NCF_USERS, RESNET50_STAGES, VGG_19, VGG_A, ModelSpec, get_model)

BN_EPSILON = 1e-5  # PyTorch's BatchNorm defaults
BN_MOMENTUM = 0.9  # Keras: momentum * old + (1 - momentum) * new; PyTorch's 0.1 is the new share

# The reference initialisations (docs/models.md, *Initialisation*), one new initializer per
# layer: a Keras initializer made without a seed draws one when it is made and then gives the
# same values at every call, so one shared instance would start every layer of the same shape
# with the same weights, and one made at import would differ from process to process. Made
# while the layer is built, each draws its seed from the one keras.utils.set_random_seed set.
# PyTorch's Conv2d and Linear default, kaiming_uniform(a=sqrt(5)) = U(+-1/sqrt(fan_in))
TORCH_DEFAULT = partial(keras.initializers.VarianceScaling, 1 / 3, "fan_in", "uniform")
# torchvision's VGG, ResNet and MobileNet convolutions: kaiming_normal(fan_out, relu)
HE_FAN_OUT = partial(keras.initializers.VarianceScaling, 2.0, "fan_out", "untruncated_normal")
# The same for a depthwise kernel: Keras shapes it (kh, kw, channels, 1), so its "fan_in"
# (kh * kw * channels) is PyTorch's fan_out of the (channels, 1, kh, kw) weight
HE_FAN_OUT_DEPTHWISE = partial(keras.initializers.VarianceScaling, 2.0, "fan_in",
                               "untruncated_normal")
# torchvision's VGG and MobileNet classifiers
SMALL_NORMAL = partial(keras.initializers.RandomNormal, 0.0, 0.01)
EMBEDDING = partial(keras.initializers.RandomNormal, 0.0, 1.0)  # PyTorch's nn.Embedding


def dense(units: int, init=TORCH_DEFAULT, **kwargs) -> layers.Dense:
    return layers.Dense(units, kernel_initializer=init(), **kwargs)


def build(name: str, small: bool = False) -> keras.Model:
    """The model ``name`` as a functional Keras model, for the spec's inputs (or small_inputs)."""
    spec = get_model(name)
    shapes = spec.small_inputs if small else spec.inputs
    if "image" in shapes:
        channels, height, width = shapes["image"]
        image = keras.Input((height, width, channels), name="image")
        return keras.Model(image, _IMAGE_MODELS[name](image), name=name)
    return {"gnmt_v2": gnmt_v2, "ncf": ncf}[name]()


def count_trainable_params(name: str) -> int:
    """Trainable parameters of ``build(name)``, built without allocating or initialising weights.

    Variables created in a StatelessScope stay uninitialised shapes; Keras keeps
    a global list of them, which ``clear_session`` drops (it also resets the
    global dtype policy: set it again before the next build).
    """
    with keras.StatelessScope(initialize_variables=False):
        count = trainable_params(build(name))
    keras.backend.clear_session()
    return count


def trainable_params(model: keras.Model) -> int:
    """Trainable parameters only: BatchNorm moving statistics are non-trainable weights."""
    return sum(int(np.prod(w.shape)) for w in model.trainable_weights)


def loss(spec: ModelSpec, logits, labels):
    """The model's mean loss, computed in float32 whatever the compute dtype."""
    logits = ops.cast(logits, "float32")
    if spec.loss == "binary_cross_entropy":
        return ops.mean(ops.binary_crossentropy(labels, logits, from_logits=True))
    cross_entropy = ops.sparse_categorical_crossentropy(labels, logits, from_logits=True)
    if spec.loss == "label_smoothed_cross_entropy":
        # PyTorch's label_smoothing: (1 - e) * NLL + e * (mean over classes of -log p).
        uniform = ops.logsumexp(logits, axis=-1) - ops.mean(logits, axis=-1)
        cross_entropy = (1 - LABEL_SMOOTHING) * cross_entropy + LABEL_SMOOTHING * uniform
    return ops.mean(cross_entropy)


# ---- building blocks ----

def conv(x, filters: int, kernel: int, stride: int = 1, padding: int = 0, *,
         use_bias: bool = True, activation: str = "relu", init=TORCH_DEFAULT):
    """Conv2D (+ activation) padded exactly like PyTorch's Conv2d(kernel, stride, padding)."""
    x, keras_padding = _pad(x, kernel, stride, padding)
    return layers.Conv2D(filters, kernel, stride, keras_padding, use_bias=use_bias,
                         activation=activation, kernel_initializer=init())(x)


def max_pool(x, kernel: int, stride: int, padding: int = 0):
    x, keras_padding = _pad(x, kernel, stride, padding)
    return layers.MaxPooling2D(kernel, stride, keras_padding)(x)


def _pad(x, kernel: int, stride: int, padding: int):
    if padding == 0:
        return x, "valid"
    if stride == 1 and 2 * padding == kernel - 1:
        return x, "same"
    return layers.ZeroPadding2D(padding)(x), "valid"


def batch_norm(x):
    return layers.BatchNormalization(epsilon=BN_EPSILON, momentum=BN_MOMENTUM)(x)


def classifier(x, hidden: Sequence[int], classes: int = 1000, dropout: float = 0.0,
               dropout_first: bool = False, init=TORCH_DEFAULT):
    """Flatten, then Linear-ReLU per hidden width, then the class layer (torchvision's dropouts)."""
    x = layers.Flatten()(x)
    for width in hidden:
        if dropout and dropout_first:  # AlexNet: Dropout, Linear, ReLU
            x = layers.Dropout(dropout)(x)
        x = dense(width, init, activation="relu")(x)
        if dropout and not dropout_first:  # VGG: Linear, ReLU, Dropout
            x = layers.Dropout(dropout)(x)
    return dense(classes, init)(x)


def adaptive_avg_pool(x, size: int):
    """torchvision's AdaptiveAvgPool2d; an identity where the map already has that size."""
    if tuple(x.shape[1:3]) == (size, size):
        return x
    return AdaptiveAveragePooling(size)(x)


class AdaptiveAveragePooling(layers.Layer):
    """PyTorch's AdaptiveAvgPool2d as one einsum with fixed averaging matrices.

    Output cell i averages input cells floor(i n / s) .. ceil((i + 1) n / s) - 1,
    also where the map is smaller than the output (the small test inputs);
    keras.layers.AdaptiveAveragePooling2D fails there on the TensorFlow backend.
    """

    def __init__(self, size: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.size = size

    def averaging_matrix(self, n: int):
        matrix = np.zeros((self.size, n), np.float32)
        for i in range(self.size):
            start, stop = (i * n) // self.size, -((-(i + 1) * n) // self.size)
            matrix[i, start:stop] = 1 / (stop - start)
        return ops.convert_to_tensor(matrix, dtype=self.compute_dtype)

    def call(self, x):
        rows, cols = (self.averaging_matrix(n) for n in x.shape[1:3])
        return ops.einsum("bhwc,ih,jw->bijc", x, rows, cols)

    def compute_output_shape(self, shape):
        return (shape[0], self.size, self.size, shape[3])


# ---- torchvision models ----

def alexnet(x):
    x = max_pool(conv(x, 64, 11, 4, 2), 3, 2)
    x = max_pool(conv(x, 192, 5, 1, 2), 3, 2)
    x = conv(conv(conv(x, 384, 3, 1, 1), 256, 3, 1, 1), 256, 3, 1, 1)
    x = adaptive_avg_pool(max_pool(x, 3, 2), 6)
    return classifier(x, [4096, 4096], dropout=0.5, dropout_first=True)


def vgg_features(x, config: Sequence, init=TORCH_DEFAULT):
    for v in config:
        x = max_pool(x, 2, 2) if v == "M" else conv(x, int(v), 3, 1, 1, init=init)
    return x


def vgg19(x):
    x = adaptive_avg_pool(vgg_features(x, VGG_19, HE_FAN_OUT), 7)
    return classifier(x, [4096, 4096], dropout=0.5, init=SMALL_NORMAL)


def linear_conv(x, filters: int, kernel: int, stride: int = 1, padding: int = 0):
    """A convolution before batch norm (no bias, no activation), torchvision's He init."""
    return conv(x, filters, kernel, stride, padding, use_bias=False, activation=None,
                init=HE_FAN_OUT)


def bottleneck(x, width: int, stride: int):
    """ResNet v1.5 bottleneck: the stride is on the 3x3 convolution; no conv biases."""
    shortcut = x
    if stride != 1 or x.shape[-1] != 4 * width:
        shortcut = batch_norm(linear_conv(x, 4 * width, 1, stride))
    y = layers.ReLU()(batch_norm(linear_conv(x, width, 1)))
    y = layers.ReLU()(batch_norm(linear_conv(y, width, 3, stride, 1)))
    y = batch_norm(linear_conv(y, 4 * width, 1))
    return layers.ReLU()(layers.Add()([y, shortcut]))


def resnet50(x):
    x = layers.ReLU()(batch_norm(linear_conv(x, 64, 7, 2, 3)))
    x = max_pool(x, 3, 2, 1)
    for width, blocks, stride in RESNET50_STAGES:
        for i in range(blocks):
            x = bottleneck(x, width, stride if i == 0 else 1)
    x = layers.GlobalAveragePooling2D()(x)
    return dense(1000)(x)


def conv_bn_relu6(x, filters: int, kernel: int, stride: int = 1):
    return layers.ReLU(6.0)(batch_norm(linear_conv(x, filters, kernel, stride, (kernel - 1) // 2)))


def inverted_residual(x, channels: int, stride: int, expand: int):
    y = x
    if expand != 1:
        y = conv_bn_relu6(y, x.shape[-1] * expand, 1)
    y, keras_padding = _pad(y, 3, stride, 1)
    y = layers.DepthwiseConv2D(3, stride, keras_padding, use_bias=False,
                               depthwise_initializer=HE_FAN_OUT_DEPTHWISE())(y)
    y = layers.ReLU(6.0)(batch_norm(y))
    y = batch_norm(linear_conv(y, channels, 1))
    return layers.Add()([x, y]) if stride == 1 and x.shape[-1] == channels else y


def mobilenet_v2(x):
    x = conv_bn_relu6(x, 32, 3, 2)
    for expand, channels, repeats, stride in MOBILENET_V2:
        for i in range(repeats):
            x = inverted_residual(x, channels, stride if i == 0 else 1, expand)
    x = layers.GlobalAveragePooling2D()(conv_bn_relu6(x, 1280, 1))
    return dense(1000, SMALL_NORMAL)(layers.Dropout(0.2)(x))


# ---- convnet-benchmarks (no dropout, as benchmarked there) ----

def alexnet_owt(x):
    x = max_pool(conv(x, 64, 11, 4, 2), 3, 2)
    x = max_pool(conv(x, 192, 5, 1, 2), 3, 2)
    x = conv(conv(conv(x, 384, 3, 1, 1), 256, 3, 1, 1), 256, 3, 1, 1)
    return classifier(max_pool(x, 3, 2), [4096, 4096])


def overfeat(x):
    x = max_pool(conv(x, 96, 11, 4), 2, 2)
    x = max_pool(conv(x, 256, 5), 2, 2)
    x = conv(conv(conv(x, 512, 3, 1, 1), 1024, 3, 1, 1), 1024, 3, 1, 1)
    return classifier(max_pool(x, 2, 2), [3072, 4096])


def vgg_a(x):
    return classifier(vgg_features(x, VGG_A), [4096, 4096])


def inception(x, c1: int, c3: Sequence[int], c5: Sequence[int], cp: int):
    branches = [conv(x, c1, 1),
                conv(conv(x, c3[0], 1), c3[1], 3, 1, 1),
                conv(conv(x, c5[0], 1), c5[1], 5, 1, 2),
                conv(max_pool(x, 3, 1, 1), cp, 1)]
    return layers.Concatenate()(branches)


def googlenet(x):
    """GoogLeNet v1 of convnet-benchmarks without its final ReLU (see torch/models.py googlenet)."""
    x = max_pool(conv(x, 64, 7, 2, 3), 3, 2, 1)
    x = max_pool(conv(conv(x, 64, 1), 192, 3, 1, 1), 3, 2, 1)
    for block in GOOGLENET_BLOCKS:
        x = max_pool(x, 3, 2, 1) if block == "M" else inception(x, *block)
    x = layers.Flatten()(layers.AveragePooling2D(7, 1)(x))
    return dense(1000)(x)


_IMAGE_MODELS = {"alexnet": alexnet, "vgg19": vgg19, "resnet50": resnet50,
                 "mobilenet_v2": mobilenet_v2, "alexnet_owt": alexnet_owt,
                 "overfeat": overfeat, "vgg_a": vgg_a, "googlenet": googlenet}


# ---- NCF (NeuMF) ----

def embedding(count: int, size: int) -> layers.Embedding:
    return layers.Embedding(count, size, embeddings_initializer=EMBEDDING())


def ncf(users: int = NCF_USERS, items: int = NCF_ITEMS, mf_dim: int = 64,
        mlp_sizes: Sequence[int] = (256, 256, 128, 64)) -> keras.Model:
    user = keras.Input((), dtype="int32", name="user")
    item = keras.Input((), dtype="int32", name="item")
    mf = layers.Multiply()([embedding(users, mf_dim)(user), embedding(items, mf_dim)(item)])
    mlp = layers.Concatenate()([embedding(users, mlp_sizes[0] // 2)(user),
                                embedding(items, mlp_sizes[0] // 2)(item)])
    for width in mlp_sizes[1:]:
        mlp = dense(width, activation="relu")(mlp)
    logits = dense(1)(layers.Concatenate()([mf, mlp]))
    return keras.Model([user, item], ops.squeeze(logits, -1), name="ncf")


# ---- GNMT v2 ----

class NormalizedBahdanauAttention(layers.Layer):
    """score(q, k) = v_normalized . tanh(W_q q + W_k k + b), softmax over the keys."""

    def __init__(self, units: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.units = units
        self.linear_q = dense(units, use_bias=False)
        self.linear_k = dense(units, use_bias=False)

    def build(self, query_shape, keys_shape) -> None:
        self.linear_q.build(query_shape)
        self.linear_k.build(keys_shape)
        self.linear_att = self.add_weight(
            shape=(self.units,), name="linear_att",
            initializer=keras.initializers.RandomUniform(-0.1, 0.1))
        self.normalize_scalar = self.add_weight(
            shape=(1,), name="normalize_scalar",
            initializer=keras.initializers.Constant(self.units ** -0.5))
        self.normalize_bias = self.add_weight(shape=(self.units,), name="normalize_bias",
                                              initializer="zeros")

    def call(self, query, keys):
        q = ops.expand_dims(self.linear_q(query), 2)  # (b, tq, 1, n)
        k = ops.expand_dims(self.linear_k(keys), 1)  # (b, 1, tk, n)
        v = self.linear_att / ops.norm(self.linear_att) * self.normalize_scalar
        scores = ops.einsum("bqkn,n->bqk", ops.tanh(q + k + self.normalize_bias), v)
        return ops.matmul(ops.softmax(scores, axis=-1), keys)  # (b, tq, n)

    def compute_output_shape(self, query_shape, keys_shape):
        return tuple(query_shape[:-1]) + (keys_shape[-1],)


def lstm(units: int = GNMT_HIDDEN) -> layers.LSTM:
    """The native LSTM with its cuDNN-compatible defaults (tanh, sigmoid, no recurrent dropout),
    every weight U(+-1/sqrt(units)) as PyTorch's nn.LSTM (not Keras' orthogonal recurrent
    kernels and forget-gate bias of 1)."""
    init = partial(keras.initializers.RandomUniform, -units ** -0.5, units ** -0.5)
    return layers.LSTM(units, return_sequences=True, kernel_initializer=init(),
                       recurrent_initializer=init(), bias_initializer=init(),
                       unit_forget_bias=False)


def gnmt_v2(vocab: int = GNMT_VOCAB, hidden: int = GNMT_HIDDEN) -> keras.Model:
    src = keras.Input((None,), dtype="int32", name="src")
    tgt = keras.Input((None,), dtype="int32", name="tgt")
    shared = embedding(vocab, hidden)  # shared by source and target
    x = layers.Bidirectional(lstm(hidden))(shared(src))
    x = lstm(hidden)(x)
    for _ in range(2):  # residual connections from the third encoder layer on
        x = layers.Add()([lstm(hidden)(x), x])
    keys = x
    y = lstm(hidden)(shared(tgt))
    context = NormalizedBahdanauAttention(hidden)(y, keys)
    for i in range(3):
        out = lstm(hidden)(layers.Concatenate()([y, context]))
        y = layers.Add()([out, y]) if i >= 1 else out  # decoder layers 3 and 4 are residual
    return keras.Model([src, tgt], dense(vocab)(y), name="gnmt_v2")
