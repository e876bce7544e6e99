"""The command line: listing, error paths (exit 2, valid choices named), a real measurement."""
import json
import os
import subprocess
import sys

import pytest

from fwkernels.frameworks import FRAMEWORKS, unavailable_reason
from fwkernels.models import MODELS
from fwkernels.runner import INSTRUCTION_SETS, tcmalloc_library, worker_environment



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
    # sweep resolves every combination as measure does, before measuring any
    (["sweep", "nosuchframework"], list(FRAMEWORKS)),
    (["sweep", "torch", "--models", "ncf,nosuchmodel"], list(MODELS)),
    (["sweep", "torch", "--models", "ncf", "--precisions", "fp32,fp16"], ["fp32", "tf32", "bf16"]),
    (["sweep", "torch", "--models", "ncf", "--device", "tpu"], ["cpu", "cuda"]),
    (["sweep", "torch,jax", "--models", "ncf", "--modes", "jit,turbo"], ["eager", "compile", "jit"]),
    (["sweep", "torch", "--models", "ncf", "--precisions", "tf32"], ["fp32", "bf16"]),
    (["sweep", "torch", "--models", "ncf", "--windows", "0"], ["windows", "positive"]),
    (["sweep", "torch", "--models", "ncf", "--steps", "-2"], ["steps", "positive"]),
    (["sweep", "torch", "--models", "ncf", "--threads", "0"], ["threads", "usable cores"]),
    (["sweep", "torch", "--models", "ncf", "--threads", "100000"], ["threads", "usable cores"]),
    (["sweep", "torch", "--models", "ncf", "--window-seconds", "nan"], ["window_seconds"]),
    (["measure", "torch", "ncf", "--threads", "100000"], ["threads", "usable cores"]),
    (["repeat", "torch", "ncf", "--runs", "1"], ["runs", "2 or more"]),
    (["repeat", "torch", "nosuchmodel"], list(MODELS)),
    (["repeat", "torch", "ncf", "--windows", "0"], ["windows", "positive"]),
    (["repeat", "torch", "ncf", "--jsonl", "/no/such/folder/r.jsonl"], ["--jsonl", "no folder"]),
    # a mistyped records file is an error, not an empty table
    (["noise", "/no/such/r.jsonl"], ["/no/such/r.jsonl", "No such file"]),
    (["combination-time", "/no/such/r.jsonl"], ["/no/such/r.jsonl", "No such file"]),
    (["framework-ratio", "torch", "jax", "/no/such/r.jsonl"], ["/no/such/r.jsonl", "No such file"]),
    (["internal-memory", "/no/such/r.jsonl"], ["/no/such/r.jsonl", "No such file"]),
    # argparse's own errors: one line too, without the usage
    (["measure", "torch", "resnet50", "--windows", "0"], ["--windows", "positive"]),
    ([], ["measure", "ledger"]),
    (["ledger"], ["fold", "set-aside"]),
    # a machine or environment name becomes a folder or file name under results/ and records/
    (["asv-machine", "../elsewhere"], ["'../elsewhere'", "letters, digits"]),
    (["ledger", "set-aside", "--machine", "m/x", "--env", "e", "--commits", "c"], ["--machine"]),
    (["ledger", "fold", "--env", ".."], ["--env", "'..'"]),
    (["history", "torch", "--machine", ""], ["--machine", "''"]),
])
def test_bad_input_is_one_line_naming_the_valid_choices(args, names):
    proc = run(*args)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and "error" in lines[0]
    for name in names:
        assert name in lines[0]


@pytest.mark.parametrize("variable, value, named", [
    ("FWKERNELS_MODELS", "resnet50,resnet5", ["FWKERNELS_MODELS", "'resnet5'", "googlenet"]),
    ("FWKERNELS_PRECISIONS", "fp16", ["FWKERNELS_PRECISIONS", "bf16"]),
    ("FWKERNELS_DEVICE", "tpu", ["FWKERNELS_DEVICE", "cuda"]),
    ("FWKERNELS_MODES", "turbo", ["FWKERNELS_MODES", "tuned"]),
    ("FWKERNELS_SELECT", "(", ["FWKERNELS_SELECT", "regular expression"]),
    ("FWKERNELS_WINDOWS", "0", ["FWKERNELS_WINDOWS", "positive"]),
    ("FWKERNELS_WARMUP", "two", ["FWKERNELS_WARMUP", "whole number"]),
    ("FWKERNELS_CPU_ALLOCATOR", "jemalloc", ["FWKERNELS_CPU_ALLOCATOR", "tcmalloc"]),
])
def test_the_suites_variables_are_checked_before_a_run_installs_anything(variable, value, named):
    """scripts/bench checks them first: the suite itself would fail each combination, after
    the releases were installed."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("FWKERNELS_")}
    proc = subprocess.run([sys.executable, "-m", "fwkernels", "check-variables"],
                          env={**env, variable: value}, capture_output=True, text=True)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and all(name in lines[0] for name in named), lines
    fine = subprocess.run([sys.executable, "-m", "fwkernels", "check-variables"],
                          env={**env, "FWKERNELS_MODELS": "resnet50,ncf"}, capture_output=True,
                          text=True)
    assert fine.returncode == 0 and "models resnet50,ncf" in fine.stdout, fine.stderr


def test_a_reader_that_leaves_early_gets_no_traceback():
    read_end, write_end = os.pipe()
    os.close(read_end)  # what `fwkernels list | head -0` does to the writer
    proc = subprocess.run([sys.executable, "-m", "fwkernels", "list"], stdout=write_end,
                          stderr=subprocess.PIPE, text=True)
    os.close(write_end)
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr and "BrokenPipe" not in proc.stderr


def test_an_unknown_cpu_allocator_is_one_line_naming_the_choices(monkeypatch):
    monkeypatch.setenv("FWKERNELS_CPU_ALLOCATOR", "jemalloc")
    proc = run("measure", "torch", "ncf")
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert "FWKERNELS_CPU_ALLOCATOR" in proc.stderr and "valid CPU allocators: tcmalloc, glibc" in proc.stderr


@pytest.mark.parametrize("batch", ["0", "-3"])
def test_non_positive_batch_is_rejected(batch):
    proc = run("measure", "torch", "ncf", "--batch", batch)
    assert proc.returncode == 2 and "batch" in proc.stderr


@pytest.mark.parametrize("option", ["--jsonl", "--markdown"])
def test_sweep_checks_where_it_writes_before_measuring(tmp_path, option):
    target, records = tmp_path / "missing" / "out", tmp_path / "records.jsonl"
    paths = {"--jsonl": str(records), option: str(target)}
    proc = run("sweep", "torch", "--models", "ncf", *[w for pair in paths.items() for w in pair])
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1
    assert f"{option} {target}: no folder" in proc.stderr
    assert not (tmp_path / "missing").exists() and not records.exists()  # nothing measured


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
    # the fairness policy's CPU allocator, preloaded into this framework's workers
    assert record["allocator"] == ("tcmalloc_minimal" if tcmalloc_library() else "glibc")
    assert set(record["instruction_sets"]) <= set(INSTRUCTION_SETS)
    # what else the machine did during the timed windows (another lane of the tests, say)
    assert 0 <= record["other_cpu_share"] <= 1 and record["steal_share"] >= 0
    # and MKL's code path, where the policy (a non-Intel processor) or the caller sets one
    assert record.get("mkl_debug_cpu_type") \
        == worker_environment(1, "unused", "", "cpu").get("MKL_DEBUG_CPU_TYPE")


def test_repeat_measures_in_fresh_processes_and_reports_both_spreads(framework, tmp_path):
    if framework != "torch":
        pytest.skip("repeat runs `measure` N times whatever the framework: tested with PyTorch")
    records = tmp_path / "repeat.jsonl"
    proc = run("repeat", framework, "ncf", "--batch", "4096", "--runs", "2", "--windows", "2",
               "--steps", "2", "--warmup", "1", "--jsonl", str(records))
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Run-to-run spread of the means:" in proc.stdout and "within-run CV" in proc.stdout
    written = [json.loads(line) for line in records.read_text().splitlines()]
    assert [(r["status"], r["batch"]) for r in written] == [("ok", 4096), ("ok", 4096)]
    assert written[0]["timestamp"] != written[1]["timestamp"]
    assert all(r["host_speed"] > 0 for r in written) and "| host speed | beside it |" in proc.stdout
    noise = run("noise", str(records), check=True).stdout
    assert "| samples_per_s | track_samples_per_s, track_time_per_sample | 1 |" in noise


def test_unavailable_framework_names_the_reason():
    missing = [n for n in FRAMEWORKS if unavailable_reason(n)]
    if not missing:
        pytest.skip("every framework is installed here")
    proc = run("measure", missing[0], "ncf")
    assert proc.returncode == 2 and unavailable_reason(missing[0]) in proc.stderr


def test_sweep_table_says_what_ran_beside_the_timed_windows():
    from fwkernels.sweep import markdown

    base = dict(status="ok", framework="torch", model="ncf", mode="eager", precision="fp32",
                samples_per_s=10.0, samples_per_s_std=0.1, samples_per_s_cv=0.01,
                other_cpu_share=0.01, steal_share=0.0)
    quiet = markdown([base], "").splitlines()[-1]
    assert quiet == ("Beside the timed training windows, other processes and other guests took at "
                     "most 1.0% of the machine's CPU time (ncf fp32; the records' "
                     "other_cpu_share and steal_share).")
    busy = markdown([base, dict(base, model="vgg_a", other_cpu_share=0.3, steal_share=0.02)], "")
    assert busy.splitlines()[-1].endswith("at most 32.0% of the machine's CPU time (vgg_a fp32; "
                                          "the records' other_cpu_share and steal_share): a "
                                          "measurement above 5% is not the framework's alone.")


def test_sweep_table_names_the_framework_where_it_holds_several():
    from fwkernels.sweep import markdown

    base = dict(status="ok", framework="a", framework_title="A", framework_version="1",
                device_name="GPU", device="cuda", threads=1, windows=3, timestamp="t",
                model="ncf", mode="jit", precision="bf16", batch=2, unit="samples",
                samples_per_s=10.0, samples_per_s_std=0.1, samples_per_s_cv=0.01, step_time_s=0.1,
                forward_backward_time_s=0.1, forward_time_s=0.05, peak_memory_bytes=2**20,
                forward_peak_memory_bytes=2**20, warmup_s=1.0, params=10)
    assert "| ncf | jit | bf16 |" in markdown([base], "")
    both = markdown([base, dict(base, framework="b", framework_title="B", mode="eager")], "")
    assert "| ncf | a:jit |" in both and "| ncf | b:eager |" in both
    assert "A 1, B 1 on GPU" in both
    # A train-only record (no forward phase) and the compiler variables it ran under.
    train_only = {k: v for k, v in base.items() if not k.startswith("forward_")}
    train_only.update(forward_backward_time_s=0.1, xla_flags="--xla_gpu_autotune_level=0")
    row = markdown([train_only], "").splitlines()[-1]
    assert row.startswith("| ncf | jit (XLA_FLAGS=--xla_gpu_autotune_level=0) | bf16 |")
    assert "| 100.0 | 100.0 | – | 1 / – |" in row
    warm = dict(base, compile_cache="TORCHINDUCTOR_CACHE_DIR=/warm")
    assert "| jit (TORCHINDUCTOR_CACHE_DIR=/warm) |" in markdown([warm], "")
    # a spread of hundreds is written out, not as 6e+02
    wide = dict(base, samples_per_s=7102.6, samples_per_s_std=595.3)
    assert "| 7,103 ± 595 samples/s |" in markdown([wide], "")
    # an experiment's record (experiments/) has the throughput but not the runner's other fields
    experiment = {k: base[k] for k in ("status", "framework", "model", "mode", "precision",
                                       "samples_per_s", "samples_per_s_std", "samples_per_s_cv")}
    table = markdown([dict(experiment, framework="torch")], "").splitlines()
    assert table[0].startswith("PyTorch on – (–, – threads)"), table[0]
    assert table[-1] == ("| ncf | jit | bf16 | – | 10 ± 0.1 samples/s | 1.00% | – | – | – "
                         "| – / – | – | – | – |")
