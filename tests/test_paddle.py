"""PaddlePaddle only: the static mode computes what the dynamic mode does; threads; N/A reasons."""
import os
import sys
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


def test_mkl_runs_its_avx2_kernels_on_a_non_intel_processor(paddle_backend, check_mkl_kernels):
    from fwkernels.frameworks.paddle.runtime import mkl_library
    check_mkl_kernels(sys.executable, mkl_library(), dict(os.environ))


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


def test_the_layout_follows_the_policy(paddle_backend):
    """NHWC for a convolutional network at tf32 and bf16 on a GPU (not in mode "untuned"); NCHW
    everywhere else (docs/fairness.md, *Layout*)."""
    from fwkernels.frameworks.paddle.backend import layout

    def at(model, device="cuda", precision="bf16", mode="dynamic"):
        return layout(RunConfig(model=get_model(model), batch=2, device=device,
                                precision=precision, mode=mode))

    assert at("resnet50") == at("googlenet", precision="tf32") == at("vgg19", mode="static") == "NHWC"
    assert at("resnet50", precision="fp32") == at("resnet50", device="cpu") == "NCHW"
    assert at("resnet50", mode="untuned") == at("ncf") == at("gnmt_v2") == "NCHW"


def _same_weights(source, target, flat_map=None) -> None:
    """Copy source's parameters and buffers into target (the same model in the other layout);
    ``flat_map`` (channels, height, width) reorders the first linear layer's rows from a
    flattened NCHW map to a flattened NHWC one."""
    import numpy as np

    pairs = list(zip(source.state_dict().values(), target.state_dict().values()))
    first_linear = flat_map and next(i for i, (s, _) in enumerate(pairs)
                                     if s.shape[:1] == [int(np.prod(flat_map))] and len(s.shape) == 2)
    for i, (s, t) in enumerate(pairs):
        value = s.numpy()
        if i == first_linear:
            c, h, w = flat_map
            value = value.reshape(c, h, w, -1).transpose(1, 2, 0, 3).reshape(c * h * w, -1)
        t.set_value(value)


@pytest.mark.parametrize("model,flat_map", [("resnet50", None), ("mobilenet_v2", None),
                                            ("googlenet", None), ("alexnet", (256, 6, 6))])
def test_nhwc_models_compute_what_nchw_models_do(paddle_backend, model, flat_map):
    """The same weights give the same outputs in both layouts (convolutions, batch norm, the
    pools, inception's concatenation, the flattened map): the NHWC path is the same function."""
    import numpy as np
    import paddle

    from fwkernels.frameworks.paddle.models import build

    nchw, nhwc = build(model, "NCHW"), build(model, "NHWC")
    _same_weights(nchw, nhwc, flat_map)
    nchw.eval()
    nhwc.eval()
    shape = get_model(model).input_shapes(2, small=True)["image"]
    images = np.random.default_rng(0).normal(size=shape).astype("float32")
    with paddle.no_grad():
        want = nchw(paddle.to_tensor(images)).numpy()
        got = nhwc(paddle.to_tensor(images.transpose(0, 2, 3, 1))).numpy()
    assert np.abs(got - want).max() <= 1e-4 * max(1.0, np.abs(want).max())


def test_the_reference_initialisation(paddle_backend):
    """torchvision's He normal (fan out) convolutions with zero biases and N(0, 0.01) classifiers
    for VGG-19 and MobileNet v2 (docs/models.md, *Initialisation*), depthwise included."""
    import numpy as np
    from paddle import nn

    from fwkernels.frameworks.paddle.models import build

    for model in ("vgg19", "mobilenet_v2"):
        for layer in build(model).sublayers():
            if isinstance(layer, (nn.Conv2D, nn.Linear)):
                weight = layer.weight.numpy()
                if isinstance(layer, nn.Conv2D):
                    cout, _, kh, kw = weight.shape
                    expected = (2.0 / (cout * kh * kw)) ** 0.5
                else:
                    expected = 0.01
                assert np.std(weight) == pytest.approx(expected, rel=0.1), (model, weight.shape)
                assert layer.bias is None or not np.any(layer.bias.numpy())
