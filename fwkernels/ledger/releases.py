"""The tracked releases: ``releases.toml``, the source of truth of the release ledger.

Per framework (a table named like fwkernels' framework, ``[torch]``), the package it is
installed as, the companion packages discovery resolves with each new release, and its releases
oldest first, each with its release date and its exact pins::

    [torch]
    package = "torch"
    companions = ["torchvision"]

    [[torch.release]]
    version = "2.14.1"
    date = 2026-09-30
    pins = { torchvision = "0.29.1" }

A release published only as a source distribution that does not build in pip's isolated build
environment names what it builds with in ``build_requires`` (e.g. ``["setuptools<74", "wheel"]``):
the install step installs those and the pins first, then the release without build isolation.

A framework whose releases run on a Python of their own (CNTK 2.7: cp36 wheels only) names the
script that makes that environment in ``environment`` (``"scripts/cntk-env.sh"``): the install
step runs it with the release's requirements into a folder of asv's environment
(``installed.own_environment``) instead of pip-installing them beside fwkernels.

``load`` checks the file and names what is wrong in one line (``LedgerError``); ``dump`` writes it
back in this layout (discovery appends releases through it).
"""
from __future__ import annotations

import datetime
import re
import tomllib
from dataclasses import dataclass, field
from typing import Dict, Iterable, List, Optional

DEFAULT_PATH = "releases.toml"
HEADER = """\
# The framework releases that fwkernels measures: the source of truth of the release ledger
# (docs/releases.md). `fwkernels ledger build` turns it into a git repository with one branch per
# framework and one commit per release, which asv benchmarks as it would a project's commits.
# `fwkernels ledger discover` appends the releases newer than the last one listed, with the
# registry's release date and the companion versions pip resolves. Comments are not kept:
# say why a pin is there in the release's `note`.
"""
# A version or a package name as the registry spells it; nothing that could reach a shell or pip
# as an option.
_VERSION = re.compile(r"^[0-9][0-9A-Za-z.+!_-]*$")
_PACKAGE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*(\[[A-Za-z0-9._,-]+\])?$")
# A build requirement: a package name and optional version clauses ("setuptools<74", "wheel").
_CLAUSE = r" *(===|==|~=|!=|<=|>=|<|>) *[0-9][0-9A-Za-z.*+!_-]*"
_SCRIPT = re.compile(r"^[A-Za-z0-9_-][A-Za-z0-9_./-]*\.sh$")
_REQUIREMENT = re.compile(rf"^[A-Za-z0-9][A-Za-z0-9._-]*({_CLAUSE}( *,{_CLAUSE})*)?$")


class LedgerError(ValueError):
    """A releases file or ledger that cannot be used: the message says what and where."""


class RegistryUnavailable(LedgerError):
    """The package registry did not answer: discovery changes nothing."""


@dataclass(frozen=True)
class Release:
    framework: str
    version: str
    date: datetime.date
    pins: Dict[str, str] = field(default_factory=dict)  # companion package -> exact version
    note: str = ""
    python: str = ""  # the Pythons it installs on, a specifier such as ">=3.12" ("": any)
    # installed before the release, which is then built without build isolation ([]: isolated)
    build_requires: List[str] = field(default_factory=list)

    def installs_on(self, python_version: str) -> bool:
        """Whether this release's ``python`` specifier admits ``python_version`` ("3.11.7")."""
        if not self.python:
            return True
        from packaging.specifiers import SpecifierSet

        return python_version in SpecifierSet(self.python)

    @property
    def tag(self) -> str:
        """The ledger's tag of this release, e.g. ``torch-2.14.1``."""
        return f"{self.framework}-{self.version}"


@dataclass
class TrackedFramework:
    name: str  # fwkernels' framework name, and the ledger branch
    package: str  # the distribution installed, e.g. "tensorflow-cpu"
    companions: List[str] = field(default_factory=list)  # resolved by pip at discovery
    cuda_package: str = ""  # the distribution on a CUDA machine, when it is another one
    releases: List[Release] = field(default_factory=list)
    # a script making an environment of another Python for the releases ("": asv's environment)
    environment: str = ""

    @property
    def newest(self) -> Optional[Release]:
        return self.releases[-1] if self.releases else None

    def release(self, version: str) -> Release:
        for release in self.releases:
            if release.version == version:
                return release
        raise LedgerError(f"{self.name} {version} is not tracked; tracked {self.name} releases: "
                          f"{', '.join(r.version for r in self.releases) or 'none'}")


def load(path: str = DEFAULT_PATH, known: Optional[Iterable[str]] = None
         ) -> Dict[str, TrackedFramework]:
    """The frameworks of a releases file, checked; ``known`` are the valid framework names
    (default: fwkernels' registry)."""
    if known is None:
        from fwkernels.frameworks import list_frameworks
        known = list_frameworks()
    known = list(known)
    try:
        with open(path, "rb") as f:
            data = tomllib.load(f)
    except FileNotFoundError:
        raise LedgerError(f"no releases file {path!r}") from None
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
        raise LedgerError(f"{path}: not valid TOML: {error}") from None
    frameworks = {}
    for name, table in data.items():
        if name not in known:
            raise LedgerError(f"{path}: unknown framework [{name}]; valid frameworks: "
                              f"{', '.join(known)}")
        frameworks[name] = _framework(path, name, table)
    return frameworks


def _framework(path: str, name: str, table: object) -> TrackedFramework:
    where = f"{path} [{name}]"
    if not isinstance(table, dict):
        raise LedgerError(f"{where}: must be a table")
    unknown = set(table) - {"package", "companions", "cuda_package", "environment", "release"}
    if unknown:
        raise LedgerError(f"{where}: unknown keys {', '.join(sorted(unknown))}; valid keys: "
                          "package, companions, cuda_package, environment, release")
    package = table.get("package")
    if not isinstance(package, str) or not _PACKAGE.match(package):
        raise LedgerError(f"{where}: `package` must name the distribution, e.g. \"torch\"")
    companions = table.get("companions", [])
    if not isinstance(companions, list) or not all(
            isinstance(c, str) and _PACKAGE.match(c) for c in companions):
        raise LedgerError(f"{where}: `companions` must be a list of package names")
    cuda_package = table.get("cuda_package", "")
    if not isinstance(cuda_package, str) or (cuda_package and not _PACKAGE.match(cuda_package)):
        raise LedgerError(f"{where}: `cuda_package` must name a distribution")
    environment = table.get("environment", "")
    if not isinstance(environment, str) or (environment and (
            not _SCRIPT.match(environment) or ".." in environment.split("/"))):
        raise LedgerError(f"{where}: `environment` must be the path of a script in this "
                          "repository, e.g. \"scripts/cntk-env.sh\"")
    tracked = TrackedFramework(name, package, list(companions), cuda_package,
                               environment=environment)
    entries = table.get("release", [])
    if not isinstance(entries, list):
        raise LedgerError(f"{where}: releases are [[{name}.release]] tables")
    for entry in entries:
        release = _release(where, name, entry)
        if any(r.version == release.version for r in tracked.releases):
            raise LedgerError(f"{where}: {release.version} is listed twice")
        previous = tracked.newest
        if previous and release.date < previous.date:
            raise LedgerError(f"{where}: {release.version} ({release.date}) is dated before the "
                              f"release listed above it, {previous.version} ({previous.date}); "
                              "list releases oldest first")
        tracked.releases.append(release)
    return tracked


def _release(where: str, name: str, entry: object) -> Release:
    if not isinstance(entry, dict):
        raise LedgerError(f"{where}: each release is a [[{name}.release]] table")
    unknown = set(entry) - {"version", "date", "pins", "note", "python", "build_requires"}
    if unknown:
        raise LedgerError(f"{where}: unknown release keys {', '.join(sorted(unknown))}; "
                          "valid keys: version, date, pins, note, python, build_requires")
    version = entry.get("version")
    if not isinstance(version, str) or not _VERSION.match(version):
        raise LedgerError(f"{where}: a release needs `version`, a version string such as "
                          f"\"2.14.1\" (got {version!r})")
    date = entry.get("date")
    if isinstance(date, datetime.datetime) or not isinstance(date, datetime.date):
        raise LedgerError(f"{where}: {name} {version} needs `date`, a TOML date such as "
                          "2026-09-30 (the release date)")
    pins = entry.get("pins", {})
    if not isinstance(pins, dict) or not all(
            isinstance(p, str) and _PACKAGE.match(p) and isinstance(v, str) and _VERSION.match(v)
            for p, v in pins.items()):
        raise LedgerError(f"{where}: {name} {version}: `pins` maps package names to exact "
                          "versions, e.g. { torchvision = \"0.29.1\" }")
    note = entry.get("note", "")
    if not isinstance(note, str):
        raise LedgerError(f"{where}: {name} {version}: `note` must be a string")
    python = entry.get("python", "")
    if not isinstance(python, str) or not re.match(r"^[<>=!~0-9., ]*$", python):
        raise LedgerError(f"{where}: {name} {version}: `python` must be a version specifier "
                          "such as \">=3.12\"")
    build_requires = entry.get("build_requires", [])
    if not isinstance(build_requires, list) or not all(
            isinstance(r, str) and _REQUIREMENT.match(r) for r in build_requires):
        raise LedgerError(f"{where}: {name} {version}: `build_requires` must be a list of "
                          "requirements such as [\"setuptools<74\", \"wheel\"] (installed first; "
                          "the release then builds without build isolation)")
    return Release(name, version, date, dict(pins), note, python, list(build_requires))


def dump(frameworks: Dict[str, TrackedFramework], path: str = DEFAULT_PATH) -> None:
    """Write the releases file (atomically: a reader never sees half of it)."""
    import os

    lines = [HEADER]
    for tracked in frameworks.values():
        lines.append(f"[{tracked.name}]")
        lines.append(f"package = {_string(tracked.package)}")
        if tracked.cuda_package:
            lines.append(f"cuda_package = {_string(tracked.cuda_package)}")
        if tracked.companions:
            lines.append(f"companions = [{', '.join(_string(c) for c in tracked.companions)}]")
        if tracked.environment:
            lines.append(f"environment = {_string(tracked.environment)}")
        lines.append("")
        for release in tracked.releases:
            lines.append(f"[[{tracked.name}.release]]")
            lines.append(f"version = {_string(release.version)}")
            lines.append(f"date = {release.date.isoformat()}")
            if release.pins:
                pins = ", ".join(f"{_key(p)} = {_string(v)}" for p, v in release.pins.items())
                lines.append(f"pins = {{ {pins} }}")
            if release.python:
                lines.append(f"python = {_string(release.python)}")
            if release.build_requires:
                requires = ", ".join(_string(r) for r in release.build_requires)
                lines.append(f"build_requires = [{requires}]")
            if release.note:
                lines.append(f"note = {_string(release.note)}")
            lines.append("")
    tmp = f"{path}.tmp"
    with open(tmp, "w") as f:
        f.write("\n".join(lines))
    os.replace(tmp, path)


def _string(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _key(name: str) -> str:
    return name if re.match(r"^[A-Za-z0-9_-]+$", name) else _string(name)


def requirements(tracked: TrackedFramework, release: Release, device: str = "cpu") -> List[str]:
    """pip requirements that install exactly this release: ``===`` matches the version string
    as the registry names it, so a local build such as 2.13.0+cpu lying beside it never does."""
    package = tracked.cuda_package if device == "cuda" and tracked.cuda_package else tracked.package
    return [f"{package}==={release.version}"] + [f"{p}==={v}" for p, v in release.pins.items()]
