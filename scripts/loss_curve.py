"""The training loss of one suite workload, step by step: does a configuration stay finite?

    python scripts/loss_curve.py FRAMEWORK MODEL [--batch N] [--steps N] [--every N]
        [--device cpu|cuda] [--precision fp32|tf32|bf16] [--mode MODE]

Builds the workload as the suite does (the same model, synthetic batch, SGD and learning rate,
scaled to --batch), runs --steps training steps on that one batch and prints "step loss
seconds" every --every steps. The suite's timing windows stop at the first non-finite loss; this
shows when a configuration gets there.
"""
from __future__ import annotations

import argparse
import time

from fwkernels.frameworks import load_backend
from fwkernels.frameworks.base import DEVICES, PRECISIONS, RunConfig
from fwkernels.models import get_model
from fwkernels.runner import InvalidRequest, default_threads, validate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("framework")
    parser.add_argument("model")
    parser.add_argument("--batch", type=int, help="default: the model's GPU batch")
    parser.add_argument("--steps", type=int, default=300)
    parser.add_argument("--every", type=int, default=10)
    parser.add_argument("--device", default="cpu", help=f"one of: {', '.join(DEVICES)}")
    parser.add_argument("--precision", default="fp32", help=f"one of: {', '.join(PRECISIONS)}")
    parser.add_argument("--mode", default="")
    args = parser.parse_args()
    try:  # unknown names fail with the valid ones
        validate(args.framework, args.model, args.device, args.precision, args.mode, args.batch)
    except InvalidRequest as error:
        parser.error(str(error))
    backend = load_backend(args.framework)
    backend.set_threads(default_threads())
    model = get_model(args.model)
    config = RunConfig(model=model, batch=args.batch or model.batch_gpu, device=args.device,
                       precision=args.precision, mode=args.mode)
    workload = backend.build(config)
    print(f"# {args.framework} {args.model} batch {config.batch} lr {config.learning_rate:g} "
          f"{args.precision} on {args.device}")
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        workload.train_step()
        if step % args.every == 0 or step == 1:
            print(step, f"{workload.loss():.4f}", f"{time.perf_counter() - start:.0f}", flush=True)


if __name__ == "__main__":
    main()
