"""CNTK 2.7 backend: a static graph per model, trained by CNTK's Trainer with momentum SGD.

CNTK runs in its own Python 3.6 process (server36.py, its models in models36.py); this backend
is the fwkernels side of it: it describes the model (the layer plans of fwkernels/models.py as
JSON), draws the synthetic batch with ``base.synthetic_batch`` like every backend, hands both
to the CNTK process, and forwards each step as one call.  docs/cntk.md describes the design, the
threads, precisions and quirks.
"""
from __future__ import annotations

import dataclasses
import os
import tempfile
from typing import Any, Dict, List, Optional

import numpy

from fwkernels.frameworks import base
from fwkernels.frameworks.base import RunConfig
from fwkernels.frameworks.cntk import runtime
from fwkernels.models import (ALEXNET_FEATURES, CONVNETS, GNMT_HIDDEN, GNMT_VOCAB, MOBILENET_V2,
                              NCF_ITEMS, NCF_USERS, RESNET50_STAGES, VGG_19, InceptionBlock,
                              ModelSpec, vgg_plan)


def plan_json(plan: List[object]) -> List[Dict[str, Any]]:
    """A layer plan of fwkernels/models.py as plain JSON for models36.layers."""
    def step(entry: object) -> Dict[str, Any]:
        if isinstance(entry, InceptionBlock):
            return {"kind": "inception", "branches": [plan_json(list(b)) for b in entry.branches]}
        return {"kind": type(entry).__name__.lower(), **dataclasses.asdict(entry)}
    return [step(entry) for entry in plan]


def model_description(spec: ModelSpec, batch: int = 1, small: bool = False) -> Dict[str, Any]:
    """What models36.build needs to know of a model, as JSON."""
    description: Dict[str, Any] = {
        "name": spec.name, "unit": spec.unit, "loss": spec.loss, "num_classes": spec.num_classes,
        "batch": batch, "input_shapes": list(spec.input_shapes(batch, small).items())}
    if spec.name in CONVNETS:
        net = CONVNETS[spec.name]
        description["convnet"] = {"features": plan_json(net.features), "flat": net.flat,
                                  "hidden": list(net.hidden), "average_pool": net.average_pool}
    elif spec.name == "alexnet":
        description["features"] = plan_json(ALEXNET_FEATURES)
    elif spec.name == "vgg19":
        description["features"] = plan_json(vgg_plan(VGG_19))
    elif spec.name == "resnet50":
        description["stages"] = RESNET50_STAGES
    elif spec.name == "mobilenet_v2":
        description["inverted_residuals"] = MOBILENET_V2
    elif spec.name == "gnmt_v2":
        description.update(vocab=GNMT_VOCAB, hidden=GNMT_HIDDEN)
    elif spec.name == "ncf":
        description.update(users=NCF_USERS, items=NCF_ITEMS)
    return description


class CNTKWorkload(base.Workload):
    """The workload held by the CNTK process; every method is one call to it."""

    peak_memory_source = "CNTK process peak RSS above baseline"

    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.process = runtime.process()
        inputs, labels = base.synthetic_batch(config)
        with tempfile.TemporaryDirectory(prefix="fwkernels-cntk-") as folder:
            path = os.path.join(folder, "batch.npz")  # read once by the CNTK process (numpy 1.19)
            numpy.savez(path, labels=labels, **{f"input{i}": a for i, a in enumerate(inputs)})
            built = self.process.call(
                "build", description=model_description(config.model, config.batch, config.small),
                batch_path=path, seed=config.seed, learning_rate=config.learning_rate,
                momentum=base.MOMENTUM, weight_decay=base.WEIGHT_DECAY,
                label_smoothing=base.LABEL_SMOOTHING)
        self.params = built["params"]

    def train_step(self) -> None:
        self.process.call("train_step")

    def forward_backward(self) -> None:
        self.process.call("forward_backward")

    def forward(self) -> None:
        self.process.call("forward")  # the output stays in the CNTK process

    def output_shape(self) -> tuple:
        return tuple(self.process.call("output_shape"))

    def sync(self) -> None:
        pass  # CNTK's CPU calls return when their work is done

    def loss(self) -> float:
        return float(self.process.call("loss"))

    def param_fingerprint(self) -> List[float]:
        return self.process.call("param_fingerprint")

    def precision_settings(self) -> Dict[str, object]:
        return {"policy": self.config.precision, "tf32_enabled": False,
                **self.process.call("precision_settings")}

    def policy_settings(self) -> Dict[str, object]:
        # CNTK's CPU convolutions are MKL-DNN's, chosen without timing (no autotuning to set)
        return base.policy_fields(self.config, False, "none (CPU only)", "NCHW")

    def peak_memory_bytes(self) -> Optional[int]:
        return self.process.call("peak_memory_bytes")


class Backend(base.Backend):
    runtime = runtime

    def unsupported_reason(self, config: RunConfig) -> Optional[str]:
        if config.device == "cuda":
            return runtime.CUDA_REASON
        if config.precision == "tf32":
            return "TF32 is a GPU tensor-core mode, and CNTK runs on the CPU only here"
        if config.precision == "bf16":
            return ("CNTK 2.7 has no bfloat16 (its reduced precision is float16, on GPUs only); "
                    "fp32 runs float32")
        return None

    def device_unavailable_reason(self, device: str) -> Optional[str]:
        return runtime.CUDA_REASON if device == "cuda" else None

    def count_params(self, model: ModelSpec) -> int:
        return runtime.process().call("count_params", description=model_description(model))

    def build(self, config: RunConfig) -> base.Workload:
        return CNTKWorkload(config)

    def is_out_of_memory(self, error: BaseException) -> bool:
        return "bad_alloc" in str(error) or super().is_out_of_memory(error)
