"""Window length: does a longer timing window steady a figure?  One combination, measured in
fresh processes at each window length in turn, round after round.

    python experiments/window_length.py FRAMEWORK MODEL [--device cuda] [--precision bf16]
        [--mode MODE] [--window-seconds 0.5,2.5] [--rounds 3] [--batch B] [--jsonl FILE]

Each round measures the training phase once at every length of ``--window-seconds``
(``fwkernels.runner.run``, the suite's protocol with only the window's target length
changed), so that a drift of the host's pace over the rounds hits every length alike.
Per length it prints what ``fwkernels repeat`` prints: each run's throughput and
within-run CV, and the spread between the runs' means.
"""
from __future__ import annotations

import argparse
import sys
import time
from typing import Dict, List

from fwkernels.cli import EXIT_FAILED, add_combination_arguments, check_output_path, train_run
from fwkernels.record import Record
from fwkernels.report import analysis
from fwkernels.request import InvalidRequest, require, resolve


def main(argv: List[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    add_combination_arguments(parser)
    parser.add_argument("--batch", type=int, help="default: the model's")
    parser.add_argument("--window-seconds", default="0.5,2.5",
                        help="comma list of target window lengths in seconds")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--jsonl", help="append every run's record here")
    args = parser.parse_args(argv)
    if args.rounds < 1:
        parser.error(f"--rounds must be 1 or more, got {args.rounds}")
    try:
        lengths = [float(text) for text in args.window_seconds.split(",")]
    except ValueError:
        parser.error(f"--window-seconds takes numbers separated by commas, got "
                     f"{args.window_seconds!r}")
    try:
        check_output_path(args.jsonl, "--jsonl")
        requests = [require(resolve(args.framework, args.model, device=args.device,
                                    precision=args.precision, mode=args.mode, batch=args.batch,
                                    window_seconds=length)) for length in lengths]
    except InvalidRequest as error:
        print(f"window_length.py: {error}", file=sys.stderr)
        return 2
    runs: Dict[float, List[Record]] = {length: [] for length in lengths}
    for number in range(1, args.rounds + 1):
        for length, request in zip(lengths, requests):
            runs[length].append(train_run(request, args.jsonl, f"{time.strftime('%H:%M:%S')} "
                                          f"round {number}, windows of {length:g} s"))
    request = requests[0]
    print(f"{request.framework} [{request.mode}] {request.model} on {request.device}, "
          f"{request.precision}, batch {request.batch}, {request.windows} windows")
    for length in lengths:
        print(f"\n### Windows of {length:g} s\n\n{analysis.repeat_table(runs[length])}")
    return 0 if all(r.ok for rs in runs.values() for r in rs) else EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
