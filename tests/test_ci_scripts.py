"""The scripts the workflows call (scripts/ci/), run for real on CPU before they reach the runner.

Two nights of the nightly job, in a clone of this repository: the asv suite through the
existing-environment route for the release installed here (this Python's PyTorch 2.13.0 on CPU,
NCF only, short windows) at its commit of the release ledger, the site published and fwkernels
report in the job summary, the results stored on a results branch (a local bare repository
stands in for GitHub) and restored the next night, and the regression check comparing a release
with the release before it.  The pull-request job checks out base and head and measures both
(with a profile that skips every combination, to stay fast); `propose` pushes discovered
releases and opens a pull request (a stand-in `gh`).  Run with `nox -s lint`, which installs
asv, PyTorch and the tools.
"""
from __future__ import annotations

import importlib.util
import json
import os
import shutil
import subprocess
import sys
from types import SimpleNamespace
from typing import Dict, List, Optional

import pytest

pytest.importorskip("asv")  # installed by nox -s lint

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MACHINE = "ci-cpu"
RESULTS_BRANCH = "benchmark-results"
RELEASE = "torch-2.13.0"  # what the lint session installs (its CPU build)
EARLIER = "torch-2.12.1"
PROFILE = {"FWKERNELS_DEVICE": "cpu", "FWKERNELS_MODELS": "ncf", "FWKERNELS_PRECISIONS": "fp32",
           "FWKERNELS_WINDOWS": "2", "FWKERNELS_WINDOW_SECONDS": "0.2"}
ENV = f"existing-py{sys.version_info.major}.{sys.version_info.minor}"
IDENTITY = ["-c", "user.name=test", "-c", "user.email=test@fwkernels.invalid"]


def git(*args: str, cwd: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True,
                          text=True).stdout.strip()


def bench(box: SimpleNamespace, *args: str, env: Optional[Dict[str, str]] = None,
          path: Optional[List[str]] = None) -> subprocess.CompletedProcess:
    """scripts/ci/bench.py in the clone, as a workflow step runs it; .summary is the job summary."""
    summary = os.path.join(box.root, "summary.md")
    open(summary, "w").close()
    environ = {k: v for k, v in os.environ.items()
               if k not in ("GITHUB_TOKEN", "REGRESSION_FACTOR", "BENCH_PYTHON", "BENCH_RELEASES",
                            "FWKERNELS_SELECT")}
    search_path = [*(path or []), os.path.dirname(sys.executable), environ["PATH"]]
    environ.update(PROFILE, HOME=box.home, ASV_MACHINE=MACHINE, GITHUB_STEP_SUMMARY=summary,
                   PATH=os.pathsep.join(search_path), **(env or {}))
    result = subprocess.run([sys.executable, os.path.join("scripts", "ci", "bench.py"), *args],
                            cwd=box.repo, env=environ, capture_output=True, text=True)
    with open(summary) as f:
        result.summary = f.read()  # type: ignore[attr-defined]
    return result


def ok(result: subprocess.CompletedProcess) -> subprocess.CompletedProcess:
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    return result


def result_files(directory: str) -> List[str]:
    return sorted(n for n in os.listdir(directory) if n.endswith(".json") and n != "machine.json")


def commits_of(directory: str) -> List[str]:
    """The short commits that name the result files of a directory."""
    return [name[:8] for name in result_files(directory)]


def ledger_commit(box: SimpleNamespace, release: str) -> str:
    return git("rev-parse", f"{release}^{{commit}}", cwd=os.path.join(box.repo, ".asv", "ledger"))


def checkout_results_branch(box: SimpleNamespace, name: str) -> str:
    path = os.path.join(box.root, name)
    git("clone", "--quiet", "--branch", RESULTS_BRANCH, box.origin, path, cwd=box.root)
    return path


@pytest.fixture(scope="module")
def box(tmp_path_factory) -> SimpleNamespace:
    """A clone of this repository with scripts/ci as in the working tree (the scripts check out
    commits and find the repository from their own place), and an empty results branch."""
    root = str(tmp_path_factory.mktemp("ci"))
    repo, origin, seed = (os.path.join(root, n) for n in ("repo", "origin.git", "seed"))
    git("clone", "--quiet", "--shared", REPO, repo, cwd=root)
    git("checkout", "--quiet", "-B", "main", cwd=repo)
    shutil.copytree(os.path.join(REPO, "scripts", "ci"), os.path.join(repo, "scripts", "ci"),
                    dirs_exist_ok=True, ignore=shutil.ignore_patterns("__pycache__"))
    git("add", "scripts/ci", cwd=repo)
    git(*IDENTITY, "commit", "--quiet", "--allow-empty", "-m", "scripts under test", cwd=repo)
    git("init", "--quiet", "--bare", origin, cwd=root)
    git("init", "--quiet", "--initial-branch", RESULTS_BRANCH, seed, cwd=root)
    git(*IDENTITY, "commit", "--quiet", "--allow-empty", "-m", "Nightly benchmark results", cwd=seed)
    git("push", "--quiet", origin, RESULTS_BRANCH, cwd=seed)
    return SimpleNamespace(root=root, repo=repo, origin=origin, home=os.path.join(root, "home"))


@pytest.fixture(scope="module")
def nights(box: SimpleNamespace) -> SimpleNamespace:
    """Two nights of the nightly workflow's steps, a commit apart."""
    pytest.importorskip("torch")
    out = SimpleNamespace()
    suite = ["--python", sys.executable, "--release", RELEASE]
    for night in ("first", "second"):
        branch = checkout_results_branch(box, f"branch-{night}")
        work = os.path.join(box.root, f"night-{night}")
        setattr(out, night, SimpleNamespace(
            work=work, branch=branch,
            measure=ok(bench(box, "measure", "--work", work, "--previous", branch, *suite)),
            check=bench(box, "check", "--work", work, env={"REGRESSION_FACTOR": "1000"}),
            store=ok(bench(box, "store", "--work", work, "--branch-dir", branch))))
    return out


def test_first_night_measures_the_release_publishes_and_reports(nights, box) -> None:
    night = nights.first
    machine_dir = os.path.join(night.work, "results", MACHINE)
    [name] = result_files(machine_dir)
    assert name == f"{ledger_commit(box, RELEASE)[:8]}-{ENV}.json"
    assert result_files(os.path.join(night.work, "latest", MACHINE)) == [name]
    with open(os.path.join(machine_dir, name)) as f:
        result = json.load(f)
    columns = result["result_columns"]
    throughput = dict(zip(columns, result["results"]["training.Training.track_samples_per_s"]))
    assert throughput["params"] == [["'default'"], ["'ncf'"], ["'fp32'"]]
    assert throughput["result"][0] > 0 and len(throughput["samples"][0]) == 2
    with open(os.path.join(REPO, "results", "benchmarks.json")) as f:
        committed = json.load(f)["training.Training.track_samples_per_s"]["version"]
    assert throughput["version"] == committed  # asv publishes the committed results beside it
    with open(os.path.join(night.work, "records", MACHINE, name.replace(".json", ".jsonl"))) as f:
        [record] = [json.loads(line) for line in f]
    assert (record["framework"], record["model"], record["status"]) == ("torch", "ncf", "ok")
    assert record["release"] == RELEASE and record["harness_commit"].startswith(
        git("rev-parse", "HEAD", cwd=box.repo))
    assert os.path.exists(os.path.join(night.work, "html", "index.html"))
    assert f"Releases measured tonight on {MACHINE}: {RELEASE}" in night.measure.summary
    assert "fwkernels report, machine ci-cpu" in night.measure.summary
    assert "NCF" in night.measure.summary and "PyTorch" in night.measure.summary
    assert night.check.returncode == 0, night.check.stdout + night.check.stderr
    assert f"{RELEASE}: no earlier torch release measured on {MACHINE}" in night.check.summary


def test_results_branch_keeps_every_night(nights, box) -> None:
    log = git("log", "--format=%s", RESULTS_BRANCH, cwd=box.origin).splitlines()
    assert log == [f"Nightly results of {MACHINE}: {RELEASE}"] * 2 + ["Nightly benchmark results"]
    branch = checkout_results_branch(box, "branch-after")
    release = ledger_commit(box, RELEASE)[:8]
    assert commits_of(os.path.join(branch, "results", MACHINE)) == [release]
    assert commits_of(os.path.join(branch, "latest", MACHINE)) == [release]
    with open(os.path.join(branch, "records", MACHINE, f"{release}-{ENV}.jsonl")) as f:
        assert len(f.readlines()) == 2  # each night's record is kept


def test_second_night_restores_the_previous_one(nights, box) -> None:
    night = nights.second
    release = ledger_commit(box, RELEASE)[:8]
    assert commits_of(os.path.join(night.work, "previous", MACHINE)) == [release]
    assert commits_of(os.path.join(night.work, "results", MACHINE)) == [release]
    assert night.check.returncode == 0, night.check.stdout + night.check.stderr


def with_earlier_release(nights, box, tmp_path) -> str:
    """A copy of the second night's work directory where the earlier torch release has results
    too: tonight's figures again, relabelled (a fixture: one Python holds one torch)."""
    work = tmp_path / "work"
    shutil.copytree(nights.second.work, work)
    source, target = ledger_commit(box, RELEASE), ledger_commit(box, EARLIER)
    for folder, suffix in (("results", ".json"), ("records", ".jsonl")):
        with open(work / folder / MACHINE / f"{source[:8]}-{ENV}{suffix}") as f:
            text = f.read().replace(source, target).replace(RELEASE, EARLIER)
        (work / folder / MACHINE / f"{target[:8]}-{ENV}{suffix}").write_text(text)
    return str(work)


def test_check_compares_a_release_with_the_one_before(nights, box, tmp_path) -> None:
    work = with_earlier_release(nights, box, tmp_path)
    result = bench(box, "check", "--work", work, env={"REGRESSION_FACTOR": "1000"})
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"fwkernels compare {EARLIER} {RELEASE}" in result.summary
    assert "track_samples_per_s" in result.summary and "ncf" in result.summary


def test_store_with_nothing_new_pushes_nothing(nights, box) -> None:
    before = git("rev-parse", RESULTS_BRANCH, cwd=box.origin)
    night = nights.second
    result = ok(bench(box, "store", "--work", night.work, "--branch-dir", night.branch))
    assert "nothing new to store" in result.stdout
    assert git("rev-parse", RESULTS_BRANCH, cwd=box.origin) == before


def test_store_echoes_no_token(nights, box, tmp_path) -> None:
    """A push with GITHUB_TOKEN set, to a copy of the results repository rewound to its start."""
    origin = str(tmp_path / "origin.git")
    git("clone", "--quiet", "--bare", box.origin, origin, cwd=str(tmp_path))
    start = git("rev-list", "--max-parents=0", RESULTS_BRANCH, cwd=origin)
    git("update-ref", f"refs/heads/{RESULTS_BRANCH}", start, cwd=origin)
    branch = str(tmp_path / "branch")
    git("clone", "--quiet", "--branch", RESULTS_BRANCH, origin, branch, cwd=str(tmp_path))
    token = "ghs_notarealtoken0123456789"
    result = ok(bench(box, "store", "--work", nights.second.work, "--branch-dir", branch,
                      env={"GITHUB_TOKEN": token}))
    assert token not in result.stdout + result.stderr
    assert git("log", "-1", "--format=%s", RESULTS_BRANCH, cwd=origin) == \
        f"Nightly results of {MACHINE}: {RELEASE}"


def test_check_fails_and_names_the_regressions(nights, box, tmp_path) -> None:
    """fwkernels compare's exit status and its REGRESSION rows reach the run's status, the job
    summary and an error annotation.  A stand-in `fwkernels` (this test only) plays a compare
    that finds one: two real nights on a shared CPU give no regression to rely on."""
    work = with_earlier_release(nights, box, tmp_path)
    arguments = tmp_path / "arguments"
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    stand_in = bin_dir / "fwkernels"
    stand_in.write_text(
        "#!/bin/sh\n"
        f'[ "$1" = compare ] || exec "{sys.executable}" -m fwkernels "$@"\n'
        f'echo "$@" > "{arguments}"\n'
        "echo '| samples_per_s | torch | ncf | fp32 | 9 ± 1 | 4 ± 1 | 0.444 | REGRESSION |'\n"
        "echo '| forward_time | torch | ncf | fp32 | 1 ms | 1 ms | 1.000 | within spread |'\n"
        "echo '1 regression(s) beyond factor 1.2: exit status 1'\n"
        "exit 1\n")
    stand_in.chmod(0o755)
    result = bench(box, "check", "--work", work, env={"REGRESSION_FACTOR": "1.2"},
                   path=[str(bin_dir)])
    assert result.returncode == 1
    assert arguments.read_text().split() == [
        "compare", EARLIER, RELEASE, "--results", os.path.join(work, "results"),
        "--machine", MACHINE, "--format", "markdown", "--factor", "1.2"]
    [annotation] = [line for line in result.stdout.splitlines() if line.startswith("::error")]
    assert annotation.startswith(f"::error title={RELEASE} regressed against {EARLIER}::")
    assert "samples_per_s | torch | ncf | fp32" in annotation and "forward_time" not in annotation
    assert "REGRESSION" in result.summary and "within spread" in result.summary


def test_check_fails_on_failed_benchmarks(nights, box, tmp_path) -> None:
    work = tmp_path / "work"
    shutil.copytree(nights.first.work, work)
    (work / "asv-run-status").write_text("2\n")
    result = bench(box, "check", "--work", str(work))
    assert result.returncode == 2
    assert "asv run exited with status 2" in result.summary


def test_pull_request_measures_base_and_head(box) -> None:
    """Base and head checked out and measured in turn, the checkout restored, then compared.
    FWKERNELS_SELECT skips every combination (fast), so compare finds no figure of the release
    on either side, says so and exits 2."""
    head = git("rev-parse", "HEAD", cwd=box.repo)
    base = git("rev-parse", "HEAD~1", cwd=box.repo)
    work = os.path.join(box.root, "pull-request")
    result = bench(box, "pull-request", "--base", base, "--head", head, "--work", work,
                   "--python", sys.executable, "--release", RELEASE,
                   env={"FWKERNELS_SELECT": "^nothing$"})
    release = ledger_commit(box, RELEASE)[:8]
    assert result_files(os.path.join(work, "results", MACHINE)) == [
        f"{release}-{ENV}-base.json", f"{release}-{ENV}-head.json"]
    assert git("rev-parse", "HEAD", cwd=box.repo) == head
    assert result.returncode == 2
    assert f"'release={RELEASE},env=-base'" in result.summary
    assert "matches no results" in result.summary


def test_pull_request_refuses_local_changes(box) -> None:
    with open(os.path.join(box.repo, "README.md"), "a") as f:
        f.write("local change\n")
    try:
        result = bench(box, "pull-request", "--base", "HEAD~1", "--head", "HEAD", "--work",
                       os.path.join(box.root, "refused"), "--python", sys.executable)
    finally:
        git("checkout", "--quiet", "README.md", cwd=box.repo)
    assert result.returncode != 0 and "local changes" in result.stderr


def test_sessions_script_lists_every_nox_session() -> None:
    """The CI matrix: one job per nox session, core, lint and each framework environment."""
    result = subprocess.run(["bash", os.path.join(REPO, "scripts", "ci", "sessions.sh")],
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    [line] = result.stdout.splitlines()
    assert line.startswith("sessions=")
    sessions = json.loads(line[len("sessions="):])
    spec = importlib.util.spec_from_file_location("noxfile", os.path.join(REPO, "noxfile.py"))
    noxfile = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(noxfile)  # needs nox, which lint installs
    assert {"core", "lint", *noxfile.FRAMEWORK_ENVIRONMENTS} <= set(sessions)
    assert len(sessions) == len(set(sessions))


def test_propose_pushes_discovered_releases_and_opens_a_pull_request(box, tmp_path) -> None:
    """The nightly's propose step in its own clone (it commits there), pushing to a local bare
    repository; a stand-in `gh` (this test only) records the pull request it is asked for."""
    origin, clone = str(tmp_path / "origin.git"), str(tmp_path / "clone")
    git("init", "--quiet", "--bare", origin, cwd=str(tmp_path))
    git("clone", "--quiet", "--shared", box.repo, clone, cwd=str(tmp_path))
    git("remote", "set-url", "origin", origin, cwd=clone)
    work = tmp_path / "work"
    work.mkdir()
    with open(os.path.join(clone, "releases.toml")) as f:
        discovered = f.read() + '\n[[mxnet.release]]\nversion = "1.9.2"\ndate = 2026-11-30\n'
    (work / "releases.toml").write_text(discovered)
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    arguments = tmp_path / "gh-arguments"
    (bin_dir / "gh").write_text(f'#!/bin/sh\necho "$GH_TOKEN $@" > "{arguments}"\n')
    (bin_dir / "gh").chmod(0o755)
    environ = dict(os.environ, PATH=f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
                   GITHUB_TOKEN="ghs_notarealtoken", HOME=box.home)
    command = [sys.executable, os.path.join(clone, "scripts", "ci", "bench.py"), "propose",
               "--work", str(work)]
    result = subprocess.run(command, cwd=clone, env=environ, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr
    pushed = git("show", "releases/discovered:releases.toml", cwd=origin)
    assert pushed.strip() == discovered.strip()
    assert arguments.read_text().split()[:7] == [
        "ghs_notarealtoken", "pr", "create", "--base", "main", "--head", "releases/discovered"]
    again = subprocess.run(command, cwd=clone, env=environ, capture_output=True, text=True)
    assert "nothing to propose" in again.stdout


@pytest.mark.parametrize("factor", ["nan", "inf", "0.9", "-1", "fast"])
def test_a_regression_factor_that_would_not_gate_is_rejected(tmp_path, factor) -> None:
    """REGRESSION_FACTOR=nan made every comparison false: twelve regressions passed the gate."""
    environ = dict(os.environ, REGRESSION_FACTOR=factor)
    for command in (["check", "--work", str(tmp_path)],
                    ["pull-request", "--work", str(tmp_path), "--machine", MACHINE,
                     "--base", "HEAD", "--head", "HEAD"]):
        result = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "ci", "bench.py"),
                                 *command], env=environ, capture_output=True, text=True)
        assert result.returncode == 2 and result.stderr.count("\n") == 1, result.stderr
        assert "finite number >= 1" in result.stderr and repr(factor) in result.stderr


def night_work(root: str, files: Dict[str, str]) -> str:
    """A work directory as measure leaves it, holding ``files`` (path -> content)."""
    work = os.path.join(root, "work")
    for path, content in files.items():
        os.makedirs(os.path.dirname(os.path.join(work, path)), exist_ok=True)
        with open(os.path.join(work, path), "w") as f:
            f.write(content)
    return work


def results_repository(root: str, files: Dict[str, str]) -> SimpleNamespace:
    """A bare origin whose results branch holds ``files``, and a checkout of it."""
    origin, seed = os.path.join(root, "origin.git"), os.path.join(root, "seed")
    git("init", "--quiet", "--bare", origin, cwd=root)
    git("init", "--quiet", "--initial-branch", RESULTS_BRANCH, seed, cwd=root)
    for path, content in files.items():
        os.makedirs(os.path.dirname(os.path.join(seed, path)), exist_ok=True)
        with open(os.path.join(seed, path), "w") as f:
            f.write(content)
    git("add", "--all", cwd=seed)
    git(*IDENTITY, "commit", "--quiet", "--allow-empty", "-m", "results", cwd=seed)
    git("push", "--quiet", origin, RESULTS_BRANCH, cwd=seed)
    branch = os.path.join(root, "branch")
    git("clone", "--quiet", "--branch", RESULTS_BRANCH, origin, branch, cwd=root)
    return SimpleNamespace(origin=origin, seed=seed, branch=branch)


def store(root: str, work: str, branch: str) -> subprocess.CompletedProcess:
    environ = {k: v for k, v in os.environ.items() if k != "GITHUB_TOKEN"}
    return subprocess.run([sys.executable, os.path.join(REPO, "scripts", "ci", "bench.py"),
                           "store", "--work", work, "--branch-dir", branch, "--machine", MACHINE],
                          cwd=root, env=environ, capture_output=True, text=True)


def test_store_mirrors_deletions_and_leaves_other_machines_alone(tmp_path) -> None:
    """A result file the night removed (folded away, or deleted by a maintainer before the night
    restored the branch) stays removed; another machine's folder is not this night's."""
    root = str(tmp_path)
    repository = results_repository(root, {
        f"results/{MACHINE}/old-env.json": "{}", f"records/{MACHINE}/old-env.jsonl": "",
        "results/other-box/kept-env.json": "{}"})
    work = night_work(root, {f"results/{MACHINE}/new-env.json": "{}",
                             f"records/{MACHINE}/new-env.jsonl": "",
                             f"latest/{MACHINE}/new-env.json": "{}",
                             "results/benchmarks.json": "{}"})
    ok(store(root, work, repository.branch))
    stored = git("ls-tree", "-r", "--name-only", RESULTS_BRANCH, cwd=repository.origin).split()
    assert sorted(stored) == sorted([
        f"results/{MACHINE}/new-env.json", f"records/{MACHINE}/new-env.jsonl",
        f"latest/{MACHINE}/new-env.json", "results/benchmarks.json",
        "results/other-box/kept-env.json"])


def test_store_rebases_when_the_branch_moved_on(tmp_path) -> None:
    """Another machine's nightly pushed after this night's checkout: the push is rejected, the
    night's commit rebased on it and pushed; both nights are on the branch."""
    root = str(tmp_path)
    repository = results_repository(root, {})
    with open(os.path.join(repository.seed, "other.txt"), "w") as f:
        f.write("another machine's night\n")
    git("add", "other.txt", cwd=repository.seed)
    git(*IDENTITY, "commit", "--quiet", "-m", "another night", cwd=repository.seed)
    git("push", "--quiet", repository.origin, RESULTS_BRANCH, cwd=repository.seed)
    work = night_work(root, {f"results/{MACHINE}/new-env.json": "{}",
                             f"latest/{MACHINE}/new-env.json": "{}"})
    result = ok(store(root, work, repository.branch))
    assert "push rejected (attempt 1 of 3)" in result.stdout
    log = git("log", "--format=%s", RESULTS_BRANCH, cwd=repository.origin).splitlines()
    assert log[:2] == [f"Nightly results of {MACHINE}: new-env.", "another night"]


def test_store_without_the_machines_results_removes_nothing(tmp_path) -> None:
    root = str(tmp_path)
    repository = results_repository(root, {f"results/{MACHINE}/old-env.json": "{}"})
    result = store(root, night_work(root, {"results/benchmarks.json": "{}"}), repository.branch)
    assert result.returncode != 0 and "nothing to store" in result.stderr
    assert os.path.exists(os.path.join(repository.branch, "results", MACHINE, "old-env.json"))


def test_pull_request_runs_only_the_reviewed_head(box, tmp_path) -> None:
    """Dispatched with the head a maintainer reviewed, beside a checkout of the pull request: a
    pull request that moved on since (or a head that is no full SHA) is refused before anything
    of it is checked out."""
    root = str(tmp_path)
    repo, pull_request_checkout = os.path.join(root, "repo"), os.path.join(root, "pull-request")
    git("clone", "--quiet", "--shared", box.repo, repo, cwd=root)
    git("clone", "--quiet", "--shared", box.repo, pull_request_checkout, cwd=root)
    reviewed = git("rev-parse", "HEAD~1", cwd=repo)  # then the author pushed HEAD

    def pull_request(head: str) -> subprocess.CompletedProcess:
        return subprocess.run([sys.executable, os.path.join("scripts", "ci", "bench.py"),
                               "pull-request", "--head-from", pull_request_checkout, "--head",
                               head, "--work", os.path.join(root, "work"), "--machine", MACHINE],
                              cwd=repo, capture_output=True, text=True)

    result = pull_request(reviewed)
    assert result.returncode == 1
    assert f"the pull request is at {git('rev-parse', 'HEAD', cwd=repo)[:8]}, not at the " \
           f"reviewed {reviewed[:8]}" in result.stderr
    result = pull_request(reviewed[:8])
    assert result.returncode == 1 and "full SHA of the reviewed commit" in result.stderr
    assert not os.path.exists(os.path.join(root, "work"))


def test_lanes_run_every_session_report_failures_and_prune(tmp_path) -> None:
    """scripts/lanes.py with a stand-in nox: every session runs once, a failing one fails the
    whole run by name, and with FWKERNELS_TEST_PRUNE=1 each session's environment is deleted."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    fake_nox = bin_dir / "nox"
    fake_nox.write_text(
        "#!/bin/sh\n"
        'if [ "$1" = --list ]; then\n'
        '  echo \'[{"session": "alpha"}, {"session": "beta"}, {"session": "gamma"}]\'; exit 0\n'
        "fi\n"
        'mkdir -p ".nox/$2"; echo "ran $2" >> ran.txt; [ "$2" != beta ]\n')
    fake_nox.chmod(0o755)
    env = {**os.environ, "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
           "FWKERNELS_TEST_PRUNE": "1"}
    done = subprocess.run([sys.executable, os.path.join(REPO, "scripts", "lanes.py"), "2"],
                          cwd=tmp_path, env=env, capture_output=True, text=True)
    assert done.returncode == 1, done.stdout + done.stderr
    assert "sessions failed: beta" in done.stdout
    assert sorted((tmp_path / "ran.txt").read_text().split("\n")[:-1]) == [
        "ran alpha", "ran beta", "ran gamma"]
    assert not any((tmp_path / ".nox").iterdir())


@pytest.mark.parametrize("profile, last", [
    (None, "1 --exclude chainer --exclude cntk --exclude keras-torch --exclude keras-tensorflow"),
    ("releases", "4")])
def test_bench_runs_with_nothing_set(tmp_path, profile, last) -> None:
    """scripts/bench, the README's main command, as a fresh clone runs it: none of its
    variables set.  Its tools (pip, asv, fwkernels) are stand-ins that log their arguments."""
    for path in ("scripts/bench", "scripts/tools-venv.sh", "requirements-tools.txt"):
        os.makedirs(tmp_path / os.path.dirname(path), exist_ok=True)
        shutil.copy(os.path.join(REPO, path), tmp_path / path)
    (tmp_path / ".asv").mkdir()  # what `fwkernels ledger build` makes
    tools = tmp_path / ".venv" / "bin"
    tools.mkdir(parents=True)
    shutil.copy(tmp_path / "requirements-tools.txt", tmp_path / ".venv")
    for tool in ("pip", "nox", "asv", "fwkernels"):
        (tools / tool).write_text(f'#!/bin/sh\necho "{tool} $*" >> "$CALLS"\n')
        (tools / tool).chmod(0o755)
    env = {key: value for key, value in os.environ.items() if not key.startswith(
        ("FWKERNELS_", "ASV_"))}
    env["CALLS"] = str(tmp_path / "calls.txt")
    if profile:
        env["FWKERNELS_PROFILE"] = profile
    done = subprocess.run(["bash", "scripts/bench"], cwd=tmp_path, env=env,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    calls = (tmp_path / "calls.txt").read_text().splitlines()
    assert f"fwkernels ledger commits --last {last}" in calls
    # the suite's variables are checked before anything is built or installed
    assert calls.index("fwkernels check-variables") < calls.index("fwkernels ledger build")
    assert any(c.startswith("fwkernels asv-machine ") for c in calls)
    run = next(i for i, c in enumerate(calls)
               if c.startswith("asv run") and "HASHFILE:.asv/ledger-commits" in c)
    # what the run would replace is set aside before it and folded back after it
    assert calls[run - 1].startswith("fwkernels ledger set-aside ")
    assert "--commits .asv/ledger-commits" in calls[run - 1]
    assert calls[run + 1].startswith("fwkernels ledger fold ")
    assert calls[-1].startswith("fwkernels report")
