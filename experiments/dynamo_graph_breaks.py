"""How TorchDynamo splits a compiled training step into graphs: for a mode of a framework that
compiles with ``torch.compile`` (PyTorch ``compile`` and ``cudagraphs``, Keras on PyTorch ``jit``),
the suite's own workload runs STEPS training steps and the graphs Dynamo captured, the calls in
them and its graph breaks by reason (the first line of Dynamo's explanation) are printed as JSON,
with each step's time (the first steps compile).  ``--dynamo-backend eager`` leaves out Inductor's
code generation after Dynamo's capture, for a quick count: the steps' times are then not the
mode's, and the counts can differ a little from the mode's own (docs/gpu.md, *Keras 3 on the GPU*).

    python experiments/dynamo_graph_breaks.py keras-torch resnet50 --mode jit --batch 2
"""
from __future__ import annotations

import argparse
import functools
import json
import time
from collections import Counter

import torch
import torch._dynamo
from torch._dynamo.utils import counters

from fwkernels.frameworks import get_framework, load_backend
from fwkernels.frameworks.base import RunConfig
from fwkernels.models import get_model


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("framework", choices=["torch", "keras-torch"])
    parser.add_argument("model")
    parser.add_argument("--mode", required=True)
    parser.add_argument("--device", default="cpu", choices=["cpu", "cuda"])
    parser.add_argument("--precision", default="fp32", choices=["fp32", "tf32", "bf16"])
    parser.add_argument("--batch", type=int, default=None)
    parser.add_argument("--steps", type=int, default=3)
    parser.add_argument("--small", action="store_true", help="the models' small test inputs")
    parser.add_argument("--dynamo-backend", default=None,
                        help="torch.compile's backend for every compile (default: the mode's)")
    args = parser.parse_args()
    try:
        spec = get_model(args.model)
        mode = get_framework(args.framework).check_mode(args.mode)
    except ValueError as error:  # names the valid choices
        parser.error(str(error))
    batch = args.batch or spec.default_batch(args.device)
    if args.dynamo_backend:
        torch.compile = functools.partial(torch.compile, backend=args.dynamo_backend)
    config = RunConfig(model=spec, batch=batch, device=args.device, precision=args.precision,
                       mode=mode, small=args.small)
    workload = load_backend(args.framework).build(config)
    step_s = []
    for _ in range(args.steps):
        start = time.perf_counter()
        workload.train_step()
        workload.sync()
        step_s.append(time.perf_counter() - start)
    reasons: Counter = Counter()
    for reason, count in counters["graph_break"].items():
        reasons[reason.strip().splitlines()[0]] += count
    print(json.dumps({
        "framework": args.framework, "model": args.model, "mode": mode, "device": args.device,
        "precision": args.precision, "batch": batch, "torch": torch.__version__,
        "dynamo_backend": args.dynamo_backend or "the mode's", "step_s": step_s,
        "graphs": counters["stats"]["unique_graphs"],
        "calls_captured": counters["stats"]["calls_captured"],
        "graph_breaks": sum(reasons.values()), "graph_break_reasons": dict(reasons.most_common())}))


if __name__ == "__main__":
    main()
