"""Framework tests run in the framework's own environment (see noxfile.py).

FWKERNELS_TEST_FRAMEWORKS (comma list) names the frameworks a session tests;
by default every framework that is available here.
"""
import os
import subprocess
from typing import Dict

import pytest

from fwkernels.frameworks import FRAMEWORKS, load_backend, unavailable_reason
from fwkernels.runner import processor, worker_environment

# The kernels an MKL before 2020.1 picks, as its internal mkl_serv_cpu_detect reads them (0 its
# generic SSE kernels, 5 the AVX2 ones); its OpenMP runtime, beside it, first.
MKL_KERNELS = ("import ctypes, os, sys; "
               "ctypes.CDLL(os.path.join(os.path.dirname(sys.argv[1]), 'libiomp5.so'), "
               "mode=ctypes.RTLD_GLOBAL); print(ctypes.CDLL(sys.argv[1]).mkl_serv_cpu_detect())")


def mkl_kernels(python: str, library: str, env: Dict[str, str]) -> int:
    return int(subprocess.run([python, "-c", MKL_KERNELS, library], env=env, check=True,
                              capture_output=True, text=True).stdout)


@pytest.fixture
def check_mkl_kernels():
    """Checks that in a CPU worker's environment the MKL at ``library`` runs its AVX2 kernels on
    a non-Intel processor, and its generic ones with MKL_DEBUG_CPU_TYPE empty (MKL's own
    choice); skips elsewhere."""
    policy = worker_environment(1, "unused", "", "cpu")
    if not policy.get("MKL_DEBUG_CPU_TYPE"):
        pytest.skip("MKL picks its own kernels here (an Intel processor, or one without AVX2)")

    def check(python: str, library: str, env: Dict[str, str]) -> None:
        assert mkl_kernels(python, library, dict(env, **policy)) == 5
        assert mkl_kernels(python, library, dict(env, MKL_DEBUG_CPU_TYPE="")) == 0
    return check


def tested_frameworks():
    names = os.environ.get("FWKERNELS_TEST_FRAMEWORKS")
    if names:
        return [n.strip() for n in names.split(",") if n.strip()]
    return [n for n in FRAMEWORKS if unavailable_reason(n) is None]


_backends = {}


@pytest.fixture
def backend(framework):
    if framework not in _backends:
        reason = unavailable_reason(framework)
        if reason:
            pytest.fail(f"{framework} was asked for but is unavailable: {reason}")
        b = load_backend(framework)
        b.set_threads(len(os.sched_getaffinity(0)))
        _backends[framework] = b
    return _backends[framework]


def pytest_terminal_summary(terminalreporter):
    """The processor under every session's results (also with -q): a failure that depends on the
    processor's arithmetic (vendor, instruction set) is recognisable as one from the log alone."""
    model, isa = processor()
    terminalreporter.write_line(
        f"processor: {model}, {len(os.sched_getaffinity(0))} usable cores, "
        f"instruction sets: {' '.join(isa) or 'none of avx2/avx512/amx'}")


def pytest_generate_tests(metafunc):
    if "framework" in metafunc.fixturenames:
        metafunc.parametrize("framework", tested_frameworks())
