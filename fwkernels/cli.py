"""The ``fwkernels`` command line: list, measure, report."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Dict, List, Optional

from fwkernels.frameworks import FRAMEWORKS, unavailable_reason
from fwkernels.frameworks.base import DEVICES, PRECISIONS
from fwkernels.models import MODELS
from fwkernels.runner import InvalidRequest, measure

EXIT_INVALID = 2
EXIT_FAILED = 1


def list_entries() -> Dict[str, List[Dict[str, Any]]]:
    frameworks = []
    for info in FRAMEWORKS.values():
        reason = unavailable_reason(info.name)
        frameworks.append({"name": info.name, "title": info.title, "modes": list(info.modes),
                           "available": reason is None, "reason": reason,
                           "package": info.package,
                           "version": None if reason else _installed_version(info.package)})
    models = [{"name": m.name, "title": m.title, "source": m.source, "task": m.task,
               "unit": m.unit, "params": m.params, "batch_gpu": m.batch_gpu,
               "batch_cpu": m.batch_cpu} for m in MODELS.values()]
    return {"models": models, "frameworks": frameworks}


def _installed_version(package: str) -> Optional[str]:
    """The installed distribution's version, read without importing the framework."""
    from importlib import metadata

    for dist in (package, {"paddle": "paddlepaddle"}.get(package, package), f"{package}-cpu"):
        try:
            return metadata.version(dist)
        except metadata.PackageNotFoundError:
            continue
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
    record = measure(args.framework, args.model, device=args.device, batch=args.batch,
                     precision=args.precision, mode=args.mode or "", windows=args.windows,
                     steps=args.steps, warmup=args.warmup, threads=args.threads)
    if args.json:
        print(json.dumps(record, default=str))
    else:
        print(format_record(record))
    return 0 if record["status"] == "ok" else EXIT_FAILED


def format_record(r: Dict[str, Any]) -> str:
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
    if r.get("achieved_tflops"):
        lines.append(f"  model FLOPs       {r['flops_per_sample'] / 1e9:.3g} GFLOP/sample "
                     f"(train), achieved {r['achieved_tflops']:.3g} TFLOP/s")
    return "\n".join(lines)


def cmd_widen_grids(args: argparse.Namespace) -> int:
    from fwkernels.results import widen_benchmark_grids

    for name in widen_benchmark_grids(args.results):
        print(f"widened the parameter grid of {name}")
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="fwkernels", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("list", help="models and frameworks, with availability and versions")
    p.add_argument("--json", action="store_true")
    p.set_defaults(func=cmd_list)

    p = sub.add_parser("measure", help="run the measurement protocol for one combination")
    p.add_argument("framework", help=f"one of: {', '.join(FRAMEWORKS)}")
    p.add_argument("model", help=f"one of: {', '.join(MODELS)}")
    p.add_argument("--device", default="cpu", help=f"one of: {', '.join(DEVICES)}")
    p.add_argument("--batch", type=int, help="batch size (default: the model's for the device)")
    p.add_argument("--precision", default="fp32", help=f"one of: {', '.join(PRECISIONS)}")
    p.add_argument("--mode", help="execution mode (default: the framework's first)")
    p.add_argument("--windows", type=_positive, help="timing windows K")
    p.add_argument("--steps", type=_positive, help="steps per window N (default: calibrated)")
    p.add_argument("--warmup", type=_non_negative, help="warm-up steps")
    p.add_argument("--threads", type=_positive, help="CPU threads (default: all usable cores)")
    p.add_argument("--json", action="store_true", help="print one JSON object")
    p.set_defaults(func=cmd_measure)

    p = sub.add_parser("widen-grids", help="make results/benchmarks.json's parameter grids "
                       "cover every stored result (run before `asv publish`)")
    p.add_argument("results", nargs="?", default="results", help="asv results directory")
    p.set_defaults(func=cmd_widen_grids)

    from fwkernels import report, sweep

    sweep.add_parser(sub)
    report.add_parser(sub)
    return parser


def _positive(text: str) -> int:
    value = int(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {value}")
    return value


def _non_negative(text: str) -> int:
    value = int(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {value}")
    return value


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return args.func(args)
    except InvalidRequest as error:
        print(f"fwkernels: error: {error}", file=sys.stderr)
        return EXIT_INVALID


if __name__ == "__main__":
    sys.exit(main())
