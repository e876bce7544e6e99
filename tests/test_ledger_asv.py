"""asv over a three-commit ledger of a stand-in package from a registry on localhost: asv
installs each release with the ledger's install step (a clean environment per release), records
results per release commit, carries on past a release that fails to install, and `asv run NEW`
measures only what has no results yet."""
import datetime
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("git", reason="the ledger is tested in nox -s ledger (gitpython)")

from fwkernels.ledger import build
from fwkernels.ledger.releases import Release, TrackedFramework
from fake_registry import FakeRegistry, Package

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = "fwkernels-standin"
COMPANION = "fwkernels-standin-extra"
BENCHMARKS = '''\
import json
import os
import sys
from importlib import metadata


def track_minor_version():
    """The stand-in's minor version, read from the module the release installed."""
    import fwkernels_standin
    with open(os.path.join(sys.prefix, "fwkernels-release.json")) as f:
        assert json.load(f)["version"] == fwkernels_standin.VERSION
    return int(fwkernels_standin.VERSION.split(".")[1])


def track_companion_installed():
    """1 while the companion that only release 1.0.0 pins is installed."""
    try:
        metadata.version("fwkernels-standin-extra")
        return 1
    except metadata.PackageNotFoundError:
        return 0
'''


def release(version, day, pins=None):
    return Release("standin", version, datetime.date(2026, 1, day), pins or {})


@pytest.mark.slow
def test_asv_installs_each_release_and_records_results_per_commit(tmp_path):
    registry = FakeRegistry(str(tmp_path))
    registry.add(Package(PACKAGE, "1.0.0", "2026-01-01", [COMPANION]))
    registry.add(Package(PACKAGE, "1.1.0", "2026-01-02"))
    registry.add(Package(PACKAGE, "1.2.0", "2026-01-03"))
    registry.add(Package(COMPANION, "0.1", "2026-01-01"))
    tracked = TrackedFramework("standin", PACKAGE, [COMPANION], releases=[
        release("1.0.0", 1, {COMPANION: "0.1"}),
        release("1.1.0", 2, {COMPANION: "9.9"}),  # no such companion: the install fails
        release("1.2.0", 3),
    ])
    commits = dict(build.build({"standin": tracked}, str(tmp_path / "ledger"))["standin"])
    (tmp_path / "benchmarks").mkdir()
    (tmp_path / "benchmarks" / "__init__.py").write_text("")
    (tmp_path / "benchmarks" / "standin.py").write_text(BENCHMARKS)
    conf = {
        "version": 1, "project": "standin", "repo": str(tmp_path / "ledger"),
        "branches": ["standin"], "environment_type": "virtualenv",
        "pythons": [f"{sys.version_info.major}.{sys.version_info.minor}"], "matrix": {},
        "build_command": [], "uninstall_command": [],
        # asv.conf.json's install step, run from this checkout (there, the config's directory)
        "install_command": [f"in-dir={ROOT} python -m fwkernels.ledger.install {{build_dir}}"],
        "benchmark_dir": str(tmp_path / "benchmarks"), "env_dir": str(tmp_path / "env"),
        "results_dir": str(tmp_path / "results"), "html_dir": str(tmp_path / "html"),
    }
    config = tmp_path / "asv.conf.json"
    config.write_text(json.dumps(conf))
    with registry:
        # HOME: asv keeps its machines in ~/.asv-machine.json; a fresh one, as on a new runner
        env = dict(os.environ, PIP_EXTRA_INDEX_URL=registry.simple, FWKERNELS_MACHINE="ledger-test",
                   FWKERNELS_RECORDS_DIR=str(tmp_path / "records"), HOME=str(tmp_path))

        def asv(*args):
            return subprocess.run([sys.executable, "-m", "asv", "--config", str(config), *args],
                                  cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)

        machine = subprocess.run([sys.executable, "-m", "fwkernels", "asv-machine", "ledger-test"],
                                 cwd=ROOT, env=env, capture_output=True, text=True)
        assert machine.returncode == 0, machine.stderr
        first = asv("run", "NEW", "--machine", "ledger-test", "--show-stderr")
        again = asv("run", "NEW", "--machine", "ledger-test", "--show-stderr")
    output = first.stdout + first.stderr
    # the machine as the site shows it: asv's `machine --yes` alone would leave only its name
    with open(tmp_path / "results" / "ledger-test" / "machine.json") as f:
        described = json.load(f)
    assert described["num_cpu"] == str(os.cpu_count()) and described["cpu"] and described["ram"]
    assert "fwkernels-standin 1.1.0" not in output or "failed to install" in output, output
    assert "standin 1.1.0 failed to install" in output, output[-3000:]

    def values(tag):
        name = f"{commits[tag][:8]}-virtualenv-py{sys.version_info.major}.{sys.version_info.minor}"
        with open(tmp_path / "results" / "ledger-test" / f"{name}.json") as f:
            data = json.load(f)
        columns = data["result_columns"]
        results = {bench.split(".")[-1]: dict(zip(columns, entry))["result"]
                   for bench, entry in data["results"].items()}
        return {bench: result and result[0] for bench, result in results.items()}

    assert values("standin-1.0.0") == {"track_minor_version": 0, "track_companion_installed": 1}
    assert values("standin-1.1.0") == {"track_minor_version": None,
                                       "track_companion_installed": None}
    # the companion of 1.0.0 is gone: each release starts from a clean environment
    assert values("standin-1.2.0") == {"track_minor_version": 2, "track_companion_installed": 0}
    name = f"{commits['standin-1.1.0'][:8]}-virtualenv-py{sys.version_info.major}.{sys.version_info.minor}"
    with open(tmp_path / "records" / "ledger-test" / f"{name}.jsonl") as f:
        [failure] = [json.loads(line) for line in f]
    assert (failure["release"], failure["status"], failure["failed_phase"]) == (
        "standin-1.1.0", "error", "install")
    assert "failed to install" in failure["error"]
    # every release has results now (1.1.0's say it failed): nothing is new
    assert "Installing" not in again.stdout + again.stderr
    assert "track_minor_version" not in again.stdout
