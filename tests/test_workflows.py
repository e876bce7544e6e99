"""The GitHub workflows (.github/workflows, docs/ci.md): linted, and hardened as the project needs.

actionlint (with shellcheck on the `run:` scripts) and zizmor must report nothing, and each is
shown to report a deliberately broken workflow, so a clean result means something.  The
project's own rules follow: third-party actions pinned to commit SHAs, no credentials left in
checkouts, least permissions per job, no `pull_request_target`, the self-hosted GPU runner
reached only by the default branch's workflows (schedule or a maintainer's dispatch), and
`run:` steps that call project scripts (tested in tests/test_ci_scripts.py).  Run with `nox -s lint`, which installs the tools.
"""
from __future__ import annotations

import glob
import os
import re
import shutil
import subprocess
from typing import Any, Dict, Iterator, List, Tuple

import pytest

yaml = pytest.importorskip("yaml")  # installed by nox -s lint

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKFLOWS = sorted(glob.glob(os.path.join(REPO, ".github", "workflows", "*.yml")))
GPU_RUNNER = {"group": "gpu-benchmarks", "labels": ["self-hosted", "linux", "x64", "gpu"]}
ON_DEFAULT_BRANCH = "github.ref == format('refs/heads/{0}', github.event.repository.default_branch)"
IGNORE = re.compile(r"# zizmor: ignore\[([\w-]+)\](.*)")
PINNED = re.compile(r"^[\w.-]+/[\w./-]+@[0-9a-f]{40}$")

# A workflow with the mistakes each tool exists to catch.
BROKEN = """\
name: broken
on:
  pull_request_target:
jobs:
  build:
    needs: missing-job
    runs-on: ubuntu-24.04
    steps:
      - uses: actions/checkout@v4
        with:
          ref: ${{ github.event.pull_request.head.sha }}
      - run: echo "${{ github.event.pull_request.title }}"
"""


def tool(name: str) -> str:
    path = shutil.which(name)
    if path is None:
        pytest.skip(f"{name} is not installed here (nox -s lint installs it)")
    return path


def load(path: str) -> Dict[str, Any]:
    with open(path) as f:
        workflow = yaml.safe_load(f)
    workflow["on"] = workflow.pop(True, workflow.get("on"))  # YAML 1.1 reads `on:` as True
    return workflow


def jobs() -> Iterator[Tuple[str, str, Dict[str, Any]]]:
    for path in WORKFLOWS:
        for name, job in load(path)["jobs"].items():
            yield os.path.basename(path), name, job


def steps() -> Iterator[Tuple[str, str, Dict[str, Any]]]:
    for workflow, name, job in jobs():
        for step in job.get("steps", []):
            yield workflow, name, step


def broken_repository(tmp_path) -> str:
    os.makedirs(tmp_path / ".github" / "workflows")
    (tmp_path / ".github" / "workflows" / "broken.yml").write_text(BROKEN)
    subprocess.run(["git", "init", "--quiet", str(tmp_path)], check=True)  # actionlint wants one
    return str(tmp_path)


def test_the_three_workflows_exist() -> None:
    assert [os.path.basename(p) for p in WORKFLOWS] == ["ci.yml", "nightly.yml", "pr-benchmarks.yml"]


def test_actionlint_finds_nothing() -> None:
    tool("shellcheck")  # actionlint checks the run: scripts with it when it is on PATH
    result = subprocess.run([tool("actionlint")], cwd=REPO, capture_output=True, text=True)
    assert result.returncode == 0, result.stdout + result.stderr


def test_actionlint_reports_a_broken_workflow(tmp_path) -> None:
    result = subprocess.run([tool("actionlint")], cwd=broken_repository(tmp_path),
                            capture_output=True, text=True)
    assert result.returncode == 1, result.stdout + result.stderr
    assert "potentially untrusted" in result.stdout
    assert 'needs job "missing-job" which does not exist' in result.stdout


def zizmor(*args: str, cwd: str = REPO) -> subprocess.CompletedProcess:
    return subprocess.run([tool("zizmor"), "--offline", "--persona", "auditor", *args, ".github"],
                          cwd=cwd, capture_output=True, text=True)


def test_zizmor_auditor_finds_nothing() -> None:
    result = zizmor()
    assert result.returncode == 0, result.stdout + result.stderr


def test_every_zizmor_ignore_is_the_self_hosted_runner_and_explained() -> None:
    """What the ignore comments hide: the two GPU jobs' runner, each comment giving the control
    that makes it safe (docs/ci.md says it in full)."""
    import json

    hidden = json.loads(zizmor("--no-ignores", "--format", "json").stdout)
    found = sorted((f["ident"], f["locations"][0]["symbolic"]["key"]["Local"]["verbatim_path"])
                   for f in hidden)
    assert found == [("self-hosted-runner", ".github/workflows/nightly.yml"),
                     ("self-hosted-runner", ".github/workflows/pr-benchmarks.yml")]
    for path in WORKFLOWS:
        with open(path) as f:
            for line in f:
                ignore = IGNORE.search(line)
                if ignore:
                    assert ignore.group(1) == "self-hosted-runner", line
                    assert "docs/ci.md" in ignore.group(2) and "runner group" in ignore.group(2)


def test_zizmor_reports_a_broken_workflow(tmp_path) -> None:
    result = zizmor(cwd=broken_repository(tmp_path))
    assert result.returncode != 0
    for audit in ("dangerous-triggers", "unpinned-uses", "artipacked", "template-injection",
                  "excessive-permissions"):
        assert audit in result.stdout, result.stdout


def test_shell_scripts_pass_shellcheck() -> None:
    scripts = sorted(glob.glob(os.path.join(REPO, "scripts", "ci", "*.sh")))
    assert scripts
    result = subprocess.run([tool("shellcheck"), "--external-sources", *scripts], cwd=REPO,
                            capture_output=True, text=True)
    assert result.returncode == 0, result.stdout


def test_actions_are_pinned_to_commits() -> None:
    used = [(w, j, s["uses"]) for w, j, s in steps() if "uses" in s]
    assert used
    unpinned = [u for u in used if not PINNED.match(u[2])]
    assert not unpinned, f"pin these to a full commit SHA (# vX.Y.Z beside it): {unpinned}"


def test_checkouts_keep_no_credentials() -> None:
    checkouts = [(w, j, s) for w, j, s in steps() if s.get("uses", "").startswith("actions/checkout@")]
    assert checkouts
    for workflow, job, step in checkouts:
        assert step.get("with", {}).get("persist-credentials") is False, (workflow, job)


def test_permissions_are_declared_per_job() -> None:
    for path in WORKFLOWS:
        assert load(path)["permissions"] == {}, f"{path}: nothing granted at workflow level"
    for workflow, name, job in jobs():
        assert isinstance(job.get("permissions"), dict), (workflow, name)
        granted = {scope for scope, level in job["permissions"].items() if level == "write"}
        allowed = {("nightly.yml", "store"): {"contents"},
                   ("nightly.yml", "propose"): {"contents", "pull-requests"},
                   ("nightly.yml", "deploy"): {"pages", "id-token"}}.get((workflow, name), set())
        assert granted <= allowed, (workflow, name, granted)


def test_no_pull_request_target() -> None:
    for path in WORKFLOWS:
        assert "pull_request_target" not in load(path)["on"], path


def runner_labels(job: Dict[str, Any]) -> List[str]:
    runs_on = job["runs-on"]
    return runs_on.get("labels", []) if isinstance(runs_on, dict) else [runs_on] \
        if isinstance(runs_on, str) else runs_on


def test_self_hosted_runner_runs_only_trusted_code() -> None:
    """The GPU runner: the default branch's workflow definitions only, started by its schedule or
    by a maintainer (workflow_dispatch needs write access); nothing a pull request triggers.  The
    runner group (restricted to these two workflows at the default branch, docs/ci.md) is what
    enforces it: a pull request's own copy of a workflow is not one of them."""
    gpu_jobs = [(w, n, j) for w, n, j in jobs() if "self-hosted" in runner_labels(j)]
    assert {(w, n) for w, n, _ in gpu_jobs} == {("nightly.yml", "measure"),
                                                ("pr-benchmarks.yml", "compare")}
    for workflow, name, job in gpu_jobs:
        assert job["runs-on"] == GPU_RUNNER, (workflow, name)
        assert ON_DEFAULT_BRANCH in job["if"] and "||" not in job["if"], (workflow, name)
        triggers = load(os.path.join(REPO, ".github", "workflows", workflow))["on"]
        if workflow == "nightly.yml":
            assert set(triggers) == {"schedule", "workflow_dispatch"}
            assert "!github.event.repository.fork && " in job["if"]
        else:
            assert set(triggers) == {"workflow_dispatch"}
            assert job["env"]["REVIEWED_HEAD"] == "${{ inputs.head }}"
            command = job["steps"][-1]["run"]
            assert '--head-from pull-request --head "$REVIEWED_HEAD"' in command
            [pull_request] = [s for s in job["steps"] if s.get("with", {}).get("path")]
            assert pull_request["with"]["ref"] == "refs/pull/${{ inputs.pull-request }}/head"


def test_nightly_stores_deploys_and_proposes_only_from_the_default_branch() -> None:
    nightly = load(os.path.join(REPO, ".github", "workflows", "nightly.yml"))["jobs"]
    for name in ("store", "deploy", "propose"):
        assert nightly[name]["if"] == ON_DEFAULT_BRANCH, name


def test_pull_request_environments_are_the_jobs_own() -> None:
    """A pull request's code never runs in an environment the nightly reuses: the job builds
    its environments in the runner's temporary folder (emptied after each job), not the tool
    cache, and uses no preinstalled Python."""
    pr = load(os.path.join(REPO, ".github", "workflows", "pr-benchmarks.yml"))["jobs"]["compare"]
    text = str(pr)
    assert '--env-dir "$RUNNER_TEMP/fwkernels-asv-env"' in pr["steps"][-1]["run"]
    for shared in ("RUNNER_TOOL_CACHE", "GPU_PYTHON", "BENCH_PYTHON", "GPU_RELEASES"):
        assert shared not in text, shared
    nightly = load(os.path.join(REPO, ".github", "workflows", "nightly.yml"))["jobs"]["measure"]
    assert '--env-dir "$RUNNER_TOOL_CACHE/fwkernels-asv-env"' in nightly["steps"][4]["run"]


def test_nightly_runs_one_at_a_time() -> None:
    nightly = load(os.path.join(REPO, ".github", "workflows", "nightly.yml"))
    assert nightly["concurrency"]["cancel-in-progress"] is False
    assert [entry["cron"] for entry in nightly["on"]["schedule"]]


def test_expressions_stay_out_of_run_scripts() -> None:
    for workflow, job, step in steps():
        assert "${{" not in step.get("run", ""), (workflow, job, step.get("run"))


def test_run_steps_call_project_scripts() -> None:
    commands: List[str] = [s["run"] for _, _, s in steps() if "run" in s]
    assert commands
    for command in commands:
        script = re.search(r"\b(scripts/[\w./-]+)", command)
        assert script, f"call a project script instead of inline shell: {command!r}"
        assert os.path.exists(os.path.join(REPO, script.group(1))), script.group(1)
        assert len(command.strip().splitlines()) <= 2, command


def test_ci_runs_the_readme_test_command_per_nox_session() -> None:
    ci = load(os.path.join(REPO, ".github", "workflows", "ci.yml"))
    assert "bash scripts/ci/sessions.sh" in ci["jobs"]["sessions"]["steps"][-1]["run"]
    test = ci["jobs"]["test"]
    assert test["strategy"]["matrix"]["session"] == "${{ fromJSON(needs.sessions.outputs.sessions) }}"
    assert test["steps"][-1]["run"] == 'bash scripts/test -s "$SESSION"'
    with open(os.path.join(REPO, ".ci", "run")) as f:
        assert "bash scripts/test" in f.read()  # the same command, every session at once
    cache = [s for s in test["steps"] if s.get("uses", "").startswith("actions/cache@")]
    assert cache and "matrix.session" in cache[0]["with"]["key"]
