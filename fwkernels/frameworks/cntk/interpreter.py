"""Where CNTK's Python 3.6 is, and whether CNTK is there (no process started, nothing imported).

CNTK 2.7's wheels are cp36 only: scripts/cntk-env.sh makes a Python 3.6 environment with
cntk==2.7.post2 and the OpenMPI library names it links against in ``ENV/lib/mpi``.
FWKERNELS_CNTK_PYTHON names that environment's python; by default the one the release ledger's
install step made inside asv's environment (docs/releases.md), else the script's default.
"""
from __future__ import annotations

import glob
import os
from typing import Dict, Optional

from fwkernels.ledger.installed import own_environment

VARIABLE = "FWKERNELS_CNTK_PYTHON"
INSTALL = "bash scripts/cntk-env.sh"


def default_environment() -> str:
    ledger = own_environment("cntk")
    if os.path.isdir(ledger):
        return ledger
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(cache, "fwkernels", "cntk-2.7")


def python() -> str:
    """The CNTK environment's python (not checked)."""
    return os.environ.get(VARIABLE) or os.path.join(default_environment(), "bin", "python")


def environment_root() -> str:
    return os.path.dirname(os.path.dirname(python()))


def site_packages() -> str:
    return os.path.join(environment_root(), "lib", "python3.6", "site-packages")


def installed_version() -> Optional[str]:
    """cntk's distribution version in the CNTK environment, from its metadata (2.7.post2; the
    dist-info folder is named cntk-2.7)."""
    for path in glob.glob(os.path.join(site_packages(), "cntk-*.dist-info", "METADATA")):
        with open(path) as f:
            for line in f:
                if line.startswith("Version:"):
                    return line.split(":", 1)[1].strip()
    return None


def missing_reason() -> Optional[str]:
    """Why CNTK cannot run here, in one line, or None (looks at files only: cheap)."""
    interpreter, named = python(), VARIABLE in os.environ
    where = f"{VARIABLE}={interpreter}" if named else f"the default {interpreter}"
    if not os.access(interpreter, os.X_OK):
        return (f"cntk is not installed: no Python 3.6 for CNTK at {where} ({INSTALL} makes it"
                f"{'' if named else f'; {VARIABLE} names another'})")
    root = environment_root()
    if not os.path.exists(os.path.join(site_packages(), "cntk", "__init__.py")):
        return f"cntk is not installed in the Python 3.6 environment {root} ({INSTALL} {root})"
    if not os.path.exists(os.path.join(root, "lib", "mpi", "libmpi.so.12")):
        return (f"cntk is installed in {root} but not the OpenMPI names it links against "
                f"({root}/lib/mpi/libmpi.so.12: {INSTALL} {root} makes them)")
    return None


def process_environment() -> Dict[str, str]:
    """This process's environment with the OpenMPI names on LD_LIBRARY_PATH."""
    mpi = os.path.join(environment_root(), "lib", "mpi")
    path = os.environ.get("LD_LIBRARY_PATH")
    return dict(os.environ, LD_LIBRARY_PATH=f"{mpi}:{path}" if path else mpi)
