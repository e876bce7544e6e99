"""The benchmark jobs of the GitHub workflows (docs/ci.md), runnable anywhere, CPU included.

    bench.sh measure --machine M --work DIR [--previous DIR]       # nightly, on the GPU runner
    bench.sh check --work DIR [--factor F]                         # nightly regression check
    bench.sh store --work DIR --branch-dir DIR --machine M         # nightly results -> branch
    bench.sh pull-request --base SHA --head SHA --machine M --work DIR [--factor F]

Suite options: --config (asv configuration, default asv.gpu.conf.json), --python PY (run with
`asv run -E existing:PY`, frameworks preinstalled in PY, instead of building the configuration's
environments), --env-dir (where asv builds environments), --branch (what `asv publish` graphs).
Defaults from the environment: --machine $ASV_MACHINE, --python $BENCH_PYTHON, --factor
$REGRESSION_FACTOR.  The suite's profile comes from the FWKERNELS_* variables
(benchmarks/training.py), e.g. FWKERNELS_DEVICE=cuda.  Regressions are judged by
`fwkernels compare` (direction per unit, flagged beyond the measured spread and the factor).

A work directory has the layout of the results branch:
    asv.conf.json            generated: the chosen configuration, results kept here
    results/<machine>/       asv results, earlier nights included (what `asv publish` graphs)
    records/<machine>/       fwkernels' full records of every measurement
    latest/<machine>/        the result files of this run only
    previous/<machine>/      the result files of the previous night (measure --previous)
    html/                    the site: asv publish, then fwkernels report
    asv-run-status           asv run's exit status (non-zero: some benchmark failed)
"""
from __future__ import annotations

import argparse
import base64
import hashlib
import json
import os
import shutil
import subprocess
import sys
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


# ---------------------------------------------------------------- helpers

def run(command: List[str], check: bool = True, **kwargs) -> int:
    print("+", " ".join(command), flush=True)
    status = subprocess.run(command, **kwargs).returncode
    if check and status != 0:
        sys.exit(f"{command[0]} exited with status {status}")
    return status


def git(*args: str, cwd: str = ROOT) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def summary(text: str) -> None:
    """Print, and add to the GitHub job summary when there is one."""
    print(text, flush=True)
    path = os.environ.get("GITHUB_STEP_SUMMARY")
    if path:
        with open(path, "a") as f:
            f.write(text + "\n")


def copy_tree(source: str, target: str) -> None:
    if os.path.isdir(source):
        shutil.copytree(source, target, dirs_exist_ok=True)


def fingerprints(directory: str) -> Dict[str, str]:
    """File name -> content hash of the asv result files in one machine's directory."""
    if not os.path.isdir(directory):
        return {}
    out = {}
    for name in sorted(os.listdir(directory)):
        if name.endswith(".json") and name != "machine.json":
            with open(os.path.join(directory, name), "rb") as f:
                out[name] = hashlib.sha256(f.read()).hexdigest()
    return out


# ---------------------------------------------------------------- asv

def write_config(source: str, work: str, env_dir: Optional[str], branch: str) -> str:
    """work/asv.conf.json: `source` with results and site in `work`, repository and suite here."""
    from asv.util import load_json  # the tools venv's asv reads the comments of asv.conf.json

    path = os.path.join(ROOT, source)
    if not os.path.exists(path):
        choices = sorted(n for n in os.listdir(ROOT) if n.startswith("asv.") and n.endswith(".json"))
        sys.exit(f"no asv configuration {source!r} here; choose one of: {', '.join(choices)}")
    conf = load_json(path, js_comments=True)
    conf.update(repo=ROOT, branches=[branch], results_dir="results", html_dir="html",
                benchmark_dir=os.path.join(ROOT, conf["benchmark_dir"]),
                env_dir=os.path.abspath(env_dir or os.path.join(ROOT, conf["env_dir"])))
    os.makedirs(work, exist_ok=True)
    config = os.path.join(work, "asv.conf.json")
    with open(config, "w") as f:
        json.dump(conf, f, indent=4)
    return config


def asv(config: str, *args: str, check: bool = True, env: Optional[Dict[str, str]] = None) -> int:
    return run([sys.executable, "-m", "asv", "--config", config, *args], check=check,
               env={**os.environ, **(env or {})})


def existing_environment(python: str, commit: str) -> Dict[str, str]:
    """What the suite needs in an `-E existing` environment, to which asv passes our environment
    but not its ASV_COMMIT and ASV_ENV_NAME: the commit and asv's name of the environment (they
    name the records file beside asv's result file, fwkernels/suite.py), and fwkernels from this
    checkout first on the path (asv's benchmark process honours ASV_PYTHONPATH; the measurement
    workers it starts, PYTHONPATH)."""
    from asv.environment import get_env_name

    executable = os.path.abspath(shutil.which(python) or python)
    name = get_env_name("existing", executable.replace(os.path.sep, "_"), {}, {})
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    return {"FWKERNELS_COMMIT": commit, "FWKERNELS_ENV_NAME": name,
            "ASV_PYTHONPATH": path, "PYTHONPATH": path}


def measure_commit(args: argparse.Namespace, work: str, commit: str) -> int:
    """Run the suite for one commit into work/results; the files it wrote go to work/latest.

    Returns asv run's exit status: non-zero when a benchmark failed (recorded, kept)."""
    config = write_config(args.config, work, args.env_dir, args.branch)
    machine_dir = os.path.join(work, "results", args.machine)
    before = fingerprints(machine_dir)
    asv(config, "machine", "--yes", "--machine", args.machine)
    options = ["--machine", args.machine, "--record-samples", "--show-stderr"]
    env = {"FWKERNELS_MACHINE": args.machine, "FWKERNELS_RECORDS_DIR": os.path.join(work, "records")}
    if args.python:
        options += ["-E", f"existing:{args.python}", "--set-commit-hash", commit]
        env.update(existing_environment(args.python, commit))
    else:
        options.append(f"{commit}^!")
    status = asv(config, "run", *options, check=False, env=env)
    after = fingerprints(machine_dir)
    written = [name for name in after if before.get(name) != after[name]]
    latest = os.path.join(work, "latest", args.machine)
    shutil.rmtree(latest, ignore_errors=True)
    os.makedirs(latest)
    for name in written:
        shutil.copy2(os.path.join(machine_dir, name), latest)
    with open(os.path.join(work, "asv-run-status"), "w") as f:
        f.write(f"{status}\n")
    if not written:
        sys.exit(f"asv run (status {status}) wrote no results for machine {args.machine!r}")
    return status


def publish(work: str, machine: str) -> None:
    """asv publish, then fwkernels report: terminal table to the job summary, pages to the site."""
    # earlier nights' parameter grids stay published
    subprocess.run(["fwkernels", "widen-grids", os.path.join(work, "results")], check=True)
    asv(os.path.join(work, "asv.conf.json"), "publish")
    report = subprocess.run(["fwkernels", "report", "--results", os.path.join(work, "results"),
                             "--machine", machine, "--html-dir", os.path.join(work, "html")],
                            capture_output=True, text=True)
    print(report.stderr, file=sys.stderr, end="")
    table = (report.stdout or report.stderr).rstrip()
    summary(f"### fwkernels report, machine {machine}\n\n```text\n{table}\n```\n")
    if report.returncode != 0:
        sys.exit(f"fwkernels report exited with status {report.returncode}")


def commit_of(directory: str) -> Optional[str]:
    """The commit of the asv result files in a directory (None: no results there)."""
    commits = set()
    for name in fingerprints(directory):
        with open(os.path.join(directory, name)) as f:
            commits.add(json.load(f)["commit_hash"])  # json reads asv's bare NaN too
    if len(commits) > 1:
        sys.exit(f"{directory} holds results of several commits: {', '.join(sorted(commits))}")
    return commits.pop() if commits else None


def compare(work: str, machine: str, a: str, b: str, factor: Optional[str]) -> int:
    """fwkernels compare of commits a and b (work/results): its table to the job summary, and
    the regressions beyond `factor` named in an error annotation."""
    result = subprocess.run(
        ["fwkernels", "compare", a, b, "--results", os.path.join(work, "results"),
         "--machine", machine, "--format", "markdown", *(["--factor", factor] if factor else [])],
        capture_output=True, text=True)
    print(result.stderr, file=sys.stderr, end="")
    summary(f"### fwkernels compare {a[:8]} {b[:8]} (machine {machine})\n\n"
            f"{result.stdout or result.stderr}\n")
    if result.returncode != 0:
        flagged = [line for line in result.stdout.splitlines() if "REGRESSION" in line]
        text = "\n".join(flagged) or result.stderr.strip() or result.stdout.strip()
        print(f"::error title=Regressions, fwkernels compare {a[:8]} {b[:8]}::"
              + text.replace("%", "%25").replace("\n", "%0A"))
    return result.returncode


# ---------------------------------------------------------------- steps

def cmd_measure(args: argparse.Namespace) -> int:
    """Nightly: earlier nights restored, the suite run for HEAD, the site published."""
    work = os.path.abspath(args.work)
    if args.previous:
        for sub in ("results", "records"):
            copy_tree(os.path.join(args.previous, sub), os.path.join(work, sub))
        copy_tree(os.path.join(args.previous, "latest", args.machine),
                  os.path.join(work, "previous", args.machine))
    status = measure_commit(args, work, git("rev-parse", "HEAD"))
    publish(work, args.machine)
    if status != 0:
        print(f"::warning title=asv run::asv run exited with status {status}: some benchmarks "
              "failed (the report names them, records/ has the reasons); the check job fails on it")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Nightly: fail on a regression against the previous night, or on failed benchmarks."""
    work = os.path.abspath(args.work)
    machines = os.listdir(os.path.join(work, "latest"))
    if len(machines) != 1:
        sys.exit(f"{work}/latest should hold one machine's results, not {machines}")
    machine = machines[0]
    previous = commit_of(os.path.join(work, "previous", machine))
    tonight = commit_of(os.path.join(work, "latest", machine))
    if previous is None:
        summary("No previous night on the results branch: nothing to compare against yet.\n")
        status = 0
    elif previous == tonight:
        summary(f"main has not moved since the previous night ({tonight[:8]}): tonight's figures "
                "replace that commit's, and there is no other commit to compare against.\n")
        status = 0
    else:
        status = compare(work, machine, previous, tonight, args.factor)
    with open(os.path.join(work, "asv-run-status")) as f:
        asv_status = int(f.read())
    if asv_status != 0:
        summary(f"asv run exited with status {asv_status}: the failed benchmarks are named in the "
                "measure job's report and their reasons are in records/.\n")
    return status or asv_status


def cmd_store(args: argparse.Namespace) -> int:
    """Nightly: this run's results, records and latest/ committed and pushed to the branch."""
    work, branch_dir = os.path.abspath(args.work), os.path.abspath(args.branch_dir)
    for sub in ("results", "records"):
        copy_tree(os.path.join(work, sub), os.path.join(branch_dir, sub))
    latest = os.path.join(branch_dir, "latest", args.machine)
    shutil.rmtree(latest, ignore_errors=True)
    copy_tree(os.path.join(work, "latest", args.machine), latest)
    git("add", "--all", "results", "records", "latest", cwd=branch_dir)
    if not git("status", "--porcelain", cwd=branch_dir):
        print("nothing new to store")
        return 0
    commit = commit_of(latest) or "unknown"
    message = f"Nightly results of {args.machine} at {commit[:8]}"
    git("-c", "user.name=fwkernels nightly", "-c", "user.email=nightly@fwkernels.invalid",
        "commit", "--quiet", "-m", message, cwd=branch_dir)
    env = dict(os.environ)
    token = env.pop("GITHUB_TOKEN", "")
    if token:  # as actions/checkout does it, in the environment, never on a command line
        header = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        print(f"::add-mask::{header}")
        env.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="http.https://github.com/.extraheader",
                   GIT_CONFIG_VALUE_0=f"AUTHORIZATION: basic {header}")
    branch = git("rev-parse", "--abbrev-ref", "HEAD", cwd=branch_dir)
    return run(["git", "push", "--quiet", "origin", f"HEAD:refs/heads/{branch}"],
               cwd=branch_dir, env=env)


def cmd_pull_request(args: argparse.Namespace) -> int:
    """The suite at the base and at the head of a pull request, then compared."""
    if git("status", "--porcelain", "--untracked-files=no"):
        sys.exit("the checkout has local changes: pull-request checks out the base and the head")
    work = os.path.abspath(args.work)
    original = git("rev-parse", "HEAD")
    base, head = git("rev-parse", args.base), git("rev-parse", args.head)
    if base == head:
        sys.exit(f"base and head are the same commit {base[:8]}: nothing to compare")
    try:
        for commit in (base, head):
            git("checkout", "--quiet", "--detach", commit)
            asv_status = measure_commit(args, work, commit)
    finally:
        git("checkout", "--quiet", "--detach", original)
    status = compare(work, args.machine, base, head, args.factor)
    if asv_status != 0:
        summary(f"asv run at the head exited with status {asv_status}: some benchmarks failed "
                "(their reasons are in the records of the work directory).\n")
    return status or asv_status


# ---------------------------------------------------------------- command line

def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="step", required=True)

    def machine_option(p: argparse.ArgumentParser) -> None:
        machine = os.environ.get("ASV_MACHINE")
        p.add_argument("--machine", default=machine, required=not machine,
                       help="asv machine name, results/<machine>/ (default: $ASV_MACHINE)")

    def suite_options(p: argparse.ArgumentParser) -> None:
        machine_option(p)
        p.add_argument("--work", required=True, help="work directory (layout: see the docstring)")
        p.add_argument("--config", default="asv.gpu.conf.json", help="asv configuration")
        p.add_argument("--python", default=os.environ.get("BENCH_PYTHON") or None,
                       help="run with asv -E existing:PYTHON, frameworks preinstalled there "
                            "(default: $BENCH_PYTHON; unset: the configuration's environments)")
        p.add_argument("--env-dir", help="where asv builds environments (default: the config's)")
        p.add_argument("--branch", default="main", help="branch that asv publish graphs")

    def factor_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--factor", default=os.environ.get("REGRESSION_FACTOR") or None,
                       help="fail on a regression beyond this factor (default: $REGRESSION_FACTOR, "
                            "else fwkernels compare's default)")

    p = sub.add_parser("measure", help=cmd_measure.__doc__)
    suite_options(p)
    p.add_argument("--previous", help="checkout of the results branch (earlier nights)")
    p.set_defaults(func=cmd_measure)

    p = sub.add_parser("check", help=cmd_check.__doc__)
    p.add_argument("--work", required=True, help="the work directory of measure")
    factor_option(p)
    p.set_defaults(func=cmd_check)

    p = sub.add_parser("store", help=cmd_store.__doc__)
    p.add_argument("--work", required=True)
    p.add_argument("--branch-dir", required=True, help="checkout of the results branch")
    machine_option(p)
    p.set_defaults(func=cmd_store)

    p = sub.add_parser("pull-request", help=cmd_pull_request.__doc__)
    suite_options(p)
    p.add_argument("--base", required=True, help="base commit")
    p.add_argument("--head", required=True, help="head commit")
    factor_option(p)
    p.set_defaults(func=cmd_pull_request)
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
