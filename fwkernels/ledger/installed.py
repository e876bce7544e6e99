"""Which release the suite measures in this environment (standard library only).

In an environment asv built from the ledger, the install step wrote
``<environment>/fwkernels-release.json``. In one asv did not build (``asv run -E existing`` on a
machine whose Python already holds the frameworks), FWKERNELS_RELEASE names the release
(``torch-2.11.0``), and the framework's installed version must be that release's.
"""
from __future__ import annotations

import glob
import json
import os
import sys
from dataclasses import dataclass, field
from typing import Dict, List, Optional

MARKER = "fwkernels-release.json"  # what the ledger's install step writes into the environment
VARIABLE = "FWKERNELS_RELEASE"
WORKER_PYTHON = "worker_python"  # the marker's key: the release environment's interpreter


@dataclass(frozen=True)
class InstalledRelease:
    framework: str
    version: str
    source: str  # how this environment got it: "ledger install" or "FWKERNELS_RELEASE"
    installed: Dict[str, Optional[str]] = field(default_factory=dict)

    @property
    def tag(self) -> str:
        return f"{self.framework}-{self.version}"


def installed_release() -> Optional[InstalledRelease]:
    """The release installed here, or None when neither the marker nor the variable is set."""
    named = os.environ.get(VARIABLE, "").strip()
    if named:
        framework, _, version = named.rpartition("-")
        if not framework or not version:
            raise ValueError(f"{VARIABLE}={named!r} must name a release as <framework>-<version>, "
                             "e.g. torch-2.11.0")
        return InstalledRelease(framework, version, VARIABLE)
    path = os.path.join(sys.prefix, MARKER)
    if not os.path.exists(path):
        return None
    with open(path) as f:
        data = json.load(f)
    return InstalledRelease(data["framework"], data["version"], "ledger install",
                            data.get("installed", {}))


def release_environment() -> str:
    """Where the ledger's install step makes the environment of a release whose wheels need
    another Python than asv's (releases.toml's ``python``): a folder of asv's environment,
    named as ``own_environment``'s are, so that the install step removes it with them."""
    return os.path.join(sys.prefix, "fwkernels-release-environment")


def worker_python() -> str:
    """The interpreter that runs the measurement workers: the release environment's, where the
    install step made one for the release installed here; else this one."""
    path = os.path.join(sys.prefix, MARKER)
    if os.path.exists(path) and not os.environ.get(VARIABLE, "").strip():
        with open(path) as f:
            python = json.load(f).get(WORKER_PYTHON)
        if python:
            return python
    return sys.executable


def worker_site_packages() -> Optional[List[str]]:
    """The site-packages of the workers' Python where it is not this one (a release environment),
    else None: what is installed there is read from its files, without running it."""
    python = worker_python()
    if python == sys.executable:
        return None
    root = os.path.dirname(os.path.dirname(python))
    return glob.glob(os.path.join(root, "lib", "python*", "site-packages"))


def own_environment(framework: str) -> str:
    """Where the ledger's install step makes the environment of a framework that runs on a
    Python of its own (releases.toml's ``environment``): a folder of asv's environment."""
    return os.path.join(sys.prefix, f"fwkernels-{framework}-environment")


def matches(release_version: str, framework_version: str) -> bool:
    """Whether a framework's reported version is the release's: "2.11.0+cu130" is 2.11.0,
    "3.15.1 (jax 0.11.2)" (Keras with its backend) is 3.15.1, "2.7" is the post-release
    2.7.post2 (CNTK reports the version it was released as, not the repackaging's)."""
    reported = framework_version.split()[0] if framework_version else ""
    base = release_version.split(".post")[0]
    return reported in (release_version, base) or reported.startswith(release_version + "+")
