"""What the asv suite (benchmarks/training.py) needs: its parameters and measure-once records."""
from __future__ import annotations

import os
import re
import socket
import tempfile
from typing import Any, Dict, List, Sequence

from fwkernels import record
from fwkernels.frameworks import FRAMEWORKS
from fwkernels.frameworks.base import PRECISIONS
from fwkernels.models import MODELS
from fwkernels.record import Record
from fwkernels.request import Skip, resolve, split_target, targets
from fwkernels.runner import run


def _env_list(name: str, default: Sequence[str]) -> List[str]:
    value = os.environ.get(name, "").strip()
    return [v.strip() for v in value.split(",") if v.strip()] if value else list(default)


def parameters(device: str) -> List[List[str]]:
    """asv's parameters: framework targets, models, precisions.  FWKERNELS_MODES picks the
    modes of each framework: "default" (its first), "tuned" (that and its compiled modes,
    ``FrameworkInfo.tuned_modes``) or "all"; FWKERNELS_FRAMEWORKS may name one mode
    ("torch:compile"): only that target (asv starts a process per benchmark and combination,
    skipped ones too)."""
    precisions = _env_list("FWKERNELS_PRECISIONS", ["fp32"] if device == "cpu" else PRECISIONS)
    profile = os.environ.get("FWKERNELS_MODES", "").strip() or "default"
    frameworks = _env_list("FWKERNELS_FRAMEWORKS", FRAMEWORKS)
    return [targets(frameworks, profile), _env_list("FWKERNELS_MODELS", MODELS), precisions]


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


def measured(cache_dir: str, device: str, target: str, model: str, precision: str) -> Record:
    """The record of one combination, measured on first use; NotImplementedError skips it."""
    select = os.environ.get("FWKERNELS_SELECT")
    if select and not re.search(select, f"{target}/{model}/{precision}"):
        raise NotImplementedError(f"outside this profile (FWKERNELS_SELECT={select!r})")
    framework, mode = split_target(target)
    request = resolve(framework, model, device=device, precision=precision, mode=mode,
                      windows=_env_int("FWKERNELS_WINDOWS"),
                      window_seconds=_env_float("FWKERNELS_WINDOW_SECONDS"))
    if isinstance(request, Skip):
        raise NotImplementedError(request.reason)
    path = os.path.join(cache_dir, f"{target}-{model}-{precision}.json".replace(":", "_"))
    if not os.path.exists(path):
        result = run(request).with_fields(asv_commit=_asv_commit(), asv_env=_asv_env_name(),
                                          asv_machine=os.environ.get("FWKERNELS_MACHINE"))
        record.append(records_path(), result)
        record.write_one(path, result)
    result = record.read_one(path)
    if result.status == "n/a":
        raise NotImplementedError(f"{target} {model}: N/A, {result.error}")
    if not result.ok:
        raise RuntimeError(f"{target} {model} {precision}: {result.status}: {result.error}")
    return result


def _asv_commit() -> str:
    # asv sets ASV_COMMIT for the environments it builds, not for `-E existing` runs.
    return os.environ.get("ASV_COMMIT") or os.environ.get("FWKERNELS_COMMIT") or "unknown"


def _asv_env_name() -> str:
    return os.environ.get("ASV_ENV_NAME") or os.environ.get("FWKERNELS_ENV_NAME") or "unknown-env"


def samples(values: Sequence[float]) -> Dict[str, Any]:
    """A track_ result that keeps the per-window spread in asv's results."""
    return {"samples": list(values), "number": 1}


def _env_int(name: str):
    return int(os.environ[name]) if os.environ.get(name) else None


def _env_float(name: str):
    return float(os.environ[name]) if os.environ.get(name) else None
