"""The command line: listing, error paths (exit 2, valid choices named), a real measurement."""
import json
import subprocess
import sys

import pytest

from fwkernels.frameworks import FRAMEWORKS, unavailable_reason
from fwkernels.models import MODELS



def run(*args, check=False):
    proc = subprocess.run([sys.executable, "-m", "fwkernels", *args], capture_output=True, text=True)
    if check:
        assert proc.returncode == 0, proc.stderr
    return proc


def test_list_json_names_every_model_and_framework_with_availability():
    entries = json.loads(run("list", "--json", check=True).stdout)
    assert [m["name"] for m in entries["models"]] == list(MODELS)
    by_name = {f["name"]: f for f in entries["frameworks"]}
    assert list(by_name) == list(FRAMEWORKS)
    for name, entry in by_name.items():
        reason = unavailable_reason(name)
        assert entry["available"] is (reason is None)
        assert entry["reason"] == reason
        assert (entry["version"] is not None) == entry["available"]


@pytest.mark.parametrize("args, names", [
    (["measure", "nosuchframework", "resnet50"], list(FRAMEWORKS)),
    (["measure", "torch", "nosuchmodel"], list(MODELS)),
    (["measure", "torch", "resnet50", "--precision", "fp16"], ["fp32", "tf32", "bf16"]),
    (["measure", "torch", "resnet50", "--device", "tpu"], ["cpu", "cuda"]),
    (["measure", "torch", "resnet50", "--mode", "turbo"], ["eager", "compile"]),
])
def test_bad_input_is_one_line_naming_the_valid_choices(args, names):
    proc = run(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0]
    for name in names:
        assert name in lines[0]


@pytest.mark.parametrize("batch", ["0", "-3"])
def test_non_positive_batch_is_rejected(batch):
    proc = run("measure", "torch", "ncf", "--batch", batch)
    assert proc.returncode == 2 and "batch" in proc.stderr


def test_tf32_on_cpu_is_rejected_with_the_alternatives():
    proc = run("measure", "torch", "ncf", "--precision", "tf32")
    assert proc.returncode == 2 and "fp32" in proc.stderr and "bf16" in proc.stderr


def test_missing_device_is_rejected(framework):
    proc = run("measure", framework, "ncf", "--device", "cuda", "--batch", "8")
    if proc.returncode == 0:
        pytest.skip("a CUDA device is present")
    assert proc.returncode == 2
    assert "cuda" in proc.stderr and "available devices: cpu" in proc.stderr


def test_measure_json_has_the_documented_figures(framework):
    proc = run("measure", framework, "ncf", "--batch", "4096", "--windows", "2", "--steps", "2",
               "--warmup", "1", "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    record = json.loads(proc.stdout)
    for key in ("framework framework_version model device batch precision unit samples_per_s "
                "samples_per_s_std step_time_s peak_memory_bytes params threads "
                "forward_time_s forward_backward_time_s forward_peak_memory_bytes").split():
        assert key in record, key
    assert record["status"] == "ok"
    assert record["params"] == MODELS["ncf"].expected_params(framework)
    assert record["samples_per_s"] > 0 and record["peak_memory_bytes"] > 0
    assert len(record["window_samples_per_s"]) == 2


def test_unavailable_framework_names_the_reason():
    missing = [n for n in FRAMEWORKS if unavailable_reason(n)]
    if not missing:
        pytest.skip("every framework is installed here")
    proc = run("measure", missing[0], "ncf")
    assert proc.returncode == 2 and unavailable_reason(missing[0]) in proc.stderr
