"""PyTorch-specific checks; the generic ones (parity, training, shapes) are in test_models.py."""
import math
import subprocess
import sys
from dataclasses import replace

import pytest

from fwkernels.frameworks import load_backend, unavailable_reason
from fwkernels.frameworks.base import RunConfig
from fwkernels.models import get_model
from fwkernels.request import require, resolve

if unavailable_reason("torch"):
    pytest.skip(unavailable_reason("torch"), allow_module_level=True)

import torch  # noqa: E402
from torch.utils.flop_counter import FlopCounterMode  # noqa: E402


def test_training_flops_count_depthwise_convolutions_once_per_group():
    """One training step is about three forward passes (forward, input and weight gradients);
    torch's own count makes MobileNet v2's ~20, its depthwise weight gradients x groups."""
    backend = load_backend("torch")
    config = RunConfig(model=get_model("mobilenet_v2"), batch=2, mode="eager", small=True)
    if backend.unsupported_reason(config):
        pytest.skip(f"N/A: {backend.unsupported_reason(config)}")
    workload = backend.build(config)
    counter = FlopCounterMode(display=False)
    with counter, torch.no_grad():
        workload.module(*workload.inputs)
    ratio = workload.flops_per_step() / counter.get_total_flops()
    assert 2.5 < ratio < 3.0, ratio  # 3 less the first layer's input gradient, not computed


def test_the_default_mode_autotunes_and_untuned_keeps_pytorchs_defaults():
    """docs/fairness.md: eager with cuDNN autotuning in NCHW; "untuned" is PyTorch as installed
    (a CUDA-only mode); the record states both settings."""
    backend = load_backend("torch")
    model = get_model("alexnet_owt")  # an image model torchvision does not build
    request = require(resolve("torch", model.name, batch=2))
    workload = backend.build(RunConfig(model=model, batch=2, mode=request.mode, small=True))
    assert request.mode == "eager" and torch.backends.cudnn.benchmark is True
    assert workload.policy_settings() == {"autotune": None, "autotune_setting":
                                          "cudnn.benchmark=True", "layout": "NCHW"}
    assert not workload.inputs[0].is_contiguous(memory_format=torch.channels_last)
    untuned = RunConfig(model=model, batch=2, mode="untuned", device="cuda", small=True)
    assert backend.unsupported_reason(untuned) is None
    assert "CUDA only" in backend.unsupported_reason(replace(untuned, device="cpu"))
    workload = backend.build(replace(untuned, device="cpu"))
    assert workload.precision_settings()["cudnn_benchmark"] is False
    assert workload.policy_settings()["autotune_setting"] == "cudnn.benchmark=False"
    tuned = backend.build(RunConfig(model=model, batch=2, mode="channels_last", small=True))
    assert tuned.policy_settings()["layout"] == "NHWC"
    assert tuned.inputs[0].is_contiguous(memory_format=torch.channels_last)
    ncf = backend.build(RunConfig(model=get_model("ncf"), batch=2, mode="eager", small=True))
    assert ncf.policy_settings()["layout"] == "none"


def test_the_default_mode_is_channels_last_for_convnets_at_reduced_precision_on_a_gpu():
    """docs/fairness.md, *Layout*: NHWC where Tensor Cores take it (tf32, bf16 on CUDA), NCHW at
    fp32 and on the CPU; "untuned" stays PyTorch as installed (NCHW)."""
    from fwkernels.frameworks.torch.backend import channels_last

    resnet = RunConfig(model=get_model("resnet50"), batch=2, mode="eager", device="cuda")
    assert channels_last(replace(resnet, precision="bf16"))
    assert channels_last(replace(resnet, precision="tf32"))
    assert not channels_last(replace(resnet, precision="fp32"))
    assert not channels_last(replace(resnet, precision="bf16", device="cpu"))
    assert not channels_last(replace(resnet, precision="bf16", mode="untuned"))
    assert not channels_last(replace(resnet, model=get_model("gnmt_v2"), precision="bf16"))
    assert channels_last(replace(resnet, mode="channels_last"))


def test_loss_curve_prints_the_loss_of_each_step():
    command = [sys.executable, "-m", "fwkernels", "loss-curve"]
    out = subprocess.run(command + ["torch", "ncf", "--batch", "64", "--steps", "3", "--every",
                                    "1"], capture_output=True, text=True, check=True).stdout
    steps = [line.split() for line in out.splitlines()[1:]]
    assert [int(s[0]) for s in steps] == [1, 2, 3]
    assert all(math.isfinite(float(s[1])) for s in steps)
    wrong = subprocess.run(command + ["torch", "resnet5"], capture_output=True, text=True)
    assert wrong.returncode == 2 and "valid models:" in wrong.stderr
