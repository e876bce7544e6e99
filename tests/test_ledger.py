"""The release ledger: the releases file, the deterministic ledger, discovery against a local
registry, and `fwkernels ledger` on bad input. The asv run over a ledger is in test_ledger_asv.py."""
import copy
import datetime
import itertools
import json
import os
import subprocess
import sys

import pytest

pytest.importorskip("git", reason="the ledger is tested in nox -s ledger (gitpython)")

from fwkernels.ledger import build, releases
from fwkernels.ledger.discover import Registry, RegistryUnavailable, discover
from fwkernels.ledger.releases import LedgerError
from fake_registry import FakeRegistry, Package, pip_environment

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KNOWN = ["torch", "jax"]
TWO_FRAMEWORKS = """\
[torch]
package = "torch"
companions = ["torchvision"]

[[torch.release]]
version = "2.13.0"
date = 2026-07-08
pins = { torchvision = "0.28.0" }

[[torch.release]]
version = "2.14.1"
date = 2026-09-30
pins = { torchvision = "0.29.1" }
note = "the newest"

[jax]
package = "jax"
companions = ["jaxlib", "flax", "optax"]

[[jax.release]]
version = "0.10.2"
date = 2026-06-17
pins = { jaxlib = "0.10.2", flax = "0.12.8", optax = "0.2.8" }
"""
# The commit of torch 2.14.1 in the ledger of TWO_FRAMEWORKS: what any machine must build (the
# content, author, dates and parent all come from the file, nothing from the machine or clock).
TORCH_2_14_1 = "63a4aea7fad78b82bcf3ddf17bff3781357d53b8"


def write(tmp_path, text, name="releases.toml"):
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_releases_file_loads_and_writes_back_unchanged(tmp_path):
    tracked = releases.load(write(tmp_path, TWO_FRAMEWORKS), known=KNOWN)
    assert list(tracked) == ["torch", "jax"]
    torch = tracked["torch"]
    assert [r.version for r in torch.releases] == ["2.13.0", "2.14.1"]
    assert torch.newest.date == datetime.date(2026, 9, 30)
    assert torch.newest.tag == "torch-2.14.1"
    assert releases.requirements(torch, torch.newest) == ["torch===2.14.1", "torchvision===0.29.1"]
    copy = str(tmp_path / "copy.toml")
    releases.dump(tracked, copy)
    assert releases.load(copy, known=KNOWN) == tracked


@pytest.mark.parametrize("text, message", [
    ('[caffe]\npackage = "caffe"\n', "unknown framework [caffe]; valid frameworks: torch, jax"),
    ('[torch]\npackage = "torch"\n[[torch.release]]\nversion = "two"\ndate = 2026-01-01\n',
     "a version string"),
    ('[torch]\npackage = "torch"\n[[torch.release]]\nversion = "2.1.0"\n', "needs `date`"),
    ('[torch]\npackage = "torch"\n[[torch.release]]\nversion = "2.1.0"\ndate = 2026-02-01\n'
     '[[torch.release]]\nversion = "2.2.0"\ndate = 2026-01-01\n', "list releases oldest first"),
    ('[torch]\npackage = "torch"\n[[torch.release]]\nversion = "2.1.0"\ndate = 2026-02-01\n'
     '[[torch.release]]\nversion = "2.1.0"\ndate = 2026-02-01\n', "listed twice"),
    ('[torch]\npackage = "torch"\nversions = []\n', "unknown keys versions"),
    ('[torch]\npackage = "torch --index-url x"\n', "`package` must name the distribution"),
    ('[torch]\npackage = "torch"\n[[torch.release]]\nversion = "2.1.0"\ndate = 2026-01-01\n'
     'pins = { torchvision = 29 }\n', "`pins` maps package names to exact versions"),
    ("[torch\n", "not valid TOML"),
    ('[torch]\npackage = "torch"\n[[torch.release]]\nversion = "2.1.0"\ndate = 2026-01-01\n'
     'build_requires = "setuptools<74"\n', "`build_requires` must be a list of requirements"),
    ('[torch]\npackage = "torch"\n[[torch.release]]\nversion = "2.1.0"\ndate = 2026-01-01\n'
     'build_requires = ["setuptools<74 --pre"]\n', "`build_requires` must be a list"),
    ('[torch]\npackage = "torch"\nenvironment = "../elsewhere.sh"\n', "`environment` must be"),
    ('[torch]\npackage = "torch"\nenvironment = "scripts/env.py"\n', "`environment` must be"),
])
def test_bad_releases_file_is_one_clear_error(tmp_path, text, message):
    with pytest.raises(LedgerError, match=message.replace("[", r"\[").replace("(", r"\(")):
        releases.load(write(tmp_path, text), known=KNOWN)


SOURCE_ONLY = """\
[torch]
package = "torch"

[[torch.release]]
version = "7.8.1"
date = 2020-08-27
pins = { numpy = "1.23.5" }
build_requires = ["setuptools<74", "wheel"]
"""


def test_build_requires_are_installed_first_then_the_release_without_build_isolation(tmp_path):
    from fwkernels.ledger import install

    tracked = releases.load(write(tmp_path, SOURCE_ONLY), known=KNOWN)
    copy = str(tmp_path / "copy.toml")
    releases.dump(tracked, copy)
    assert open(copy).read().count('build_requires = ["setuptools<74", "wheel"]') == 1
    assert releases.load(copy, known=KNOWN) == tracked
    document = build.release_document(tracked["torch"], tracked["torch"].newest)
    assert document["build_requires"] == ["setuptools<74", "wheel"]
    assert install.install_steps(document["requirements"]["cpu"], document["build_requires"]) == [
        ["setuptools<74", "wheel", "numpy===1.23.5"],
        ["--no-build-isolation", "torch===7.8.1", "numpy===1.23.5"]]
    plain = releases.load(write(tmp_path, TWO_FRAMEWORKS), known=KNOWN)["torch"]
    assert "build_requires" not in build.release_document(plain, plain.newest)  # hashes kept
    assert install.install_steps(["torch===2.14.1"], []) == [["torch===2.14.1"]]


def test_a_release_is_installed_without_byte_compiling_and_the_harness_beside_it(
        tmp_path, monkeypatch):
    """pip does not compile the release's modules (a worker compiles what it imports); the
    record names the versions installed."""
    from fwkernels.ledger import install

    plain = releases.load(write(tmp_path, TWO_FRAMEWORKS), known=KNOWN)["torch"]
    build_dir, prefix = tmp_path / "build", tmp_path / "prefix"
    for folder in (build_dir, prefix):
        folder.mkdir()
    (build_dir / build.RELEASE_FILE).write_text(
        json.dumps(build.release_document(plain, plain.newest)))
    calls = []
    monkeypatch.setattr(install, "pip", lambda *args: calls.append(args) or
                        subprocess.CompletedProcess(args, 0, ""))
    monkeypatch.setattr(install, "installed_distributions",
                        lambda: {"pip": "24.0", "torch": "2.14.1", "torchvision": "0.29.1"})
    monkeypatch.setattr(install.sys, "prefix", str(prefix))
    install.baseline(str(prefix))
    record = install.install(str(build_dir), "cpu", str(tmp_path / "harness"))
    installs = [call for call in calls if call[0] == "install"]
    assert installs[0] == ("install", "--no-compile", "torch===2.14.1", "torchvision===0.29.1")
    assert installs[1][-2:] == ("-e", str(tmp_path / "harness"))
    assert record["installed"] == {"torch": "2.14.1", "torchvision": "0.29.1"}


def test_chainer_installs_as_its_sdist_needs():
    """Chainer 7.8.1 builds only with setuptools < 74 and wheel, without build isolation."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    chainer = releases.load(os.path.join(root, releases.DEFAULT_PATH))["chainer"]
    release = chainer.release("7.8.1")
    assert release.build_requires == ["setuptools<74", "wheel"]
    assert releases.requirements(chainer, release) == ["chainer===7.8.1", "numpy===1.23.5"]


OWN_PYTHON = """\
[torch]
package = "cntk"
environment = "scripts/own-env.sh"

[[torch.release]]
version = "2.7.post2"
date = 2020-12-09
pins = { numpy = "1.19.5" }
"""
# What the install step must call: a script of the checkout, given the folder and the release's
# requirements; it writes what it was given and a dist-info, as a real environment has.
FAKE_ENVIRONMENT_SCRIPT = """\
folder=$1; shift
mkdir -p "$folder/lib/python3.6/site-packages/cntk-2.7.dist-info"
printf 'Name: cntk\\nVersion: 2.7.post2\\n' \\
    > "$folder/lib/python3.6/site-packages/cntk-2.7.dist-info/METADATA"
echo "$@" > "$folder/requirements.txt"
"""


def test_a_release_on_a_python_of_its_own_is_installed_by_its_script(tmp_path, monkeypatch):
    """CNTK 2.7 (cp36 wheels only): its script makes the environment inside asv's, asv's
    environment gets fwkernels' side (numpy), and the marker records the script's versions."""
    from fwkernels.ledger import install, installed

    tracked = releases.load(write(tmp_path, OWN_PYTHON), known=KNOWN)["torch"]
    copy = str(tmp_path / "copy.toml")
    releases.dump({"torch": tracked}, copy)
    assert releases.load(copy, known=KNOWN)["torch"] == tracked
    document = build.release_document(tracked, tracked.newest)
    assert document["environment"] == "scripts/own-env.sh"
    plain = releases.load(write(tmp_path, TWO_FRAMEWORKS), known=KNOWN)["torch"]
    assert "environment" not in build.release_document(plain, plain.newest)  # hashes kept
    build_dir, harness, prefix = tmp_path / "build", tmp_path / "harness", tmp_path / "prefix"
    for folder in (build_dir, harness / "scripts", prefix):
        folder.mkdir(parents=True)
    (build_dir / build.RELEASE_FILE).write_text(json.dumps(document))
    (harness / "scripts" / "own-env.sh").write_text(FAKE_ENVIRONMENT_SCRIPT)
    calls = []
    monkeypatch.setattr(install, "pip", lambda *args: calls.append(args) or
                        subprocess.CompletedProcess(args, 0, ""))
    monkeypatch.setattr(install, "installed_distributions", lambda: {"pip": "24.0"})
    monkeypatch.setattr(install.sys, "prefix", str(prefix))
    record = install.install(str(build_dir), "cpu", str(harness))
    folder = installed.own_environment("torch")
    assert folder.startswith(str(prefix))
    assert open(os.path.join(folder, "requirements.txt")).read().split() == [
        "cntk===2.7.post2", "numpy===1.19.5"]
    assert calls[0] == ("install", *install.OWN_PYTHON_HARNESS)
    assert record["installed"] == {"cntk": "2.7.post2", "numpy": None}
    assert json.load(open(prefix / install.MARKER))["environment"] == "scripts/own-env.sh"
    install.clean(str(prefix))  # the next release starts without it
    assert not os.path.exists(folder)


def test_a_post_release_is_the_version_it_repackages():
    from fwkernels.ledger.installed import matches

    assert matches("2.7.post2", "2.7") and matches("2.14.1", "2.14.1+cu130")
    assert matches("3.15.1", "3.15.1 (jax 0.11.2)")
    assert not matches("2.7.post2", "2.6") and not matches("2.14.1", "2.14.10")


def test_clean_puts_back_the_environments_own_packages(tmp_path, monkeypatch):
    """A release's build requirements (setuptools < 74) must not outlive it."""
    from fwkernels.ledger import install

    calls = []
    monkeypatch.setattr(install, "pip", lambda *args: calls.append(args) or
                        subprocess.CompletedProcess(args, 0, ""))
    monkeypatch.setattr(install, "installed_distributions",
                        lambda: {"pip": "24.0", "setuptools": "75.1.0"})
    install.baseline(str(tmp_path))  # recorded with versions the first time
    monkeypatch.setattr(install, "installed_distributions",
                        lambda: {"pip": "24.0", "setuptools": "73.0.1", "chainer": "7.8.1"})
    assert install.clean(str(tmp_path)) == ["chainer"]
    assert calls == [("install", "setuptools==75.1.0"), ("uninstall", "-y", "chainer")]
    calls.clear()
    with open(tmp_path / install.BASELINE, "w") as f:
        json.dump(["pip", "setuptools"], f)  # a baseline of names only, as written before
    assert install.clean(str(tmp_path)) == ["chainer"]
    assert calls == [("uninstall", "-y", "chainer")]


def test_ledger_is_the_same_built_twice_and_on_any_machine(tmp_path):
    tracked = releases.load(write(tmp_path, TWO_FRAMEWORKS), known=KNOWN)
    first = build.build(tracked, str(tmp_path / "a"))
    again = build.build(tracked, str(tmp_path / "a"))
    elsewhere = build.build(tracked, str(tmp_path / "b"))
    assert first == again == elsewhere
    assert first["torch"][-1] == ("torch-2.14.1", TORCH_2_14_1)
    git = ["git", "-C", str(tmp_path / "a")]
    log = subprocess.run(git + ["log", "--format=%ad %s", "--date=short", "torch"],
                         capture_output=True, text=True, check=True).stdout.splitlines()
    assert log == ["2026-09-30 torch 2.14.1", "2026-07-08 torch 2.13.0"]
    shown = subprocess.run(git + ["show", "torch-2.14.1:release.json"], capture_output=True,
                           text=True, check=True).stdout
    assert '"torch===2.14.1"' in shown and '"torchvision===0.29.1"' in shown


def test_a_new_release_leaves_the_older_commits_alone_and_a_removed_one_goes(tmp_path):
    path = write(tmp_path, TWO_FRAMEWORKS)
    tracked = releases.load(path, known=KNOWN)
    before = build.build(tracked, str(tmp_path / "ledger"))
    tracked["torch"].releases.append(releases.Release("torch", "2.15.0",
                                                      datetime.date(2026, 10, 28),
                                                      {"torchvision": "0.29.2"}))
    after = build.build(tracked, str(tmp_path / "ledger"))
    assert after["torch"][:2] == before["torch"]
    assert after["torch"][2][0] == "torch-2.15.0"
    del tracked["jax"]
    build.build(tracked, str(tmp_path / "ledger"))
    with pytest.raises(LedgerError, match="'jax-0.10.2' is not a release"):
        build.resolve(str(tmp_path / "ledger"), "jax-0.10.2")
    assert build.resolve(str(tmp_path / "ledger"), "torch-2.15.0") == after["torch"][2][1]


STANDIN = """\
[torch]
package = "standin"
companions = ["standin-extra"]

[[torch.release]]
version = "1.0.0"
date = 2026-01-01
pins = { standin-extra = "0.1", numpy = "1.23.5" }
"""


def standin_registry(directory):
    registry = FakeRegistry(str(directory))
    registry.add(Package("standin", "1.0.0", "2026-01-01", ["standin-extra"]))
    registry.add(Package("standin", "1.1.0", "2026-02-03", ["standin-extra"]))
    registry.add(Package("standin", "1.2.0", "2026-03-04", ["standin-extra>=0.2"]))
    registry.add(Package("standin", "1.3.0", "2026-04-05", requires_python=">=3.99"))
    registry.add(Package("standin", "2.0.0rc1", "2026-05-06"))
    registry.add(Package("standin-extra", "0.1", "2026-01-01"))
    registry.add(Package("standin-extra", "0.2", "2026-02-01"))
    registry.add(Package("numpy", "1.23.5", "2022-11-20"))
    return registry


def test_discovery_adds_newer_releases_with_dates_and_companions(tmp_path):
    tracked = releases.load(write(tmp_path, STANDIN), known=KNOWN)["torch"]
    (tmp_path / "registry").mkdir()
    with standin_registry(tmp_path / "registry") as registry:
        found = discover(tracked, Registry(env=pip_environment(registry)))
    assert [(r.version, r.date.isoformat(), r.pins) for r in found.added] == [
        ("1.1.0", "2026-02-03", {"standin-extra": "0.2", "numpy": "1.23.5"}),
        ("1.2.0", "2026-03-04", {"standin-extra": "0.2", "numpy": "1.23.5"}),
    ]
    [skipped] = found.skipped
    assert skipped.version == "1.3.0"
    assert skipped.reason.startswith("requires Python >=3.99; this is Python 3.")


def run_cli(*args, env=None):
    return subprocess.run([sys.executable, "-m", "fwkernels", "ledger", *args],
                          capture_output=True, text=True, env={**os.environ, **(env or {})})


def test_discover_command_writes_the_file_and_says_what_it_skipped(tmp_path):
    path = write(tmp_path, STANDIN)
    (tmp_path / "registry").mkdir()
    with standin_registry(tmp_path / "registry") as registry:
        result = run_cli("discover", "--releases", path, env=pip_environment(registry))
    assert result.returncode == 0, result.stderr
    assert "torch 1.2.0: released 2026-03-04; with standin-extra 0.2, numpy 1.23.5" in result.stdout
    assert "torch 1.3.0: skipped, requires Python >=3.99" in result.stdout
    assert [r.version for r in releases.load(path)["torch"].releases] == ["1.0.0", "1.1.0", "1.2.0"]


def test_discover_without_a_registry_says_so_and_changes_nothing(tmp_path):
    path = write(tmp_path, STANDIN)
    with FakeRegistry(str(tmp_path)) as registry:
        env = pip_environment(registry)
    before = open(path).read()
    result = run_cli("discover", "--releases", path, env=env)  # the registry is gone
    assert result.returncode == 1
    assert "cannot reach the package registry" in result.stderr
    assert "nothing changed" in result.stderr and "Traceback" not in result.stderr
    assert open(path).read() == before


def test_registry_unavailable_is_an_error_of_its_own():
    with pytest.raises(RegistryUnavailable):
        Registry(index_url="http://127.0.0.1:9/simple/", env={"PIP_CONFIG_FILE": os.devnull},
                 timeout=5).project("standin")


@pytest.mark.parametrize("args, message", [
    (["commits", "--framework", "caffe"], "caffe not in"),
    (["commits", "--last", "-1"], "--last must be >= 0"),
    (["build", "--releases", "missing.toml"], "no releases file 'missing.toml'"),
])
def test_ledger_command_bad_input_exits_2_with_one_line(tmp_path, args, message):
    path = write(tmp_path, TWO_FRAMEWORKS)
    if "--releases" not in args:
        args = [*args, "--releases", path]
    result = run_cli(*args, "--ledger", str(tmp_path / "ledger"))
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1


def test_commits_lists_the_last_releases_of_each_framework(tmp_path):
    path = write(tmp_path, TWO_FRAMEWORKS)
    ledger = str(tmp_path / "ledger")
    assert run_cli("build", "--releases", path, "--ledger", ledger).returncode == 0
    tags = run_cli("commits", "--last", "1", "--tags", "--releases", path, "--ledger", ledger)
    assert tags.stdout.split() == ["torch-2.14.1", "jax-0.10.2"]
    hashes = run_cli("commits", "--framework", "torch", "--releases", path, "--ledger", ledger)
    assert hashes.stdout.split()[-1] == TORCH_2_14_1
    left = run_cli("commits", "--last", "1", "--tags", "--exclude", "torch", "--releases", path,
                   "--ledger", ledger)
    assert left.stdout.split() == ["jax-0.10.2"]
    bad = run_cli("commits", "--exclude", "nosuch", "--releases", path, "--ledger", ledger)
    assert bad.returncode == 2 and "nosuch" in bad.stderr and "torch" in bad.stderr


def test_asv_configuration_lists_every_framework_of_the_releases_file():
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with open(os.path.join(root, "asv.conf.json")) as f:
        text = "\n".join(line for line in f if not line.lstrip().startswith("//"))
    conf = json.loads(text)
    tracked = releases.load(os.path.join(root, releases.DEFAULT_PATH))
    assert conf["branches"] == list(tracked)
    assert conf["repo"] == build.DEFAULT_PATH
    assert all(t.releases for t in tracked.values())


def fixture_results(tmp_path, releases_text):
    """tests/data's results and records of one machine (torch 2.13.0 and 2.14.1 at a commit of
    fwkernels, before the ledger), a releases file and its ledger, in tmp_path."""
    import shutil

    data = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data")
    for folder in ("results", "records"):
        shutil.copytree(os.path.join(data, folder, "cpu-fixture"),
                        tmp_path / folder / "cpu-fixture")
    shutil.copy(os.path.join(data, "results", "benchmarks.json"), tmp_path / "results")
    path = write(tmp_path, releases_text)
    build.build(releases.load(path), str(tmp_path / ".asv" / "ledger"))
    return path


def test_fold_moves_results_of_fwkernels_commits_to_their_releases(tmp_path):
    from fwkernels.ledger.fold import fold
    from fwkernels.report.results import load_runs, select

    path = fixture_results(tmp_path, TWO_FRAMEWORKS)
    ledger = str(tmp_path / ".asv" / "ledger")
    before = load_runs(str(tmp_path / "results"))
    written = fold(str(tmp_path / "results"), str(tmp_path / "records"), "cpu-fixture",
                   "virtualenv-py3.11", releases.load(path), ledger)
    assert len(written) == 4  # a result file and a records file per release
    runs = load_runs(str(tmp_path / "results"))
    assert sorted(r.release for r in runs) == ["torch-2.13.0", "torch-2.14.1"]
    assert {r.env for r in runs} == {"virtualenv-py3.11"}
    with open(tmp_path / "results" / "cpu-fixture" / "machine.json") as f:
        machine = {k: v for k, v in json.load(f).items() if k != "version"}
    for name in written[::2]:
        with open(name) as f:
            data = json.load(f)
        assert data["python"] == "3.11"  # one entry in the site's python selector
        # the parameters asv writes for a run of this environment: the site graphs folded and
        # freshly run releases as one series
        assert data["params"] == {**machine, "python": "3.11"}
    # every figure kept, under the suite's mode parameter ("torch" is its default mode)
    assert sorted(v.mean for r in before for v in r.values.values()) == \
        sorted(v.mean for r in runs for v in r.values.values())
    for run in runs:
        assert run.records and all(r.release == run.release for r in run.records)
        assert {r.harness_commit[:8] for r in run.records} == {"62d2aa7d"}
    assert [r.release for r in select(runs, "cpu-fixture")] == ["torch-2.14.1"]
    compared = subprocess.run([sys.executable, "-m", "fwkernels", "compare", "torch-2.13.0",
                               "torch-2.14.1", "--results", str(tmp_path / "results"),
                               "--machine", "cpu-fixture", "--factor", "100"],
                              capture_output=True, text=True)
    assert compared.returncode == 0, compared.stderr
    assert "track_samples_per_s" in compared.stdout and "ncf" in compared.stdout
    again = fold(str(tmp_path / "results"), str(tmp_path / "records"), "cpu-fixture",
                 "virtualenv-py3.11", releases.load(path), ledger)
    assert again == []  # folded already


def test_a_later_slice_folds_into_the_folded_file_cell_by_cell(tmp_path):
    """A slice run elsewhere and brought back unfolded (scripts/gpu-existing.sh, FWKERNELS_FOLD=0):
    its measured cells replace the folded ones, its skipped cells (NaN) leave them as they were."""
    from fwkernels.ledger.fold import COLUMNS, fold
    from fwkernels.report.results import load_result_file

    path = fixture_results(tmp_path, TWO_FRAMEWORKS)
    ledger = str(tmp_path / ".asv" / "ledger")
    args = (str(tmp_path / "results"), str(tmp_path / "records"), "cpu-fixture",
            "virtualenv-py3.11", releases.load(path), ledger)
    folded = fold(*args)[0]
    before = load_result_file(folded)
    result, started = COLUMNS.index("result"), COLUMNS.index("started_at")
    benchmark = "training.Training.track_samples_per_s"
    cells = before["results"][benchmark][result]
    measured = next(i for i, v in enumerate(cells) if v is not None)
    later = copy.deepcopy(before)
    later["env_name"] = "existing-py_opt_fwk_slice_bin_python"
    for columns in later["results"].values():
        columns[started] = (columns[started] or 0) + 1000
        if columns[result]:
            columns[result] = [float("nan")] * len(columns[result])
    later["results"][benchmark][result][measured] = cells[measured] * 2
    stem = os.path.basename(folded).split("-")[0]
    slice_path = tmp_path / "results" / "cpu-fixture" / f"{stem}-{later['env_name']}.json"
    slice_path.write_text(json.dumps(later))
    assert folded in fold(*args)
    after = load_result_file(folded)["results"][benchmark][result]
    assert after[measured] == cells[measured] * 2
    assert [v for i, v in enumerate(after) if i != measured] == \
        [v for i, v in enumerate(cells) if i != measured]  # the skipped cells
    assert not slice_path.exists()


def test_a_run_of_fewer_models_keeps_the_others_set_aside_before_it(tmp_path):
    """scripts/bench: set-aside before `asv run`, fold after it. asv replaces the release's result
    with one of the run's models only; the fold brings back the other models' figures and
    records, takes the run's own figures where both have one, and keeps a failed cell in the
    grid without letting it hide a figure."""
    from fwkernels.ledger.fold import COLUMNS, SET_ASIDE_ENV, fold, set_aside
    from fwkernels.report.results import load_result_file

    path = fixture_results(tmp_path, TWO_FRAMEWORKS)
    ledger = str(tmp_path / ".asv" / "ledger")
    results, records = str(tmp_path / "results"), str(tmp_path / "records")
    args = (results, records, "cpu-fixture", "virtualenv-py3.11", releases.load(path), ledger)
    fold(*args)
    commit = build.resolve(ledger, "torch-2.14.1")
    result_path, records_path = (os.path.join(folder, "cpu-fixture",
                                              f"{commit[:8]}-virtualenv-py3.11{extension}")
                                 for folder, extension in ((results, ".json"),
                                                           (records, ".jsonl")))
    index = {c: COLUMNS.index(c) for c in ("result", "params", "started_at")}
    before = load_result_file(result_path)
    for columns in before["results"].values():  # GoogleNet failed in the earlier run
        combos = itertools.product(*columns[index["params"]])
        columns[index["result"]] = [None if combo[1] == "'googlenet'" else value
                                    for combo, value in zip(combos, columns[index["result"]])]
    with open(result_path, "w") as f:
        json.dump(before, f)
    with open(records_path) as f:
        earlier_records = [line.replace('"status": "ok"', '"status": "error"')
                           if '"model": "googlenet"' in line else line
                           for line in f.read().splitlines()]
    with open(records_path, "w") as f:
        f.write("\n".join(earlier_records) + "\n")
    moved = set_aside(*args[:4], [commit])
    assert [os.path.basename(p) for p in moved] == [f"{commit[:8]}-{SET_ASIDE_ENV}.json",
                                                   f"{commit[:8]}-{SET_ASIDE_ENV}.jsonl"]
    assert not os.path.exists(result_path) and not os.path.exists(records_path)
    # what asv writes for a run of AlexNet-OWT and NCF: a grid of two models, NCF at twice the
    # throughput, AlexNet-OWT failed this time
    run = copy.deepcopy(before)
    for columns in run["results"].values():
        columns[index["params"]][1] = ["'ncf'", "'alexnet_owt'"]  # in the suite's order
        kept = [i for i, combo in enumerate(itertools.product(*columns[index["params"]]))
                if combo[1] in columns[index["params"]][1]]
        for i, column in enumerate(columns):
            if isinstance(column, list) and i != index["params"]:
                columns[i] = [column[k] for k in kept]
        columns[index["result"]] = [2 * columns[index["result"]][0], None]
        columns[index["started_at"]] += 1000
    with open(result_path, "w") as f:
        json.dump(run, f)
    ncf_record = next(line for line in earlier_records if '"model": "ncf"' in line)
    with open(records_path, "w") as f:
        f.write(ncf_record.replace('"timestamp": "2026-', '"timestamp": "2027-') + "\n")
    assert result_path in fold(*args)
    after = load_result_file(result_path)
    benchmark = "training.Training.track_samples_per_s"
    grid = after["results"][benchmark][index["params"]]
    assert grid == before["results"][benchmark][index["params"]]  # every model again
    # NCF's new figure; AlexNet-OWT's earlier one, not this run's failure; GoogleNet's earlier
    # failure, still in the grid
    for combo, old, new in zip(itertools.product(*grid),
                               before["results"][benchmark][index["result"]],
                               after["results"][benchmark][index["result"]]):
        assert new == (2 * old if combo[1] == "'ncf'" else old), combo
    assert after["results"][benchmark][index["result"]].count(None) == 1
    with open(records_path) as f:
        assert len(f.read().splitlines()) == len(earlier_records) + 1
    assert not [name for name in os.listdir(tmp_path / "results" / "cpu-fixture")
                if SET_ASIDE_ENV in name]
    # a set-aside never folded back (a run killed) is not overwritten by the next
    set_aside(*args[:4], [commit])
    with pytest.raises(LedgerError, match="not folded back"):
        set_aside(*args[:4], [commit])


def test_asv_machine_keeps_the_description_its_results_ran_under(tmp_path):
    """A kernel update changes the system asv detects: a machine with results keeps the system it
    was described with (else the site draws its releases as two series); another processor or
    core count under its name is refused."""
    pytest.importorskip("asv")

    def describe():
        return subprocess.run([sys.executable, "-m", "fwkernels", "asv-machine", "m1",
                               "--results", str(tmp_path / "results")],
                              env=dict(os.environ, HOME=str(tmp_path)), capture_output=True,
                              text=True)

    def stored():
        with open(tmp_path / ".asv-machine.json") as f:
            return json.load(f)["m1"]

    assert describe().returncode == 0
    detected = stored()
    (tmp_path / "results" / "m1").mkdir(parents=True)
    described = tmp_path / "results" / "m1" / "machine.json"
    described.write_text(json.dumps({**detected, "os": "Linux earlier", "version": 1}))
    kept = describe()
    assert kept.returncode == 0, kept.stderr
    assert stored() == {**detected, "os": "Linux earlier"}
    assert "os kept as" in kept.stdout
    described.write_text(json.dumps({**detected, "num_cpu": "999", "version": 1}))
    refused = describe()
    assert refused.returncode == 2
    assert refused.stderr.count("\n") == 1 and "num_cpu '999'" in refused.stderr


def test_fold_writes_the_figures_of_a_stopped_run_from_its_records_as_asv_would(tmp_path):
    """A run stopped before asv wrote its results (a time limit) brings back records only: fold
    writes their figures with asv's own statistics, the same as asv wrote for the same records,
    and never replaces a figure asv wrote."""
    from fwkernels.ledger.fold import fold
    from fwkernels.report.results import combinations, load_result_file

    folded_files = {}
    for case in ("asv", "stopped"):
        root = tmp_path / case
        path = fixture_results(root, TWO_FRAMEWORKS)
        machine_results = root / "results" / "cpu-fixture"
        records_dir = root / "records" / "cpu-fixture"
        from_records = []
        if case == "stopped":
            (machine_results / "62d2aa7d-virtualenv-py3.11-torch2.13.0.json").unlink()
            # a later record of a combination asv wrote a figure for, its result file lost too
            newer = json.loads((records_dir / "62d2aa7d-virtualenv-py3.11-torch2.14.1-"
                                "torchvision0.29.1.jsonl").read_text().splitlines()[0])
            newer["window_samples_per_s"] = [2 * x for x in newer["window_samples_per_s"]]
            newer["timestamp"] = "2030-01-01T00:00:00+00:00"
            (records_dir / "62d2aa7d-existing-py_slice.jsonl").write_text(json.dumps(newer) + "\n")
        written = fold(str(root / "results"), str(root / "records"), "cpu-fixture",
                       "virtualenv-py3.11", releases.load(path), str(root / ".asv" / "ledger"),
                       from_records)
        folded_files[case] = {os.path.basename(p): load_result_file(p) for p in written[::2]}
        if case == "stopped":
            assert sorted(from_records) == [f"cpu-fixture torch-2.13.0 default {model} fp32"
                                            for model in ("alexnet_owt", "googlenet", "ncf")]

    def figures(data):
        return {(benchmark, combo): (cell, fields["version"])
                for benchmark, combo, cell, fields in combinations(data)
                if cell.get("result") is not None}

    assert folded_files["asv"].keys() == folded_files["stopped"].keys()
    for name, data in folded_files["asv"].items():
        expected, got = figures(data), figures(folded_files["stopped"][name])
        assert got.keys() == expected.keys() and len(expected) == 3 * 8
        for key, (cell, version) in expected.items():
            assert got[key][1] == version
            for column, value in cell.items():
                assert got[key][0][column] == (value if value is None
                                               else pytest.approx(value, rel=1e-12)), (key, column)


def test_fold_names_a_release_missing_from_the_releases_file_and_writes_nothing(tmp_path):
    from fwkernels.ledger.fold import fold

    only_newer = TWO_FRAMEWORKS.replace('version = "2.13.0"\ndate = 2026-07-08\n'
                                        'pins = { torchvision = "0.28.0" }\n', 'version = "2.12.1"\n'
                                        'date = 2026-06-17\n')
    path = fixture_results(tmp_path, only_newer)
    listed = sorted(os.listdir(tmp_path / "results" / "cpu-fixture"))
    with pytest.raises(LedgerError, match="torch 2.13.0 is not in the releases file"):
        fold(str(tmp_path / "results"), str(tmp_path / "records"), "cpu-fixture",
             "virtualenv-py3.11", releases.load(path), str(tmp_path / ".asv" / "ledger"))
    assert sorted(os.listdir(tmp_path / "results" / "cpu-fixture")) == listed


class TwoPythonsRegistry(Registry):
    """A registry whose jax 0.12.1 has wheels for Python >=3.12 only: this interpreter's pip
    cannot install it, the pip of ``OTHER_PYTHON`` can."""
    OTHER_PYTHON = "/opt/python3.12/bin/python3"

    def __init__(self) -> None:
        super().__init__(index_url="http://registry.invalid/simple/")

    def project(self, package):
        from fwkernels.ledger.discover import Project

        return Project(versions=["0.10.2", "0.12.1"],
                       upload_dates={"0.10.2": "2026-06-17", "0.12.1": "2026-11-18"},
                       requires_python={"0.12.1": [">=3.12"]}, yanked=[])

    def installable(self, package):
        return ["0.10.2", "0.12.1"] if self.python == self.OTHER_PYTHON else ["0.10.2"]

    def resolve(self, requirements):
        assert self.python == self.OTHER_PYTHON, "resolved with a pip that cannot install it"
        return {"jax": "0.12.1", "jaxlib": "0.12.1", "flax": "0.12.12", "optax": "0.2.8"}


def test_a_release_for_another_python_is_found_through_that_pythons_pip(tmp_path, monkeypatch):
    """JAX 0.12 has no wheel for Python 3.11: discovery asks a Python of this machine that it
    admits, and the release keeps its requirement (the install step then makes its environment);
    without such a Python it is skipped with the reason, as before."""
    from fwkernels.ledger import discover as discovery, pythons

    jax = releases.load(write(tmp_path, TWO_FRAMEWORKS), known=KNOWN)["jax"]
    monkeypatch.setattr(discovery.platform, "python_version", lambda: "3.11.7")
    monkeypatch.setattr(pythons, "find", lambda specifier: TwoPythonsRegistry.OTHER_PYTHON
                        if specifier == ">=3.12" else None)
    [added] = discover(jax, TwoPythonsRegistry()).added
    assert (added.version, added.python) == ("0.12.1", ">=3.12")
    assert added.pins == {"jaxlib": "0.12.1", "flax": "0.12.12", "optax": "0.2.8"}
    monkeypatch.setattr(pythons, "find", lambda specifier: None)
    found = discover(jax, TwoPythonsRegistry())
    assert not found.added and "requires Python >=3.12" in found.skipped[0].reason


def test_pythons_are_found_by_the_versions_they_report(tmp_path, monkeypatch):
    from fwkernels.ledger import pythons

    here = ".".join(map(str, sys.version_info[:3]))
    monkeypatch.setenv(pythons.VARIABLE, sys.executable)
    assert pythons.find(f"=={here}") == sys.executable
    assert pythons.find(f"!={here}") is None
    monkeypatch.setenv(pythons.VARIABLE, str(tmp_path / "no-python"))
    assert pythons.find(f"=={here}") is None


NEEDS_ANOTHER_PYTHON = """\
[torch]
package = "fwkernels-standin"

[[torch.release]]
version = "1.0.0"
date = 2026-01-01
python = ">=3.99"
"""


def test_a_release_for_another_python_gets_an_environment_of_its_own(tmp_path, monkeypatch):
    """Its pins go into a virtualenv of the Python found, with this checkout's fwkernels on that
    Python's path; the workers start with that interpreter, and what is installed is read there."""
    from fwkernels import frameworks, runner
    from fwkernels.ledger import install, installed, pythons

    tracked = releases.load(write(tmp_path, NEEDS_ANOTHER_PYTHON), known=KNOWN)["torch"]
    build_dir, prefix = tmp_path / "build", tmp_path / "prefix"
    for folder in (build_dir, prefix):
        folder.mkdir()
    (build_dir / build.RELEASE_FILE).write_text(
        json.dumps(build.release_document(tracked, tracked.newest)))
    monkeypatch.setattr(install.sys, "prefix", str(prefix))
    monkeypatch.setattr(pythons, "find", lambda specifier: None)
    with pytest.raises(SystemExit, match=r"installs on Python >=3.99; .* no other Python here"):
        install.install(str(build_dir), "cpu", ROOT)

    monkeypatch.setattr(pythons, "find", lambda specifier: sys.executable)
    calls = []
    monkeypatch.setattr(install, "pip", lambda *args, python="": calls.append((python, args))
                        or subprocess.CompletedProcess(args, 0, ""))
    monkeypatch.setattr(install, "installed_distributions", lambda: {"pip": "24.0"})
    record = install.install(str(build_dir), "cpu", ROOT)
    worker = os.path.join(installed.release_environment(), "bin", "python")
    assert worker.startswith(str(prefix))
    assert (worker, ("install", "--no-compile", "fwkernels-standin===1.0.0")) in calls
    assert calls[-1][0] == "" and calls[-1][1][-2:] == ("-e", ROOT)  # asv's side imports it too
    assert record[installed.WORKER_PYTHON] == worker
    assert installed.worker_python() == worker
    assert runner.worker_command({}, "out.json")[0] == worker
    reason = frameworks.unavailable_reason("torch")
    assert "torch is not installed in the release's environment" in reason
    imported = subprocess.run([worker, "-c", "import fwkernels; print(fwkernels.__file__)"],
                              capture_output=True, text=True)
    assert imported.stdout.strip() == os.path.join(ROOT, "fwkernels", "__init__.py")
    install.clean(str(prefix))  # the next release starts without it
    assert not os.path.exists(installed.release_environment())
    assert installed.worker_python() == sys.executable


def test_commits_keep_a_release_for_another_python_where_this_machine_has_one(monkeypatch):
    from fwkernels.ledger import commands, pythons

    here = ".".join(map(str, sys.version_info[:3]))
    newer = releases.Release("jax", "0.12.1", datetime.date(2026, 11, 18), python=">=3.99")
    monkeypatch.setattr(pythons, "find", lambda specifier: "/opt/python3.99/bin/python3")
    assert commands.installs(newer, here) and commands.installs(newer, "any")
    assert not commands.installs(newer, "3.10.0")  # a version named: that version only
    monkeypatch.setattr(pythons, "find", lambda specifier: None)
    assert not commands.installs(newer, here)
