"""The model registry: framework-neutral specs of the ten benchmark models.

Every framework backend builds these models so that the *trainable* parameter
count equals ``ModelSpec.params`` exactly (the parity rule).  Where a
framework's native fused primitive differs by construction, the spec declares
that framework's exact count and the reason in ``params_by_framework``.

Sources: PyTorch paper (arXiv:1912.01703) Table 1 models; the convnet-benchmarks
models of soumith/convnet-benchmarks (torch7/imagenet_winners) used by the MXNet
paper (arXiv:1512.01274).  Counts: docs/models.md derives each one.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable, Dict, List, Tuple, TypeVar

from fwkernels.registry import lookup

Shape = Tuple[int, ...]
T = TypeVar("T")


@dataclass(frozen=True)
class ModelSpec:
    name: str
    title: str
    source: str  # "pytorch-table1" or "convnet-benchmarks"
    task: str
    unit: str  # what one "sample" is: images, tokens or samples
    inputs: Dict[str, Shape]  # per-sample input shapes (no batch dimension)
    small_inputs: Dict[str, Shape]  # valid, cheaper per-sample shapes for tests
    loss: str
    params: int  # canonical trainable parameter count
    batch_gpu: int
    batch_cpu: int
    lr: float  # SGD learning rate at batch_gpu (momentum 0.9, weight decay 1e-4 for all)
    num_classes: int = 1000
    params_by_framework: Dict[str, Tuple[int, str]] = field(default_factory=dict)

    def samples_per_step(self, batch: int, small: bool = False) -> int:
        """Samples in one training step, in ``unit``: tokens count source and target."""
        if self.unit == "tokens":
            shapes = self.small_inputs if small else self.inputs
            return batch * (shapes["src"][0] + shapes["tgt"][0])
        return batch

    def expected_params(self, framework: str) -> int:
        """The exact trainable count a framework's build must have (parity rule)."""
        declared = self.params_by_framework.get(framework)
        return declared[0] if declared else self.params

    def output_shape(self, batch: int, small: bool = False) -> Tuple[int, ...]:
        """Shape of the forward output: logits per image or per target token, one per NCF pair."""
        shapes = self.small_inputs if small else self.inputs
        if self.unit == "tokens":
            return (batch, shapes["tgt"][0], self.num_classes)
        if self.num_classes == 1:
            return (batch,)
        return (batch, self.num_classes)

    def input_shapes(self, batch: int, small: bool = False) -> Dict[str, Shape]:
        """Input shapes with the batch dimension in front."""
        shapes = self.small_inputs if small else self.inputs
        return {k: (batch,) + tuple(v) for k, v in shapes.items()}

    def default_batch(self, device: str) -> int:
        return self.batch_cpu if device == "cpu" else self.batch_gpu


GNMT_VOCAB = 32320
GNMT_HIDDEN = 1024
GNMT_SEQ_LEN = 50  # MLPerf GNMT max sequence length; synthetic batches use it for src and tgt
NCF_USERS = 138493  # MovieLens-20M
NCF_ITEMS = 26744

# LSTMs with one bias vector per gate set (Keras/TF, Flax, CNTK) instead of two:
# 9 LSTM direction-layers (5 encoder, 4 decoder) x 4 gates x 1024 fewer.
_ONE_BIAS_LSTM = (
    160_671_297 - 9 * 4 * GNMT_HIDDEN,
    "native LSTM carries one bias vector per gate set (PyTorch, MXNet, Paddle, Chainer carry two)",
)

# Layer tables shared by every backend's definitions ("M" = 2x2 max pool in the VGGs,
# 3x3/2 max pool between GoogLeNet's inception stages).
VGG_A = [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]
VGG_19 = [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M",
          512, 512, 512, 512, "M", 512, 512, 512, 512, "M"]
# torchvision's ResNet-50 stages (bottleneck width, blocks, stride of the first block) and
# MobileNet v2's inverted residuals (expansion t, channels c, repeats n, first stride s; width 1.0)
RESNET50_STAGES = [(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)]
MOBILENET_V2 = [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                (6, 160, 3, 2), (6, 320, 1, 1)]
# (1x1, (3x3 reduce, 3x3), (5x5 reduce, 5x5), pool projection) per inception block
GOOGLENET_BLOCKS = [
    (64, (96, 128), (16, 32), 32), (128, (128, 192), (32, 96), 64), "M",
    (192, (96, 208), (16, 48), 64), (160, (112, 224), (24, 64), 64),
    (128, (128, 256), (24, 64), 64), (112, (144, 288), (32, 64), 64),
    (256, (160, 320), (32, 128), 128), "M",
    (256, (160, 320), (32, 128), 128), (384, (192, 384), (48, 128), 128),
]

# ---- the convnet-benchmarks models' feature extractors as layer plans ----
# Each framework's models.py turns a plan into its layers (a Conv is followed by a ReLU), so the
# channel arithmetic is written once.

@dataclass(frozen=True)
class Conv:
    """A convolution and its ReLU, padded symmetrically as PyTorch pads."""
    cin: int
    cout: int
    kernel: int
    stride: int = 1
    padding: int = 0


@dataclass(frozen=True)
class Pool:
    """A max pool (floor mode)."""
    kernel: int
    stride: int
    padding: int = 0


@dataclass(frozen=True)
class InceptionBlock:
    """Branches of Conv and Pool steps run on the same input, concatenated along channels."""
    branches: Tuple[Tuple[object, ...], ...]
    cout: int


def conv_plan(table: List[object], cin: int = 3) -> List[object]:
    """Steps from a table of ``(cout, kernel, stride, padding)`` convolutions and ``Pool``s."""
    steps: List[object] = []
    for entry in table:
        if isinstance(entry, Pool):
            steps.append(entry)
        else:
            cout, kernel, stride, padding = entry  # type: ignore[misc]
            steps.append(Conv(cin, cout, kernel, stride, padding))
            cin = cout
    return steps


def realize(plan: List[object], conv: Callable[[Conv], List[T]], pool: Callable[[Pool], T],
            inception: Callable[[InceptionBlock], T]) -> List[T]:
    """A framework's layers for a plan: ``conv`` gives a convolution's layers (with its ReLU)."""
    out: List[T] = []
    for step in plan:
        if isinstance(step, Pool):
            out.append(pool(step))
        elif isinstance(step, InceptionBlock):
            out.append(inception(step))
        else:
            out += conv(step)  # type: ignore[arg-type]
    return out


def vgg_plan(config: List[object]) -> List[object]:
    """A VGG feature table ("M": 2x2 max pool, a number: a 3x3 convolution) as steps."""
    return conv_plan([Pool(2, 2) if v == "M" else (v, 3, 1, 1) for v in config])


def inception(cin: int, c1: int, c3: Tuple[int, int], c5: Tuple[int, int], cp: int) -> InceptionBlock:
    return InceptionBlock(branches=(
        (Conv(cin, c1, 1),),
        (Conv(cin, c3[0], 1), Conv(c3[0], c3[1], 3, 1, 1)),
        (Conv(cin, c5[0], 1), Conv(c5[0], c5[1], 5, 1, 2)),
        (Pool(3, 1, 1), Conv(cin, cp, 1))), cout=c1 + c3[1] + c5[1] + cp)


def googlenet_plan() -> List[object]:
    """GoogLeNet v1's features up to the 7x7 average pool (1024 channels)."""
    steps = conv_plan([(64, 7, 2, 3), Pool(3, 2, 1), (64, 1, 1, 0), (192, 3, 1, 1), Pool(3, 2, 1)])
    channels = 192
    for block in GOOGLENET_BLOCKS:
        if block == "M":
            steps.append(Pool(3, 2, 1))
        else:
            steps.append(inception(channels, *block))  # type: ignore[misc]
            channels = steps[-1].cout
    return steps


ALEXNET_FEATURES = conv_plan([(64, 11, 4, 2), Pool(3, 2), (192, 5, 1, 2), Pool(3, 2),
                              (384, 3, 1, 1), (256, 3, 1, 1), (256, 3, 1, 1), Pool(3, 2)])
OVERFEAT_FEATURES = conv_plan([(96, 11, 4, 0), Pool(2, 2), (256, 5, 1, 0), Pool(2, 2),
                               (512, 3, 1, 1), (1024, 3, 1, 1), (1024, 3, 1, 1), Pool(2, 2)])


@dataclass(frozen=True)
class ConvNet:
    """A convnet-benchmarks model: features, an optional average pool (stride 1), then Linear +
    ReLU layers of the hidden widths and the 1000-class Linear on the flattened map."""
    features: List[object]
    flat: int  # features after flattening
    hidden: Tuple[int, ...]
    average_pool: int = 0


# No dropout, as benchmarked there. AlexNet-OWT: the one-tower variant of "One weird trick"
# (arXiv:1404.5997); Overfeat "fast" (input 231); VGG configuration A (11 weight layers, no
# batch norm); GoogLeNet v1 without LRN, auxiliary heads and dropout, and without the reference's
# ReLU after the classifier (docs/models.md: it clips the logits at zero, so the network cannot
# learn).
CONVNETS = {
    "alexnet_owt": ConvNet(ALEXNET_FEATURES, 256 * 6 * 6, (4096, 4096)),
    "overfeat": ConvNet(OVERFEAT_FEATURES, 1024 * 6 * 6, (3072, 4096)),
    "vgg_a": ConvNet(vgg_plan(VGG_A), 512 * 7 * 7, (4096, 4096)),
    "googlenet": ConvNet(googlenet_plan(), 1024, (), average_pool=7),
}


_IMAGE_224 = {"image": (3, 224, 224)}
_IMAGE_SMALL = {"image": (3, 64, 64)}

def _image_classifier(name: str, title: str, source: str, params: int, batch_gpu: int,
                      batch_cpu: int, lr: float, inputs: Dict[str, Shape] = _IMAGE_224,
                      small_inputs: Dict[str, Shape] = _IMAGE_SMALL) -> ModelSpec:
    return ModelSpec(name=name, title=title, source=source, task="image classification",
                     unit="images", inputs=inputs, small_inputs=small_inputs, loss="cross_entropy",
                     params=params, batch_gpu=batch_gpu, batch_cpu=batch_cpu, lr=lr)


_TABLE1, _CONVNET = "pytorch-table1", "convnet-benchmarks"
_OVERFEAT_INPUT = {"image": (3, 231, 231)}
_MODELS = [
    # name, title, source, canonical params, batch GPU / CPU, learning rate (at the GPU batch)
    _image_classifier("alexnet", "AlexNet", _TABLE1, 61_100_840, 256, 8, 0.01),
    _image_classifier("vgg19", "VGG-19", _TABLE1, 143_667_240, 64, 2, 0.01),
    _image_classifier("resnet50", "ResNet-50", _TABLE1, 25_557_032, 256, 4, 0.1),
    _image_classifier("mobilenet_v2", "MobileNet v2", _TABLE1, 3_504_872, 256, 8, 0.05),
    ModelSpec(
        name="gnmt_v2", title="GNMT v2", source=_TABLE1, task="translation",
        unit="tokens", inputs={"src": (GNMT_SEQ_LEN,), "tgt": (GNMT_SEQ_LEN,)},
        small_inputs={"src": (6,), "tgt": (5,)}, loss="label_smoothed_cross_entropy",
        params=160_671_297, batch_gpu=128, batch_cpu=4, lr=0.5,
        num_classes=GNMT_VOCAB,
        params_by_framework={"tensorflow": _ONE_BIAS_LSTM, "jax": _ONE_BIAS_LSTM,
                             "keras-jax": _ONE_BIAS_LSTM, "keras-torch": _ONE_BIAS_LSTM,
                             "keras-tensorflow": _ONE_BIAS_LSTM, "cntk": _ONE_BIAS_LSTM},
    ),
    ModelSpec(
        name="ncf", title="NCF (NeuMF)", source=_TABLE1, task="recommendation",
        unit="samples", inputs={"user": (), "item": ()}, small_inputs={"user": (), "item": ()},
        loss="binary_cross_entropy", params=31_832_577, batch_gpu=1_048_576,
        batch_cpu=65_536, lr=0.5, num_classes=1,
    ),
    # the convnet-benchmarks models are tested at their full input size
    _image_classifier("alexnet_owt", "AlexNet-OWT", _CONVNET, 61_100_840, 128, 8, 0.01,
                      small_inputs=_IMAGE_224),
    _image_classifier("overfeat", "Overfeat-fast", _CONVNET, 145_920_872, 128, 4, 0.01,
                      inputs=_OVERFEAT_INPUT, small_inputs=_OVERFEAT_INPUT),
    _image_classifier("vgg_a", "VGG-A", _CONVNET, 132_863_336, 64, 2, 0.01,
                      small_inputs=_IMAGE_224),
    _image_classifier("googlenet", "GoogLeNet v1", _CONVNET, 6_998_552, 128, 4, 0.01,
                      small_inputs=_IMAGE_224),
]

MODELS: Dict[str, ModelSpec] = {m.name: m for m in _MODELS}
PYTORCH_TABLE1 = tuple(m.name for m in _MODELS if m.source == "pytorch-table1")
CONVNET_BENCHMARKS = tuple(m.name for m in _MODELS if m.source == "convnet-benchmarks")


def list_models() -> list:
    return list(MODELS)


def get_model(name: str) -> ModelSpec:
    return lookup(MODELS, name, "model")
