"""Registries, specs and the asv suite's parameters: no framework needed."""
import importlib.util
import json
import os
import subprocess
import sys

import pytest

from fwkernels import get_framework, get_model, list_frameworks, list_models
from fwkernels.frameworks import FRAMEWORKS, unavailable_reason
from fwkernels.models import CONVNET_BENCHMARKS, PYTORCH_TABLE1
from fwkernels import suite
from fwkernels.request import InvalidRequest, release_target


def test_the_ten_models_of_both_papers():
    assert PYTORCH_TABLE1 == ("alexnet", "vgg19", "resnet50", "mobilenet_v2", "gnmt_v2", "ncf")
    assert CONVNET_BENCHMARKS == ("alexnet_owt", "overfeat", "vgg_a", "googlenet")
    assert list_models() == list(PYTORCH_TABLE1 + CONVNET_BENCHMARKS)


def test_unknown_names_fail_with_the_valid_list():
    with pytest.raises(ValueError, match="resnet50.*googlenet"):
        get_model("resnet-50")
    with pytest.raises(ValueError, match="torch.*tensorflow.*jax"):
        get_framework("pytorch")


def test_one_bias_lstm_count_is_declared_with_its_reason():
    gnmt = get_model("gnmt_v2")
    assert gnmt.expected_params("torch") == 160_671_297
    count, reason = gnmt.params_by_framework["tensorflow"]
    assert count == 160_634_433 and "bias" in reason
    assert get_model("resnet50").expected_params("tensorflow") == 25_557_032


def test_throughput_units_and_samples_per_step():
    assert get_model("resnet50").samples_per_step(256) == 256
    assert get_model("gnmt_v2").samples_per_step(128) == 128 * (50 + 50)
    assert get_model("ncf").unit == "samples" and get_model("gnmt_v2").unit == "tokens"
    assert get_model("gnmt_v2").output_shape(2) == (2, 50, 32320)
    assert get_model("ncf").output_shape(5) == (5,)


def test_learning_rate_scales_linearly_with_batch():
    from fwkernels.frameworks.base import RunConfig

    spec = get_model("resnet50")
    assert RunConfig(model=spec, batch=spec.batch_gpu, mode="eager").learning_rate == spec.lr
    assert RunConfig(model=spec, batch=spec.batch_gpu // 4, mode="eager").learning_rate \
        == spec.lr / 4
    assert RunConfig(model=spec, batch=2, mode="eager", lr=0.5).learning_rate == 0.5


def test_a_run_config_names_its_mode():
    """No empty mode that each backend would read its own way: the resolver fills it in."""
    from fwkernels.frameworks.base import RunConfig

    with pytest.raises(TypeError, match="mode"):
        RunConfig(model=get_model("ncf"), batch=2)


def test_unavailable_frameworks_say_why():
    for name in list_frameworks():
        reason = unavailable_reason(name)
        installed = importlib.util.find_spec(FRAMEWORKS[name].package) is not None
        if FRAMEWORKS[name].own_python:  # CNTK: installed in a Python of its own
            installed = reason is None
        if not installed:
            assert reason and "not installed" in reason or "no backend" in reason


def test_import_does_not_import_any_framework():
    code = ("import sys, fwkernels, fwkernels.cli, fwkernels.suite; "
            "loaded = [m for m in ('torch','tensorflow','jax','mxnet','paddle','keras','chainer') "
            "if m in sys.modules]; print(loaded); assert not loaded")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_suite_parameters_follow_the_profile(monkeypatch):
    monkeypatch.delenv("FWKERNELS_PRECISIONS", raising=False)
    monkeypatch.delenv("FWKERNELS_MODELS", raising=False)
    monkeypatch.setenv("FWKERNELS_MODES", "default")
    assert suite.parameters("cpu") == [["default"], list_models(), ["fp32"]]
    monkeypatch.setenv("FWKERNELS_MODES", "all")
    monkeypatch.setenv("FWKERNELS_MODELS", "resnet50")
    modes, models, precisions = suite.parameters("cuda")
    assert modes[0] == "default" and {"compile", "xla", "imperative", "static"} <= set(modes)
    assert "eager" not in modes and len(modes) == len(set(modes))
    assert models == ["resnet50"] and precisions == ["fp32", "tf32", "bf16"]
    monkeypatch.setenv("FWKERNELS_MODES", "tuned")
    assert suite.parameters("cuda")[0] == [
        "default", "compile", "cudagraphs", "xla", "static", "jit"]
    monkeypatch.setenv("FWKERNELS_MODES", "default,cudagraphs")
    assert suite.parameters("cuda")[0] == ["default", "cudagraphs"]
    monkeypatch.setenv("FWKERNELS_MODES", "fast")
    with pytest.raises(ValueError, match="valid: default, tuned, all, or a comma list"):
        suite.parameters("cuda")


def test_suite_mode_is_the_installed_frameworks(monkeypatch):
    assert release_target("torch", "default") == "torch"
    assert release_target("torch", "compile") == "torch:compile"
    assert "jax has no mode 'compile'" in release_target("jax", "compile").reason
    assert "measured as mode 'default'" in release_target("torch", "eager").reason


def test_tuned_modes_are_modes_other_than_the_default():
    for info in FRAMEWORKS.values():
        assert set(info.tuned_modes) <= set(info.modes[1:]), info.name


def test_suite_skips_an_environment_without_a_release(tmp_path, monkeypatch):
    monkeypatch.delenv("FWKERNELS_RELEASE", raising=False)
    with pytest.raises(NotImplementedError, match="no framework release is installed"):
        suite.measured(str(tmp_path), "cpu", "default", "ncf", "fp32")


def test_suite_skips_unavailable_frameworks_with_the_reason(tmp_path, monkeypatch):
    missing = [n for n in FRAMEWORKS if unavailable_reason(n)]
    monkeypatch.setenv("FWKERNELS_RELEASE", f"{missing[0]}-1.0")
    with pytest.raises(NotImplementedError, match=unavailable_reason(missing[0])):
        suite.measured(str(tmp_path), "cpu", "default", "ncf", "fp32")


def test_select_skips_combinations_outside_the_profile(tmp_path, monkeypatch):
    monkeypatch.setenv("FWKERNELS_SELECT", "^torch:compile/resnet50/bf16$")
    monkeypatch.setenv("FWKERNELS_RELEASE", "torch-2.14.1")
    with pytest.raises(NotImplementedError, match="outside this profile"):
        suite.measured(str(tmp_path), "cuda", "default", "resnet50", "bf16")


def test_the_protocol_variables_reach_the_request(monkeypatch):
    for name in ("FWKERNELS_WINDOWS", "FWKERNELS_WINDOW_SECONDS", "FWKERNELS_WARMUP"):
        monkeypatch.delenv(name, raising=False)
    assert suite.protocol_overrides() == {}
    monkeypatch.setenv("FWKERNELS_WINDOWS", "5")
    monkeypatch.setenv("FWKERNELS_WINDOW_SECONDS", "4")
    monkeypatch.setenv("FWKERNELS_WARMUP", "5")
    assert suite.protocol_overrides() == {"windows": 5, "window_seconds": 4.0, "warmup": 5}
    monkeypatch.setenv("FWKERNELS_WARMUP", "five")
    with pytest.raises(InvalidRequest, match="FWKERNELS_WARMUP must be a whole number of steps, "
                                             "not 'five'"):
        suite.protocol_overrides()


def test_policy_fields_state_autotuning_on_the_gpu_and_layout_for_images():
    from fwkernels.frameworks.base import RunConfig, policy_fields

    gpu = RunConfig(model=get_model("resnet50"), batch=2, mode="eager", device="cuda")
    assert policy_fields(gpu, True, "cudnn.benchmark=True", "NCHW") == {
        "autotune": True, "autotune_setting": "cudnn.benchmark=True", "layout": "NCHW"}
    cpu = RunConfig(model=get_model("gnmt_v2"), batch=2, mode="eager")
    assert policy_fields(cpu, True, "X=1", "NHWC") == {
        "autotune": None, "autotune_setting": "X=1", "layout": "none"}


def test_the_harness_commit_ignores_what_a_run_writes(tmp_path):
    """asv rewrites results/benchmarks.json as it starts: that is no change of the harness."""
    def git(*args):
        subprocess.run(["git", "-C", str(tmp_path), "-c", "user.name=t", "-c", "user.email=t@t",
                        *args], check=True, capture_output=True)

    for path in ("fwkernels/runner.py", "results/benchmarks.json", "records/m/r.jsonl"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("1\n")
    git("init", "-q")
    git("add", "-A")
    git("commit", "-q", "-m", "c")
    commit = suite.harness_commit(str(tmp_path))
    assert commit and not commit.endswith("+changes")
    (tmp_path / "results/benchmarks.json").write_text("2\n")
    (tmp_path / "records/m/r.jsonl").write_text("2\n")
    assert suite.harness_commit(str(tmp_path)) == commit
    (tmp_path / "fwkernels/runner.py").write_text("2\n")
    assert suite.harness_commit(str(tmp_path)) == commit + "+changes"


TCMALLOC = "/usr/lib/x86_64-linux-gnu/libtcmalloc_minimal.so.4"  # Debian's libtcmalloc-minimal4


def worker_allocator(**env: str) -> dict:
    from fwkernels.worker import ALLOCATOR_PREFIXES, ALLOCATOR_VARIABLES

    code = "import json; from fwkernels.worker import memory_allocator; " \
           "print(json.dumps(memory_allocator()))"
    clean = {k: v for k, v in os.environ.items() if k != "LD_PRELOAD"
             and k not in ALLOCATOR_VARIABLES and not k.startswith(ALLOCATOR_PREFIXES)}
    proc = subprocess.run([sys.executable, "-c", code], env={**clean, **env},
                          capture_output=True, text=True, check=True)
    return json.loads(proc.stdout)


def test_a_record_names_the_allocator_and_the_variables_that_tune_it():
    assert worker_allocator() == {"allocator": "glibc"}
    tuned = worker_allocator(GLIBC_TUNABLES="glibc.malloc.mmap_max=0")
    assert tuned == {"allocator": "glibc",
                     "allocator_settings": {"GLIBC_TUNABLES": "glibc.malloc.mmap_max=0"}}
    # a preload the loader cannot open is not the allocator (the loader says so and goes on)
    assert worker_allocator(LD_PRELOAD="/nonexistent/libtcmalloc.so.4")["allocator"] == "glibc"


@pytest.mark.skipif(not os.path.exists(TCMALLOC) and not os.environ.get("CI"),
                    reason="Debian's libtcmalloc-minimal4 is not installed (.ci/run installs it)")
def test_a_preloaded_allocator_is_named():
    assert worker_allocator(LD_PRELOAD=TCMALLOC)["allocator"] == "tcmalloc_minimal"
