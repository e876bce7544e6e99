"""Single-precision GEMM through one Intel MKL library, with MKL's own choice of kernels and with
the CPU policy's MKL_DEBUG_CPU_TYPE (``fwkernels.runner.mkl_cpu_type``), each in a fresh process
(MKL reads the variable once).  An MKL before 2020.1, such as the MKLML that PaddlePaddle's and
CNTK's CPU wheels bundle, runs its generic SSE kernels on a processor whose vendor is not Intel;
``kernels`` is what its internal ``mkl_serv_cpu_detect`` reads (0 the generic kernels, 5 the AVX2
ones).  Prints one JSON object per setting (docs/fairness.md, *Intel MKL on a non-Intel
processor*).

    python experiments/mkl_sgemm.py "$(python -c 'import paddle, os; print(os.path.dirname(paddle.__file__))')/libs/libmklml_intel.so"
"""
import argparse
import ctypes
import json
import os
import statistics
import subprocess
import sys
import time
from typing import Any, Dict

import numpy as np

CBLAS_ROW_MAJOR, CBLAS_NO_TRANS = 101, 111
MKL_CPU_TYPE_VARIABLE = "MKL_DEBUG_CPU_TYPE"
POLICY_CPU_TYPE = "5"  # fwkernels.runner.MKL_AVX2_CPU_TYPE; this file runs on CNTK's Python 3.6


class MKLVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_int), ("minor", ctypes.c_int), ("update", ctypes.c_int),
                ("product_status", ctypes.c_char_p), ("build", ctypes.c_char_p),
                ("processor", ctypes.c_char_p), ("platform", ctypes.c_char_p)]


def load(library: str) -> ctypes.CDLL:
    # MKLML links Intel's OpenMP runtime, which sits beside it and is not on the loader's path
    ctypes.CDLL(os.path.join(os.path.dirname(library), "libiomp5.so"), mode=ctypes.RTLD_GLOBAL)
    return ctypes.CDLL(library)


def measure(library: str, size: int, repeats: int, threads: int) -> Dict[str, Any]:
    mkl = load(library)
    mkl.MKL_Set_Num_Threads(threads)
    version = MKLVersion()
    mkl.MKL_Get_Version(ctypes.byref(version))
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((size, size), dtype=np.float32) for _ in range(2))
    c = np.zeros((size, size), np.float32)
    pointer = ctypes.c_void_p
    sgemm = mkl.cblas_sgemm
    sgemm.argtypes = [ctypes.c_int] * 6 + [ctypes.c_float, pointer, ctypes.c_int, pointer,
                                            ctypes.c_int, ctypes.c_float, pointer, ctypes.c_int]

    def gemm() -> float:
        start = time.perf_counter()
        sgemm(CBLAS_ROW_MAJOR, CBLAS_NO_TRANS, CBLAS_NO_TRANS, size, size, size, 1.0,
              a.ctypes.data, size, b.ctypes.data, size, 0.0, c.ctypes.data, size)
        return 2 * size ** 3 / (time.perf_counter() - start) / 1e9

    gemm()  # the first call loads the kernels
    rates = [gemm() for _ in range(repeats)]
    if not np.allclose(c[:8, :8], a[:8] @ b[:, :8], rtol=1e-3, atol=1e-3):
        raise SystemExit("mkl_sgemm: the product is wrong")
    return {"library": library, "mkl_version": f"{version.major}.{version.minor}.{version.update}",
            MKL_CPU_TYPE_VARIABLE.lower(): os.environ.get(MKL_CPU_TYPE_VARIABLE),
            "kernels": int(mkl.mkl_serv_cpu_detect()), "size": size, "threads": threads,
            "gflops": statistics.median(rates), "gflops_runs": rates}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("library", help="path of an MKL library: libmklml_intel.so")
    parser.add_argument("--size", type=int, default=2048, help="square matrices of this side")
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--threads", type=int, default=len(os.sched_getaffinity(0)))
    parser.add_argument("--here", action="store_true", help="measure in this process only")
    args = parser.parse_args()
    if not os.path.exists(args.library):
        parser.exit(2, f"mkl_sgemm: no such library: {args.library}\n")
    if args.here:
        print(json.dumps(measure(args.library, args.size, args.repeats, args.threads)))
        return
    for setting in ("", POLICY_CPU_TYPE):  # MKL's own choice, then the policy's
        command = [sys.executable, os.path.abspath(__file__), args.library, "--here",
                   "--size", str(args.size), "--repeats", str(args.repeats),
                   "--threads", str(args.threads)]
        subprocess.run(command, env=dict(os.environ, **{MKL_CPU_TYPE_VARIABLE: setting}),
                       check=True)


if __name__ == "__main__":
    main()
