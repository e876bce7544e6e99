"""Every nox session, in parallel lanes: what `scripts/test` runs when given no arguments.

    python scripts/lanes.py LANES

Each lane runs its share of the sessions, the longest sessions dealt first
to the lane with the least work. Sessions spend much of their time installing wheels and
compiling on one thread, so two lanes on two cores finish well before one lane does. Every
thread pool waits passively (OMP_WAIT_POLICY and its vendors' equivalents): a spinning wait
would take the core the other lane is computing on. The thread counts, and so the arithmetic
of every test, stay what they are in one lane. Each session is its own `nox -s NAME`, its output
printed whole when it ends; the exit status is non-zero when any session failed. With
FWKERNELS_TEST_PRUNE=1 (CI) a session's environment is deleted when it ends, so the disk holds
at most one environment per lane (all of them together take about 15 GB).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time
from typing import Dict, List

# Minutes each session took in two lanes on the 2-core machine (`CI=true bash .ci/run` from a
# fresh clone of 3989478, 2026-12-07 00:42-01:16 UTC, each session printing its time; docs/ci.md):
# only to balance the lanes.
MINUTES = {"jax": 11.0, "torch": 10.8, "tensorflow": 8.9, "chainer": 7.1, "cntk": 6.5,
           "paddle": 4.9, "mxnet": 3.7, "lint": 2.7, "site": 1.0, "ledger": 1.0, "report": 0.6,
           "core": 0.5}
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


def run_lane(number: int, names: List[str], env: Dict[str, str], prune: bool,
             failed: List[str], printing: threading.Lock) -> None:
    """One session after the other; each session's output is printed whole when it ends."""
    for name in names:
        started = time.monotonic()
        with tempfile.TemporaryFile(mode="w+") as log:
            code = subprocess.run(["nox", "-s", name], stdout=log, stderr=subprocess.STDOUT,
                                  env=env).returncode
            log.seek(0)
            with printing:
                print(f"\n===== lane {number}: {name} (exit {code}, "
                      f"{(time.monotonic() - started) / 60:.1f} min) =====", flush=True)
                sys.stdout.write(log.read())
                sys.stdout.flush()
        if code:
            failed.append(name)
        if prune:
            shutil.rmtree(os.path.join(".nox", name), ignore_errors=True)


def main(argv: List[str]) -> int:
    if len(argv) != 1 or not argv[0].isdigit() or int(argv[0]) < 1:
        print("usage: python scripts/lanes.py LANES (a positive number)", file=sys.stderr)
        return 2
    lanes = deal(sessions(), int(argv[0]))
    env = {**os.environ, **PASSIVE_WAIT}
    prune = os.environ.get("FWKERNELS_TEST_PRUNE") == "1"
    failed: List[str] = []
    printing = threading.Lock()
    threads = []
    for number, names in enumerate(lanes, 1):
        print(f"lane {number}: {' '.join(names)}", flush=True)
        threads.append(threading.Thread(target=run_lane,
                                        args=(number, names, env, prune, failed, printing)))
        threads[-1].start()
    for thread in threads:
        thread.join()
    print(f"\nsessions failed: {' '.join(failed)}" if failed else "\nevery session passed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
