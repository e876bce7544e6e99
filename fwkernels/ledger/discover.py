"""Discover framework releases newer than the last tracked one, through pip and the registry.

pip says which releases this Python can install (``pip index versions``) and which companion
versions go with one (``pip install --dry-run --report``); the registry's JSON index (PEP 691,
with PEP 700's upload times) says which releases exist at all and when each was first uploaded,
which is its release date. A release whose files all need another Python than this one
(``Requires-Python``) is asked of the pip of a Python of this machine that admits it
(``fwkernels.ledger.pythons``) and keeps that requirement as its ``python``: the install step gives
it an environment of its own. A release pip cannot install here is skipped with the reason (no
wheel for this Python, a Python requirement no Python here meets, a resolution conflict); nothing
is written when the registry cannot be reached.
"""
from __future__ import annotations

import copy
import json
import os
import platform
import re
import subprocess
import sys
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from typing import Dict, List, Optional, Tuple

from fwkernels.ledger import pythons
from fwkernels.ledger.releases import LedgerError, RegistryUnavailable, Release, TrackedFramework

DEFAULT_INDEX = "https://pypi.org/simple/"
JSON_INDEX = "application/vnd.pypi.simple.v1+json"


@dataclass(frozen=True)
class Skipped:
    framework: str
    version: str
    reason: str


@dataclass
class Discovery:
    added: List[Release] = field(default_factory=list)
    skipped: List[Skipped] = field(default_factory=list)


@dataclass
class Project:
    """What the registry's JSON index says of one package."""
    versions: List[str]
    upload_dates: Dict[str, str]  # version -> earliest upload date (YYYY-MM-DD)
    requires_python: Dict[str, List[str]]  # version -> the files' Requires-Python
    yanked: List[str]  # versions whose every file is yanked


class Registry:
    """The package index pip uses (PIP_INDEX_URL, pip's configuration, else PyPI)."""

    def __init__(self, index_url: Optional[str] = None, env: Optional[Dict[str, str]] = None,
                 timeout: float = 60) -> None:
        self.env = {**os.environ, **(env or {})}
        self.index_url = (index_url or self.env.get("PIP_INDEX_URL") or _pip_config_index(self.env)
                          or DEFAULT_INDEX).rstrip("/") + "/"
        self.timeout = timeout
        self.python = sys.executable  # whose pip answers installable() and resolve()

    def on_python(self, python: str) -> "Registry":
        """The same registry, asked through another interpreter's pip."""
        other = copy.copy(self)
        other.python = python
        return other

    def project(self, package: str) -> Project:
        url = f"{self.index_url}{_normalise(package.split('[')[0])}/"
        request = urllib.request.Request(url, headers={"Accept": JSON_INDEX})
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                data = json.load(response)
        except urllib.error.HTTPError as error:
            if error.code == 404:
                raise LedgerError(f"the registry {self.index_url} has no package {package!r}") \
                    from None
            raise RegistryUnavailable(f"the registry {self.index_url} answered {error.code} for "
                                      f"{package}; nothing changed") from None
        except (urllib.error.URLError, OSError, ValueError) as error:
            reason = getattr(error, "reason", error)
            raise RegistryUnavailable(f"cannot reach the package registry {self.index_url} "
                                      f"({reason}); nothing changed") from None
        return _project(data)

    def installable(self, package: str) -> List[str]:
        """The releases pip would install with this registry's Python, on this platform."""
        result = self._pip("index", "versions", package.split("[")[0])
        match = re.search(r"^Available versions: (.*)$", result.stdout, re.MULTILINE)
        if match:
            return [v.strip() for v in match.group(1).split(",")]
        if "No matching distribution" in result.stdout:
            return []
        raise RegistryUnavailable(f"pip index versions {package} failed: "
                                  f"{_pip_error(result.stdout)}; nothing changed")

    def resolve(self, requirements: List[str]) -> Dict[str, str]:
        """Normalised name -> version of everything pip would install for ``requirements``;
        LedgerError with pip's reason when it cannot."""
        result = self._pip("install", "--dry-run", "--ignore-installed", "--quiet",
                           "--report", "-", *requirements)
        start = result.stdout.find("{")
        if result.returncode != 0 or start < 0:
            raise LedgerError(_pip_error(result.stdout))
        report = json.loads(result.stdout[start:])
        return {_normalise(item["metadata"]["name"]): item["metadata"]["version"]
                for item in report.get("install", [])}

    def _pip(self, *args: str) -> subprocess.CompletedProcess:
        env = dict(self.env, PIP_CONSTRAINT=os.devnull, PIP_DISABLE_PIP_VERSION_CHECK="1",
                   PIP_INDEX_URL=self.index_url)
        return subprocess.run([self.python, "-m", "pip", *args], env=env, text=True,
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                              timeout=max(self.timeout, 600))


def discover(tracked: TrackedFramework, registry: Registry) -> Discovery:
    """The releases of ``tracked`` newer than its newest, with dates and pins (not yet written)."""
    from packaging.version import InvalidVersion, Version

    def version(text: str) -> Optional[Version]:
        try:
            return Version(text)
        except InvalidVersion:
            return None

    project = registry.project(tracked.package)
    newest = tracked.newest
    floor = version(newest.version) if newest else None
    candidates = sorted((v for v in project.versions
                         if version(v) and not version(v).is_prerelease
                         and v not in project.yanked and (floor is None or version(v) > floor)),
                        key=version)
    if newest is None:
        candidates = candidates[-1:]  # a framework without releases starts at the newest
    found = Discovery()
    installable = set(registry.installable(tracked.package)) if candidates else set()
    previous = newest
    elsewhere: Dict[str, Optional[Tuple[Registry, set]]] = {}  # by the Python specifier
    for candidate in candidates:
        reason = _not_installable(candidate, installable, project)
        asked, needs = registry, _other_python(candidate, project)
        if reason and needs:  # the install step makes such a release an environment of its own
            if needs not in elsewhere:
                elsewhere[needs] = _other_registry(registry, needs, tracked.package)
            other = elsewhere[needs]
            if other and candidate in other[1]:
                reason, asked = None, other[0]
        date = project.upload_dates.get(candidate)
        if reason is None and date is None:
            reason = "the registry gives no upload date for it: add it by hand with its date"
        if reason is None and previous and date < previous.date.isoformat():
            reason = (f"first uploaded {date}, before {previous.version} ({previous.date}): "
                      "a release of an older line")
        pins: Dict[str, str] = {}
        if reason is None:
            try:
                pins = companion_pins(tracked, candidate, date, previous, asked)
            except LedgerError as error:
                reason = f"pip cannot install it here: {error}"
        if reason:
            found.skipped.append(Skipped(tracked.name, candidate, reason))
            continue
        import datetime

        release = Release(tracked.name, candidate, datetime.date.fromisoformat(date), pins,
                          python=needs if asked is not registry else "",
                          build_requires=list(previous.build_requires) if previous else [])
        found.added.append(release)
        previous = release
    return found


# A companion uploaded more than this many days after the release was not what a user installing
# the release got on its day (torchvision 0.29.2 came with torch 2.15.0 and still accepts 2.14.1).
COMPANION_SLACK_DAYS = 3


def companion_pins(tracked: TrackedFramework, version: str, date: str,
                   previous: Optional[Release], registry: Registry) -> Dict[str, str]:
    """Companion versions pip resolves with the release, each the newest that pip accepts among
    those uploaded by ``date`` (plus a few days); a previous release's pins of other packages
    (numpy held back for an old framework, say) are carried over."""
    import datetime

    held = {p: v for p, v in (previous.pins if previous else {}).items()
            if p not in tracked.companions}
    by = (datetime.date.fromisoformat(date)
          + datetime.timedelta(days=COMPANION_SLACK_DAYS)).isoformat()
    requirements = [f"{tracked.package}==={version}", *(f"{p}==={v}" for p, v in held.items())]
    resolved = registry.resolve(requirements + list(tracked.companions))
    pins: Dict[str, str] = {}
    for companion in tracked.companions:
        chosen = resolved.get(_normalise(companion.split("[")[0]))
        if chosen is None:
            raise LedgerError(f"pip did not resolve the companion {companion}")
        dates = registry.project(companion).upload_dates
        if dates.get(chosen, by) > by:
            chosen = _newest_accepted(registry, requirements, companion, dates, by) or chosen
        pins[companion] = chosen
    return {**pins, **held}


def _newest_accepted(registry: Registry, requirements: List[str], companion: str,
                     dates: Dict[str, str], by: str) -> Optional[str]:
    """The newest version of ``companion`` uploaded by ``by`` that pip installs beside
    ``requirements`` (None when none does)."""
    from packaging.version import InvalidVersion, Version

    def key(text: str):
        try:
            return Version(text)
        except InvalidVersion:
            return Version("0")

    for candidate in sorted((v for v, d in dates.items() if d <= by), key=key, reverse=True)[:5]:
        try:
            registry.resolve([*requirements, f"{companion}==={candidate}"])
            return candidate
        except LedgerError:
            continue
    return None


def _not_installable(candidate: str, installable: set, project: Project) -> Optional[str]:
    if candidate in installable:
        return None
    python = platform.python_version()
    required = [spec for spec in project.requires_python.get(candidate, []) if spec]
    if required and not any(_python_matches(spec, python) for spec in required):
        return f"requires Python {' or '.join(sorted(set(required)))}; this is Python {python}"
    return (f"no file that pip can install on CPython {python} "
            f"({platform.system().lower()} {platform.machine()})")


def _other_registry(registry: Registry, specifier: str, package: str
                    ) -> Optional[Tuple[Registry, set]]:
    """The registry asked through the pip of a Python here that ``specifier`` admits, with the
    releases of ``package`` it would install; None where this machine has no such Python."""
    python = pythons.find(specifier)
    if python is None:
        return None
    other = registry.on_python(python)
    return other, set(other.installable(package))


def _other_python(candidate: str, project: Project) -> str:
    """The one Python specifier of the candidate's files where it does not admit this Python
    (">=3.12"), else ""."""
    python = platform.python_version()
    required = sorted({spec for spec in project.requires_python.get(candidate, []) if spec})
    if len(required) == 1 and not _python_matches(required[0], python):
        return required[0]
    return ""


def _python_matches(spec: str, python: str) -> bool:
    from packaging.specifiers import InvalidSpecifier, SpecifierSet

    try:
        return python in SpecifierSet(spec)
    except InvalidSpecifier:
        return True


def _project(data: dict) -> Project:
    dates: Dict[str, str] = {}
    requires: Dict[str, List[str]] = {}
    live: Dict[str, bool] = {}
    for entry in data.get("files", []):
        version = _file_version(entry.get("filename", ""))
        if version is None:
            continue
        uploaded = (entry.get("upload-time") or "")[:10]
        if uploaded:
            dates[version] = min(dates.get(version, uploaded), uploaded)
        requires.setdefault(version, []).append(entry.get("requires-python") or "")
        live[version] = live.get(version, False) or not entry.get("yanked")
    versions = data.get("versions") or sorted(live)
    return Project(list(versions), dates, requires, [v for v, ok in live.items() if not ok])


def _file_version(filename: str) -> Optional[str]:
    if filename.endswith(".whl"):
        parts = filename[:-4].split("-")
        return parts[1] if len(parts) >= 5 else None
    for suffix in (".tar.gz", ".zip", ".tar.bz2"):
        if filename.endswith(suffix):
            name = filename[: -len(suffix)]
            return name.rsplit("-", 1)[1] if "-" in name else None
    return None


def _normalise(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _pip_config_index(env: Dict[str, str]) -> Optional[str]:
    result = subprocess.run([sys.executable, "-m", "pip", "config", "get", "global.index-url"],
                            env=env, text=True, capture_output=True)
    return result.stdout.strip() if result.returncode == 0 and result.stdout.strip() else None


def _pip_error(output: str) -> str:
    errors = [line.removeprefix("ERROR: ").strip() for line in output.splitlines()
              if line.startswith("ERROR")]
    return " ".join(errors[-2:]) or (output.strip().splitlines() or ["pip failed"])[-1]
