"""CNTK's process switches, answered by the CNTK process (server36.py on Python 3.6): version,
devices, threads, runtime info.  The process starts on first use, one per fwkernels process, in
this process's group (the runner ends both together), and ends with it.
"""
from __future__ import annotations

import atexit
import json
import os
import subprocess
from typing import Any, Dict, Optional

from fwkernels.frameworks.cntk import interpreter

SERVER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "server36.py")
CUDA_REASON = ("CNTK 2.7's GPU build needs CUDA 10 (cuDNN 7), which no current NVIDIA driver "
               "stack here provides; fwkernels runs CNTK's CPU build")


class CNTKProcessError(RuntimeError):
    """The CNTK process failed a call (its message) or ended."""


class CNTKProcess:
    """The Python 3.6 process holding CNTK; ``call`` sends one call and waits for its reply."""

    def __init__(self) -> None:
        self.process = subprocess.Popen(
            [interpreter.python(), SERVER], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            env=interpreter.process_environment(), text=True)
        self.hello: Dict[str, Any] = self.call("hello")

    def call(self, name: str, **args: Any) -> Any:
        if self.process.poll() is not None:
            raise CNTKProcessError(f"the CNTK process ended (exit status {self.process.returncode})")
        self.process.stdin.write(json.dumps({"call": name, "args": args}) + "\n")
        self.process.stdin.flush()
        line = self.process.stdout.readline()
        if not line:
            status = self.process.wait()
            raise CNTKProcessError(f"the CNTK process ended during {name} (exit status {status})")
        reply = json.loads(line)
        if "error" in reply:
            if reply["type"] == "MemoryError":
                raise MemoryError(reply["error"])
            raise CNTKProcessError(reply["error"])
        return reply["result"]

    def close(self) -> None:
        if self.process.poll() is None:
            self.process.stdin.close()
            self.process.wait()


_process: Optional[CNTKProcess] = None


def process() -> CNTKProcess:
    global _process
    if _process is None:
        _process = CNTKProcess()
        atexit.register(_process.close)
    return _process


def version() -> str:
    return process().hello["version"]


def device_available(device: str) -> bool:
    """The CPU, where CNTK's CPU build sees it (its GPU build is not installed: CUDA_REASON)."""
    return device == "cpu" and device in process().call("devices")


def set_threads(threads: int) -> None:
    """cntk_py.set_max_num_cputhreads: CNTK's OpenMP and MKL threads; read back."""
    kept = process().call("set_threads", threads=threads)
    if kept != threads:
        raise ValueError(f"CNTK kept {kept} threads when asked for {threads}")


def runtime_info(device: str) -> Dict[str, Optional[str]]:
    hello = process().hello
    return {"cntk_threads": str(process().call("threads")),
            "numpy_version": hello["numpy_version"], "cntk_python": hello["python"],
            "cntk_python_path": interpreter.python()}
