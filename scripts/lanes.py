"""Every nox session, in parallel lanes: what `scripts/test` runs when given no arguments.

    python scripts/lanes.py LANES

Each lane is one `nox -s ...` over its share of the sessions, the longest sessions dealt first
to the lane with the least work. Sessions spend much of their time installing wheels and
compiling on one thread, so two lanes on two cores finish well before one lane does. Every
thread pool waits passively (OMP_WAIT_POLICY and its vendors' equivalents): a spinning wait
would take the core the other lane is computing on. The thread counts, and so the arithmetic
of every test, stay what they are in one lane. A lane's output is printed whole when it ends;
the exit status is non-zero when any session failed.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

# Minutes each session took in two lanes on the 2-core machine (nox's summary, 2026-12-01):
# only to balance the lanes.
MINUTES = {"jax": 14, "keras-tensorflow": 12, "torch": 12, "keras-jax": 10, "tensorflow": 9,
           "keras-torch": 9, "mxnet": 8, "paddle": 8, "lint": 7, "ledger": 2, "site": 2}
PASSIVE_WAIT = {"OMP_WAIT_POLICY": "PASSIVE", "KMP_BLOCKTIME": "0", "GOMP_SPINCOUNT": "0"}


def sessions() -> List[str]:
    listed = subprocess.run(["nox", "--list", "--json"], check=True, capture_output=True,
                            text=True).stdout
    return [entry["session"] for entry in json.loads(listed)]


def deal(names: List[str], lanes: int) -> List[List[str]]:
    """Longest first, each to the lane with the least work so far; a lane keeps noxfile order."""
    work = [0] * lanes
    dealt: List[List[str]] = [[] for _ in range(lanes)]
    for name in sorted(names, key=lambda n: -MINUTES.get(n, 1)):
        lane = work.index(min(work))
        dealt[lane].append(name)
        work[lane] += MINUTES.get(name, 1)
    return [[n for n in names if n in lane] for lane in dealt if lane]


def main(argv: List[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit() or int(argv[0]) < 1:
        print("usage: python scripts/lanes.py LANES (a positive number)", file=sys.stderr)
        return 2
    lanes = deal(sessions(), int(argv[0]))
    env = {**os.environ, **PASSIVE_WAIT}
    running: Dict[subprocess.Popen, tuple] = {}
    for number, names in enumerate(lanes, 1):
        print(f"lane {number}: nox -s {' '.join(names)}", flush=True)
        log = tempfile.TemporaryFile(mode="w+")
        running[subprocess.Popen(["nox", "-s", *names], stdout=log, stderr=subprocess.STDOUT,
                                 env=env)] = (number, log, time.monotonic())
    status = 0
    while running:
        for process in [p for p in running if p.poll() is not None]:
            number, log, started = running.pop(process)
            log.seek(0)
            print(f"\n===== lane {number} (exit {process.returncode}, "
                  f"{(time.monotonic() - started) / 60:.1f} min) =====", flush=True)
            sys.stdout.write(log.read())
            sys.stdout.flush()
            status = status or process.returncode
        time.sleep(2)
    return status


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
