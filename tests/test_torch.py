"""PyTorch-specific checks; the generic ones (parity, training, shapes) are in test_models.py."""
import math
import os
import subprocess
import sys

import pytest

from fwkernels.frameworks import load_backend, unavailable_reason
from fwkernels.frameworks.base import RunConfig
from fwkernels.models import get_model

if unavailable_reason("torch"):
    pytest.skip(unavailable_reason("torch"), allow_module_level=True)

import torch  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402


def test_training_flops_count_depthwise_convolutions_once_per_group():
    """One training step is about three forward passes (forward, input and weight gradients);
    torch's own count makes MobileNet v2's ~20, its depthwise weight gradients x groups."""
    backend = load_backend("torch")
    config = RunConfig(model=get_model("mobilenet_v2"), batch=2, small=True)
    if backend.unsupported_reason(config):
        pytest.skip(f"N/A: {backend.unsupported_reason(config)}")
    workload = backend.build(config)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        workload.module(*workload.inputs)
    ratio = workload.flops_per_step() / counter.get_total_flops()
    assert 2.5 < ratio < 3.0, ratio  # 3 less the first layer's input gradient, not computed


def test_loss_curve_prints_the_loss_of_each_step():
    script = os.path.join(os.path.dirname(__file__), "..", "scripts", "loss_curve.py")
    out = subprocess.run([sys.executable, script, "torch", "ncf", "--batch", "64", "--steps", "3",
                          "--every", "1"], capture_output=True, text=True, check=True).stdout
    steps = [line.split() for line in out.splitlines()[1:]]
    assert [int(s[0]) for s in steps] == [1, 2, 3]
    assert all(math.isfinite(float(s[1])) for s in steps)
    wrong = subprocess.run([sys.executable, script, "torch", "resnet5"], capture_output=True,
                           text=True)
    assert wrong.returncode == 2 and "valid models:" in wrong.stderr
