"""The Pythons of this machine, for a release whose wheels need another Python than asv's
(releases.toml's ``python``, e.g. ``">=3.12"`` for JAX 0.11 and newer). Standard library only,
but for ``packaging``, which asv's environment and the tools' environment hold.

Where they are looked for: FWKERNELS_RELEASE_PYTHON (an interpreter; only it, when set), else
``python3.N`` on PATH and pyenv's versions. Only those whose names could be admitted are run, to
ask their version: pyenv's shims answer to names whose version is not selected, and fail then.
"""
from __future__ import annotations

import glob
import os
import shutil
import subprocess
from typing import List, Optional, Tuple

VARIABLE = "FWKERNELS_RELEASE_PYTHON"
HOW = (f"set {VARIABLE} to an interpreter that it admits, or install one "
       "(e.g. `pyenv install 3.12`)")
MINORS = range(20, 5, -1)  # python3.20 down to python3.6


def candidates() -> List[Tuple[str, str]]:
    """(the version its name claims, interpreter path), not run: "3.12" for a python3.12 on
    PATH, "3.12.1" for pyenv's, "" for FWKERNELS_RELEASE_PYTHON's."""
    named = os.environ.get(VARIABLE, "").strip()
    if named:
        return [("", named)]
    found = [(f"3.{minor}", shutil.which(f"python3.{minor}")) for minor in MINORS]
    root = os.environ.get("PYENV_ROOT") or os.path.expanduser("~/.pyenv")
    found += [(os.path.basename(os.path.dirname(os.path.dirname(path))), path)
              for path in glob.glob(os.path.join(root, "versions", "*", "bin", "python3"))]
    return [(claim, path) for claim, path in found if path]


def version_of(python: str) -> Optional[str]:
    """The interpreter's version, asked of it; None where it does not run."""
    try:
        out = subprocess.run([python, "-c", "import platform; print(platform.python_version())"],
                             capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 and out.stdout.strip() else None


def find(specifier: str) -> Optional[str]:
    """The oldest Python here that ``specifier`` admits (the nearest to asv's, whose wheels
    are the likeliest to exist), or None."""
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    wanted = SpecifierSet(specifier)

    def claimed(claim: str) -> Version:
        try:
            return Version(claim)
        except InvalidVersion:
            return Version("0")

    def could_be_admitted(claim: str) -> bool:  # "3.12": any 3.12.x
        versions = [f"{claim}.{patch}" for patch in range(30)] if claim.count(".") == 1 \
            else [claim]
        return not claim or any(version in wanted for version in versions)

    for claim, path in sorted(candidates(), key=lambda found: claimed(found[0])):
        if could_be_admitted(claim):
            version = version_of(path)
            if version and version in wanted:
                return path
    return None
