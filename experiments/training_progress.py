"""The training test's losses: what tests/test_models.py asserts, printed per model.

    python experiments/training_progress.py FRAMEWORK [--models resnet50,vgg19] [--label L]

Builds each model exactly as the training test does (its batch, learning rate, steps, the
framework's default mode, all usable cores), trains it on the fixed batch and prints one JSON
line per model: the first loss, the mean and median of the last LAST_STEPS, whether the test's assertion
holds, every loss, the thread count and the instruction-set variables in effect
(MKL_ENABLE_INSTRUCTIONS, ONEDNN_MAX_CPU_ISA, XLA_FLAGS). Run it under `taskset -c 0` or with
those variables set lower to check the assertion across thread counts and instruction sets
(docs/models.md, *The training test*).
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(ROOT, "tests"))

from fwkernels.frameworks import FRAMEWORKS, load_backend, unavailable_reason  # noqa: E402
from fwkernels.frameworks.base import RunConfig  # noqa: E402
from fwkernels.models import MODELS, get_model  # noqa: E402
from test_models import (LAST_STEPS, LR_SCALE, TRAIN_BATCH, TRAIN_STEPS,  # noqa: E402
                         recent_loss)

ISA_VARIABLES = ("MKL_ENABLE_INSTRUCTIONS", "ONEDNN_MAX_CPU_ISA", "XLA_FLAGS")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("framework", choices=sorted(FRAMEWORKS))
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--label", default="", help="a name for this run's settings")
    args = parser.parse_args()
    models = [m.strip() for m in args.models.split(",") if m.strip()]
    unknown = [m for m in models if m not in MODELS]
    if unknown:
        parser.exit(2, f"unknown model {unknown[0]!r}; choose from: {', '.join(MODELS)}\n")
    reason = unavailable_reason(args.framework)
    if reason:
        parser.exit(2, f"{args.framework} is not available here: {reason}\n")
    backend = load_backend(args.framework)
    threads = len(os.sched_getaffinity(0))
    backend.set_threads(threads)
    for name in models:
        spec = get_model(name)
        config = RunConfig(model=spec, batch=TRAIN_BATCH.get(name, 2),
                           mode=backend.info.default_mode, small=True, lr=spec.lr * LR_SCALE)
        if backend.unsupported_reason(config):
            continue
        workload = backend.build(config)
        losses = []
        for _ in range(TRAIN_STEPS):
            workload.train_step()
            losses.append(workload.loss())
        print(json.dumps({
            "framework": args.framework, "model": name, "label": args.label, "threads": threads,
            "batch": config.batch, "first": losses[0],
            "last_mean": statistics.fmean(losses[-LAST_STEPS:]), "last_median": recent_loss(losses),
            "holds": recent_loss(losses) < losses[0],
            "losses": losses, "isa": {v: os.environ[v] for v in ISA_VARIABLES if v in os.environ},
        }), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
