"""What the asv suite (benchmarks/training.py) needs: its parameters and measure-once records."""
from __future__ import annotations

import json
import os
import re
import socket
import tempfile
from typing import Any, Dict, List, Sequence

from fwkernels.frameworks import FRAMEWORKS, get_framework, unavailable_reason
from fwkernels.frameworks.base import PRECISIONS
from fwkernels.models import MODELS
from fwkernels.runner import measure


def _env_list(name: str, default: Sequence[str]) -> List[str]:
    value = os.environ.get(name, "").strip()
    return [v.strip() for v in value.split(",") if v.strip()] if value else list(default)


MODE_PROFILES = ("default", "tuned", "all")


def targets(profile: str = "default") -> List[str]:
    """asv's framework parameter: "name" for the default mode, "name:mode" for the others.

    ``profile`` picks the modes of each framework: "default" (its first), "tuned" (that and its
    compiled modes, ``FrameworkInfo.tuned_modes``) or "all". FWKERNELS_FRAMEWORKS may name one
    mode ("torch:compile"): only that target, not the profile's modes (asv starts a process per
    benchmark and combination, skipped ones too).
    """
    if profile not in MODE_PROFILES:
        raise ValueError(f"unknown FWKERNELS_MODES {profile!r}; valid: {', '.join(MODE_PROFILES)}")
    out = []
    for name in _env_list("FWKERNELS_FRAMEWORKS", FRAMEWORKS):
        framework, _, mode = name.partition(":")
        info = get_framework(framework)
        if mode:
            info.check_mode(mode)
            out.append(framework if mode == info.default_mode else name)
            continue
        extra = {"default": (), "tuned": info.tuned_modes, "all": info.modes[1:]}[profile]
        out += [name] + [f"{name}:{m}" for m in extra]
    return out


def parameters(device: str) -> List[List[str]]:
    precisions = _env_list("FWKERNELS_PRECISIONS", ["fp32"] if device == "cpu" else PRECISIONS)
    profile = os.environ.get("FWKERNELS_MODES", "").strip() or "default"
    return [targets(profile), _env_list("FWKERNELS_MODELS", MODELS), precisions]


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


def measured(cache_dir: str, device: str, target: str, model: str, precision: str) -> Dict[str, Any]:
    """The record of one combination, measured on first use; NotImplementedError skips it."""
    framework, _, mode = target.partition(":")
    select = os.environ.get("FWKERNELS_SELECT")
    if select and not re.search(select, f"{target}/{model}/{precision}"):
        raise NotImplementedError(f"outside this profile (FWKERNELS_SELECT={select!r})")
    reason = unavailable_reason(framework)
    if reason:
        raise NotImplementedError(f"{framework}: {reason}")
    if device == "cpu" and precision == "tf32":
        raise NotImplementedError("tf32 is a GPU tensor-core mode")
    path = os.path.join(cache_dir, f"{target}-{model}-{precision}.json".replace(":", "_"))
    if not os.path.exists(path):
        record = measure(framework, model, device=device, precision=precision, mode=mode,
                         windows=_env_int("FWKERNELS_WINDOWS"),
                         window_seconds=_env_float("FWKERNELS_WINDOW_SECONDS"))
        record.update(asv_commit=_asv_commit(), asv_env=_asv_env_name(),
                      asv_machine=os.environ.get("FWKERNELS_MACHINE"))
        with open(records_path(), "a") as f:
            f.write(json.dumps(record, default=str) + "\n")
        with open(path, "w") as f:
            json.dump(record, f, default=str)
    with open(path) as f:
        record = json.load(f)
    if record["status"] == "n/a":
        raise NotImplementedError(f"{target} {model}: N/A, {record['error']}")
    if record["status"] != "ok":
        raise RuntimeError(f"{target} {model} {precision}: {record['status']}: {record.get('error')}")
    return record


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
