"""The request resolver: defaults, mode_parameter, and the rules every entry point shares."""
import re

import pytest

from fwkernels.frameworks import FRAMEWORKS, unavailable_reason
from fwkernels.models import MODELS
from fwkernels.request import (CPU_ALLOCATOR_VARIABLE, DEFAULTS, InvalidRequest, Request, Skip, default_threads,
                               parse_target, require, mode_parameter, resolve, split_target, target_name)

AVAILABLE = [n for n in FRAMEWORKS if unavailable_reason(n) is None]
MISSING = [n for n in FRAMEWORKS if unavailable_reason(n)]


@pytest.mark.parametrize("name", list(FRAMEWORKS))
def test_no_mode_is_the_default_mode_of_every_framework(name, monkeypatch):
    monkeypatch.setattr("fwkernels.request.unavailable_reason", lambda name: None)
    for mode in (None, ""):
        request = resolve(name, "ncf", mode=mode)
        assert request.mode == FRAMEWORKS[name].modes[0]
    assert split_target(name) == (name, FRAMEWORKS[name].modes[0])


def test_defaults_come_from_the_device_and_the_model(monkeypatch):
    monkeypatch.setattr("fwkernels.request.unavailable_reason", lambda name: None)
    cpu = resolve("torch", "resnet50")
    assert isinstance(cpu, Request)
    assert (cpu.batch, cpu.windows, cpu.window_seconds, cpu.warmup) == (
        MODELS["resnet50"].batch_cpu, DEFAULTS["cpu"].windows, DEFAULTS["cpu"].window_seconds,
        DEFAULTS["cpu"].warmup)
    gpu = resolve("torch", "resnet50", device="cuda", precision="tf32", batch=8, warmup=0)
    assert (gpu.batch, gpu.windows, gpu.warmup) == (8, DEFAULTS["cuda"].windows, 0)
    assert cpu.threads >= 1 and cpu.steps is None
    message = gpu.worker_message(["train"])
    assert message["phases"] == ["train"] and message["mode"] == "eager"


@pytest.mark.parametrize("choices, named", [
    (dict(framework="pytorch"), ["torch", "tensorflow", "keras-jax"]),
    (dict(model="resnet-50"), list(MODELS)),
    (dict(device="tpu"), ["cpu", "cuda"]),
    (dict(precision="fp16"), ["fp32", "tf32", "bf16"]),
    (dict(mode="turbo"), ["eager", "compile", "cudagraphs"]),
    (dict(batch=0), ["batch must be a positive integer"]),
    (dict(allocator="jemalloc"), ["FWKERNELS_CPU_ALLOCATOR", "valid CPU allocators: tcmalloc, glibc"]),
])
def test_bad_input_is_a_usage_error_naming_the_choices(choices, named):
    args = dict(framework="torch", model="ncf") | choices
    with pytest.raises(InvalidRequest) as error:
        resolve(args.pop("framework"), args.pop("model"), **args)
    for name in named:
        assert name in str(error.value)


def test_cpu_requests_name_the_policys_allocator_unless_told_otherwise(monkeypatch):
    monkeypatch.setattr("fwkernels.request.unavailable_reason", lambda name: None)
    monkeypatch.delenv(CPU_ALLOCATOR_VARIABLE, raising=False)
    assert resolve("torch", "ncf").allocator == "tcmalloc"
    assert resolve("torch", "ncf", device="cuda").allocator == ""  # a GPU's workers: as is
    monkeypatch.setenv(CPU_ALLOCATOR_VARIABLE, "glibc")
    assert resolve("torch", "ncf").allocator == "glibc"
    assert resolve("torch", "ncf", allocator="tcmalloc").allocator == "tcmalloc"
    monkeypatch.setenv(CPU_ALLOCATOR_VARIABLE, "jemalloc")
    with pytest.raises(InvalidRequest, match="valid CPU allocators: tcmalloc, glibc"):
        resolve("torch", "ncf", device="cuda")  # checked wherever it runs


def test_what_this_machine_cannot_run_is_a_skip_with_its_reason(monkeypatch):
    monkeypatch.setattr("fwkernels.request.unavailable_reason", lambda name: None)
    skip = resolve("torch", "ncf", precision="tf32")
    assert isinstance(skip, Skip) and "GPU tensor-core" in skip.reason
    with pytest.raises(InvalidRequest, match="GPU tensor-core"):
        require(skip)  # one named combination: a usage error (exit 2)
    monkeypatch.setattr("fwkernels.request.unavailable_reason", lambda name: "not installed")
    assert resolve("torch", "ncf") == Skip("framework 'torch' is not available: not installed")


@pytest.mark.skipif(not MISSING, reason="every framework is installed here")
def test_a_framework_not_installed_is_skipped():
    assert unavailable_reason(MISSING[0]) in resolve(MISSING[0], "ncf").reason


def test_targets_parse_and_print_both_ways():
    assert parse_target("torch") == ("torch", "eager")
    assert parse_target("torch:compile") == ("torch", "compile")
    assert target_name("torch", "eager") == "torch" and target_name("torch", "compile") \
        == "torch:compile"
    assert split_target("nosuch:mode") == ("nosuch", "mode")  # old results: read as written
    with pytest.raises(InvalidRequest, match="valid modes: eager"):
        parse_target("torch:jit")
    with pytest.raises(InvalidRequest, match="valid frameworks"):
        parse_target("pytorch")
    assert mode_parameter("tuned") == ["default", "compile", "cudagraphs", "xla", "static", "jit"]


@pytest.mark.parametrize("choice, words", [
    (dict(windows=0), "windows must be a positive integer"),
    (dict(steps=-1), "steps must be a positive integer"),
    (dict(warmup=-1), "warmup must be 0 or more"),
    (dict(window_seconds=float("nan")), "window_seconds must be a positive number"),
    (dict(threads=0), "threads must be from 1 to"),
    (dict(threads=default_threads() + 1), f"from 1 to {default_threads()} (the usable cores)"),
])
def test_protocol_choices_out_of_range_are_invalid(choice, words):
    with pytest.raises(InvalidRequest, match=re.escape(words)):
        resolve("torch", "ncf", **choice)
