"""fwkernels compare on the real results in tests/data: two torch versions on one machine."""
from __future__ import annotations

import json
import os
import shutil

import pytest

from fwkernels.cli import main
from fwkernels.report.compare import Comparison, compare, resolve
from fwkernels.report.results import THROUGHPUT, Value, benchmark_units, load_json, load_runs

RESULTS = os.path.join(os.path.dirname(__file__), "data", "results")
OLD, NEW = "torch2.13.0", "torch2.14.1"


@pytest.fixture(scope="module")
def runs():
    return load_runs(RESULTS)


def comparisons(runs, a: str, b: str, machine: str = "cpu-fixture"):
    side_a, side_b = resolve(a, runs, machine, None), resolve(b, runs, machine, None)
    return {c.key[:4]: c for c in compare(side_a, side_b, benchmark_units(RESULTS))}


def test_direction_follows_the_unit(runs):
    result = comparisons(runs, OLD, NEW)
    throughput = result[(THROUGHPUT, "torch", "ncf", "fp32")]
    time_per_sample = result[("training.Training.track_time_per_sample", "torch", "ncf", "fp32")]
    assert throughput.unit == "samples/s" and time_per_sample.unit == "seconds"
    # the same measured change reads as "better" in both units: throughput up, time down
    assert throughput.ratio > 1 and time_per_sample.ratio < 1
    assert throughput.worse_factor < 1 and time_per_sample.worse_factor < 1
    assert throughput.worse_factor == pytest.approx(time_per_sample.worse_factor, rel=0.1)


def test_flags_only_beyond_the_measured_spread(runs):
    for c in comparisons(runs, OLD, NEW).values():
        if not c.spread_known:
            continue
        difference = abs(c.b.mean - c.a.mean)
        if difference <= c.a.std + c.b.std:
            assert c.verdict(1.1) == "within spread", c.key
        else:
            assert c.verdict(1.1) in ("improved", "REGRESSION", "better", "worse"), c.key


def test_exit_status_follows_the_factor(runs, capsys):
    """NEW -> OLD is a real throughput drop on ncf (beyond the windows' spread)."""
    ncf = comparisons(runs, NEW, OLD)[(THROUGHPUT, "torch", "ncf", "fp32")]
    assert ncf.beyond_spread and ncf.worse_factor > 1.5
    args = ["compare", NEW, OLD, "--results", RESULTS, "--machine", "cpu-fixture",
            "--benchmark", "samples_per_s"]
    assert main(args + ["--factor", "1.1"]) == 1
    assert "REGRESSION" in capsys.readouterr().out
    assert main(args + ["--factor", f"{ncf.worse_factor * 2:.2f}"]) == 0
    assert "REGRESSION" not in capsys.readouterr().out
    assert main(["compare", OLD, NEW, "--results", RESULTS, "--machine", "cpu-fixture",
                 "--benchmark", "samples_per_s"]) == 0


def test_machines_and_commits_as_selectors(runs, capsys):
    assert main(["compare", "cpu-fixture", "cpu-fixture-b", "--results", RESULTS,
                 "--benchmark", "samples_per_s", "--factor", "100"]) == 0
    out = capsys.readouterr().out
    assert "ncf" in out and "googlenet" in out  # only in A: listed, not compared
    assert main(["compare", "machine=cpu-fixture,env=" + OLD, "machine=cpu-fixture-b,env=" + OLD,
                 "--results", RESULTS, "--factor", "100"]) == 0
    assert main(["compare", "62d2aa7d", "62d2aa7d", "--machine", "cpu-fixture",
                 "--results", RESULTS]) == 0  # a commit against itself: no change
    assert "REGRESSION" not in capsys.readouterr().out


def test_bad_selectors_name_the_choices(capsys):
    assert main(["compare", "nope", NEW, "--results", RESULTS]) == 2
    err = capsys.readouterr().err
    assert "cpu-fixture" in err and "62d2aa7d" in err and "virtualenv-py3.11-torch2.13.0" in err
    assert main(["compare", "torch", NEW, "--results", RESULTS, "--machine", "cpu-fixture"]) == 2
    assert "several environments" in capsys.readouterr().err
    assert main(["compare", "flavour=x", NEW, "--results", RESULTS]) == 2
    assert "machine, commit, env" in capsys.readouterr().err
    assert main(["compare", OLD, NEW, "--results", RESULTS, "--factor", "0.5"]) == 2


def test_figures_without_spread_are_judged_by_the_factor():
    unit = "bytes"
    c = Comparison(("m",), unit, Value(100.0, None), Value(125.0, None))
    assert not c.spread_known
    assert c.verdict(1.2) == "REGRESSION" and c.verdict(1.3) == "no spread measured"


def copy_data(tmp_path) -> str:
    """tests/data's results and records, to be spoilt."""
    for folder in ("results", "records"):
        shutil.copytree(os.path.join(os.path.dirname(RESULTS), folder), tmp_path / folder)
    return str(tmp_path / "results")


def spoil_samples(results: str, env_part: str, model: str, spoilt) -> None:
    """Put ``spoilt`` (NaN, inf, None) among the throughput windows of torch on ``model``."""
    folder = os.path.join(results, "cpu-fixture")
    path = next(os.path.join(folder, f) for f in os.listdir(folder) if env_part in f)
    data = load_json(path)
    fields = dict(zip(data["result_columns"], data["results"][THROUGHPUT]))
    frameworks, models, _ = fields["params"]
    index = frameworks.index("'torch'") * len(models) + models.index(f"'{model}'")
    fields["samples"][index][1] = spoilt
    with open(path, "w") as f:
        json.dump(data, f)  # writes NaN and Infinity bare, as asv does


@pytest.mark.parametrize("spoilt", [float("nan"), float("inf"), None])
def test_a_non_finite_sample_is_no_result_never_within_spread(tmp_path, capsys, spoilt):
    results = copy_data(tmp_path)
    spoil_samples(results, NEW, "ncf", spoilt)
    found = comparisons(load_runs(results), OLD, NEW)[(THROUGHPUT, "torch", "ncf", "fp32")]
    assert found.b is None and found.verdict(1.1) == "no result"
    assert main(["compare", OLD, NEW, "--results", results, "--machine", "cpu-fixture",
                 "--benchmark", "samples_per_s"]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if "track_samples_per_s" in line and "ncf" in line)
    assert "no result [1]" in row and "nan" not in row.lower()
    assert "[1] B: 1 of its" in out and "not finite" in out


@pytest.mark.parametrize("factor", ["nan", "inf", "-inf", "0.5", "0"])
def test_a_factor_that_would_turn_the_gate_off_is_rejected(capsys, factor):
    assert main(["compare", NEW, OLD, "--results", RESULTS, "--machine", "cpu-fixture",
                 f"--factor={factor}"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "finite number >= 1" in err


def test_results_of_another_grid_are_named_not_dropped_silently(tmp_path, capsys):
    results = copy_data(tmp_path)
    older = os.path.join(results, "cpu-fixture", "0123abcd-virtualenv-py3.11-torch2.12.0.json")
    with open(older, "w") as f:
        json.dump({"commit_hash": "0123abcd" * 5, "env_name": "virtualenv-py3.11-torch2.12.0",
                   "date": 1, "result_columns": ["result", "params"],
                   "results": {THROUGHPUT: [[1.0, 2.0], [["'torch'"], ["'ncf'", "'vgg'"]]]}}, f)
    assert main(["compare", OLD, "torch2.12.0", "--results", results, "--machine",
                 "cpu-fixture"]) == 2
    err = capsys.readouterr().err
    assert f"{older}: 1 benchmark(s) with 2 parameters left out" in err
    assert "no benchmark in common" in err


def test_the_run_to_run_spread_widens_what_counts_as_real(runs, tmp_path, capsys):
    """A change beyond the windows' spread but inside the machine's run-to-run spread
    (noise.toml) is no longer flagged, in compare's verdict and in history's change column."""
    from fwkernels.report.history import change

    flagged = [c for c in comparisons(runs, OLD, NEW).values()
               if c.spread_known and c.beyond_spread]
    assert flagged
    c = flagged[0]
    needed = abs(c.b.mean - c.a.mean) / abs(c.a.mean)
    c.run_to_run = needed * 1.01
    assert not c.beyond_spread and c.verdict(1.1) == "within spread"
    c.run_to_run = needed * 0.99
    assert c.beyond_spread
    assert "within the noise" in change(c.a, c.b, needed * 1.01)
    assert "beyond the noise" in change(c.a, c.b, needed * 0.99)

    noise_file = tmp_path / "noise.toml"
    noise_file.write_text('[machine.cpu-fixture]\nrun_to_run = 0.99\n')
    args = ["compare", NEW, OLD, "--results", RESULTS, "--machine", "cpu-fixture",
            "--benchmark", "samples_per_s"]  # a real drop: exit 1 without noise.toml
    assert main(args + ["--noise", str(noise_file)]) == 0
    out = capsys.readouterr().out
    assert "run-to-run spread, 99.0% of mean A" in out and "REGRESSION" not in out


@pytest.mark.parametrize("text", ["[machine.m]\nrun_to_run = 1.5\n", "[machine.m]\n",
                                  "not toml ["])
def test_a_bad_noise_file_is_one_line(tmp_path, capsys, text):
    noise_file = tmp_path / "noise.toml"
    noise_file.write_text(text)
    assert main(["compare", OLD, NEW, "--results", RESULTS, "--machine", "cpu-fixture",
                 "--noise", str(noise_file)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "noise.toml" in err[0]


def test_a_difference_in_the_hosts_speed_is_named():
    from fwkernels.report.compare import comparison_table

    fresh = load_runs(RESULTS)
    side_a, side_b = (resolve(name, fresh, "cpu-fixture", None) for name in (OLD, NEW))
    results = compare(side_a, side_b, benchmark_units(RESULTS))
    assert not any("host" in line for line in comparison_table(side_a, side_b, results, 1.1).summary)
    for side, speed in ((side_a, 8.0), (side_b, 14.0)):
        for run in side.runs:
            run.records = [r.with_fields(host_speed=speed) for r in run.records]
    assert all(run.records for run in side_a.runs + side_b.runs)
    summary = comparison_table(side_a, side_b, results, 1.1).summary
    assert "The host ran at different speeds: A 8.0, B 14.0 million loop iterations/s (75% apart" \
        in summary[-1]


def test_other_work_beside_the_measurements_is_named():
    from fwkernels.report.compare import comparison_table

    fresh = load_runs(RESULTS)
    side_a, side_b = (resolve(name, fresh, "cpu-fixture", None) for name in (OLD, NEW))
    results = compare(side_a, side_b, benchmark_units(RESULTS))
    for side, share in ((side_a, 0.02), (side_b, 0.04)):
        for run in side.runs:
            run.records = [r.with_fields(other_cpu_share=share, steal_share=0.0)
                           for r in run.records]
    assert not any("beside" in line
                   for line in comparison_table(side_a, side_b, results, 1.1).summary)
    for run in side_b.runs:
        run.records = [r.with_fields(other_cpu_share=0.5) for r in run.records]
    summary = comparison_table(side_a, side_b, results, 1.1).summary
    assert "Other work ran beside the measurements: up to 2% (A) and 50% (B)" in summary[-1]


def test_a_difference_in_the_memory_allocator_is_named():
    from fwkernels.report.compare import comparison_table

    fresh = load_runs(RESULTS)
    side_a, side_b = (resolve(name, fresh, "cpu-fixture", None) for name in (OLD, NEW))
    results = compare(side_a, side_b, benchmark_units(RESULTS))
    for run in side_a.runs + side_b.runs:
        run.records = [r.with_fields(allocator="glibc") for r in run.records]
    assert not any("allocator" in line
                   for line in comparison_table(side_a, side_b, results, 1.1).summary)
    for run in side_b.runs:
        run.records = [r.with_fields(allocator="tcmalloc_minimal") for r in run.records]
    summary = comparison_table(side_a, side_b, results, 1.1).summary
    assert "The runs used different memory allocators: A glibc, B tcmalloc_minimal;" in summary[-1]
    for run in side_b.runs:
        run.records = [r.with_fields(mkl_debug_cpu_type="5") for r in run.records]
    summary = comparison_table(side_a, side_b, results, 1.1).summary
    assert ("The runs asked MKL for different kernels: A MKL's own choice, B MKL_DEBUG_CPU_TYPE=5;"
            in summary[-1])
