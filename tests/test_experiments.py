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
                     "--warmup", "1", "--steps", "2", "--cudnn-benchmark-limit", "0")
    result = json.loads(out)
    assert result["cudnn_benchmark_limit"] == 0
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


def load(name: str):
    """An experiment's module, for testing its functions."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, os.path.join(EXPERIMENTS, f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_gc_pauses_counts_a_collection_inside_a_window_only_when_it_starts_there():
    gc_pauses = load("gc_pauses")
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


def reading(clock: float, thread_cpu: float = 0.0, steal: float = 0.0, faults: int = 0) -> dict:
    return {"clock": clock, "thread_cpu": thread_cpu, "process_cpu": clock,
            "involuntary_switches": 0, "migrations": None, "steal": steal,
            "minor_faults": faults}


def test_host_pace_splits_each_window_at_its_closing_sync():
    host_pace = load("host_pace")
    # clock readings: warm-up start and end, calibration start and end, then two windows
    edges = [reading(t) for t in (0.0, 1.0, 1.0, 1.1, 2.0)] + [
        reading(3.0, faults=7), reading(3.0, faults=7), reading(4.5, steal=0.25, faults=10)]
    # readings as each sync began: warm-up, calibration, the two windows
    launched = [reading(1.0), reading(1.1), reading(2.9, thread_cpu=0.6), reading(4.0)]
    rows = host_pace.split_windows(edges, launched, windows=2)
    assert [(r["wall_s"], r["launch_s"], r["drain_s"]) for r in rows] == [(1.0, 0.9, 0.1),
                                                                          (1.5, 1.0, 0.5)]
    assert [r["thread_cpu_s"] for r in rows] == [0.6, 0.0]
    assert [r["steal_s"] for r in rows] == [0.0, 0.25] and rows[0]["migrations"] is None
    assert [r["minor_faults"] for r in rows] == [7, 3]
    probe = [[1.9, 2.1, 5.0], [2.2, 2.4, 7.0], [2.6, 2.8, 9.0], [2.95, 3.05, 100.0]]
    assert host_pace.probe_speeds([p + [1.0, 0.0] for p in probe], rows) == [8.0, None]


def test_host_pace_times_the_suites_windows_with_the_probe_beside_them():
    needs("torch")
    cores = sorted(os.sched_getaffinity(0))
    out = experiment("host_pace.py", "torch", "ncf", "--batch", "256", "--windows", "2",
                     "--window-seconds", "0.3", "--cpus", str(cores[0]),
                     "--probe-cpu", str(cores[-1]))
    result = json.loads(out.splitlines()[-1])
    assert result["status"] == "ok" and result["cpus"] == [cores[0]], result
    assert result["threads"] == 1 and result["allocator"] == "glibc", result
    assert len(result["per_window"]) == 2
    for row in result["per_window"]:
        assert abs(row["launch_s"] + row["drain_s"] - row["wall_s"]) < 1e-5, row
        assert row["probe_speed"] > 0 and row["thread_cpu_s"] > 0, row


def test_host_pace_reads_the_probe_alone_on_each_core_at_once():
    cores = sorted(os.sched_getaffinity(0))[:2]
    out = experiment("host_pace.py", "--probe-alone", "0.3",
                     "--probe-cpu", ",".join(map(str, cores)))
    result = json.loads(out)
    assert [probe["probe_cpu"] for probe in result["probes"]] == cores, result
    for probe in result["probes"]:
        assert probe["readings"] and probe["speed_min"] <= probe["speed_max"], probe
        assert all(start < end and speed > 0 and 0 < on_cpu <= 1.05
                   for start, end, speed, on_cpu, _ in probe["readings"])
    assert ("correlations" in result) == (len(cores) > 1), result


def test_host_pace_correlates_the_cores_paces_over_the_same_spans():
    host_pace = load("host_pace")

    def readings(speeds, first=0.0):  # one 0.25 s reading after another
        return [[first + 0.25 * i, first + 0.25 * (i + 1), speed, 1.0, 0.0]
                for i, speed in enumerate(speeds)]

    # core 1 starts later: only the spans from 0.5 s on, when every core was read, count
    paces = {0: readings([1, 1, 2, 4, 6, 8, 8, 8, 4, 4]),
             1: readings([5, 5, 9, 9, 10, 10, 6, 6], first=0.5),
             2: readings([9, 9, 7, 7, 3, 3, 2, 2, 6, 6])}
    assert host_pace.pace_correlations(paces) == [[0, 1, 1.0], [0, 2, -1.0], [1, 2, -1.0]]
    assert host_pace.pace_correlations({0: paces[0], 1: readings([1, 2])}) == [[0, 1, None]]


def test_host_pace_stops_every_probe_when_one_does_not_start(monkeypatch):
    host_pace = load("host_pace")
    stopped = []

    class Probe:
        def __init__(self, cpu):
            self.cpu = cpu

        def started(self):
            return self.cpu != 1

        def stop(self):
            stopped.append(self.cpu)
            return []

    monkeypatch.setattr(host_pace, "Probe", Probe)
    result = host_pace.probe_alone(60, [0, 1])  # no waiting: it stops at once
    assert stopped == [0, 1] and result["probes"] == [], result
    assert result["error"] == "the probe on core 1 ended before its first reading"


def test_host_pace_names_the_cores_it_can_use_when_given_another():
    proc = subprocess.run([sys.executable, os.path.join(EXPERIMENTS, "host_pace.py"),
                           "--probe-alone", "1", "--probe-cpu", "4096"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.count("\n") == 1 and "among this process's" in proc.stderr, proc.stderr


def test_host_pace_takes_one_probe_core_beside_a_run():
    cores = sorted(os.sched_getaffinity(0))
    if len(cores) < 2:
        pytest.skip("one usable core")
    proc = subprocess.run([sys.executable, os.path.join(EXPERIMENTS, "host_pace.py"), "torch",
                           "ncf", "--probe-cpu", f"{cores[0]},{cores[1]}"],
                          capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stdout == "", proc.stdout
    assert proc.stderr.count("\n") == 1 and "name one core beside a run" in proc.stderr


def test_mkl_sgemm_times_mkls_own_kernels_and_the_policys():
    needs("paddle")
    from fwkernels.frameworks.paddle.runtime import mkl_library
    from fwkernels.runner import mkl_cpu_type

    own, policy = map(json.loads, experiment("mkl_sgemm.py", mkl_library(), "--size", "64",
                                             "--repeats", "2").splitlines())
    assert (own["mkl_debug_cpu_type"], policy["mkl_debug_cpu_type"]) == ("", "5")
    assert own["gflops"] > 0 and policy["gflops"] > 0 and len(policy["gflops_runs"]) == 2
    if mkl_cpu_type("cpu"):  # a non-Intel processor with AVX2: the policy changes the kernels
        assert (own["kernels"], policy["kernels"]) == (0, 5)


def test_window_length_alternates_the_lengths_round_after_round(tmp_path):
    needs("torch")
    jsonl = tmp_path / "records.jsonl"
    # At batch 4096 a step of NCF took over 0.2 s on a loaded CI runner, so windows of 0.05 s and
    # 0.2 s both held one step: at batch 256 the 1 s window holds several on a loaded runner too.
    out = experiment("window_length.py", "torch", "ncf", "--batch", "256",
                     "--window-seconds", "0.05,1", "--rounds", "2", "--jsonl", str(jsonl))
    from fwkernels import record

    records = record.read(str(jsonl))
    assert [r.status for r in records] == ["ok"] * 4
    assert [r.window_seconds for r in records] == [0.05, 1, 0.05, 1]
    steps = [r["steps_per_window"] for r in records]
    assert steps[0] < steps[1] and steps[2] < steps[3], steps  # 0.05 s, 1 s, 0.05 s, 1 s
    assert out.count("Run-to-run spread of the means") == 2 and "### Windows of 1 s" in out


@pytest.mark.parametrize("args, message", [
    (["--window-seconds", "0,1"], "window_seconds must be a positive number"),
    (["--jsonl", "/no/such/folder/r.jsonl"], "no folder /no/such/folder"),
])
def test_window_length_names_bad_input_in_one_line(args, message):
    proc = subprocess.run([sys.executable, os.path.join(EXPERIMENTS, "window_length.py"),
                           "torch", "ncf", *args], capture_output=True, text=True)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stderr
    assert message in proc.stderr
