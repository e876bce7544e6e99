"""PaddlePaddle only: the static mode computes what the dynamic mode does; threads; N/A reasons."""
import os
from dataclasses import replace

import pytest

from fwkernels.frameworks.base import RunConfig
from fwkernels.models import get_model


@pytest.fixture
def paddle_backend(backend, framework):
    if framework != "paddle":
        pytest.skip("PaddlePaddle only")
    return backend


def losses(backend, model: str, mode: str, steps: int = 3) -> list:
    spec = get_model(model)
    workload = backend.build(RunConfig(model=spec, batch=2, small=True, lr=spec.lr * 0.1, mode=mode))
    out = []
    for _ in range(steps):
        workload.train_step()
        out.append(workload.loss())
    return out


@pytest.mark.parametrize("model", ["ncf", "alexnet"])
def test_static_mode_trains_exactly_as_dynamic_mode(paddle_backend, model):
    dynamic = losses(paddle_backend, model, "dynamic")
    assert dynamic[-1] < dynamic[0]
    assert losses(paddle_backend, model, "static") == pytest.approx(dynamic, rel=1e-4)


def test_set_threads_reaches_the_blas_library(paddle_backend):
    from fwkernels.frameworks.paddle.runtime import blas_threads

    paddle_backend.set_threads(1)
    assert blas_threads() == 1
    paddle_backend.set_threads(len(os.sched_getaffinity(0)))
    assert blas_threads() == len(os.sched_getaffinity(0))


def test_bf16_on_cpu_is_not_applicable_with_the_reason(paddle_backend):
    config = RunConfig(model=get_model("ncf"), batch=2, mode="dynamic", precision="bf16")
    assert "auto_cast" in paddle_backend.unsupported_reason(config)
    assert paddle_backend.unsupported_reason(RunConfig(model=get_model("ncf"), batch=2,
                                                       mode="dynamic")) is None


def test_exhaustive_search_is_the_default_and_absent_without_cudnn(paddle_backend):
    """The flag exists in CUDA builds only: a CPU build records its absence, and on CUDA it is on
    except in mode "untuned" (docs/fairness.md)."""
    from fwkernels.frameworks.paddle import runtime

    config = RunConfig(model=get_model("resnet50"), batch=2, mode="dynamic", small=True)
    settings = paddle_backend.build(config).policy_settings()
    if runtime.set_cudnn_autotune(True) is None:
        assert settings["autotune_setting"] == \
            "FLAGS_cudnn_exhaustive_search absent (a build without cuDNN)"
    else:
        assert settings["autotune_setting"] == "FLAGS_cudnn_exhaustive_search=True"
    assert settings["layout"] == "NCHW"
    assert "CUDA only" in paddle_backend.unsupported_reason(replace(config, mode="untuned"))
