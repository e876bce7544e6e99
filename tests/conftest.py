"""Framework tests run in the framework's own environment (see noxfile.py).

FWKERNELS_TEST_FRAMEWORKS (comma list) names the frameworks a session tests;
by default every framework that is available here.
"""
import os

import pytest

from fwkernels.frameworks import FRAMEWORKS, load_backend, unavailable_reason
from fwkernels.runner import processor


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
