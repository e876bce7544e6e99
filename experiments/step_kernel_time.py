"""Where a PyTorch training step's time goes, by kind of kernel: convolutions, matrix products,
normalisation and elementwise work, the optimizer, layout copies.  The suite's own workload (same
model, batch, precision and mode) runs WARMUP steps, then STEPS steps under torch.profiler; each
kernel's own device time (CPU: each operator's own time) is summed by kind and printed per step
beside the step's time without the profiler, as JSON.  ``bound_samples_per_s`` is the rate if the
step did nothing but its convolutions and matrix products at their measured speed;
``other_largest`` names the largest kernels no pattern matched.

    python experiments/step_kernel_time.py --device cuda --precision bf16 --mode compile \
        --model resnet50 --batch 256 --steps 10

``--cudnn-benchmark-limit N`` sets how many of cuDNN's algorithms PyTorch times per convolution
when it autotunes (``torch.backends.cudnn.benchmark_limit``: 10 by default, 0 for all of them).
"""
from __future__ import annotations

import argparse
import json
import re
import time
from typing import Dict, Iterable, Tuple

import torch
from torch.profiler import ProfilerActivity, profile

from fwkernels.frameworks import load_backend
from fwkernels.frameworks.base import RunConfig
from fwkernels.models import get_model

# Kernel and operator names by kind, the first pattern that matches wins (cuDNN's kernels are
# named after their algorithm: xmma/implicit_gemm, fprop/dgrad/wgrad; cuBLAS's Hopper GEMMs are
# nvjet_*). Inductor's kernels,
# triton_*, are named after the operators they fuse, "convolution_backward" among them, but
# the convolutions themselves stay cuDNN's: they are normalisation and elementwise work.
KINDS: Tuple[Tuple[str, str], ...] = (
    ("layout copy", r"nchwToNhwc|nhwcToNchw|transpose|copy_|contiguous"),
    ("optimizer", r"sgd|multi_tensor|foreach|fused_sgd"),
    ("normalisation, elementwise", r"^triton_"),
    ("convolution", r"conv|xmma|implicit_gemm|fprop|dgrad|wgrad|winograd|cudnn"),
    ("matrix product", r"gemm|cublas|nvjet|cutlass|addmm|\bmm\b|matmul|linear"),
    ("normalisation, elementwise", r"triton|batch_norm|bn_|elementwise|relu|add|mul|pool|"
                                   r"reduce|softmax|cross_entropy|nll|log_softmax"),
)
COMPUTE_KINDS = ("convolution", "matrix product")


def kind_of(name: str) -> str:
    lowered = name.lower()
    return next((kind for kind, pattern in KINDS if re.search(pattern, lowered)), "other")


def own_times(events: Iterable, device: str) -> Dict[str, float]:
    """Seconds of own time per kernel (GPU) or aten operator (CPU) name."""
    times: Dict[str, float] = {}
    for event in events:
        if device == "cuda":
            seconds = event.self_device_time_total / 1e6
        elif event.key.startswith("aten::"):
            seconds = event.self_cpu_time_total / 1e6
        else:
            continue
        if seconds > 0:
            times[event.key] = times.get(event.key, 0.0) + seconds
    return times


def time_by_kind(times: Dict[str, float]) -> Dict[str, float]:
    totals: Dict[str, float] = {}
    for name, seconds in times.items():
        kind = kind_of(name)
        totals[kind] = totals.get(kind, 0.0) + seconds
    return totals


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--device", default="cuda", choices=["cpu", "cuda"])
    parser.add_argument("--precision", default="bf16", choices=["fp32", "tf32", "bf16"])
    parser.add_argument("--mode", default="compile")
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--small", action="store_true", help="the models' small test inputs")
    parser.add_argument("--cudnn-benchmark-limit", type=int, default=None,
                        help="cuDNN algorithms tried per convolution when autotuning (PyTorch's "
                             "torch.backends.cudnn.benchmark_limit; 0: all; default: PyTorch's)")
    args = parser.parse_args()
    if args.cudnn_benchmark_limit is not None:
        torch.backends.cudnn.benchmark_limit = args.cudnn_benchmark_limit
    spec = get_model(args.model)
    batch = args.batch or spec.default_batch(args.device)
    config = RunConfig(model=spec, batch=batch, device=args.device, precision=args.precision,
                       mode=args.mode, small=args.small)
    workload = load_backend("torch").build(config)
    for _ in range(args.warmup):
        workload.train_step()
    workload.sync()
    start = time.perf_counter()
    for _ in range(args.steps):
        workload.train_step()
    workload.sync()
    step_s = (time.perf_counter() - start) / args.steps
    activities = [ProfilerActivity.CUDA] if args.device == "cuda" else [ProfilerActivity.CPU]
    with profile(activities=activities) as profiler:
        for _ in range(args.steps):
            workload.train_step()
        workload.sync()
    times = own_times(profiler.key_averages(), args.device)
    per_step = {kind: seconds / args.steps for kind, seconds in time_by_kind(times).items()}
    unmatched = sorted((name for name in times if kind_of(name) == "other"),
                       key=lambda name: -times[name])[:5]
    compute_s = sum(per_step.get(kind, 0.0) for kind in COMPUTE_KINDS)
    print(json.dumps({
        "model": args.model, "device": args.device, "precision": args.precision,
        "mode": args.mode, "batch": batch, "torch": torch.__version__,
        "device_name": torch.cuda.get_device_name() if args.device == "cuda" else None,
        "cudnn_benchmark_limit": torch.backends.cudnn.benchmark_limit,
        "step_s": step_s, "samples_per_s": batch / step_s,
        "kernel_s_per_step": dict(sorted(per_step.items(), key=lambda kv: -kv[1])),
        "kernel_s_total": sum(per_step.values()),
        "other_largest": {name[:120]: times[name] / args.steps for name in unmatched},
        "bound_samples_per_s": batch / compute_s if compute_s else None}))


if __name__ == "__main__":
    main()
