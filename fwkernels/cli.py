"""The ``fwkernels`` command line: every subcommand is registered here.

    list, measure, sweep, repeat, render, loss-curve           measuring
    report, compare, history, widen-grids, asv-machine         asv results
    check-variables                                            the asv suite's variables
    combination-time, framework-ratio, internal-memory, noise  records files
    ledger                                                     framework releases as commits
"""
from __future__ import annotations

import argparse
import json
import math
import os
import platform
import re
import sys
import time
from typing import Any, Dict, List, Mapping, Optional

from fwkernels import record, sweep
from fwkernels.frameworks import FRAMEWORKS, FrameworkInfo, own_interpreter, unavailable_reason
from fwkernels.frameworks.base import DEVICES, PRECISIONS
from fwkernels.ledger.installed import worker_site_packages
from fwkernels.ledger.releases import LedgerError, RegistryUnavailable
from fwkernels.models import MODELS
from fwkernels.report import analysis, compare, noise
from fwkernels.report.render import (render_markdown, render_report_markdown,
                                     render_report_text, render_text)
from fwkernels.report.results import (ResultsError, benchmark_units, load_json, load_runs,
                                      machines, widen_benchmark_grids)
from fwkernels.report.tables import build_report
from fwkernels.request import InvalidRequest, Request, require, resolve
from fwkernels.runner import run

EXIT_INVALID = 2
EXIT_FAILED = 1
EXIT_REGRESSION = 1


def list_entries() -> Dict[str, List[Dict[str, Any]]]:
    frameworks = []
    for info in FRAMEWORKS.values():
        reason = unavailable_reason(info.name)
        frameworks.append({"name": info.name, "title": info.title, "modes": list(info.modes),
                           "available": reason is None, "reason": reason,
                           "package": info.package,
                           "version": None if reason else _installed_version(info)})
    models = [{"name": m.name, "title": m.title, "source": m.source, "task": m.task,
               "unit": m.unit, "params": m.params, "batch_gpu": m.batch_gpu,
               "batch_cpu": m.batch_cpu} for m in MODELS.values()]
    return {"models": models, "frameworks": frameworks}


def _installed_version(info: FrameworkInfo) -> Optional[str]:
    """The installed distribution's version, read without importing the framework."""
    from importlib import metadata

    if info.own_python:
        return own_interpreter(info).installed_version()
    package = info.package
    where = worker_site_packages() or sys.path  # a release environment's, else this one's
    for dist in (package, {"paddle": "paddlepaddle"}.get(package, package), f"{package}-cpu"):
        found = next(iter(metadata.distributions(name=dist, path=where)), None)
        if found is not None:
            return found.version
    return None


def cmd_list(args: argparse.Namespace) -> int:
    entries = list_entries()
    if args.json:
        print(json.dumps(entries, indent=2))
        return 0
    print("Models:")
    for m in entries["models"]:
        print(f"  {m['name']:<13} {m['title']:<14} {m['unit']:<7} {m['params']:>12,} params"
              f"  batch gpu/cpu {m['batch_gpu']}/{m['batch_cpu']}  ({m['source']})")
    print("Frameworks:")
    for f in entries["frameworks"]:
        state = (f"available ({f['package']} {f['version']})" if f["available"]
                 else f"unavailable: {f['reason']}")
        print(f"  {f['name']:<17} {f['title']:<21} modes {','.join(f['modes']):<36} {state}")
    return 0


def cmd_measure(args: argparse.Namespace) -> int:
    result = run(require(resolve(
        args.framework, args.model, device=args.device, batch=args.batch,
        precision=args.precision, mode=args.mode, windows=args.windows, steps=args.steps,
        warmup=args.warmup, threads=args.threads)))
    print(record.dumps(result) if args.json else format_record(result))
    return 0 if result.ok else EXIT_FAILED


def format_record(r: Mapping[str, Any]) -> str:
    head = (f"{r['framework']} {r.get('framework_version', '?')} [{r['mode']}] {r['model']} "
            f"on {r['device']}, batch {r['batch']}, {r['precision']}, {r['threads']} threads")
    if r["status"] != "ok":
        return f"{head}\n  {r['status'].upper()}: {r.get('error', '')}"
    unit = r["unit"]
    lines = [
        head,
        f"  throughput        {r['samples_per_s']:.4g} ± {r['samples_per_s_std']:.2g} {unit}/s "
        f"(median {r['samples_per_s_median']:.4g}, cv {100 * r['samples_per_s_cv']:.1f}%, "
        f"{r['windows']} windows x {r['steps_per_window']} steps)",
        f"  train step        {1e3 * r['step_time_s']:.2f} ms/batch (forward+backward+update)",
        f"  forward-backward  {1e3 * r['forward_backward_time_s']:.2f} ms/batch",
        f"  forward only      {1e3 * r['forward_time_s']:.2f} ms/batch",
        f"  peak memory       {r['peak_memory_bytes'] / 2**20:.1f} MiB train, "
        f"{r['forward_peak_memory_bytes'] / 2**20:.1f} MiB forward ({r['peak_memory_source']})",
        f"  warm-up           {r['warmup_s']:.2f} s; build {r['build_s']:.2f} s",
        f"  parameters        {r['params']:,} (expected {r['expected_params']:,})",
    ]
    beside = record.share_beside(r)
    if beside is not None:
        lines.append(f"  beside it         {100 * beside:.1f}% of the machine's CPU time went to "
                     "other processes and other guests during the timed windows")
    if r.get("achieved_tflops"):
        lines.append(f"  model FLOPs       {r['flops_per_sample'] / 1e9:.3g} GFLOP/sample "
                     f"(train), achieved {r['achieved_tflops']:.3g} TFLOP/s")
    return "\n".join(lines)


def cmd_sweep(args: argparse.Namespace) -> int:
    check_output_path(args.jsonl, "--jsonl")
    check_output_path(args.markdown, "--markdown")
    requests = sweep.plan(args.frameworks, args.models, args.precisions, args.modes,
                          device=args.device, windows=args.windows, steps=args.steps,
                          window_seconds=args.window_seconds, threads=args.threads)
    start = time.perf_counter()
    records = sweep.run_sweep(requests, args.jsonl)
    text = sweep.sweep_table(records, sweep.command_line(), time.perf_counter() - start)
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(text)
    print(text)
    return 0 if all(r.status in ("ok", "n/a") for r in records) else EXIT_FAILED


def measured_by(records: List[record.Record], pattern: Optional[str]) -> List[record.Record]:
    """The records whose "<fwkernels commit>/<asv environment>" matches ``pattern`` (all: None):
    the measurements of one harness version, or of one slice of an asv run."""
    if not pattern:
        return list(records)
    try:
        regex = re.compile(pattern)
    except re.error as error:
        raise InvalidRequest(f"--measured-by: {error}") from None
    return [r for r in records if regex.search(
        f"{(r.get('harness_commit') or r.get('asv_commit') or '')[:8]}/{r.get('asv_env') or ''}")]


def check_output_path(path: Optional[str], option: str) -> None:
    """A file a command will write: its folder must exist, checked before any work is done."""
    if path is None:
        return
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or os.path.isdir(path):
        raise InvalidRequest(f"{option} {path}: " + (
            "is a directory; name a file" if os.path.isdir(path) else
            f"no folder {os.path.dirname(path) or '.'}; create it or name a file in an existing "
            "folder"))


def cmd_render(args: argparse.Namespace) -> int:
    if os.path.isdir(args.records):
        raise record.RecordError(f"{args.records}: a directory; name a records file (.jsonl)")
    records = record.read(args.records, required=True)
    print(sweep.markdown(measured_by(records, args.measured_by),
                         args.caption or f"fwkernels render {args.records}"))
    return 0


def cmd_loss_curve(args: argparse.Namespace) -> int:
    from fwkernels import worker

    spec = MODELS.get(args.model)
    request = require(resolve(args.framework, args.model, device=args.device,
                              precision=args.precision, mode=args.mode,
                              batch=args.batch or (spec.batch_gpu if spec else None)))
    out: Dict[str, Any] = {}
    prepared = worker.prepare(request.worker_message(["train"]), out)
    if prepared is None:
        print(f"fwkernels loss-curve: {out['status']}: {out['error']}", file=sys.stderr)
        return EXIT_INVALID if out["status"] == "invalid" else EXIT_FAILED
    workload = worker.build(*prepared, out)
    config = prepared[1]
    print(f"# {request.framework} {request.model} batch {config.batch} "
          f"lr {config.learning_rate:g} {request.precision} on {request.device}")
    start = time.perf_counter()
    for step in range(1, args.steps + 1):
        workload.train_step()
        if step % args.every == 0 or step == 1:
            print(step, f"{workload.loss():.4f}", f"{time.perf_counter() - start:.0f}", flush=True)
    return 0


def cmd_report(args: argparse.Namespace) -> int:
    from fwkernels import site

    check_output_path(args.markdown, "--markdown")
    runs = load_runs(args.results, args.records)
    if not runs:
        raise ResultsError(f"no asv results under {args.results!r}: run the main job "
                           f"(scripts/bench) first")
    wanted = [args.machine] if args.machine else machines(runs)
    html_dir = None if args.no_html else (args.html_dir or site.default_html_dir())
    links = bool(html_dir) and site.is_asv_site(html_dir)
    spreads = noise.load(args.noise)
    reports = [build_report(runs, m, args.commit, links, noise.run_to_run([m], spreads))
               for m in wanted]
    render = render_report_markdown if args.format == "markdown" else render_report_text
    print("\n".join(render(r) for r in reports))
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write("\n".join(render_report_markdown(r) for r in reports))
        print(f"Markdown: {args.markdown}")
    if html_dir:
        try:
            from fwkernels.report import html
        except ImportError as error:
            print(f"fwkernels report: error: the HTML report needs matplotlib and jinja2 "
                  f"(pip install 'fwkernels[report]'): {error}", file=sys.stderr)
            return EXIT_FAILED
        # Every machine gets its page (its latest commit, or --commit for --machine).
        by_machine = {m: build_report(runs, m, asv_links=links,
                                      run_to_run=noise.run_to_run([m], spreads))
                      for m in machines(runs) if m not in wanted}
        by_machine.update({r.machine: r for r in reports})
        pages = html.write_site(list(by_machine.values()), html_dir)
        print(f"HTML: {pages[0]} ({len(pages)} pages; see docs/reports.md to view offline)")
    return 0


def cmd_compare(args: argparse.Namespace) -> int:
    if not math.isfinite(args.factor) or args.factor < 1:
        raise InvalidRequest(f"--factor must be a finite number >= 1 (1.1: fail on more than "
                             f"10% worse), got {args.factor}")
    runs = load_runs(args.results, args.records)
    a = compare.resolve(args.a, runs, args.machine, args.commit)
    b = compare.resolve(args.b, runs, args.machine, args.commit)
    units = benchmark_units(args.results)
    spread = noise.run_to_run({r.machine for r in a.runs + b.runs}, noise.load(args.noise))
    try:
        results = [c for c in compare.compare(a, b, units, spread)
                   if not args.benchmark or re.search(args.benchmark, c.key[0])]
    except re.error as error:
        raise ResultsError(f"--benchmark: {error}") from None
    if not any(c.a and c.b for c in results):
        raise ResultsError(f"A and B have no benchmark in common:\n  A {a.describe()}\n"
                           f"  B {b.describe()}")
    table = compare.comparison_table(a, b, results, args.factor, spread)
    print(render_markdown(table) if args.format == "markdown" else render_text(table))
    regressions = [c for c in results if c.verdict(args.factor) == "REGRESSION"]
    if regressions:
        print(f"{len(regressions)} regression(s) beyond factor {args.factor:g}: exit status "
              f"{EXIT_REGRESSION}")
        return EXIT_REGRESSION
    return 0


def cmd_history(args: argparse.Namespace) -> int:
    from fwkernels.report.history import history_table, releases_of

    framework, _, mode = args.framework.partition(":")
    get_framework_or_invalid(framework)
    check_output_path(args.markdown, "--markdown")
    runs = load_runs(args.results, args.records)
    if not releases_of(runs, args.machine, framework):
        raise ResultsError(f"no {framework} release measured on {args.machine!r}; machines with "
                           f"results: {', '.join(machines(runs)) or 'none'}")
    spread = noise.run_to_run([args.machine], noise.load(args.noise))
    tables = [history_table(runs, args.machine, framework, precision, mode, spread)
              for precision in args.precision.split(",")]
    text = "\n\n".join(render_markdown(t) for t in tables if not t.is_empty()) + "\n"
    print(text, end="")
    if args.markdown:
        with open(args.markdown, "w") as f:
            f.write(f"Generated by `fwkernels history {' '.join(sys.argv[2:])}`.\n\n{text}")
    return 0


def get_framework_or_invalid(name: str) -> None:
    from fwkernels.frameworks import get_framework

    try:
        get_framework(name)
    except ValueError as error:
        raise InvalidRequest(str(error)) from None


def cmd_widen_grids(args: argparse.Namespace) -> int:
    for name in widen_benchmark_grids(args.results):
        print(f"widened the parameter grid of {name}")
    return 0


# what names a different machine; the system (a kernel update) and the memory the kernel reports
# may change under one name
IDENTIFYING_MACHINE_FIELDS = ("arch", "cpu", "num_cpu")


def cmd_asv_machine(args: argparse.Namespace) -> int:
    # asv 0.6.6's `asv machine --yes --machine NAME` stores the name alone (given options too, it
    # keeps only those that differ from what it detects: airspeed-velocity/asv#944), so each
    # results/NAME/machine.json and the site would lose the processor, cores and memory
    try:
        from asv.machine import Machine, MachineCollection
    except ImportError:
        print("fwkernels asv-machine needs asv (requirements-tools.txt)", file=sys.stderr)
        return EXIT_INVALID
    info = dict(Machine.get_defaults(), machine=args.name)
    described = os.path.join(args.results, args.name, "machine.json")
    if os.path.exists(described):
        # asv graphs results of different machine parameters as different series: a machine
        # keeps the description its results were run under, less what names another machine
        recorded = {k: str(v) for k, v in load_json(described).items() if k in info}
        other = [k for k in IDENTIFYING_MACHINE_FIELDS if recorded.get(k, info[k]) != info[k]]
        if other:
            differences = ", ".join(f"{k} {recorded[k]!r}, here {info[k]!r}" for k in other)
            raise InvalidRequest(f"{described} describes another machine ({differences}): "
                                 "choose another name")
        for key, value in recorded.items():
            if value != info[key]:
                print(f"asv machine {args.name}: {key} kept as {described} has it, {value!r} "
                      f"(here {info[key]!r})")
        info.update(recorded)
    MachineCollection.save(args.name, info)
    print(f"asv machine {args.name}: " + ", ".join(f"{k} {v}" for k, v in info.items()
                                                   if k != "machine"))
    return 0


def cmd_check_variables(args: argparse.Namespace) -> int:
    from fwkernels.suite import check_variables

    modes, models, precisions = check_variables()
    print(f"asv suite: modes {','.join(modes)}; models {','.join(models)}; precisions "
          f"{','.join(precisions)}")
    return 0


def cmd_combination_time(args: argparse.Namespace) -> int:
    print(analysis.combination_time(measured_by(record.read_all(args.records), args.measured_by)))
    return 0


def cmd_framework_ratio(args: argparse.Namespace) -> int:
    print(analysis.framework_ratio(measured_by(record.read_all(args.records), args.measured_by),
                                   args.baseline, args.other))
    return 0


def cmd_internal_memory(args: argparse.Namespace) -> int:
    records = record.read(args.records, required=True)
    print(analysis.internal_memory(records, sweep.command_line()), end="")
    return 0


def cmd_noise(args: argparse.Namespace) -> int:
    print(analysis.noise(measured_by(record.read_all(args.records), args.measured_by)))
    return 0


def cmd_repeat(args: argparse.Namespace) -> int:
    if args.runs < 2:
        raise InvalidRequest(f"--runs must be 2 or more (a spread needs two runs), got {args.runs}")
    check_output_path(args.jsonl, "--jsonl")
    request = require(resolve(
        args.framework, args.model, device=args.device, precision=args.precision,
        mode=args.mode, batch=args.batch, windows=args.windows, steps=args.steps,
        window_seconds=args.window_seconds, warmup=args.warmup, threads=args.threads))
    results = [train_run(request, args.jsonl, f"run {number}/{args.runs}")
               for number in range(1, args.runs + 1)]
    print(f"{request.framework} [{request.mode}] {request.model} on {request.device}, "
          f"{request.precision}, batch {request.batch}, {request.threads} threads\n")
    print(analysis.repeat_table(results))
    return 0 if all(r.ok for r in results) else EXIT_FAILED


def train_run(request: Request, jsonl: Optional[str], label: str) -> record.Record:
    """The training phase in fresh processes once; its record appended to ``jsonl`` (when named)
    as soon as it ends, and its throughput or status printed after ``label`` on stderr."""
    result = run(request, phases=("train",))
    if jsonl:
        record.append(jsonl, result)
    status = f"{result.samples_per_s:.4g} samples/s" if result.ok else result.status
    print(f"{label}: {status}", file=sys.stderr, flush=True)
    return result


def _list(text: str) -> List[str]:
    return [v for v in text.split(",") if v]


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


NAME_PATTERN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]*")


def _results_name(text: str) -> str:
    """A machine's or environment's name, which asv and fwkernels use as a file or folder name
    under results/ and records/."""
    if not NAME_PATTERN.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"letters, digits, '.', '_' and '-', beginning with a letter or digit: got {text!r}")
    return text


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def _add_results_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--results", default="results", help="asv results directory (default: results)")
    p.add_argument("--records", help="fwkernels records directory (default: records beside "
                                     "--results)")


def _add_noise_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--noise", default=noise.DEFAULT_PATH, metavar="FILE",
                   help="each machine's measured run-to-run spread (default: noise.toml)")


def add_combination_arguments(p: argparse.ArgumentParser, optional: bool = False) -> None:
    """FRAMEWORK MODEL --device --precision --mode, as ``measure`` and the experiments take them;
    ``optional`` for a command that has a use without them."""
    nargs = "?" if optional else None
    p.add_argument("framework", nargs=nargs, help=f"one of: {', '.join(FRAMEWORKS)}")
    p.add_argument("model", nargs=nargs, help=f"one of: {', '.join(MODELS)}")
    p.add_argument("--device", default="cpu", help=f"one of: {', '.join(DEVICES)}")
    p.add_argument("--precision", default="fp32", help=f"one of: {', '.join(PRECISIONS)}")
    p.add_argument("--mode", help="execution mode (default: the framework's first)")


class Parser(argparse.ArgumentParser):
    """Bad input is one line naming what is wrong (exit 2); the usage is `-h`'s."""

    def error(self, message: str) -> None:  # type: ignore[override]
        self.exit(EXIT_INVALID, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = Parser(prog="fwkernels", description=__doc__,
                    formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = parser.add_subparsers(dest="command", required=True)
    verbatim = argparse.RawDescriptionHelpFormatter

    p = sub.add_parser("list", help="models and frameworks, with availability and versions")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("measure", help="run the measurement protocol for one combination")
    add_combination_arguments(p)
    p.add_argument("--batch", type=int, help="batch size (default: the model's for the device)")
    p.add_argument("--windows", type=_positive, help="timing windows K")
    p.add_argument("--steps", type=_positive, help="steps per window N (default: calibrated)")
    p.add_argument("--warmup", type=_non_negative, help="warm-up steps")
    p.add_argument("--threads", type=_positive, help="CPU threads (default: all usable cores)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_measure)

    p = sub.add_parser("sweep", help="measure many combinations; JSON lines + Markdown table",
                       description=sweep.__doc__, formatter_class=verbatim)
    p.add_argument("frameworks", type=_list, help="comma list of frameworks")
    p.add_argument("--models", type=_list, default=list(MODELS))
    p.add_argument("--precisions", type=_list, default=["fp32"])
    p.add_argument("--modes", type=_list, default=[], help="default: each framework's first")
    p.add_argument("--device", default="cpu", help=f"one of: {', '.join(DEVICES)}")
    p.add_argument("--windows", type=int, help="timing windows K")
    p.add_argument("--steps", type=int, help="steps per window N (default: calibrated)")
    p.add_argument("--window-seconds", type=float, help="target length of a timing window")
    p.add_argument("--threads", type=int, help="CPU threads (default: all usable cores)")
    p.add_argument("--jsonl", default="sweep.jsonl", help="records are appended here")
    p.add_argument("--markdown", help="write the table here too")
    p.set_defaults(func=cmd_sweep)

    p = sub.add_parser("render", help="the Markdown table of a JSON-lines file of records")
    p.add_argument("records", help="records file (from sweep, or records/<machine>/ of asv runs)")
    p.add_argument("--command", dest="caption",
                   help="the command that produced the records, for the caption")
    measured_by_option(p)
    p.set_defaults(func=cmd_render)

    p = sub.add_parser("loss-curve", help="a workload's training loss step by step (when does "
                       "a NaN come?)", description="Builds the workload as the suite does (the "
                       "same model, synthetic batch, SGD and learning rate, scaled to --batch), "
                       "runs --steps training steps on that one batch and prints 'step loss "
                       "seconds' every --every steps.")
    add_combination_arguments(p)
    p.add_argument("--batch", type=int, help="default: the model's GPU batch")
    p.add_argument("--steps", type=_positive, default=300)
    p.add_argument("--every", type=_positive, default=10)
    p.set_defaults(func=cmd_loss_curve)

    import fwkernels.report

    p = sub.add_parser("report", help="the papers' tables from asv results, terminal/Markdown/HTML",
                       description=fwkernels.report.__doc__, formatter_class=verbatim)
    _add_results_arguments(p)
    p.add_argument("--machine", type=_results_name,
                   help="asv machine name (default: every machine with results)")
    p.add_argument("--commit", help="commit hash prefix, or a comma list of them (default: "
                                    "each machine's latest)")
    p.add_argument("--format", choices=("terminal", "markdown"), default="terminal",
                   help="what to print (default: terminal)")
    p.add_argument("--markdown", metavar="FILE", help="also write the Markdown report to FILE")
    p.add_argument("--html-dir", help="site folder for the HTML pages (default: asv's html_dir)")
    p.add_argument("--no-html", action="store_true", help="print only, write no HTML")
    _add_noise_argument(p)
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("compare", help="two environments, machines or commits side by side",
                       description=compare.__doc__, formatter_class=verbatim)
    p.add_argument("a", metavar="A", help="baseline selector")
    p.add_argument("b", metavar="B", help="selector compared with A")
    p.add_argument("--factor", type=float, default=1.1,
                   help="exit 1 when B is worse than A by more than this factor (default 1.1)")
    _add_results_arguments(p)
    p.add_argument("--machine", type=_results_name,
                   help="machine, when a selector does not name one")
    p.add_argument("--commit", help="commit prefix, when a selector does not name one "
                                    "(default: each side's latest)")
    p.add_argument("--benchmark", help="regular expression on benchmark names "
                                       "(e.g. samples_per_s)")
    p.add_argument("--format", choices=("terminal", "markdown"), default="terminal")
    _add_noise_argument(p)
    p.set_defaults(func=cmd_compare)

    from fwkernels.report import history

    p = sub.add_parser("history", help="one framework's training throughput per release, each "
                       "against the one before (Markdown)", description=history.__doc__,
                       formatter_class=verbatim)
    p.add_argument("framework", help="framework[:mode], e.g. torch or torch:compile")
    p.add_argument("--machine", type=_results_name, required=True, help="asv machine name")
    p.add_argument("--precision", default="fp32", help="comma list (default: fp32)")
    p.add_argument("--markdown", metavar="FILE", help="also write the page to FILE")
    _add_results_arguments(p)
    _add_noise_argument(p)
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("widen-grids", help="make results/benchmarks.json's parameter grids "
                       "cover every stored result (run before `asv publish`)")
    p.add_argument("results", nargs="?", default="results", help="asv results directory")
    p.set_defaults(func=cmd_widen_grids)

    p = sub.add_parser("asv-machine", help="describe this machine to asv under NAME, with the "
                       "system, processor, cores and memory asv detects (for `asv run --machine`)")
    p.add_argument("name", type=_results_name, help="asv machine name, e.g. amd-epyc-2core")
    p.add_argument("--results", default="results", help="asv results directory: a machine "
                   "described there keeps that description (its system and memory), and a "
                   "different processor or core count under its name is refused")
    p.set_defaults(func=cmd_asv_machine)

    p = sub.add_parser("check-variables", help="check the asv suite's variables (FWKERNELS_DEVICE, "
                       "_MODELS, _PRECISIONS, _MODES, _SELECT, _WINDOWS, _WINDOW_SECONDS, _WARMUP, "
                       "_CPU_ALLOCATOR) before a run installs anything, and print its parameters")
    p.set_defaults(func=cmd_check_variables)

    p = sub.add_parser("combination-time", help="where each framework's measurement time went "
                       "(import, build, warm-up, FLOPs, windows), from records files",
                       description=analysis.combination_time.__doc__)
    p.add_argument("records", nargs="+", help="JSON-lines records files")
    measured_by_option(p)
    p.set_defaults(func=cmd_combination_time)

    p = sub.add_parser("framework-ratio", help="OTHER's training throughput / BASELINE's per "
                       "model and precision, from records files",
                       description=analysis.framework_ratio.__doc__ + " The newest record of a "
                       "combination counts; a name alone is the framework's default mode.")
    p.add_argument("baseline", help="framework[:mode], e.g. torch or torch:compile")
    p.add_argument("other", help="framework[:mode], e.g. keras-torch")
    p.add_argument("records", nargs="+", help="JSON-lines records files")
    measured_by_option(p)
    p.set_defaults(func=cmd_framework_ratio)

    p = sub.add_parser("internal-memory", help="MXNet's internal-memory figures of a records "
                       "file as a Markdown table", description=analysis.internal_memory.__doc__)
    p.add_argument("records", help="a JSON-lines records file (an MXNet sweep)")
    p.set_defaults(func=cmd_internal_memory)

    p = sub.add_parser("noise", help="run-to-run spread of each figure, from records files "
                       "(the regression thresholds of asv.conf.json)",
                       description=analysis.noise.__doc__)
    p.add_argument("records", nargs="+", help="JSON-lines records files")
    measured_by_option(p)
    p.set_defaults(func=cmd_noise)

    p = sub.add_parser("repeat", help="one combination's training throughput in N fresh "
                       "processes: the spread between runs beside the spread within one",
                       description=analysis.repeat_table.__doc__)
    add_combination_arguments(p)
    p.add_argument("--runs", type=int, default=5, help="fresh processes (default 5)")
    p.add_argument("--batch", type=int, help="batch size (default: the model's for the device)")
    p.add_argument("--windows", type=int, help="timing windows K")
    p.add_argument("--steps", type=int, help="steps per window N (default: calibrated)")
    p.add_argument("--window-seconds", type=float, help="target length of a timing window")
    p.add_argument("--warmup", type=int, help="warm-up steps")
    p.add_argument("--threads", type=int, help="CPU threads (default: all usable cores)")
    p.add_argument("--jsonl", help="append each run's record here (fwkernels noise reads it)")
    p.set_defaults(func=cmd_repeat)

    add_ledger_parser(sub)
    name_the_commands(parser)
    return parser


def name_the_commands(parser: argparse.ArgumentParser) -> None:
    """A missing command is named by its choices, not by its dest ("command")."""
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            action.metavar = "{" + ",".join(action.choices) + "}"
            for subparser in action.choices.values():
                name_the_commands(subparser)


def measured_by_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--measured-by", metavar="REGEX", help="only the records whose "
                   "'<fwkernels commit>/<asv environment>' matches, e.g. '^4bbc5eb6/.*cg-'")


def add_ledger_parser(sub: argparse._SubParsersAction) -> None:
    from fwkernels.ledger import build as ledger_build
    from fwkernels.ledger import commands as ledger
    from fwkernels.ledger import releases as ledger_releases

    parent = sub.add_parser("ledger", help="the release ledger: asv's history over framework "
                            "releases (docs/releases.md)")
    commands = parent.add_subparsers(dest="ledger_command", required=True)

    def common(p: argparse.ArgumentParser) -> None:
        p.add_argument("--releases", default=ledger_releases.DEFAULT_PATH,
                       help=f"releases file (default: {ledger_releases.DEFAULT_PATH})")
        p.add_argument("--ledger", default=ledger_build.DEFAULT_PATH,
                       help=f"ledger repository (default: {ledger_build.DEFAULT_PATH})")
        p.add_argument("--framework", action="append", default=[],
                       help="only this framework (repeatable; default: all in the file)")

    p = commands.add_parser("build", help="(re)build the ledger repository from the releases file")
    common(p)
    p.set_defaults(func=ledger.cmd_build)

    p = commands.add_parser("discover", help="add releases newer than the last tracked one "
                            "(dates from the registry, companions resolved by pip)")
    common(p)
    p.add_argument("--dry-run", action="store_true", help="print, do not write the file")
    p.set_defaults(func=ledger.cmd_discover)

    p = commands.add_parser("commits", help="ledger commit hashes of tracked releases, one per "
                            "line (for `asv run HASHFILE:...`)")
    common(p)
    p.add_argument("--last", type=int, default=0,
                   help="the last N releases of each framework (default: all)")
    p.add_argument("--exclude", action="append", default=[], metavar="FRAMEWORK",
                   help="leave this framework out (repeatable)")
    p.add_argument("--tags", action="store_true", help="print the release tags, not hashes")
    p.add_argument("--python", default=platform.python_version(),
                   help="only releases that install on this Python version, or `any` (default: "
                        "this interpreter's, and the releases that need another Python where the "
                        "install step finds one here; the others are named on stderr)")
    p.set_defaults(func=ledger.cmd_commits)

    p = commands.add_parser("fold", help="fold results into one file per machine, release and "
                            "environment (results before the ledger, runs in slices)",
                            description=ledger_fold_doc())
    common(p)
    p.add_argument("--results", default="results", help="asv results directory")
    p.add_argument("--records", default="records", help="records directory")
    p.add_argument("--machine", type=_results_name,
                   help="one machine (default: every machine under --results)")
    p.add_argument("--env", type=_results_name, required=True,
                   help="the environment name to fold into, e.g. existing-py3.12")
    p.set_defaults(func=ledger.cmd_fold)

    p = commands.add_parser("set-aside", help="before `asv run` of ledger commits: move the "
                            "results and records the run would replace to the environment "
                            "'earlier', which `ledger fold` takes back after the run, figure by "
                            "figure, the newer kept")
    p.add_argument("--results", default="results", help="asv results directory")
    p.add_argument("--records", default="records", help="records directory")
    p.add_argument("--machine", type=_results_name, required=True, help="the machine asv runs as")
    p.add_argument("--env", type=_results_name, required=True,
                   help="asv's environment of the run (`fwkernels ledger environment`)")
    p.add_argument("--commits", required=True, metavar="FILE",
                   help="the run's ledger commits, one per line (`fwkernels ledger commits`)")
    p.set_defaults(func=ledger.cmd_set_aside)

    p = commands.add_parser("environment", help="the name asv gives the environment of its "
                            "configuration on this machine (results/MACHINE/COMMIT-NAME.json)")
    p.add_argument("--config", default="asv.conf.json", help="asv's configuration file")
    p.set_defaults(func=ledger.cmd_environment)


def ledger_fold_doc() -> str:
    from fwkernels.ledger import fold

    return fold.__doc__ or ""


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except InvalidRequest as error:
        print(f"fwkernels: error: {error}", file=sys.stderr)
        return EXIT_INVALID
    except (ResultsError, record.RecordError) as error:  # a file that is not what it should be
        print(f"fwkernels {args.command}: error: {error}", file=sys.stderr)
        return EXIT_INVALID
    except LedgerError as error:  # bad input: 2; the package registry did not answer: 1
        print(f"fwkernels: error: {error}", file=sys.stderr)
        return EXIT_FAILED if isinstance(error, RegistryUnavailable) else EXIT_INVALID
    except BrokenPipeError:  # the reader of stdout left early (`| head`): no traceback
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
