"""The experiments (experiments/README.md) still run: a small run of each, where its frameworks are."""
import json
import os
import subprocess
import sys

import pytest

from fwkernels.frameworks import unavailable_reason

EXPERIMENTS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                           "experiments")
TESTED = os.environ.get("FWKERNELS_TEST_FRAMEWORKS", "").split(",")


def needs(*frameworks: str) -> None:
    for name in frameworks:
        if name not in TESTED or unavailable_reason(name):
            pytest.skip(f"{name} is not tested in this environment")


def experiment(name: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, os.path.join(EXPERIMENTS, name), *args],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc.stdout


@pytest.mark.parametrize("name", ["torch", "jax"])
def test_harness_overhead_puts_the_suite_beside_a_bare_loop(name):
    needs(name)
    out = experiment("harness_overhead.py", "--framework", name, "--models", "ncf",
                     "--batch", "4096", "--steps", "1", "--windows", "2")
    rows = [line for line in out.splitlines() if line.startswith("| ncf |")]
    assert rows, out  # printed as it comes, then in the table
    ratio = float(rows[-1].rstrip(" |").rsplit("|", 1)[-1])
    assert ratio > 0


def test_keras_overhead_measures_keras_beside_its_framework(tmp_path):
    needs("keras-torch")
    if unavailable_reason("torch"):
        pytest.skip("torch is not installed here")
    out = experiment("keras_overhead.py", "torch", "--models", "ncf", "--batch", "4096",
                     "--window-seconds", "0.2", "--jsonl", str(tmp_path / "records.jsonl"))
    assert "| ncf | 4096 |" in out
    from fwkernels import record

    assert [r.framework for r in record.read(str(tmp_path / "records.jsonl"))] == \
        ["torch", "keras-torch"]


def test_training_progress_prints_the_training_tests_losses():
    needs("torch")
    out = experiment("training_progress.py", "torch", "--models", "ncf", "--label", "test")
    [line] = out.splitlines()
    from test_models import TRAIN_STEPS

    result = json.loads(line)
    assert result["model"] == "ncf" and len(result["losses"]) == TRAIN_STEPS
    assert result["holds"] == (result["last_mean"] < result["first"])


def test_step_kernel_time_sums_a_steps_time_by_kind_of_work():
    needs("torch")
    out = experiment("step_kernel_time.py", "--device", "cpu", "--precision", "fp32",
                     "--mode", "eager", "--model", "alexnet_owt", "--batch", "2", "--small",
                     "--warmup", "1", "--steps", "2")
    result = json.loads(out)
    kinds = result["kernel_s_per_step"]
    assert kinds["convolution"] > 0 and kinds["matrix product"] > 0, kinds
    assert 0 < result["kernel_s_total"] and result["bound_samples_per_s"] > 0


def test_dynamo_graph_breaks_counts_the_graphs_of_a_compiled_step():
    needs("torch")
    out = experiment("dynamo_graph_breaks.py", "torch", "ncf", "--mode", "compile", "--small",
                     "--batch", "4", "--steps", "2", "--dynamo-backend", "eager")
    result = json.loads(out)
    assert result["graphs"] >= 1 and result["calls_captured"] > 0, result
    assert result["graph_breaks"] == sum(result["graph_break_reasons"].values())
    assert len(result["step_s"]) == 2


def test_gc_pauses_counts_a_collection_inside_a_window_only_when_it_starts_there():
    import importlib.util

    spec = importlib.util.spec_from_file_location("gc_pauses",
                                                  os.path.join(EXPERIMENTS, "gc_pauses.py"))
    gc_pauses = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gc_pauses)
    # clock readings: warm-up start and end, calibration start and end, then two windows
    edges = [0.0, 1.0, 1.0, 1.1, 2.0, 3.0, 3.5, 4.5]
    collections = [(0.5, 0.01, 2), (1.05, 0.001, 0), (2.0, 0.001, 0), (2.9, 0.2, 1),
                   (3.0, 0.001, 0), (3.2, 0.001, 0), (4.4, 0.001, 2), (4.5, 0.001, 0)]
    inside, outside = gc_pauses.split_by_windows(collections, edges, windows=2)
    assert inside == [(2.0, 0.001, 0), (2.9, 0.2, 1), (4.4, 0.001, 2)]
    assert outside == [(0.5, 0.01, 2), (1.05, 0.001, 0), (3.0, 0.001, 0), (3.2, 0.001, 0),
                       (4.5, 0.001, 0)]
    counts = gc_pauses.per_generation(inside)
    assert counts["1"] == {"count": 1, "seconds": 0.2} and counts["2"]["count"] == 1


@pytest.mark.parametrize("collector", ["on", "off"])
def test_gc_pauses_times_the_suites_windows(collector):
    needs("torch")
    out = experiment("gc_pauses.py", "torch", "ncf", "--batch", "256", "--windows", "2",
                     "--window-seconds", "0.05", "--collector", collector)
    result = json.loads(out.splitlines()[-1])
    assert result["status"] == "ok" and len(result["window_samples_per_s"]) == 2, result
    assert sum(g["count"] for g in result["outside_windows"].values()) > 0  # import and build
    assert result["collector_enabled"] == (collector == "on")
    if collector == "off":
        assert sum(g["count"] for g in result["inside_windows"].values()) == 0
    assert result["windows_s"] > 0
