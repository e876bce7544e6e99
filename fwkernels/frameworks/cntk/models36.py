"""CNTK 2.7 definitions of the ten models, layer for layer those of torch/models.py (runs on Python
3.6 in the CNTK process: numpy and cntk only, no fwkernels import).

The layer plans (AlexNet's and the VGGs' features, the convnet-benchmarks models, GoogLeNet's
inception blocks, ResNet-50's stages and MobileNet v2's inverted residuals) come from
fwkernels/models.py, sent by the backend as plain JSON in the model description
(``backend.model_description``).  Layout NCHW (CNTK's (C, H, W) samples on its batch axis).
Each builder takes the description and the input variables and returns the output Function.
"""
import math

import cntk as C

# The PyTorch reference's initial weights, by layer kind: PyTorch's default U(+-1/sqrt(fan in))
# for convolutions and linear layers; torchvision's He normal (fan out) convolutions and N(0, 0.01)
# classifiers for VGG-19, ResNet-50 and MobileNet v2; PyTorch's N(0, 1) for NCF's embeddings; MLPerf
# GNMT's U(-0.1, 0.1) for GNMT v2's embeddings and LSTMs.  Biases start at zero, BatchNorm gamma 1
# and beta 0 (as in the MXNet and Chainer backends).
TORCH_DEFAULT, HE_FAN_OUT, SMALL_NORMAL = "torch_default", "he_fan_out", "small_normal"


def initializer(kind, fan_in, fan_out):
    if kind == HE_FAN_OUT:
        return C.initializer.normal(math.sqrt(2.0 / fan_out))
    if kind == SMALL_NORMAL:
        return C.initializer.normal(0.01)
    return C.initializer.uniform(1.0 / math.sqrt(fan_in))


def conv(x, cin, cout, kernel, stride=1, padding=0, groups=1, bias=True, init=TORCH_DEFAULT):
    """A 2-D convolution padded as PyTorch pads: CNTK's auto padding where it gives the same
    output size (padding (k-1)/2), an explicit C.pad otherwise (AlexNet's first layer, and a map
    smaller than the kernel, which CNTK refuses to auto-pad: the tests' small inputs)."""
    # PyTorch's fans of a (cout, cin / groups, k, k) weight: fan out counts every output channel
    fan_in, fan_out = cin // groups * kernel * kernel, cout * kernel * kernel
    weight = C.parameter((cout, cin // groups, kernel, kernel),
                         init=initializer(init, fan_in, fan_out))
    auto = padding > 0 and 2 * padding == kernel - 1 and min(x.shape[1:]) >= kernel
    if padding and not auto:
        x = C.pad(x, pattern=[(0, 0), (padding, padding), (padding, padding)])
    y = C.convolution(weight, x, strides=(stride, stride), auto_padding=[False, auto, auto],
                      groups=groups)
    return y + C.parameter((cout, 1, 1), init=0) if bias else y


def linear(x, cin, cout, bias=True, init=TORCH_DEFAULT):
    """A dense layer on the flattened sample (C.layers.Dense keeps the input's axes in its weight)."""
    layer = C.layers.Dense(cout, init=initializer(init, cin, cout), bias=bias, init_bias=0)
    return layer(x)


def max_pool(x, kernel, stride, padding=0):
    # PyTorch's floor mode; its paddings here are all (k-1)/2, CNTK's auto padding
    return C.pooling(x, C.MAX_POOLING, (kernel, kernel), strides=(stride, stride),
                     auto_padding=[False, padding > 0, padding > 0])


def global_average_pool(x):
    return C.reduce_mean(x, axis=(1, 2))


def adaptive_average_pool(x, size):
    """torchvision's AdaptiveAvgPool2d((size, size)), which CNTK lacks: an identity at 224."""
    _, height, width = x.shape
    if (height, width) == (size, size):
        return x

    def bins(length):
        return [(i * length // size, -(-(i + 1) * length // size)) for i in range(size)]

    rows = [C.splice(*[C.reduce_mean(C.slice(x, [1, 2], [r0, c0], [r1, c1]), axis=(1, 2))
                       for c0, c1 in bins(width)], axis=2)
            for r0, r1 in bins(height)]
    return C.splice(*rows, axis=1)


def layers(x, plan, init=TORCH_DEFAULT):
    """A layer plan of fwkernels/models.py (Conv + ReLU, Pool, Inception) on ``x``."""
    for step in plan:
        if step["kind"] == "conv":
            x = C.relu(conv(x, step["cin"], step["cout"], step["kernel"], step["stride"],
                            step["padding"], init=init))
        elif step["kind"] == "pool":
            x = max_pool(x, step["kernel"], step["stride"], step["padding"])
        else:
            x = C.splice(*[layers(x, branch) for branch in step["branches"]], axis=0)
    return x


def classifier(x, widths, dropout, init=TORCH_DEFAULT):
    """Linear + ReLU (+ dropout) for each hidden width, then the last Linear."""
    for cin, cout in zip(widths[:-2], widths[1:-1]):
        x = C.relu(linear(x, cin, cout, init=init))
        x = C.dropout(x, 0.5) if dropout else x
    return linear(x, widths[-2], widths[-1], init=init)


# ---- torchvision models (with their dropout) ----

def alexnet(description, image):
    x = adaptive_average_pool(layers(image, description["features"]), 6)
    return classifier(C.dropout(x, 0.5), [256 * 6 * 6, 4096, 4096, 1000], dropout=True)


def vgg19(description, image):
    x = adaptive_average_pool(layers(image, description["features"], HE_FAN_OUT), 7)
    return classifier(x, [512 * 7 * 7, 4096, 4096, 1000], dropout=True, init=SMALL_NORMAL)


def conv_bn(x, cin, cout, kernel, stride, batch, groups=1):
    y = conv(x, cin, cout, kernel, stride, (kernel - 1) // 2, groups, bias=False, init=HE_FAN_OUT)
    # PyTorch's BatchNorm2d(momentum=0.1, eps=1e-5): CNTK blends the running statistics with
    # weight 1 - exp(-samples / time constant), 0.1 per batch of ``batch`` samples
    return C.layers.BatchNormalization(map_rank=1, epsilon=1e-5,
                                       normalization_time_constant=-batch / math.log(0.9))(y)


def bottleneck(x, cin, width, stride, batch):
    """ResNet v1.5 bottleneck: the stride on the 3x3 convolution (torchvision)."""
    cout = width * 4
    y = C.relu(conv_bn(x, cin, width, 1, 1, batch))
    y = C.relu(conv_bn(y, width, width, 3, stride, batch))
    y = conv_bn(y, width, cout, 1, 1, batch)
    identity = conv_bn(x, cin, cout, 1, stride, batch) if stride != 1 or cin != cout else x
    return C.relu(y + identity)


def resnet50(description, image):
    batch = description["batch"]
    x = max_pool(C.relu(conv_bn(image, 3, 64, 7, 2, batch)), 3, 2, 1)
    channels = 64
    for width, blocks, stride in description["stages"]:
        for i in range(blocks):
            x = bottleneck(x, channels, width, stride if i == 0 else 1, batch)
            channels = width * 4
    return linear(global_average_pool(x), channels, 1000)


def relu6(x):
    return C.clip(x, 0.0, 6.0)


def inverted_residual(x, cin, cout, stride, expand, batch):
    hidden = cin * expand
    y = relu6(conv_bn(x, cin, hidden, 1, 1, batch)) if expand != 1 else x
    y = relu6(conv_bn(y, hidden, hidden, 3, stride, batch, groups=hidden))
    y = conv_bn(y, hidden, cout, 1, 1, batch)
    return x + y if stride == 1 and cin == cout else y


def mobilenet_v2(description, image):
    batch = description["batch"]
    x = relu6(conv_bn(image, 3, 32, 3, 2, batch))
    channels = 32
    for t, c, n, s in description["inverted_residuals"]:
        for i in range(n):
            x = inverted_residual(x, channels, c, s if i == 0 else 1, t, batch)
            channels = c
    x = global_average_pool(relu6(conv_bn(x, channels, 1280, 1, 1, batch)))
    return linear(C.dropout(x, 0.2), 1280, 1000, init=SMALL_NORMAL)


def convnet(description, image):
    """A convnet-benchmarks model: features, an optional average pool, the Linear layers."""
    net = description["convnet"]
    x = layers(image, net["features"])
    if net["average_pool"]:
        x = C.pooling(x, C.AVG_POOLING, (net["average_pool"],) * 2, strides=(1, 1))
    return classifier(x, [net["flat"]] + net["hidden"] + [1000], dropout=False)


# ---- NCF (NeuMF) ----

def embedding(ids, rows, width):
    """An embedding table read with C.gather: its gradient is dense, as PyTorch's nn.Embedding's
    (CNTK's own Embedding layer multiplies a sparse one-hot input, and its learners cannot add
    weight decay to the sparse gradient that gives: "ScaleAndAdd: Feature Not Implemented")."""
    table = C.parameter((rows, width), init=C.initializer.normal(1.0))  # PyTorch's N(0, 1)
    return C.reshape(C.gather(table, ids), (width,))


def ncf(description, user, item, mf_dim=64, mlp_sizes=(256, 256, 128, 64)):
    users, items = description["users"], description["items"]
    mf = embedding(user, users, mf_dim) * embedding(item, items, mf_dim)
    mlp = C.splice(embedding(user, users, mlp_sizes[0] // 2),
                   embedding(item, items, mlp_sizes[0] // 2), axis=0)
    for cin, cout in zip(mlp_sizes[:-1], mlp_sizes[1:]):
        mlp = C.relu(linear(mlp, cin, cout))
    return C.reshape(linear(C.splice(mf, mlp, axis=0), mf_dim + mlp_sizes[-1], 1), ())


# ---- GNMT v2 ----

def lstm(x, hidden, backwards=False):
    """One LSTM layer over the sequence axis: CNTK's LSTM cell has one bias vector per gate set
    (the declared count, docs/cntk.md)."""
    cell = C.layers.LSTM(hidden, init=C.initializer.uniform(0.1), init_bias=0)
    return C.layers.Recurrence(cell, go_backwards=backwards)(x)


def normalized_bahdanau_attention(query, keys, size, source_length):
    """Each target step's context: the source states weighted by softmax(v . tanh(Wq q + Wk k +
    b)), v = g * a / |a| (MLPerf GNMT's normalized attention).  The source sequence is unpacked
    into a static (source length, size) tensor and broadcast along the target sequence."""
    linear_q = C.parameter((size, size), init=C.initializer.uniform(1.0 / math.sqrt(size)))
    linear_k = C.parameter((size, size), init=C.initializer.uniform(1.0 / math.sqrt(size)))
    linear_att = C.parameter((size,), init=C.initializer.uniform(0.1))
    normalize_scalar = C.parameter((1,), init=size ** -0.5)
    normalize_bias = C.parameter((size,), init=0)
    # unpacked, the source axis is a free dimension, which C.times cannot infer through: reshaped
    # to the source length (every sequence of a synthetic batch has it)
    unpacked = C.reshape(C.sequence.unpack(keys, 0, no_mask_output=True), (source_length, size))
    static_keys = C.sequence.broadcast_as(unpacked, query)
    projected_keys = C.times(static_keys, linear_k)  # (source length, size)
    v = linear_att * normalize_scalar / C.sqrt(C.reduce_sum(C.square(linear_att)))
    hidden = C.tanh(projected_keys + C.times(query, linear_q) + normalize_bias)
    # C.times with a vector on the right treats it as a row: v as a (size, 1) matrix
    scores = C.reshape(C.times(hidden, C.reshape(v, (size, 1))), (source_length,))
    weights = C.softmax(scores, axis=0)
    return C.times(weights, static_keys)


def gnmt(description, src, tgt):
    vocab, hidden = description["vocab"], description["hidden"]
    table = C.parameter((vocab, hidden), init=C.initializer.uniform(0.1))  # source and target

    def embed(ids):
        return C.reshape(C.gather(table, ids), (hidden,))

    x = embed(src)
    x = C.splice(lstm(x, hidden), lstm(x, hidden, backwards=True), axis=0)
    x = lstm(x, hidden)
    for _ in range(2):  # residual connections from the third layer on
        x = lstm(x, hidden) + x
    y = lstm(embed(tgt), hidden)
    source_length = dict(description["input_shapes"])["src"][1]
    context = normalized_bahdanau_attention(y, x, hidden, source_length)
    for i in range(3):  # decoder layers 3 and 4 are residual
        out = lstm(C.splice(y, context, axis=0), hidden)
        y = out + y if i >= 1 else out
    return linear(y, hidden, vocab)


BUILDERS = {"alexnet": alexnet, "vgg19": vgg19, "resnet50": resnet50,
            "mobilenet_v2": mobilenet_v2, "ncf": ncf, "gnmt_v2": gnmt}


def build(description, inputs):
    """The model's output Function on ``inputs`` (the input variables, in the spec's order)."""
    builder = convnet if "convnet" in description else BUILDERS[description["name"]]
    return builder(description, *inputs)


def count_trainable(function):
    """Every Parameter is trained (BatchNorm's running statistics are Constants)."""
    total = 0
    for parameter in function.parameters:
        size = 1
        for dimension in parameter.shape:
            size *= dimension
        total += size
    return total
