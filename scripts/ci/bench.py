"""The benchmark jobs of the GitHub workflows (docs/ci.md), runnable anywhere, CPU included.

    bench.sh discover --work DIR                                  # nightly: new releases
    bench.sh propose --work DIR                                   # nightly: ... as a pull request
    bench.sh measure --machine M --work DIR [--previous DIR]       # nightly, on the GPU runner
    bench.sh check --work DIR [--factor F]                         # nightly regression check
    bench.sh store --work DIR --branch-dir DIR --machine M         # nightly results -> branch
    bench.sh pull-request [--base SHA] --head SHA [--head-from DIR] --machine M --work DIR
                          [--factor F]

asv's commits are framework releases (the release ledger, docs/releases.md). `measure` runs the
releases of the work directory's releases.toml (the discovered one, else the repository's) that
have no results on the machine yet, and the newest release of each framework again; `check`
compares each release measured with the release before it of the same framework and fails
naming the release that regressed.

Suite options: --config (asv configuration, default asv.conf.json), --python PY with --release
TAG... (run with `asv run -E existing:PY`, those releases preinstalled in PY, instead of
installing each release), --env-dir (where asv builds environments), --framework NAME (only
these frameworks' releases). Defaults from the environment: --machine $ASV_MACHINE, --python
$BENCH_PYTHON, --release $BENCH_RELEASES (space-separated), --factor $REGRESSION_FACTOR. The
suite's profile comes from the FWKERNELS_* variables (benchmarks/training.py), e.g.
FWKERNELS_DEVICE=cuda. Regressions are judged by `fwkernels compare` (direction per unit,
flagged beyond the measured spread and the factor).

A work directory has the layout of the results branch:
    releases.toml            the releases measured (discover writes it; measure copies it)
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
import glob
import hashlib
import json
import math
import os
import re
import shutil
import subprocess
import sys
from typing import Dict, List, Optional

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LEDGER = os.path.join(ROOT, ".asv", "ledger")


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

def write_config(source: str, work: str, env_dir: Optional[str],
                 branches: Optional[List[str]] = None, name: str = "asv.conf.json") -> str:
    """work/<name>: `source` with results and site in `work`, the ledger and suite here
    (`branches` replacing the configuration's)."""
    from asv.util import load_json  # the tools venv's asv reads the comments of asv.conf.json

    path = os.path.join(ROOT, source)
    if not os.path.exists(path):
        choices = sorted(n for n in os.listdir(ROOT) if n.startswith("asv.") and n.endswith(".json"))
        sys.exit(f"no asv configuration {source!r} here; choose one of: {', '.join(choices)}")
    conf = load_json(path, js_comments=True)
    conf.update(repo=LEDGER, results_dir="results", html_dir="html",
                benchmark_dir=os.path.join(ROOT, conf["benchmark_dir"]),
                env_dir=os.path.abspath(env_dir or os.path.join(ROOT, conf["env_dir"])),
                install_command=[f"in-dir={ROOT} python -m fwkernels.ledger.install {{build_dir}}"])
    if branches:
        conf["branches"] = branches
    os.makedirs(work, exist_ok=True)
    config = os.path.join(work, name)
    with open(config, "w") as f:
        json.dump(conf, f, indent=4)
    return config


def asv(config: str, *args: str, check: bool = True, env: Optional[Dict[str, str]] = None) -> int:
    return run([sys.executable, "-m", "asv", "--config", config, *args], check=check,
               env={**os.environ, **(env or {})})


def fwkernels(*args: str, check: bool = True, **kwargs) -> subprocess.CompletedProcess:
    result = subprocess.run(["fwkernels", *args], text=True, capture_output=True, **kwargs)
    print(result.stderr, file=sys.stderr, end="")
    if check and result.returncode != 0:
        sys.exit(f"fwkernels {' '.join(args)} exited with status {result.returncode}")
    return result


def releases_file(work: str) -> str:
    """The work directory's releases.toml (discovered tonight), else a copy of the repository's."""
    path = os.path.join(work, "releases.toml")
    if not os.path.exists(path):
        os.makedirs(work, exist_ok=True)
        shutil.copy2(os.path.join(ROOT, "releases.toml"), path)
    return path


def build_ledger(work: str) -> Dict[str, str]:
    """The ledger of the work directory's releases; returns commit hash -> release tag."""
    fwkernels("ledger", "build", "--releases", releases_file(work), "--ledger", LEDGER)
    listed = fwkernels("ledger", "commits", "--releases", releases_file(work), "--ledger", LEDGER,
                       "--python", "any").stdout.split()  # every release, whatever its Python
    tags = fwkernels("ledger", "commits", "--tags", "--releases", releases_file(work),
                     "--ledger", LEDGER, "--python", "any").stdout.split()
    return dict(zip(listed, tags))


def measured_commits(directory: str) -> List[str]:
    """The commits of the asv result files in a directory."""
    commits = []
    for name in fingerprints(directory):
        with open(os.path.join(directory, name)) as f:
            commits.append(json.load(f)["commit_hash"])  # json reads asv's bare NaN too
    return sorted(set(commits))


def releases_to_measure(args: argparse.Namespace, work: str, tags: Dict[str, str],
                        new: bool = True) -> List[str]:
    """--release's, or each framework's newest release and (``new``) the releases without
    results on the machine."""
    if args.python:
        if not args.release:
            sys.exit("--python measures the releases installed there: name them with --release "
                     "(or BENCH_RELEASES)")
        unknown = [r for r in args.release if r not in tags.values()]
        if unknown:
            sys.exit(f"not releases of the ledger: {', '.join(unknown)}; releases: "
                     f"{', '.join(tags.values())}")
        return list(args.release)
    options = [x for name in args.framework for x in ("--framework", name)]
    installable = fwkernels("ledger", "commits", "--tags", "--releases", releases_file(work),
                            "--ledger", LEDGER, *options).stdout.split()
    newest = fwkernels("ledger", "commits", "--tags", "--last", "1", "--releases",
                       releases_file(work), "--ledger", LEDGER, *options).stdout.split()
    done = {tags.get(c) for c in measured_commits(os.path.join(work, "results", args.machine))}
    return [t for t in installable if (new and t not in done) or t in newest]


def existing_environment(python: str, commit: str, release: str) -> Dict[str, str]:
    """What the suite needs in an `-E existing` environment, to which asv passes our environment
    but not its ASV_COMMIT and ASV_ENV_NAME: the release, its commit and asv's name of the
    environment (they name the records file beside asv's result file, fwkernels/suite.py), and
    fwkernels from this checkout first on the path (asv's benchmark process honours
    ASV_PYTHONPATH; the measurement workers it starts, PYTHONPATH)."""
    from asv.environment import get_env_name

    executable = os.path.abspath(shutil.which(python) or python)
    name = get_env_name("existing", executable.replace(os.path.sep, "_"), {}, {})
    path = os.pathsep.join(p for p in (ROOT, os.environ.get("PYTHONPATH")) if p)
    return {"FWKERNELS_RELEASE": release, "FWKERNELS_COMMIT": commit, "FWKERNELS_ENV_NAME": name,
            "ASV_PYTHONPATH": path, "PYTHONPATH": path}


def measure_releases(args: argparse.Namespace, work: str, releases: List[str]) -> int:
    """Run the suite for releases into work/results; the files it wrote go to work/latest.

    Returns asv run's exit status: non-zero when a benchmark failed (recorded, kept)."""
    config = write_config(args.config, work, args.env_dir)
    commits = {tag: commit for commit, tag in build_ledger(work).items()}
    machine_dir = os.path.join(work, "results", args.machine)
    before = fingerprints(machine_dir)
    asv(config, "machine", "--yes", "--machine", args.machine)
    options = ["--machine", args.machine, "--record-samples", "--show-stderr"]
    env = {"FWKERNELS_MACHINE": args.machine, "FWKERNELS_RECORDS_DIR": os.path.join(work, "records")}
    status = 0
    if args.python:
        for release in releases:
            commit = commits[release]
            # asv takes no range with an existing environment and runs once per configured
            # branch's head: one branch, so the release is measured once
            framework = release.rpartition("-")[0]
            single = write_config(args.config, work, args.env_dir, [framework],
                                  f"asv.{framework}.conf.json")
            status = asv(single, "run", *options, "-E", f"existing:{args.python}",
                         "--set-commit-hash", commit, check=False,
                         env={**env, **existing_environment(args.python, commit, release)}) or status
        version = subprocess.run([args.python, "-c", "import sys; print('%d.%d' % "
                                  "sys.version_info[:2])"], capture_output=True, text=True)
        fold(work, args.machine, f"existing-py{version.stdout.strip()}")
    elif releases:
        hashes = os.path.join(work, "ledger-commits")
        with open(hashes, "w") as f:
            f.write("".join(commits[r] + "\n" for r in releases))
        # asv replaces a release's result whole: what this run leaves out (models, precisions)
        # is set aside and folded back after it (docs/releases.md)
        env_name = fwkernels("ledger", "environment", "--config", config).stdout.strip()
        fold(work, args.machine, env_name)
        fwkernels("ledger", "set-aside", "--results", os.path.join(work, "results"), "--records",
                  os.path.join(work, "records"), "--machine", args.machine, "--env", env_name,
                  "--commits", hashes)
        status = asv(config, "run", *options, f"HASHFILE:{hashes}", check=False, env=env)
        fold(work, args.machine, env_name)
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


def fold(work: str, machine: str, env_name: str) -> None:
    fwkernels("ledger", "fold", "--results", os.path.join(work, "results"), "--records",
              os.path.join(work, "records"), "--machine", machine, "--env", env_name,
              "--releases", releases_file(work), "--ledger", LEDGER)


def publish(work: str, machine: str) -> None:
    """asv publish, then fwkernels report: terminal table to the job summary, pages to the site."""
    # earlier nights' parameter grids stay published
    fwkernels("widen-grids", os.path.join(work, "results"))
    asv(os.path.join(work, "asv.conf.json"), "publish")
    report = fwkernels("report", "--results", os.path.join(work, "results"), "--machine", machine,
                       "--html-dir", os.path.join(work, "html"), check=False)
    table = (report.stdout or report.stderr).rstrip()
    summary(f"### fwkernels report, machine {machine}\n\n```text\n{table}\n```\n")
    if report.returncode != 0:
        sys.exit(f"fwkernels report exited with status {report.returncode}")


def compare(work: str, machine: str, a: str, b: str, factor: Optional[str],
            title: str) -> int:
    """fwkernels compare of two selectors (work/results): its table to the job summary, and
    the regressions beyond `factor` named in an error annotation titled `title`."""
    result = fwkernels("compare", a, b, "--results", os.path.join(work, "results"), "--machine",
                       machine, "--format", "markdown", *(["--factor", factor] if factor else []),
                       check=False)
    summary(f"### fwkernels compare {a} {b} (machine {machine})\n\n"
            f"{result.stdout or result.stderr}\n")
    if result.returncode != 0:
        flagged = [line for line in result.stdout.splitlines() if "REGRESSION" in line]
        text = "\n".join(flagged) or result.stderr.strip() or result.stdout.strip()
        print(f"::error title={title}::" + text.replace("%", "%25").replace("\n", "%0A"))
    return result.returncode


# ---------------------------------------------------------------- steps

def cmd_discover(args: argparse.Namespace) -> int:
    """Nightly: releases newer than the tracked ones, into work/releases.toml (the registry out
    of reach: said, nothing changed, the night goes on with the tracked releases)."""
    work = os.path.abspath(args.work)
    path = releases_file(work)
    result = fwkernels("ledger", "discover", "--releases", path, check=False)
    summary(f"### New framework releases\n\n```text\n{result.stdout}{result.stderr}```\n")
    if result.returncode != 0:
        print(f"::warning title=Release discovery::{result.stderr.strip() or result.stdout}")
    return 0


def cmd_propose(args: argparse.Namespace) -> int:
    """Nightly: the discovered releases (work/releases.toml) as a pull request to the default
    branch, on the branch `releases/discovered` (force-pushed: one open proposal at a time)."""
    work = os.path.abspath(args.work)
    proposed = os.path.join(work, "releases.toml")
    current = os.path.join(ROOT, "releases.toml")
    with open(proposed) as f, open(current) as g:
        if f.read() == g.read():
            print("no new release: nothing to propose")
            return 0
    shutil.copy2(proposed, current)
    branch = "releases/discovered"
    git("checkout", "--quiet", "-B", branch)
    git("add", "releases.toml")
    git("-c", "user.name=fwkernels nightly", "-c", "user.email=nightly@fwkernels.invalid",
        "commit", "--quiet", "-m", "releases.toml: new framework releases found by the nightly")
    status = run(["git", "push", "--quiet", "--force", "origin", f"HEAD:refs/heads/{branch}"],
                 cwd=ROOT, env=token_environment(), check=False)
    if status != 0:
        return status
    body = ("The nightly's `fwkernels ledger discover` found these releases; the night measured "
            "them already (the site and the results branch have them). Merge to track them.")
    return run(["gh", "pr", "create", "--base", args.base, "--head", branch, "--title",
                "New framework releases", "--body", body], cwd=ROOT, check=False,
               env=token_environment(gh=True))


def cmd_measure(args: argparse.Namespace) -> int:
    """Nightly: earlier nights restored, new releases and each framework's newest measured,
    the site published."""
    work = os.path.abspath(args.work)
    if args.previous:
        for sub in ("results", "records"):
            copy_tree(os.path.join(args.previous, sub), os.path.join(work, sub))
        copy_tree(os.path.join(args.previous, "latest", args.machine),
                  os.path.join(work, "previous", args.machine))
    tags = build_ledger(work)
    releases = releases_to_measure(args, work, tags)
    summary(f"Releases measured tonight on {args.machine}: {', '.join(releases)}\n")
    status = measure_releases(args, work, releases)
    publish(work, args.machine)
    if status != 0:
        print(f"::warning title=asv run::asv run exited with status {status}: some benchmarks "
              "failed (the report names them, records/ has the reasons); the check job fails on it")
    return 0


def cmd_check(args: argparse.Namespace) -> int:
    """Nightly: each release measured tonight against the release before it of the same
    framework (fail naming a release that regressed), and fail on failed benchmarks."""
    work = os.path.abspath(args.work)
    machines = os.listdir(os.path.join(work, "latest"))
    if len(machines) != 1:
        sys.exit(f"{work}/latest should hold one machine's results, not {machines}")
    machine = machines[0]
    tags = build_ledger(work)
    order = fwkernels("ledger", "commits", "--tags", "--releases", releases_file(work),
                      "--ledger", LEDGER, "--python", "any").stdout.split()
    measured = {tags[c] for c in measured_commits(os.path.join(work, "results", machine))
                if c in tags}
    status = 0
    for release in sorted({tags[c] for c in measured_commits(os.path.join(work, "latest", machine))
                           if c in tags}, key=order.index):
        framework = release.rpartition("-")[0]
        earlier = [t for t in order[:order.index(release)]
                   if t.rpartition("-")[0] == framework and t in measured]
        if not earlier:
            summary(f"{release}: no earlier {framework} release measured on {machine}: nothing "
                    "to compare it with.\n")
            continue
        status = compare(work, machine, earlier[-1], release, args.factor,
                         f"{release} regressed against {earlier[-1]}") or status
    with open(os.path.join(work, "asv-run-status")) as f:
        asv_status = int(f.read())
    if asv_status != 0:
        summary(f"asv run exited with status {asv_status}: the failed benchmarks are named in the "
                "measure job's report and their reasons are in records/.\n")
    return status or asv_status


def release_names(directory: str, work: str) -> List[str]:
    """The releases of the result files in a directory, as their records name them."""
    names = []
    for name in fingerprints(directory):
        path = os.path.join(work, "records", os.path.basename(directory), name[:-5] + ".jsonl")
        releases = []
        if os.path.exists(path):
            with open(path) as f:
                releases = [json.loads(line).get("release") for line in f if line.strip()]
        names.append(next((r for r in reversed(releases) if r), name[:8]))
    return sorted(set(names))


def token_environment(gh: bool = False) -> Dict[str, str]:
    """This environment, GITHUB_TOKEN moved where git (or gh) takes it, never onto a command line."""
    env = dict(os.environ)
    token = env.pop("GITHUB_TOKEN", "")
    if token and gh:
        env["GH_TOKEN"] = token
    elif token:  # as actions/checkout does it
        header = base64.b64encode(f"x-access-token:{token}".encode()).decode()
        print(f"::add-mask::{header}")
        env.update(GIT_CONFIG_COUNT="1", GIT_CONFIG_KEY_0="http.https://github.com/.extraheader",
                   GIT_CONFIG_VALUE_0=f"AUTHORIZATION: basic {header}")
    return env


def cmd_store(args: argparse.Namespace) -> int:
    """Nightly: this run's results, records and latest/ committed and pushed to the branch."""
    work, branch_dir = os.path.abspath(args.work), os.path.abspath(args.branch_dir)
    # The work directory holds this machine's results as measure restored them from the branch,
    # changed by the night (new files, files folded away): the branch mirrors them, deletions
    # included.  Other machines' folders are theirs: a nightly of another may have pushed since.
    if not os.path.isdir(os.path.join(work, "results", args.machine)):
        sys.exit(f"no results of {args.machine} in {work}: nothing to store (and nothing of the "
                 "branch's removed)")
    for sub in ("results", "records", "latest"):
        mirror(os.path.join(work, sub, args.machine), os.path.join(branch_dir, sub, args.machine))
    for path in glob.glob(os.path.join(work, "results", "*.json")):  # asv's benchmarks.json
        shutil.copy2(path, os.path.join(branch_dir, "results"))
    latest = os.path.join(branch_dir, "latest", args.machine)
    present = [sub for sub in ("results", "records", "latest")  # on disk, or removed from it
               if os.path.exists(os.path.join(branch_dir, sub))
               or git("ls-files", sub, cwd=branch_dir)]
    git("add", "--all", "--", *present, cwd=branch_dir)
    if not git("status", "--porcelain", cwd=branch_dir):
        print("nothing new to store")
        return 0
    message = f"Nightly results of {args.machine}: {', '.join(release_names(latest, work)) or 'none'}"
    identity = ["-c", "user.name=fwkernels nightly", "-c", "user.email=nightly@fwkernels.invalid"]
    git(*identity, "commit", "--quiet", "-m", message, cwd=branch_dir)
    branch = git("rev-parse", "--abbrev-ref", "HEAD", cwd=branch_dir)
    for attempt in range(1, PUSH_ATTEMPTS + 1):
        status = run(["git", "push", "--quiet", "origin", f"HEAD:refs/heads/{branch}"],
                     check=False, cwd=branch_dir, env=token_environment())
        if status == 0 or attempt == PUSH_ATTEMPTS:
            break
        print(f"push rejected (attempt {attempt} of {PUSH_ATTEMPTS}): rebasing tonight's commit "
              f"on the branch's new ones", flush=True)
        if run(["git", *identity, "pull", "--rebase", "--quiet", "origin", branch], check=False,
               cwd=branch_dir, env=token_environment()) != 0:
            subprocess.run(["git", "rebase", "--abort"], cwd=branch_dir)
            sys.exit("the rebase on the results branch's new commits failed: tonight's results "
                     "are in the run's `nightly` artifact")
    if status != 0:
        sys.exit(f"git push failed {PUSH_ATTEMPTS} times: tonight's results are in the run's "
                 "`nightly` artifact")
    return 0


PUSH_ATTEMPTS = 3


def mirror(source: str, target: str) -> None:
    """``target`` becomes a copy of ``source``: what ``source`` lacks is removed."""
    shutil.rmtree(target, ignore_errors=True)
    copy_tree(source, target)


def cmd_pull_request(args: argparse.Namespace) -> int:
    """The same releases measured by the harness at the base and at the head of a pull request
    (each framework's newest, or --release's), then compared release by release."""
    if git("status", "--porcelain", "--untracked-files=no"):
        sys.exit("the checkout has local changes: pull-request checks out the base and the head")
    work = os.path.abspath(args.work)
    original = git("rev-parse", "HEAD")
    if args.head_from:
        fetch_reviewed_head(args.head_from, args.head)
    head = git("rev-parse", args.head)
    base = git("rev-parse", args.base) if args.base else git("merge-base", original, head)
    if base == head:
        sys.exit(f"base and head are the same commit {base[:8]}: nothing to compare")
    releases_file(work)
    tags = build_ledger(work)
    releases = releases_to_measure(args, work, tags, new=False)
    try:
        for side, commit in (("base", base), ("head", head)):
            git("checkout", "--quiet", "--detach", commit)
            side_work = os.path.join(work, side)
            shutil.copy2(releases_file(work), releases_file(side_work))
            asv_status = measure_releases(args, side_work, releases)
            label(side_work, os.path.join(work, "results"), os.path.join(work, "records"), side)
    finally:
        git("checkout", "--quiet", "--detach", original)
    status = 0
    for release in releases:
        status = compare(work, args.machine, f"release={release},env=-base",
                         f"release={release},env=-head", args.factor,
                         f"{release}: the head measures a regression") or status
    if asv_status != 0:
        summary(f"asv run at the head exited with status {asv_status}: some benchmarks failed "
                "(their reasons are in the records of the work directory).\n")
    return status or asv_status


def fetch_reviewed_head(checkout: str, reviewed: str) -> None:
    """Fetch the head of a checkout of the pull request; it must still be the commit a
    maintainer reviewed (a push after the review never reaches the GPU runner)."""
    if not re.fullmatch(r"[0-9a-f]{40}", reviewed):
        sys.exit(f"--head {reviewed!r}: give the full SHA of the reviewed commit")
    run(["git", "fetch", "--quiet", "--no-tags", os.path.abspath(checkout), "HEAD"], cwd=ROOT)
    fetched = git("rev-parse", "FETCH_HEAD")
    if fetched != reviewed:
        sys.exit(f"the pull request is at {fetched[:8]}, not at the reviewed {reviewed[:8]}: "
                 "review the new commits and dispatch again")


def label(side_work: str, results: str, records: str, side: str) -> None:
    """A side's results and records, their environment named -<side>, into the shared folders."""
    for path in glob.glob(os.path.join(side_work, "results", "*", "*.json")):
        if os.path.basename(path) == "machine.json":
            continue
        with open(path) as f:
            data = json.load(f)
        old = data["env_name"]
        data["env_name"] = f"{old}-{side}"
        machine = os.path.basename(os.path.dirname(path))
        name = os.path.basename(path).replace(old, data["env_name"])
        os.makedirs(os.path.join(results, machine), exist_ok=True)
        with open(os.path.join(results, machine, name), "w") as f:
            json.dump(data, f)
        source = os.path.join(side_work, "records", machine, os.path.basename(path)[:-5] + ".jsonl")
        if os.path.exists(source):
            os.makedirs(os.path.join(records, machine), exist_ok=True)
            shutil.copy2(source, os.path.join(records, machine, name[:-5] + ".jsonl"))


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
        p.add_argument("--config", default="asv.conf.json", help="asv configuration")
        p.add_argument("--python", default=os.environ.get("BENCH_PYTHON") or None,
                       help="run with asv -E existing:PYTHON, the --release releases preinstalled "
                            "there (default: $BENCH_PYTHON; unset: install each release)")
        p.add_argument("--release", action="append",
                       default=os.environ.get("BENCH_RELEASES", "").split(),
                       help="with --python: a release installed there, e.g. torch-2.11.0 "
                            "(repeatable; default: $BENCH_RELEASES)")
        p.add_argument("--framework", action="append", default=[],
                       help="only this framework's releases (repeatable)")
        p.add_argument("--env-dir", help="where asv builds environments (default: the config's)")

    def factor_option(p: argparse.ArgumentParser) -> None:
        p.add_argument("--factor", default=os.environ.get("REGRESSION_FACTOR") or None,
                       help="fail on a regression beyond this factor (default: $REGRESSION_FACTOR, "
                            "else fwkernels compare's default)")

    p = sub.add_parser("discover", help=cmd_discover.__doc__)
    p.add_argument("--work", required=True, help="work directory (layout: see the docstring)")
    p.set_defaults(func=cmd_discover)

    p = sub.add_parser("propose", help=cmd_propose.__doc__)
    p.add_argument("--work", required=True, help="the work directory of discover")
    p.add_argument("--base", default="main", help="the branch the pull request targets")
    p.set_defaults(func=cmd_propose)

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
    p.add_argument("--base", help="base commit (default: the merge base of the checkout and "
                                   "--head)")
    p.add_argument("--head", required=True, help="head commit (with --head-from: the full SHA "
                                                 "a maintainer reviewed)")
    p.add_argument("--head-from", metavar="DIR", help="a checkout of the pull request: fetch its "
                   "HEAD first, which must be --head")
    factor_option(p)
    p.set_defaults(func=cmd_pull_request)
    return parser


def factor_problem(text: Optional[str]) -> Optional[str]:
    """Why a regression factor would not gate (NaN compares false with everything), or None."""
    try:
        if text is None or (math.isfinite(float(text)) and float(text) >= 1):
            return None
    except ValueError:
        pass
    return f"--factor / REGRESSION_FACTOR must be a finite number >= 1 (1.1: fail on more than " \
           f"10% worse), got {text!r}"


def main(argv: Optional[List[str]] = None) -> int:
    args = build_parser().parse_args(argv)
    problem = factor_problem(getattr(args, "factor", None))
    if problem:
        print(f"bench: error: {problem}", file=sys.stderr)
        return 2
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
