"""What the asv suite (benchmarks/training.py) needs: its parameters and measure-once records.

The framework measured is the release installed in asv's environment (fwkernels.ledger: asv's
commits are framework releases); the suite's parameters are mode, model and precision.
"""
from __future__ import annotations

import os
import re
import socket
import subprocess
import tempfile
from typing import Any, Dict, List, Optional, Sequence

from fwkernels import record
from fwkernels.frameworks.base import DEVICES, PRECISIONS
from fwkernels.ledger.installed import InstalledRelease, installed_release, matches
from fwkernels.models import MODELS
from fwkernels.record import Record
from fwkernels.registry import check
from fwkernels.request import (InvalidRequest, Skip, check_protocol, cpu_allocator,
                               mode_parameter, release_target, resolve, split_target)
from fwkernels.runner import run


def _env_list(name: str, default: Sequence[str]) -> List[str]:
    value = os.environ.get(name, "").strip()
    return [v.strip() for v in value.split(",") if v.strip()] if value else list(default)


def parameters(device: str) -> List[List[str]]:
    """asv's parameters: modes (FWKERNELS_MODES: "default", "tuned", "all" or a list; see
    ``request.mode_parameter``), models, precisions."""
    precisions = _env_list("FWKERNELS_PRECISIONS", ["fp32"] if device == "cpu" else PRECISIONS)
    profile = os.environ.get("FWKERNELS_MODES", "").strip() or "default"
    return [mode_parameter(profile), _env_list("FWKERNELS_MODELS", MODELS), precisions]


def check_variables() -> List[List[str]]:
    """The suite's variables, checked before a run installs anything (the suite would otherwise
    fail each combination after the installs): InvalidRequest names the variable and what it may
    hold.  Returns the parameters they select (``parameters``)."""
    device = os.environ.get("FWKERNELS_DEVICE", "cpu")
    _check_each("FWKERNELS_DEVICE", [device], DEVICES, "device")
    try:
        selected = parameters(device)
    except ValueError as error:  # it names FWKERNELS_MODES
        raise InvalidRequest(str(error)) from None
    _modes, models, precisions = selected
    _check_each("FWKERNELS_MODELS", models, MODELS, "model")
    _check_each("FWKERNELS_PRECISIONS", precisions, PRECISIONS, "precision")
    select = os.environ.get("FWKERNELS_SELECT")
    if select:
        try:
            re.compile(select)
        except re.error as error:
            raise InvalidRequest(f"FWKERNELS_SELECT is not a regular expression ({error}): "
                                 f"{select!r}") from None
    for keyword, value in protocol_overrides().items():
        try:
            check_protocol(**{keyword: value})
        except InvalidRequest as error:
            raise InvalidRequest(f"{PROTOCOL_VARIABLES[keyword][0]}: {error}") from None
    cpu_allocator(device)
    return selected


def _check_each(variable: str, values: Sequence[str], valid: Sequence[str], kind: str) -> None:
    for value in values:
        try:
            check(value, valid, kind)
        except ValueError as error:
            raise InvalidRequest(f"{variable}: {error}") from None


def make_cache_dir() -> str:
    return tempfile.mkdtemp(prefix="measurements-", dir=os.getcwd())


def records_path() -> str:
    """JSON-lines file of this environment's records: records/<machine>/<commit>-<env>.jsonl."""
    root = os.environ.get("FWKERNELS_RECORDS_DIR") or os.path.join(
        os.environ.get("ASV_CONF_DIR", os.getcwd()), "records")
    machine = os.environ.get("FWKERNELS_MACHINE") or socket.gethostname()
    commit = _asv_commit()[:8]
    env = _asv_env_name()
    os.makedirs(os.path.join(root, machine), exist_ok=True)
    return os.path.join(root, machine, f"{commit}-{env}.jsonl")


def measured(cache_dir: str, device: str, mode: str, model: str, precision: str) -> Record:
    """The record of one combination of the release installed here, measured on first use;
    NotImplementedError skips it."""
    release = installed_release()
    if release is None:
        raise NotImplementedError(
            "no framework release is installed in this environment: run asv over the release "
            "ledger (docs/releases.md), or name the release with FWKERNELS_RELEASE")
    target = release_target(release.framework, mode)
    if isinstance(target, Skip):
        raise NotImplementedError(target.reason)
    select = os.environ.get("FWKERNELS_SELECT")
    if select and not re.search(select, f"{target}/{model}/{precision}"):
        raise NotImplementedError(f"outside this profile (FWKERNELS_SELECT={select!r})")
    framework, mode = split_target(target)
    request = resolve(framework, model, device=device, precision=precision, mode=mode,
                      **protocol_overrides())
    if isinstance(request, Skip):
        raise NotImplementedError(request.reason)
    path = os.path.join(cache_dir, f"{target}-{model}-{precision}.json".replace(":", "_"))
    if not os.path.exists(path):
        result = checked(run(request), release).with_fields(
            release=release.tag, harness_commit=harness_commit(), asv_commit=_asv_commit(),
            asv_env=_asv_env_name(), asv_machine=os.environ.get("FWKERNELS_MACHINE"))
        record.append(records_path(), result)
        record.write_one(path, result)
    result = record.read_one(path)
    if result.status == "n/a":
        raise NotImplementedError(f"{target} {model}: N/A, {result.error}")
    if not result.ok:
        raise RuntimeError(f"{target} {model} {precision}: {result.status}: {result.error}")
    return result


def checked(result: Record, release: InstalledRelease) -> Record:
    """The record, failed when the framework that ran is not the release's version (an
    environment asv did not build, whose FWKERNELS_RELEASE names another release)."""
    version = result.framework_version
    if result.ok and version and not matches(release.version, version):
        return result.with_fields(status="error", error=f"{release.framework} {version} ran, "
                                  f"not the release {release.tag} that this run names")
    return result


# What a run writes into the checkout (asv rewrites results/benchmarks.json as it starts): not
# a change of the harness
RUN_OUTPUTS = ("results", "records")


def harness_commit(root: Optional[str] = None) -> Optional[str]:
    """The commit of the fwkernels checkout measuring ("+changes" with uncommitted changes to
    tracked files other than the results and records a run writes); None where fwkernels is not
    a git checkout."""
    root = root or os.path.dirname(os.path.dirname(os.path.realpath(__file__)))

    def git(*args: str) -> Optional[str]:
        try:
            out = subprocess.run(["git", "-C", root, *args], capture_output=True, text=True,
                                 timeout=30)
        except (OSError, subprocess.SubprocessError):
            return None
        return out.stdout.strip() if out.returncode == 0 else None

    commit = git("rev-parse", "HEAD")
    if not commit:
        return None
    changed = git("status", "--porcelain", "--untracked-files=no", "--", ".",
                  *(f":(exclude){folder}" for folder in RUN_OUTPUTS))
    return commit + ("+changes" if changed else "")


def _asv_commit() -> str:
    # asv sets ASV_COMMIT for the environments it builds, not for `-E existing` runs.
    return os.environ.get("ASV_COMMIT") or os.environ.get("FWKERNELS_COMMIT") or "unknown"


def _asv_env_name() -> str:
    return os.environ.get("ASV_ENV_NAME") or os.environ.get("FWKERNELS_ENV_NAME") or "unknown-env"


def samples(values: Sequence[float]) -> Dict[str, Any]:
    """A track_ result that keeps the per-window spread in asv's results."""
    return {"samples": list(values), "number": 1}


def figures(result: Record) -> Dict[str, Any]:
    """What each benchmark of benchmarks/training.py returns for a finished record, by name:
    the suite returns these, and `fwkernels ledger fold` writes them for the records of a run
    stopped before asv wrote its results."""
    windows = result["window_samples_per_s"]
    return {
        "track_samples_per_s": samples(windows),
        "track_time_per_sample": samples([1 / x for x in windows]),
        "track_train_step_time": result["step_time_s"],
        "track_forward_backward_time": result["forward_backward_time_s"],
        "track_forward_time": result["forward_time_s"],
        "track_peak_memory_train": result["peak_memory_bytes"],
        "track_peak_memory_forward": result["forward_peak_memory_bytes"],
        "track_warmup_time": result["warmup_s"],
    }


# The protocol's switches: resolve() keyword -> variable, its type, what it counts; unset keeps
# the device's defaults
PROTOCOL_VARIABLES = {"windows": ("FWKERNELS_WINDOWS", int, "a whole number of windows"),
                      "window_seconds": ("FWKERNELS_WINDOW_SECONDS", float, "a number of seconds"),
                      "warmup": ("FWKERNELS_WARMUP", int, "a whole number of steps")}


def protocol_overrides() -> Dict[str, Any]:
    """The timing protocol the variables set (windows, seconds per window, warm-up steps), as
    resolve() keywords; resolve() checks their ranges."""
    overrides: Dict[str, Any] = {}
    for keyword, (name, kind, meaning) in PROTOCOL_VARIABLES.items():
        value = os.environ.get(name, "").strip()
        if not value:
            continue
        try:
            overrides[keyword] = kind(value)
        except ValueError:
            raise InvalidRequest(f"{name} must be {meaning}, not {value!r}") from None
    return overrides
