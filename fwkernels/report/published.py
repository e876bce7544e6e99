"""Published figures the report compares against, copied as data with their sources.

Absolute numbers from 2015-2019 GPUs are not comparable with ours; ratios between
frameworks measured on the same machine are, so the report shows those.  The
figures come from ../shared/reference/anchors.md, which quotes the papers.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Dict, Optional, Tuple

# ---------------------------------------------------------------------------------------------
# PyTorch paper, Table 1: training throughput, fp32.
PYTORCH_TABLE1_SOURCE = (
    "Paszke et al. 2019, \"PyTorch: An Imperative Style, High-Performance Deep Learning "
    "Library\", arXiv:1912.01703, Table 1: training throughput, 32-bit floats, one NVIDIA "
    "Quadro GP100, 2x Xeon E5-2698 v4; images/s (CNNs), tokens/s (GNMTv2), samples/s (NCF)")
PYTORCH_TABLE1_CLAIM = ("On all the benchmarks, the performance of PyTorch is within 17% of that "
                        "of the fastest framework.")
PYTORCH_TABLE1_CLAIM_PERCENT = 17.0


@dataclass(frozen=True)
class Published:
    mean: float
    spread: float  # the ± as printed: absolute, or a percentage when relative
    relative: bool = False

    @property
    def std(self) -> float:
        return self.mean * self.spread / 100 if self.relative else self.spread


# framework (our registry name) -> model -> figure; a missing model is the paper's N/A.
PYTORCH_TABLE1: Dict[str, Dict[str, Published]] = {
    "chainer": {"alexnet": Published(778, 15), "resnet50": Published(219, 1)},
    "cntk": {"alexnet": Published(845, 8), "vgg19": Published(84, 3), "resnet50": Published(210, 1)},
    "mxnet": {"alexnet": Published(1554, 22), "vgg19": Published(113, 1),
              "resnet50": Published(218, 2), "mobilenet_v2": Published(444, 2)},
    "paddle": {"alexnet": Published(933, 123), "vgg19": Published(112, 2),
               "resnet50": Published(192, 4), "mobilenet_v2": Published(557, 24)},
    "tensorflow": {"alexnet": Published(1422, 27), "vgg19": Published(66, 2),
                   "resnet50": Published(200, 1), "mobilenet_v2": Published(216, 15),
                   "gnmt_v2": Published(9631, 1.3, True), "ncf": Published(4.8e6, 2.9, True)},
    "torch": {"alexnet": Published(1547, 316), "vgg19": Published(119, 1),
              "resnet50": Published(212, 2), "mobilenet_v2": Published(463, 17),
              "gnmt_v2": Published(15512, 4.8, True), "ncf": Published(5.4e6, 3.4, True)},
}
PYTORCH_TABLE1_FRAMEWORKS = ("chainer", "cntk", "mxnet", "paddle", "tensorflow", "torch")

# ---------------------------------------------------------------------------------------------
# soumith/convnet-benchmarks: forward+backward ms per batch (the MXNet paper's speed benchmark).
CONVNET_BENCHMARKS_SOURCE = (
    "soumith/convnet-benchmarks README: full forward+backward, ms per batch, mean of 10 runs, "
    "NVIDIA Titan X (Maxwell); AlexNet-OWT and GoogLeNet batch 128, Overfeat-fast 128, VGG-A 64. "
    "Used by Chen et al. 2015, \"MXNet\", arXiv:1512.01274 (no bar values of that paper are "
    "available as text)")
# column -> model -> ms per batch; None = "n/a" in the table.
CONVNET_BENCHMARKS_MS: Dict[str, Dict[str, Optional[float]]] = {
    "cuDNN R4 fp32": {"alexnet_owt": 81, "overfeat": 268, "vgg_a": 529, "googlenet": 470},
    "TensorFlow": {"alexnet_owt": 81, "overfeat": 279, "vgg_a": 540, "googlenet": 445},
    "Chainer": {"alexnet_owt": 177, "overfeat": 620, "vgg_a": 885, "googlenet": 687},
    "Caffe": {"alexnet_owt": 324, "overfeat": 823, "vgg_a": 1068, "googlenet": 1935},
    "Torch-7": {"alexnet_owt": 342, "overfeat": 878, "vgg_a": 1105, "googlenet": None},
}
# Columns that are frameworks of our registry (the others are libraries we do not run).
CONVNET_BENCHMARKS_FRAMEWORK = {"TensorFlow": "tensorflow", "Chainer": "chainer"}
CONVNET_BENCHMARKS_BATCH = {"alexnet_owt": 128, "overfeat": 128, "vgg_a": 64, "googlenet": 128}

MXNET_PAPER_SOURCE = "Chen et al. 2015, \"MXNet\", arXiv:1512.01274"
MXNET_PAPER_CLAIMS = (
    "Speed (convnet-benchmarks, batch 32, GTX 980): MXNet about as fast as Torch7 and Caffe; "
    "TensorFlow about 2x slower (older cuDNN).",
    "Memory (batch 64): internal memory for forward-only (prediction) and forward-backward "
    "(training); with in-place and co-shared allocation about 2x less for training and 4x less "
    "for prediction than a naive allocator.",
    "Scale: GoogLeNet-BN on ILSVRC12, ~14K s per data pass on 1 machine.",
)

# ---------------------------------------------------------------------------------------------
# Modern single-GPU anchors (NVIDIA DeepLearningExamples), as ratios are what carries over.
MODERN_ANCHORS_SOURCE = (
    "NVIDIA DeepLearningExamples, A100-80GB, ResNet-50 v1.5 training throughput "
    "(PyTorch and PaddlePaddle batch 256, MXNet batch 512); AMP is fp16 mixed precision")
# precision label -> framework -> images/s
MODERN_RESNET50: Dict[str, Dict[str, float]] = {
    "tf32": {"torch": 938, "mxnet": 1056, "paddle": 1024},
    "amp": {"torch": 2470, "mxnet": 3411, "paddle": 2897},
}

# ---------------------------------------------------------------------------------------------
ILSVRC12_TRAIN_IMAGES = 1_281_167
ILSVRC12_SOURCE = "ILSVRC 2012 training set size (as used by the MXNet paper's scale test)"


@dataclass(frozen=True)
class Peak:
    tflops: float
    source: str


_H200_SOURCE = ("measured on one NVIDIA H200 with PyTorch 2.11 (dense matmul "
                "ceilings; ../shared/reference/anchors.md, 2026-11)")
# (device name fragment, precision) -> the device's measured dense-matmul ceiling.
DEVICE_PEAKS: Dict[Tuple[str, str], Peak] = {
    ("H200", "bf16"): Peak(775, _H200_SOURCE),
    ("H200", "tf32"): Peak(400, _H200_SOURCE),
    ("H200", "fp32"): Peak(51, _H200_SOURCE),
}


def device_peak(device_name: Optional[str], precision: str) -> Optional[Peak]:
    """The known ceiling for this device and precision, or None (e.g. every CPU)."""
    if not device_name:
        return None
    for (fragment, peak_precision), peak in DEVICE_PEAKS.items():
        if fragment.lower() in device_name.lower() and peak_precision == precision:
            return peak
    return None


def distance_from_fastest(value: float, fastest: float) -> float:
    """How far below the fastest, in percent of the fastest: the paper's "within X%"."""
    return 100.0 * (fastest - value) / fastest
