"""asv's install step for a ledger commit, run with the Python of asv's environment:

    python -m fwkernels.ledger.install BUILD_DIR      (asv.conf.json's install_command)

Every release gets the same clean environment: whatever an earlier release installed is removed
first (everything that was not there when asv created the environment; asv's own packages go back
to their versions of then), then the release's exact pins are installed, not byte-compiled
(``release.json`` of the commit, CPU or CUDA packages by FWKERNELS_DEVICE; a release's
``build_requires`` first, then the release without build isolation), then fwkernels itself from
the checkout that runs asv (editable, no dependencies). What was installed is written to
``<environment>/fwkernels-release.json``, which the suite reads.

A framework that runs on a Python of its own (``environment`` in its ``release.json``: CNTK 2.7,
whose wheels are cp36 only) gets its requirements from that script instead, run into
``installed.own_environment`` inside asv's environment; asv's environment then gets only what
fwkernels' side of such a backend needs (``OWN_PYTHON_HARNESS``: numpy, which draws the synthetic
batch).

A release whose wheels need another Python than asv's (``python`` in its ``release.json``, such
as ">=3.12": JAX 0.11 and newer) is installed into a virtualenv of a Python of this machine that
admits it (``fwkernels.ledger.pythons``), ``installed.release_environment`` inside asv's
environment, with this checkout's fwkernels on its path; the marker names its interpreter, and
the runner starts the workers with it (``installed.worker_python``).

A pip constraint file (PIP_CONSTRAINT, or a pip.conf that caps a framework) is not applied: the
ledger's exact pins are the point, and a cap could only make a tracked release fail to install.
A release that fails to install fails this step with pip's reason, and a record says so; asv
records the commit as failed and goes on with the next one.

Standard library only: this runs before anything but asv's own packages is installed.
"""
from __future__ import annotations

import glob
import json
import os
import platform
import shutil
import subprocess
import sys
from importlib import metadata
from typing import Dict, List, Optional

from fwkernels.ledger import pythons
from fwkernels.ledger.installed import (MARKER, WORKER_PYTHON, own_environment,
                                       release_environment)

BASELINE = "fwkernels-ledger-baseline.json"
HARNESS = "fwkernels"
# pip byte-compiles every module it installs; a worker imports a small part of a framework, and
# Python compiles what it imports on first use. Compiling all of PyTorch 2.15.0's modules was
# about a minute of its install on the 2-core machine (docs/history.md, *The default profile's
# time*).
RELEASE_INSTALL_OPTIONS = ["--no-compile"]
OWN_PYTHON_HARNESS = ["numpy==2.4.6"]  # the nox session of such a framework pins the same


def installed_distributions() -> Dict[str, str]:
    """Normalised distribution name -> version, of this Python's environment."""
    out = {}
    for dist in metadata.distributions():
        name = dist.metadata["Name"]
        if name:
            out[normalise(name)] = dist.version
    return out


def normalise(name: str) -> str:
    return name.lower().replace("_", "-").replace(".", "-")


def pip(*args: str, python: str = "") -> subprocess.CompletedProcess:
    env = dict(os.environ, PIP_CONSTRAINT=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1")
    return subprocess.run([python or sys.executable, "-m", "pip", *args], env=env, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT)


def baseline(prefix: str) -> Dict[str, Optional[str]]:
    """The distributions asv put in the environment and their versions, recorded the first time
    this step runs (a baseline recorded before versions were lists names only: versions None)."""
    path = os.path.join(prefix, BASELINE)
    if not os.path.exists(path):
        versions = {n: v for n, v in sorted(installed_distributions().items()) if n != HARNESS}
        with open(path, "w") as f:
            json.dump(versions, f, indent=1)
    with open(path) as f:
        recorded = json.load(f)
    return recorded if isinstance(recorded, dict) else dict.fromkeys(recorded)


def clean(prefix: str) -> List[str]:
    """Remove what earlier releases installed, and put back the versions of asv's own packages
    that a release's ``build_requires`` changed (setuptools); returns the names removed."""
    keep = baseline(prefix)
    now = installed_distributions()
    changed = sorted(f"{n}=={v}" for n, v in keep.items() if v and now.get(n) != v)
    if changed:
        result = pip("install", *changed)
        if result.returncode != 0:
            raise SystemExit(f"could not put back the environment's own packages "
                             f"({', '.join(changed)}):\n{result.stdout[-3000:]}")
    extra = sorted(n for n in now if n not in keep)
    marker = os.path.join(prefix, MARKER)
    if os.path.exists(marker):
        os.remove(marker)
    for folder in glob.glob(own_environment("*")):
        shutil.rmtree(folder)
    if extra:
        result = pip("uninstall", "-y", *extra)
        if result.returncode != 0:
            raise SystemExit(f"could not remove the previous release's packages "
                             f"({', '.join(extra)}):\n{result.stdout[-3000:]}")
    return extra


def install(build_dir: str, device: str, harness_dir: Optional[str]) -> Dict[str, object]:
    with open(os.path.join(build_dir, "release.json")) as f:
        release = json.load(f)
    name = f"{release['framework']} {release['version']}"
    requirements = release["requirements"].get(device)
    if not requirements:
        raise SystemExit(f"{name} has no requirements for device {device!r}; devices: "
                         f"{', '.join(release['requirements'])}")
    worker_python = release_python(name, str(release.get("python") or ""))
    prefix = sys.prefix
    removed = clean(prefix)
    print(f"{name}: removed {len(removed)} packages of the previous release", flush=True)
    own_versions = None
    if release.get("environment"):
        own_versions = install_own_environment(name, release, requirements, harness_dir)
    elif worker_python:
        own_versions = install_release_environment(name, worker_python, requirements,
                                                   harness_dir)
    else:
        for args in install_steps(requirements, release.get("build_requires", [])):
            result = pip("install", *RELEASE_INSTALL_OPTIONS, *args)
            print(result.stdout[-5000:], flush=True)
            if result.returncode != 0:
                raise SystemExit(f"{name} failed to install ({' '.join(args)}): "
                                 f"{_last_error(result.stdout)}")
    if harness_dir:
        result = pip("install", "--no-deps", "--no-build-isolation", "-e", harness_dir)
        if result.returncode != 0:
            raise SystemExit(f"fwkernels from {harness_dir} failed to install:\n"
                             f"{result.stdout[-3000:]}")
    versions = installed_distributions() if own_versions is None else own_versions
    record = dict(release, device=device, installed={
        requirement.split("===")[0]: versions.get(normalise(requirement.split("===")[0]
                                                            .split("[")[0]))
        for requirement in requirements})
    if worker_python:
        record[WORKER_PYTHON] = os.path.join(release_environment(), "bin", "python")
    with open(os.path.join(prefix, MARKER), "w") as f:
        json.dump(record, f, indent=2, sort_keys=True)
    return record


def release_python(name: str, specifier: str) -> Optional[str]:
    """None where this Python admits the release (``specifier``: its releases.toml ``python``);
    else an interpreter of this machine that does, for the release's own environment."""
    python = platform.python_version()
    if not specifier or _admits(specifier, python):
        return None
    found = pythons.find(specifier)
    if not found:
        raise SystemExit(f"{name} installs on Python {specifier}; this environment has Python "
                         f"{python}, and no other Python here admits it: {pythons.HOW}")
    return found


def install_release_environment(name: str, python: str, requirements: List[str],
                                harness_dir: Optional[str]) -> Dict[str, str]:
    """A virtualenv of ``python`` (``installed.release_environment``) with the release's pins and
    this checkout's fwkernels on its path, in which the workers run; returns its versions."""
    if not harness_dir:
        raise SystemExit(f"{name} runs in an environment of its own, which needs the fwkernels "
                         "checkout, and no checkout was given")
    folder = release_environment()
    result = subprocess.run([python, "-m", "venv", folder], text=True, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT)
    if result.returncode != 0:
        raise SystemExit(f"{name}: {python} -m venv {folder} failed: {_last_error(result.stdout)}")
    result = pip("install", *RELEASE_INSTALL_OPTIONS, *requirements,
                 python=os.path.join(folder, "bin", "python"))
    print(result.stdout[-5000:], flush=True)
    if result.returncode != 0:
        raise SystemExit(f"{name} failed to install ({' '.join(requirements)}) on {python}: "
                         f"{_last_error(result.stdout)}")
    site_packages = _site_packages(folder)
    # fwkernels from the checkout, as an editable install would put it (no build, no download)
    with open(os.path.join(site_packages[0], "fwkernels-checkout.pth"), "w") as f:
        f.write(os.path.abspath(harness_dir) + "\n")
    return _versions_in(site_packages)


def _site_packages(folder: str) -> List[str]:
    return glob.glob(os.path.join(folder, "lib", "python*", "site-packages"))


def _versions_in(site_packages: List[str]) -> Dict[str, str]:
    return {normalise(dist.metadata["Name"]): dist.version
            for dist in metadata.distributions(path=site_packages) if dist.metadata["Name"]}


def install_own_environment(name: str, release: Dict[str, object], requirements: List[str],
                            harness_dir: Optional[str]) -> Dict[str, str]:
    """Run the release's environment script into ``own_environment`` with the requirements, and
    install fwkernels' side of the backend here; returns the versions in that environment."""
    if not harness_dir:
        raise SystemExit(f"{name} is installed by {release['environment']}, a script of the "
                         "fwkernels checkout, and no checkout was given")
    folder = own_environment(str(release["framework"]))
    script = os.path.join(harness_dir, str(release["environment"]))
    result = subprocess.run(["bash", script, folder, *requirements], text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                            env=dict(os.environ, PIP_CONSTRAINT=os.devnull))
    print(result.stdout[-5000:], flush=True)
    if result.returncode != 0:
        raise SystemExit(f"{name} failed to install ({release['environment']} {folder}): "
                         f"{_last_error(result.stdout)}")
    result = pip("install", *OWN_PYTHON_HARNESS)
    if result.returncode != 0:
        raise SystemExit(f"{name}: fwkernels' side ({' '.join(OWN_PYTHON_HARNESS)}) failed to "
                         f"install: {_last_error(result.stdout)}")
    return _versions_in(_site_packages(folder))


def install_steps(requirements: List[str], build_requires: List[str]) -> List[List[str]]:
    """pip install's arguments, in order.  A release with ``build_requires`` (a source
    distribution that does not build in pip's isolated build environment, such as Chainer 7.8.1):
    those and the pins (``requirements`` after the package) first, then everything without build
    isolation, so that the release builds against them."""
    if not build_requires:
        return [requirements]
    return [[*build_requires, *requirements[1:]], ["--no-build-isolation", *requirements]]


def _admits(specifier: str, python: str) -> bool:
    try:  # packaging comes with asv's own `build`; without it pip says no further down
        from packaging.specifiers import SpecifierSet
    except ImportError:
        return True
    return python in SpecifierSet(specifier)


def record_failure(build_dir: str, device: str, reason: str) -> None:
    """A release that did not install gets a record (model, mode and precision "all": nothing of
    it was measured), so the report and the history say why its figures are missing."""
    from fwkernels import record, suite

    with open(os.path.join(build_dir, "release.json")) as f:
        release = json.load(f)
    failed = record.Record.new(
        framework=release["framework"], mode="all", model="all", precision="all", device=device,
        status="error", error=reason.splitlines()[0][:500], failed_phase="install",
        release=f"{release['framework']}-{release['version']}",
        harness_commit=suite.harness_commit(), asv_commit=os.environ.get("ASV_COMMIT"),
        asv_env=os.environ.get("ASV_ENV_NAME"), asv_machine=os.environ.get("FWKERNELS_MACHINE"))
    record.append(suite.records_path(), failed)


def checkout() -> str:
    """The fwkernels checkout this module runs from (the harness installed beside the release)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))


def _last_error(output: str) -> str:
    errors = [line.removeprefix("ERROR: ") for line in output.splitlines()
              if line.startswith("ERROR")]
    return " ".join(errors[-2:]) or (output.strip().splitlines() or ["pip failed"])[-1]


def main(argv: Optional[List[str]] = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 1:
        print("usage: python -m fwkernels.ledger.install BUILD_DIR", file=sys.stderr)
        return 2
    device = os.environ.get("FWKERNELS_DEVICE", "cpu")
    try:
        record = install(argv[0], device, checkout())
    except SystemExit as error:
        record_failure(argv[0], device, str(error))
        raise
    print(f"installed {record['framework']} {record['version']} for {device}: "
          f"{', '.join(f'{k} {v}' for k, v in record['installed'].items())}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
