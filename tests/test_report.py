"""fwkernels report on the real results in tests/data (tests/data/README.md says how they were made)."""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import sys
import warnings

import pytest

from fwkernels.cli import main
from fwkernels.frameworks import FRAMEWORKS
from fwkernels.models import MODELS, PYTORCH_TABLE1
from fwkernels.record import Record
from fwkernels.report import published
from fwkernels.report.render import render_report_markdown, render_report_text
from fwkernels.report.results import THROUGHPUT, load_json, load_runs
from fwkernels.report.tables import best_mode_table, build_report, table1
from test_compare import copy_data, spoil_samples  # pytest puts tests/ on sys.path

DATA = os.path.join(os.path.dirname(__file__), "data")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RESULTS = os.path.join(DATA, "results")
MACHINE = "cpu-fixture"  # torch 2.14.1 and 2.13.0; ncf, googlenet, alexnet_owt
MACHINE_B = "cpu-fixture-b"  # torch 2.14.1 and 2.13.0 (no torchvision); ncf, mobilenet_v2


def raw_samples(machine: str, env_part: str, model: str) -> list:
    """The throughput windows of one combination, read straight from asv's file."""
    folder = os.path.join(RESULTS, machine)
    path = next(os.path.join(folder, f) for f in os.listdir(folder) if env_part in f)
    data = load_json(path)
    fields = dict(zip(data["result_columns"], data["results"][THROUGHPUT]))
    frameworks, models, precisions = fields["params"]
    index = frameworks.index("'torch'") * len(models) * len(precisions) + models.index(f"'{model}'")
    return fields["samples"][index]


@pytest.fixture(scope="module")
def runs():
    return load_runs(RESULTS)


def test_load_json_accepts_asv_nan_and_infinity(tmp_path):
    path = tmp_path / "r.json"
    path.write_text('{"a": NaN, "b": Infinity, "c": -Infinity, "d": [1, NaN]}')
    data = load_json(str(path))
    assert math.isnan(data["a"]) and data["b"] == math.inf and data["c"] == -math.inf
    assert math.isnan(data["d"][1])


def test_throughput_is_the_mean_and_std_of_the_recorded_windows(runs):
    report = build_report(runs, MACHINE)
    newest = next(r for r in report.rows if r.framework == "torch" and r.version.startswith("2.14"))
    value = newest.run.values[(THROUGHPUT, "torch", "ncf", "fp32")]
    windows = raw_samples(MACHINE, "torch2.14.1", "ncf")
    mean = sum(windows) / len(windows)
    std = (sum((x - mean) ** 2 for x in windows) / (len(windows) - 1)) ** 0.5
    assert value.mean == pytest.approx(mean) and value.std == pytest.approx(std)
    assert newest.run.record("torch", "ncf", "fp32")["window_samples_per_s"] == windows


def test_spread_table_counts_the_figures_within_one_percent(runs):
    from fwkernels.report.tables import spread_table

    report = build_report(runs, MACHINE)
    rows = {(r[0].text, r[1].text): r for r in spread_table(report).rows}
    for (label, precision), cells in rows.items():
        row = next(r for r in report.rows if r.label == label)
        cvs = {m: v.std / v.mean for m in ("ncf", "googlenet", "alexnet_owt")
               if (v := report.outcome(row, THROUGHPUT, m, precision).value)}
        above = [m for m, cv in cvs.items() if cv > 0.01]
        assert cells[2].text == str(len(cvs)) and cells[3].text == str(len(cvs) - len(above))
        assert all(MODELS[m].title in cells[4].text for m in above)
    assert any(cells[4].text != "–" for cells in rows.values())  # the fixture's CPU windows vary


def test_table1_keeps_every_framework_and_marks_the_fastest(runs):
    report = build_report(runs, MACHINE)
    table = table1(report, "fp32")
    labels = [row[0].text for row in table.rows]
    for info in FRAMEWORKS.values():
        assert any(label.startswith(info.title) for label in labels), info.title
    assert table.headers[1:] == [MODELS[m].title for m in PYTORCH_TABLE1]
    ncf = table.headers.index("NCF (NeuMF)")
    measured = [(row[0].text, row[ncf]) for row in table.rows if "±" in row[ncf].text]
    assert len(measured) == 2  # the two torch versions
    best = [label for label, cell in measured if cell.best]
    means = {r.label: r.run.values[(THROUGHPUT, "torch", "ncf", "fp32")].mean
             for r in report.rows if r.framework == "torch"}
    assert best == [max(means, key=means.get)]
    tensorflow = next(row for row in table.rows if row[0].text == "TensorFlow")
    assert {c.text for c in tensorflow[1:]} == {"not measured"}
    alexnet = table.headers.index("AlexNet")
    assert all(row[alexnet].text in ("not run", "not measured") for row in table.rows)
    slower = next(line for line in table.summary if "within" in line)
    percent = float(re.search(r"within (\d+)%", slower).group(1))
    assert percent == round(100 * (1 - min(means.values()) / max(means.values())))


def test_best_mode_table_names_the_fastest_mode_and_table1_keeps_the_default():
    """On the committed H200 results, where PyTorch ran several modes: Table 1 holds its default
    mode only; the best-mode table each model's fastest mode, named; the claim check states
    which it used."""
    report = build_report(load_runs(os.path.join(os.path.dirname(DATA), os.pardir, "results")),
                          "h200")
    torch_rows = [r for r in report.rows if r.framework == "torch"]
    assert len(torch_rows) > 1
    default = table1(report, "bf16")
    assert not any("[" in row[0].text for row in default.rows)
    best = best_mode_table(report, "bf16")
    [torch_cells] = [row for row in best.rows if row[0].text.startswith("PyTorch")]
    column = best.headers.index("ResNet-50")
    figures = {r.target.partition(":")[2] or "eager": o.value.mean for r in torch_rows
               if (o := report.outcome(r, THROUGHPUT, "resnet50", "bf16")).value}
    assert torch_cells[column].text.endswith(f"[{max(figures, key=figures.get)}]")
    assert any(line.startswith("PyTorch") for line in best.summary)
    ratios = dict(report.sections)["Published figures beside ours (ratios)"][0]
    assert any(line.startswith("Here, default modes (Table 1), the paper's 6 frameworks:")
               for line in ratios.summary)
    assert any(line.startswith("Here, best measured modes, the paper's 6 frameworks:")
               for line in ratios.summary)
    # the H200 has PyTorch and JAX/Keras only: the paper's claim has one framework to go on
    assert any(line.startswith("Here, best measured modes, with today's peers too (JAX/Flax, "
                               "Keras 3 (JAX), Keras 3 (PyTorch)): PyTorch is within")
               for line in ratios.summary)


def test_na_reason_comes_from_the_record(runs):
    report = build_report(runs, MACHINE_B)
    table = table1(report, "fp32")
    column = table.headers.index("MobileNet v2")
    old = next(row for row in table.rows if row[0].text.startswith("PyTorch 2.13"))
    assert old[column].text == "N/A" and old[column].note is not None
    note = table.notes[old[column].note - 1]
    record = next(r for r in report.rows if r.label == old[0].text).run.record(
        "torch", "mobilenet_v2", "fp32")
    assert record["status"] == "n/a" and record["error"] in note
    new = next(row for row in table.rows if row[0].text.startswith("PyTorch 2.14"))
    assert "±" in new[column].text


def test_paper_claim_is_reproduced_from_the_published_table():
    """The paper's "within 17%" follows from its Table 1 with our distance formula."""
    table = published.PYTORCH_TABLE1
    worst = max(published.distance_from_fastest(
        table["torch"][m].mean, max(table[f][m].mean for f in table if m in table[f]))
        for m in PYTORCH_TABLE1)
    assert round(worst) == published.PYTORCH_TABLE1_CLAIM_PERCENT


def test_device_peaks_are_known_for_h200_only():
    assert published.device_peak("NVIDIA H200", "bf16").tflops == 775
    assert published.device_peak("NVIDIA H200", "tf32").tflops == 400
    assert published.device_peak("NVIDIA H200", "fp32").tflops == 51
    assert published.device_peak("NVIDIA H200", "fp32").source
    assert published.device_peak("NVIDIA A100-SXM4-80GB", "bf16") is None
    assert published.device_peak(None, "fp32") is None


def test_tflops_and_epoch_tables_use_the_records(runs):
    report = build_report(runs, MACHINE)
    section = dict(report.sections)["Achieved TFLOP/s and derived epoch time"]
    tflops, epoch = section
    row_index = next(i for i, r in enumerate(report.rows) if r.label.startswith("PyTorch 2.14"))
    row = report.rows[row_index]
    record = row.run.record("torch", "googlenet", "fp32")
    cell = tflops.rows[row_index][tflops.headers.index("GoogLeNet v1")]
    assert cell.text == f"{record['achieved_tflops']:.3g}"
    assert any("no peak figure is known for this CPU" in line for line in tflops.summary)
    hours = published.ILSVRC12_TRAIN_IMAGES / row.run.values[
        (THROUGHPUT, "torch", "googlenet", "fp32")].mean / 3600
    assert epoch.rows[row_index][epoch.headers.index("GoogLeNet v1")].text == f"{hours:,.3g} h"
    assert "DERIVED" in epoch.caption


def test_table1_conclusions_state_the_machines_run_to_run_spread(runs, tmp_path, capsys):
    def summary(report):  # Table 1's conclusions, in the section of the published figures
        return [line for _, tables in report.sections for table in tables
                for line in table.summary]

    assert any("spread of cpu-fixture is not measured" in line
               for line in summary(build_report(runs, MACHINE)))
    assert any("land up to 31% apart" in line
               for line in summary(build_report(runs, MACHINE, run_to_run=0.31)))
    noise_file = tmp_path / "noise.toml"
    noise_file.write_text(f"[machine.{MACHINE}]\nrun_to_run = 0.31\n")
    assert main(["report", "--results", RESULTS, "--machine", MACHINE, "--no-html",
                 "--noise", str(noise_file)]) == 0
    assert "land up to 31% apart" in capsys.readouterr().out


def test_ratios_put_the_paper_beside_ours(runs):
    report = build_report(runs, MACHINE)
    ratios = dict(report.sections)["Published figures beside ours (ratios)"][0]
    torch_row = next(row for row in ratios.rows if row[0].text == "PyTorch")
    ncf = ratios.headers.index("NCF (NeuMF)")
    assert torch_row[ncf].text == "1.00 | 1.00"
    tensorflow = next(row for row in ratios.rows if row[0].text == "TensorFlow")
    assert tensorflow[ncf].text == f"{4.8e6 / 5.4e6:.2f} | –"  # not measured here
    assert any("within 17%" in line for line in ratios.summary)


def test_terminal_and_markdown_outputs(runs):
    report = build_report(runs, MACHINE)
    text = render_report_text(report)
    assert "Table 1: training throughput, fp32, cpu-fixture" in text
    assert "* fastest of the column" in text
    markdown = render_report_markdown(report)
    assert "| framework | AlexNet |" in markdown and "**" in markdown
    assert "not measured" in text


def test_the_charts_leave_the_bars_room_beside_long_row_labels(tmp_path, capsys):
    """Ten frameworks' rows, named with their companions ("Keras 3 (TensorFlow) 3.15.1
    (tensorflow 2.21.0)"), once squeezed every bar chart of the committed CPU machines' pages
    to no width at all: matplotlib's tight_layout gave up, with a warning."""
    pytest.importorskip("matplotlib")
    pytest.importorskip("jinja2")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        code = main(["report", "--results", os.path.join(REPO, "results"), "--records",
                     os.path.join(REPO, "records"), "--html-dir", str(tmp_path)])
    capsys.readouterr()
    assert code == 0
    assert not [w for w in caught if "tight_layout" in str(w.message)]


def test_cli_prints_table1_and_writes_self_contained_html(tmp_path, capsys):
    pytest.importorskip("matplotlib")  # the HTML needs the report extra (nox -s report)
    pytest.importorskip("jinja2")
    code = main(["report", "--results", RESULTS, "--html-dir", str(tmp_path),
                 "--markdown", str(tmp_path / "report.md")])
    out = capsys.readouterr().out
    assert code == 0
    assert "Table 1: training throughput, fp32, cpu-fixture" in out
    assert "Table 1: training throughput, fp32, cpu-fixture-b" in out
    page = (tmp_path / "fwkernels" / f"{MACHINE}.html").read_text()
    assert page.count("<svg") >= 3 and "Table 1" in page
    assert not re.search(r'<(script|link|img)[^>]+(src|href)="(https?:)?//', page)
    index = (tmp_path / "index.html").read_text()
    assert f'href="fwkernels/{MACHINE}.html"' in index
    assert f'href="fwkernels/{MACHINE_B}.html"' in index
    assert "### Table 1" in (tmp_path / "report.md").read_text()


def test_cli_errors_name_the_valid_choices(tmp_path, capsys):
    assert main(["report", "--results", str(tmp_path / "none"), "--no-html"]) == 2
    assert "no results directory" in capsys.readouterr().err
    assert main(["report", "--results", RESULTS, "--machine", "nope", "--no-html"]) == 2
    err = capsys.readouterr().err
    assert MACHINE in err and MACHINE_B in err
    assert main(["report", "--results", RESULTS, "--commit", "deadbeef", "--no-html"]) == 2
    assert "62d2aa7d" in capsys.readouterr().err


def test_fraction_of_peak_on_a_gpu_record():
    """The fraction-of-peak arithmetic on a record of the GPU format (device cuda, device_name
    as torch reports it). The figures are arbitrary inputs of the formula, not results."""
    from fwkernels.report.results import Run, Value
    from fwkernels.report.tables import tflops_table

    run = Run(machine="gpu", commit="0" * 40, env="env", date=1, requirements={})
    key = (THROUGHPUT, "torch", "resnet50", "bf16")
    run.attempted[key] = True
    run.values[key] = Value(1000.0, 10.0, (990.0, 1000.0, 1010.0))
    run.records.append(Record({"framework": "torch", "mode": "eager", "model": "resnet50",
                        "precision": "bf16", "device": "cuda", "device_name": "NVIDIA H200",
                        "framework_version": "2.11.0", "status": "ok", "achieved_tflops": 77.5}))
    report = build_report([run], "gpu")
    assert report.device == "NVIDIA H200"
    table = tflops_table(report, "bf16")
    row = next(r for r in table.rows if r[0].text == "PyTorch 2.11.0")
    assert row[table.headers.index("ResNet-50")].text == "77.5 (10.0%)"
    assert any("775" in line and "NVIDIA H200" in line for line in table.summary)


def test_widen_grids_makes_benchmarks_json_cover_every_result_file(tmp_path):
    grid = lambda fws, precisions: [[f"'{f}'" for f in fws], ["'ncf'"],
                                    [f"'{p}'" for p in precisions]]
    name = THROUGHPUT
    (tmp_path / "benchmarks.json").write_text(json.dumps(
        {name: {"params": grid(["torch"], ["fp32"]), "unit": "samples/s"}, "version": 2}))
    for machine, fws, precisions in [("cpu-box", ["torch"], ["fp32"]),
                                     ("gpu-box", ["torch", "jax"], ["fp32", "bf16"])]:
        (tmp_path / machine).mkdir()
        (tmp_path / machine / "machine.json").write_text("{}")
        (tmp_path / machine / "abc-env.json").write_text(json.dumps(
            {"result_columns": ["result", "params"],
             "results": {name: [[1.0] * len(fws) * len(precisions), grid(fws, precisions)]}}))
    assert main(["widen-grids", str(tmp_path)]) == 0
    assert load_json(tmp_path / "benchmarks.json")[name]["params"] == grid(["torch", "jax"],
                                                                          ["fp32", "bf16"])


def test_a_suite_run_in_slices_reports_its_commits_together():
    from fwkernels.report.results import ResultsError, Run, Value, select

    def run(commit, date, framework, model="ncf"):
        r = Run(machine="gpu", commit=commit * 40, env=framework + model, date=date,
                requirements={})
        key = (THROUGHPUT, framework, model, "bf16")
        r.attempted[key] = True
        r.values[key] = Value(1e8, 1e5, (1e8,))
        return r

    runs = [run("a", 1, "torch"), run("b", 2, "jax")]
    assert [r.env for r in select(runs, "gpu")] == ["jaxncf"]  # default: the latest commit
    assert [r.env for r in select(runs, "gpu", "aaaa,bbbb")] == ["torchncf", "jaxncf"]
    with pytest.raises(ResultsError, match="'cccc'; with results: aaaaaaaa, bbbbbbbb"):
        select(runs, "gpu", "aaaa,cccc")
    assert build_report(runs, "gpu", "aaaa,bbbb").commit == "aaaaaaaa, bbbbbbbb"
    # two slices of one framework version: one row with the figures of both
    report = build_report(runs + [run("b", 2, "torch", "resnet50")], "gpu", "aaaa,bbbb")
    torch_rows = [row for row in report.rows if row.framework == "torch"]
    assert len(torch_rows) == 1
    assert all(report.outcome(torch_rows[0], THROUGHPUT, m, "bf16").status == "ok"
               for m in ("ncf", "resnet50"))


def ncf_run(commit: str, framework: str, **fields):
    """A run of one release measuring NCF at fp32, its record carrying ``fields``."""
    from fwkernels.report.results import Run, Value

    r = Run(machine="cpu", commit=commit * 40, env=framework, date=1, requirements={},
            release=f"{framework}-1.0")
    key = (THROUGHPUT, framework, "ncf", "fp32")
    r.attempted[key] = True
    r.values[key] = Value(1e4, 1e2, (1e4,))
    r.records.append(Record.new(status="ok", framework=framework, mode="eager", model="ncf",
                                precision="fp32", **fields))
    return r


def test_report_names_host_speeds_further_apart_than_the_tolerance():
    """Records carry the host's speed before and after each measurement; the report's header says
    when the runs shown were taken at speeds more than 10% apart, and stays silent otherwise; it
    adds how far one measurement's two probes disagreed, where more than 10%."""
    def run(commit, framework, speed, probes=None):
        return ncf_run(commit, framework, host_speed=speed,
                       host_speed_probes=probes or [speed, speed])

    alike = [run("a", "torch", 14.0), run("b", "jax", 15.0)]
    report = build_report(alike, "cpu", "aaaa,bbbb")
    assert report.host_speed_note() is None
    apart = [run("a", "torch", 8.0), run("b", "jax", 14.0)]
    text = render_report_text(build_report(apart, "cpu", "aaaa,bbbb"))
    assert "8.0 (torch-1.0) to 14.0 (jax-1.0) million loop iterations/s, 75% apart" in text
    assert "probes of one measurement" not in text
    # a host whose two probes of one measurement disagree: the note gives the probe's own spread
    unsteady = apart + [run("c", "mxnet", 9.0, probes=[13.5, 9.0])]
    text = render_report_text(build_report(unsteady, "cpu", "aaaa,bbbb,cccc"))
    assert "The two probes of one measurement differed by up to 50%" in text


def test_report_names_the_measurements_taken_beside_other_work():
    """Records say what share of the machine's CPU time other processes and other guests took
    during the timed windows; the header names the runs above 5%, the largest first."""
    quiet = [ncf_run("a", "torch", other_cpu_share=0.01, steal_share=0.0),
             ncf_run("b", "jax", other_cpu_share=0.03, steal_share=0.01), ncf_run("c", "mxnet")]
    assert build_report(quiet, "cpu", "aaaa,bbbb,cccc").beside_note() is None
    busy = quiet + [ncf_run("d", "paddle", other_cpu_share=0.45, steal_share=0.02),
                    ncf_run("e", "chainer", other_cpu_share=0.0, steal_share=0.08)]
    text = render_report_text(build_report(busy, "cpu", "aaaa,bbbb,cccc,dddd,eeee"))
    assert ("2 of the measurements shown ran beside other work: up to 47% of the machine's CPU "
            "time went to other processes or other guests during the timed windows "
            "(paddle-1.0 ncf fp32;") in text


def test_report_names_the_memory_allocators_when_the_runs_used_several():
    alike = [ncf_run("a", "torch", allocator="glibc"), ncf_run("b", "jax", allocator="glibc"),
             ncf_run("c", "mxnet")]
    assert build_report(alike, "cpu", "aaaa,bbbb,cccc").allocator_note() is None
    tuned = {"allocator": "glibc",
             "allocator_settings": {"GLIBC_TUNABLES": "glibc.malloc.mmap_max=0"}}
    text = render_report_text(build_report(alike + [ncf_run("d", "paddle", **tuned)], "cpu",
                                           "aaaa,bbbb,cccc,dddd"))
    assert ("The runs used different memory allocators: glibc (torch-1.0, jax-1.0); "
            "glibc GLIBC_TUNABLES=glibc.malloc.mmap_max=0 (paddle-1.0);") in text


def test_report_names_the_mkl_kernels_when_the_runs_asked_for_several():
    own = [ncf_run("a", "torch"), ncf_run("b", "paddle", mkl_debug_cpu_type="")]
    assert build_report(own, "cpu", "aaaa,bbbb").mkl_note() is None  # empty: MKL's own choice
    text = render_report_text(build_report(own + [ncf_run("c", "cntk", mkl_debug_cpu_type="5")],
                                           "cpu", "aaaa,bbbb,cccc"))
    assert ("The runs asked MKL for different kernels: MKL's own choice (torch-1.0, paddle-1.0); "
            "MKL_DEBUG_CPU_TYPE=5 (cntk-1.0);") in text


def test_combination_time_splits_each_measurement(tmp_path):
    record = dict(status="ok", framework="jax", mode="jit", model="ncf", precision="fp32",
                  measure_s=40.0, import_s=2.0, build_s=6.0,
                  warmup_s=10.0, forward_backward_warmup_s=4.0, forward_warmup_s=3.0,
                  flops_s=1.0, windows=5, steps_per_window=10, step_time_s=0.05)
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in
                              [record, dict(record, status="oom"), dict(record, measure_s=50.0)]))
    out = subprocess.run([sys.executable, "-m", "fwkernels", "combination-time", str(path)],
                         capture_output=True, text=True, check=True).stdout
    # two ok records: 90 s in all; warm-up 17 s and training windows 2.5 s each; rest 90 - 2 x 28.5
    assert out.splitlines()[-1] == "| jax | 2 | 90 | 4 | 12 | 34 | 2 | 5 | 33 |"


def test_framework_ratio_takes_the_newest_finished_record(tmp_path):
    def record(framework, mode, rate, timestamp, status="ok", model="resnet50"):
        return dict(framework=framework, mode=mode, model=model, precision="bf16",
                    samples_per_s=rate, timestamp=timestamp, status=status)

    records = [record("torch", "eager", 100.0, "2026-01-01"),
               record("torch", "eager", 200.0, "2026-02-01"),
               record("torch", "compile", 900.0, "2026-03-01"),
               record("keras-torch", "eager", 80.0, "2026-02-01"),
               record("keras-torch", "eager", 10.0, "2026-03-01", status="error"),
               record("keras-torch", "eager", 50.0, "2026-02-01", model="ncf")]
    path = tmp_path / "records.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in records))
    script = [sys.executable, "-m", "fwkernels", "framework-ratio"]
    out = subprocess.run([*script, "torch", "keras-torch", str(path)],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert out[0] == "| keras-torch / torch | fp32 | tf32 | bf16 |"
    # 80 / 200: torch is eager (not the newer compile record), the failed Keras run left out
    assert "| resnet50 | - | - | 0.40 |" in out
    assert "| ncf | - | - | - |" in out
    wrong = subprocess.run([*script, "torch:jit", "keras-torch", str(path)],
                           capture_output=True, text=True)
    assert wrong.returncode != 0 and "valid modes: eager, channels_last" in wrong.stderr


def test_history_lists_releases_in_version_order_with_the_change_from_the_one_before(capsys):
    """On the committed CPU results of the release ledger: TensorFlow 2.19.1 and 2.20.0 came out
    the same day; the table follows the versions, and each change is judged by compare's rule
    (the windows' spread or the machine's run-to-run spread in noise.toml, the larger)."""
    from fwkernels.report import noise

    noise_file = os.path.join(REPO, "noise.toml")
    spread = noise.load(noise_file)["amd-epyc-2core"]
    assert main(["history", "tensorflow", "--machine", "amd-epyc-2core", "--results",
                 os.path.join(REPO, "results"), "--records", os.path.join(REPO, "records"),
                 "--noise", noise_file]) == 0
    lines = capsys.readouterr().out.splitlines()
    header = next(line.split(" | ") for line in lines if line.startswith("| release"))
    column = header.index("ResNet-50 images/s")
    rows = [line.split(" | ") for line in lines if re.match(r"\| \d", line)]
    assert [row[0].lstrip("| ") for row in rows] == ["2.18.1", "2.19.1", "2.20.0", "2.21.0"]
    # AlexNet was measured for the newest release only (Table 1 on this machine): no history
    assert "AlexNet images/s" not in header

    def figure(cell):
        mean, std = (float(x.replace(",", "")) for x in cell.split(" ± "))
        return mean, std

    for before, after in zip(rows, rows[1:]):
        (m0, s0), (m1, s1) = figure(before[column]), figure(after[column])
        judged = "beyond" if abs(m1 - m0) > max(s0 + s1, spread * m0) else "within"
        percent, _, rest = after[column + 1].partition("% ")
        assert abs(float(percent) - 100 * (m1 / m0 - 1)) < 0.2  # the means print rounded
        assert rest == f"({judged} the noise)"


def test_history_names_each_release_s_python_and_a_change_across_two(capsys):
    """On the committed CPU results: JAX 0.11 and later need Python 3.12 (this machine's asv
    runs 3.11), so they ran in an environment of their own; the page says so where it matters."""
    def history(framework):
        assert main(["history", framework, "--machine", "amd-epyc-2core", "--results",
                     os.path.join(REPO, "results"), "--records", os.path.join(REPO, "records"),
                     "--noise", os.path.join(REPO, "noise.toml")]) == 0
        return capsys.readouterr().out

    jax = history("jax")
    rows = {row[0].lstrip("| "): row for row in
            (line.split(" | ") for line in jax.splitlines() if re.match(r"\| \d", line))}
    assert rows["0.10.2"][2] == "3.11.7" and rows["0.11.2"][2] == "3.12.1"
    assert rows["0.11.2"][4].endswith("; Python 3.11.7 → 3.12.1)"), rows["0.11.2"]
    assert "Python" not in rows["0.10.2"][4] + rows["0.12.0"][4]
    assert "a change across two of them is the Python's too" in jax
    assert "different Pythons" not in history("tensorflow")


@pytest.mark.parametrize("args, message", [
    (["history", "nosuch", "--machine", "amd-epyc-2core"], "nosuch"),
    (["history", "torch", "--machine", "no-such-machine"], "machines with results"),
])
def test_history_bad_input_is_one_line_and_exit_2(args, message):
    proc = subprocess.run([sys.executable, "-m", "fwkernels", *args], capture_output=True,
                          text=True, cwd=REPO)
    assert proc.returncode == 2 and message in proc.stderr and len(proc.stderr.splitlines()) == 1, \
        proc.stderr


def test_a_non_finite_sample_is_no_result_with_its_footnote(tmp_path, capsys):
    results = copy_data(tmp_path)
    spoil_samples(results, "torch2.14.1", "ncf", float("nan"))
    assert main(["report", "--results", results, "--machine", MACHINE, "--no-html"]) == 0
    out = capsys.readouterr().out
    assert not re.search(r"nan ?(%|±)", out.lower())
    table = out[out.index("Training throughput"):]
    row = next(line for line in table.splitlines() if line.startswith("PyTorch 2.14.1"))
    note = re.search(r"no result \[(\d+)\]", row).group(1)
    assert re.search(rf"\[{note}\] PyTorch 2\.14\.1\S* × NCF.*: not a figure: .* 1 of its \d+ "
                     r"samples are not finite numbers \(NaN\)", table)


def fwkernels(*args: str, cwd=None) -> subprocess.CompletedProcess:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=root + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "fwkernels", *args], capture_output=True,
                          text=True, cwd=cwd, env=env)


def assert_one_line(proc: subprocess.CompletedProcess, *words: str) -> None:
    """Exit 2 and one line on stderr naming the problem: no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stderr.count("\n") == 1 and "Traceback" not in proc.stderr, proc.stderr
    for word in words:
        assert word in proc.stderr, (word, proc.stderr)


RESULT_FILE = os.path.join("results", MACHINE, "62d2aa7d-virtualenv-py3.11-torch2.13.0.json")


@pytest.mark.parametrize("content, problem", [
    ("TRUNCATE", "not JSON, truncated or corrupt"),
    ("[]", "the file holds a list, not an object"),
    ('{"results": []}', "'results' is a list, not an object"),
    ('{"date": "yesterday", "results": {}}', "'date' is 'yesterday'"),
    ('{"result_columns": ["result", "params"], "results": {"%s": [[1.0], 3]}}' % THROUGHPUT,
     "'params' is not a list of parameter lists"),
    ('{"result_columns": ["result", "params"], "results": {"%s": [1.0, [["a"]]]}}' % THROUGHPUT,
     "'result' is a number, not a list"),
])
def test_a_result_file_that_is_not_what_it_should_be_is_one_line(tmp_path, content, problem):
    copy_data(tmp_path)
    path = tmp_path / RESULT_FILE
    path.write_text(path.read_text()[:300] if content == "TRUNCATE" else content)
    for command in (["report", "--no-html"], ["compare", "torch2.13.0", "torch2.14.1",
                                              "--machine", MACHINE], ["widen-grids"]):
        assert_one_line(fwkernels(*command, cwd=tmp_path), RESULT_FILE, problem)


def test_a_corrupt_benchmarks_json_is_one_line(tmp_path):
    copy_data(tmp_path)
    (tmp_path / "results" / "benchmarks.json").write_text('{"training.')
    for command in (["compare", "torch2.13.0", "torch2.14.1", "--machine", MACHINE],
                    ["widen-grids"]):
        assert_one_line(fwkernels(*command, cwd=tmp_path), "benchmarks.json", "not JSON")
    (tmp_path / "results" / "benchmarks.json").write_text("[1]")
    assert_one_line(fwkernels("widen-grids", cwd=tmp_path), "benchmarks.json", "holds a list")


def test_widen_grids_names_a_missing_results_folder_and_writes_atomically(tmp_path, monkeypatch):
    assert_one_line(fwkernels("widen-grids", str(tmp_path / "none")), "no results directory")
    from fwkernels.report import results

    (tmp_path / "benchmarks.json").write_text('{"version": 2}')

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(results.json, "dumps", lambda *a, **k: "{" + "x" * 100)
    monkeypatch.setattr(results.os, "replace", interrupted)
    with pytest.raises(KeyboardInterrupt):
        results.widen_benchmark_grids(str(tmp_path))
    assert (tmp_path / "benchmarks.json").read_text() == '{"version": 2}'
    assert os.listdir(tmp_path) == ["benchmarks.json"]  # no temporary file left


def test_records_that_are_not_what_they_should_be(tmp_path):
    whole = open(os.path.join(DATA, "records", MACHINE,
                              "62d2aa7d-virtualenv-py3.11-torch2.13.0.jsonl")).read()
    partial = tmp_path / "partial.jsonl"
    partial.write_text(whole + whole.splitlines()[0][:80])  # a run killed while appending
    proc = fwkernels("render", str(partial))
    assert proc.returncode == 0 and proc.stderr.count("\n") == 1
    assert f"{partial}:{len(whole.splitlines()) + 1}: skipped a partial last line" in proc.stderr
    assert proc.stdout.count("| ncf |") == whole.count('"model": "ncf"')
    cases = {"garbage.jsonl": ("garbage\n" + whole, "garbage.jsonl:1: not JSON"),
             "list.jsonl": (whole + "[1, 2]\n", "a record is a JSON object, not list"),
             "nostatus.jsonl": ('{"framework": "torch", "mode": "eager", "model": "ncf", '
                                '"precision": "fp32"}\n', "nostatus.jsonl:1: missing status")}
    for name, (text, problem) in cases.items():
        (tmp_path / name).write_text(text)
        assert_one_line(fwkernels("render", str(tmp_path / name)), problem)
    assert_one_line(fwkernels("render", str(tmp_path / "none.jsonl")), "none.jsonl",
                    "No such file")
    assert_one_line(fwkernels("render", str(tmp_path)), "a directory")


def test_report_markdown_into_a_missing_folder_fails_before_reporting(tmp_path):
    proc = fwkernels("report", "--results", RESULTS, "--no-html", "--markdown",
                     str(tmp_path / "none" / "report.md"))
    assert_one_line(proc, "--markdown", "no folder")
    assert proc.stdout == ""


def test_noise_is_the_spread_between_runs_of_one_combination():
    """Two runs of a combination 10% apart, one of another 2% apart, one measured once (left
    out), one failed run (left out): nearest-rank median 2%, 95th percentile 10%.
    The figures are inputs of the arithmetic, not results."""
    from fwkernels.report.analysis import noise, run_to_run_spreads

    def rec(model: str, rate: float, status: str = "ok") -> Record:
        return Record({"framework": "torch", "mode": "eager", "model": model, "precision": "fp32",
                       "status": status, "framework_version": "2.14.1", "asv_machine": "m",
                       "samples_per_s": rate})

    records = [rec("resnet50", 95.0), rec("resnet50", 105.0), rec("ncf", 99.0), rec("ncf", 101.0),
               rec("vgg19", 50.0), rec("vgg19", 10.0, "oom")]
    assert run_to_run_spreads(records, "samples_per_s") == pytest.approx([0.02, 0.1])
    row = next(line for line in noise(records).splitlines() if line.startswith("| samples_per_s"))
    assert row.endswith("| 2 | 2.00% | 10.00% | 10.00% | 10% |"), row
    # runs on other MKL kernels or another allocator are another combination
    other_kernels = [Record(dict(rec("vgg19", 100.0), mkl_debug_cpu_type="5")),
                     Record(dict(rec("vgg19", 100.0), allocator="glibc"))]
    assert run_to_run_spreads(records + other_kernels, "samples_per_s") == pytest.approx([0.02, 0.1])
    # records taken beside other work are named under the table
    assert "beside other work" not in noise(records)
    busy = [Record(dict(rec("ncf", 90.0), other_cpu_share=0.31, steal_share=0.01))]
    assert noise(records + busy).splitlines()[-1].startswith(
        "1 of the 7 records ran beside other work: up to 32% of the machine's CPU time")
