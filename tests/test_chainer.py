"""Chainer-only behaviour: threads through numpy's OpenBLAS, denormals, N/A precisions, the
optimizer's rule, inference-mode forward, two LSTM bias vectors, CUDA only through CuPy."""
import os
from dataclasses import replace

import pytest

from fwkernels.frameworks import load_backend, unavailable_reason
from fwkernels.frameworks.base import RunConfig
from fwkernels.models import GNMT_HIDDEN, get_model

_chosen = os.environ.get("FWKERNELS_TEST_FRAMEWORKS")
if unavailable_reason("chainer") or (_chosen is not None and "chainer" not in _chosen.split(",")):
    pytest.skip("Chainer is not tested in this environment", allow_module_level=True)

from fwkernels.frameworks.chainer import runtime as chainer_runtime  # noqa: E402


@pytest.fixture(scope="module")
def chainer_backend():
    return load_backend("chainer")


def small(model, **kwargs):
    spec = get_model(model)
    kwargs.setdefault("mode", "define_by_run")
    return RunConfig(model=spec, batch=2, small=True, lr=spec.lr * 0.1, **kwargs)


def test_set_threads_reaches_numpys_openblas(chainer_backend):
    cores = len(os.sched_getaffinity(0))
    chainer_backend.set_threads(1)
    assert chainer_runtime.blas_threads() == 1
    chainer_backend.set_threads(cores)
    assert chainer_runtime.blas_threads() == cores
    info = chainer_backend.runtime_info("cpu")
    assert info["blas_threads"] == str(cores) and "OpenBLAS" in info["blas_config"]
    assert info["use_ideep"] == "never"  # Chainer's default: numpy does the work


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="FTZ/DAZ are x86 MXCSR bits")
def test_denormals_are_flushed_in_numpy_and_its_blas_threads():
    assert chainer_runtime.denormals_flushed()


def test_na_precisions_and_untuned_on_cpu_say_why(chainer_backend):
    assert "TF32" in chainer_backend.unsupported_reason(small("ncf", precision="tf32"))
    assert "bfloat16" in chainer_backend.unsupported_reason(small("ncf", precision="bf16"))
    assert "CUDA only" in chainer_backend.unsupported_reason(small("ncf", mode="untuned"))
    assert chainer_backend.unsupported_reason(small("ncf", mode="untuned", device="cuda")) is None


def test_default_mode_asks_for_cudnn_autotuning_and_untuned_keeps_chainers_default(chainer_backend):
    """docs/fairness.md: chainer.config.autotune is off out of the box; the record says so."""
    config = small("alexnet_owt")
    assert chainer_backend.build(config).policy_settings() == {
        "autotune": None, "autotune_setting": "chainer.config.autotune=True", "layout": "NCHW"}
    untuned = chainer_backend.build(replace(config, mode="untuned"))
    assert untuned.policy_settings()["autotune_setting"] == "chainer.config.autotune=False"
    ncf = chainer_backend.build(small("ncf"))
    assert ncf.policy_settings()["layout"] == "none"
    assert ncf.precision_settings()["chainer_dtype"] == "float32"


def test_cuda_needs_cupy():
    reason = chainer_runtime.cupy_missing()
    assert chainer_runtime.device_available("cuda") is (reason is None)
    if reason:
        assert "CuPy" in reason


def test_forward_is_inference_without_a_graph(chainer_backend):
    """Dropout off and BatchNorm on its running statistics: two forwards agree; no graph kept."""
    import numpy

    for model in ("alexnet", "mobilenet_v2"):
        workload = chainer_backend.build(small(model))
        first, second = workload.forward(), workload.forward()
        assert first.creator is None
        numpy.testing.assert_array_equal(first.array, second.array)


def test_nstep_lstm_carries_two_bias_vectors_per_gate_set():
    """Like cuDNN and PyTorch: GNMT v2 has the canonical count, no declared difference."""
    from fwkernels.frameworks.chainer.models import _lstm

    lstm = _lstm(GNMT_HIDDEN, GNMT_HIDDEN)
    biases = [p for name, p in lstm.namedparams() if name.rsplit("/", 1)[-1].startswith("b")]
    assert len(biases) == 8 and all(b.shape == (GNMT_HIDDEN,) for b in biases)
    assert "chainer" not in get_model("gnmt_v2").params_by_framework


def test_momentum_sgd_with_weight_decay_hook_is_pytorch_sgd(chainer_backend):
    """Chainer's MomentumSGD + WeightDecay against torch.optim.SGD's rule, in float64."""
    import chainer
    import chainer.functions as F
    import chainer.links as L
    import numpy as np

    from fwkernels.frameworks.base import MOMENTUM

    lr, wd = 0.1, 0.05  # a decay large enough that another rule would show beyond rounding
    layer = L.Linear(4, 3, initialW=chainer.initializers.Normal(1.0))
    x = np.random.RandomState(0).standard_normal((5, 4)).astype(np.float32)
    optimizer = chainer.optimizers.MomentumSGD(lr=lr, momentum=MOMENTUM)
    optimizer.setup(layer)
    optimizer.add_hook(chainer.optimizer_hooks.WeightDecay(wd))
    params = [layer.W, layer.b]
    values = [p.array.astype(np.float64) for p in params]
    buffers = [None, None]
    for _ in range(3):
        layer.cleargrads()
        F.mean(layer(x) ** 2).backward()
        grads = [p.grad.astype(np.float64) for p in params]
        optimizer.update()
        for i, (value, grad) in enumerate(zip(values, grads)):
            d = grad + wd * value  # torch: d = g + wd p; b = m b + d; p -= lr b
            buffers[i] = d if buffers[i] is None else MOMENTUM * buffers[i] + d
            values[i] = value - lr * buffers[i]
        for param, value in zip(params, values):
            np.testing.assert_allclose(param.array, value, rtol=1e-5, atol=1e-6)
