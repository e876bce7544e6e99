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
from typing import Dict, Tuple

from fwkernels.registry import lookup

Shape = Tuple[int, ...]


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

# LSTMs with one bias vector per gate set (Keras/TF, Flax) instead of two:
# 9 LSTM direction-layers (5 encoder, 4 decoder) x 4 gates x 1024 fewer.
_ONE_BIAS_LSTM = (
    160_671_297 - 9 * 4 * GNMT_HIDDEN,
    "native LSTM carries one bias vector per gate set (PyTorch, MXNet, Paddle carry two)",
)

# Layer tables shared by every backend's definitions ("M" = 2x2 max pool in the VGGs,
# 3x3/2 max pool between GoogLeNet's inception stages).
VGG_A = [64, "M", 128, "M", 256, 256, "M", 512, 512, "M", 512, 512, "M"]
VGG_19 = [64, 64, "M", 128, 128, "M", 256, 256, 256, 256, "M",
          512, 512, 512, 512, "M", 512, 512, 512, 512, "M"]
# (1x1, (3x3 reduce, 3x3), (5x5 reduce, 5x5), pool projection) per inception block
GOOGLENET_BLOCKS = [
    (64, (96, 128), (16, 32), 32), (128, (128, 192), (32, 96), 64), "M",
    (192, (96, 208), (16, 48), 64), (160, (112, 224), (24, 64), 64),
    (128, (128, 256), (24, 64), 64), (112, (144, 288), (32, 64), 64),
    (256, (160, 320), (32, 128), 128), "M",
    (256, (160, 320), (32, 128), 128), (384, (192, 384), (48, 128), 128),
]

_IMAGE_224 = {"image": (3, 224, 224)}
_IMAGE_SMALL = {"image": (3, 64, 64)}

_MODELS = [
    ModelSpec(
        name="alexnet", title="AlexNet", source="pytorch-table1", task="image classification",
        unit="images", inputs=_IMAGE_224, small_inputs=_IMAGE_SMALL, loss="cross_entropy",
        params=61_100_840, batch_gpu=256, batch_cpu=8, lr=0.01,
    ),
    ModelSpec(
        name="vgg19", title="VGG-19", source="pytorch-table1", task="image classification",
        unit="images", inputs=_IMAGE_224, small_inputs=_IMAGE_SMALL, loss="cross_entropy",
        params=143_667_240, batch_gpu=64, batch_cpu=2, lr=0.01,
    ),
    ModelSpec(
        name="resnet50", title="ResNet-50", source="pytorch-table1", task="image classification",
        unit="images", inputs=_IMAGE_224, small_inputs=_IMAGE_SMALL, loss="cross_entropy",
        params=25_557_032, batch_gpu=256, batch_cpu=4, lr=0.1,
    ),
    ModelSpec(
        name="mobilenet_v2", title="MobileNet v2", source="pytorch-table1",
        task="image classification", unit="images", inputs=_IMAGE_224,
        small_inputs=_IMAGE_SMALL, loss="cross_entropy",
        params=3_504_872, batch_gpu=256, batch_cpu=8, lr=0.05,
    ),
    ModelSpec(
        name="gnmt_v2", title="GNMT v2", source="pytorch-table1", task="translation",
        unit="tokens", inputs={"src": (GNMT_SEQ_LEN,), "tgt": (GNMT_SEQ_LEN,)},
        small_inputs={"src": (6,), "tgt": (5,)}, loss="label_smoothed_cross_entropy",
        params=160_671_297, batch_gpu=128, batch_cpu=4, lr=0.5,
        num_classes=GNMT_VOCAB,
        params_by_framework={"tensorflow": _ONE_BIAS_LSTM, "jax": _ONE_BIAS_LSTM,
                             "keras-jax": _ONE_BIAS_LSTM, "keras-torch": _ONE_BIAS_LSTM,
                             "keras-tensorflow": _ONE_BIAS_LSTM},
    ),
    ModelSpec(
        name="ncf", title="NCF (NeuMF)", source="pytorch-table1", task="recommendation",
        unit="samples", inputs={"user": (), "item": ()}, small_inputs={"user": (), "item": ()},
        loss="binary_cross_entropy", params=31_832_577, batch_gpu=1_048_576,
        batch_cpu=65_536, lr=0.5, num_classes=1,
    ),
    ModelSpec(
        name="alexnet_owt", title="AlexNet-OWT", source="convnet-benchmarks",
        task="image classification", unit="images", inputs=_IMAGE_224,
        small_inputs=_IMAGE_224, loss="cross_entropy",
        params=61_100_840, batch_gpu=128, batch_cpu=8, lr=0.01,
    ),
    ModelSpec(
        name="overfeat", title="Overfeat-fast", source="convnet-benchmarks",
        task="image classification", unit="images", inputs={"image": (3, 231, 231)},
        small_inputs={"image": (3, 231, 231)}, loss="cross_entropy",
        params=145_920_872, batch_gpu=128, batch_cpu=4, lr=0.01,
    ),
    ModelSpec(
        name="vgg_a", title="VGG-A", source="convnet-benchmarks", task="image classification",
        unit="images", inputs=_IMAGE_224, small_inputs=_IMAGE_224, loss="cross_entropy",
        params=132_863_336, batch_gpu=64, batch_cpu=2, lr=0.01,
    ),
    ModelSpec(
        name="googlenet", title="GoogLeNet v1", source="convnet-benchmarks",
        task="image classification", unit="images", inputs=_IMAGE_224,
        small_inputs=_IMAGE_224, loss="cross_entropy",
        params=6_998_552, batch_gpu=128, batch_cpu=4, lr=0.01,
    ),
]

MODELS: Dict[str, ModelSpec] = {m.name: m for m in _MODELS}
PYTORCH_TABLE1 = tuple(m.name for m in _MODELS if m.source == "pytorch-table1")
CONVNET_BENCHMARKS = tuple(m.name for m in _MODELS if m.source == "convnet-benchmarks")


def list_models() -> list:
    return list(MODELS)


def get_model(name: str) -> ModelSpec:
    return lookup(MODELS, name, "model")
