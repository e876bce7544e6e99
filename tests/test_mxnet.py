"""MXNet-only behaviour: bf16 through AMP, the internal-memory figures, settings fixed at import."""
import math
import os

import pytest

from fwkernels.frameworks import load_backend, unavailable_reason
from fwkernels.frameworks.base import RunConfig
from fwkernels.models import get_model

_chosen = os.environ.get("FWKERNELS_TEST_FRAMEWORKS")
if unavailable_reason("mxnet") or (_chosen is not None and "mxnet" not in _chosen.split(",")):
    pytest.skip("MXNet is not tested in this environment", allow_module_level=True)

from fwkernels.frameworks.mxnet import runtime as mxnet_runtime  # noqa: E402


@pytest.fixture(scope="module")
def mxnet():
    return load_backend("mxnet")


def small(model, **kwargs):
    spec = get_model(model)
    kwargs.setdefault("mode", "hybrid")
    return RunConfig(model=spec, batch=2, small=True, lr=spec.lr * 0.1, **kwargs)


@pytest.mark.parametrize("model", ["mobilenet_v2", "ncf"])  # ncf: its Concat stays float32
def test_bf16_runs_bfloat16_operators_and_trains(mxnet, model):
    config = small(model, precision="bf16")
    if mxnet.unsupported_reason(config):
        pytest.skip(mxnet.unsupported_reason(config))
    workload = mxnet.build(config)
    settings = workload.precision_settings()
    assert settings["compute_dtype"] == "bfloat16" and settings["bfloat16_operator_outputs"] > 0
    assert workload.params == config.model.expected_params("mxnet")
    before = workload.param_fingerprint()
    workload.train_step()
    assert math.isfinite(workload.loss())
    assert all(a != b for a, b in zip(before, workload.param_fingerprint()))


@pytest.mark.parametrize("mode", ["hybrid", "imperative"])
def test_internal_memory_of_forward_backward_exceeds_forward_only(mxnet, mode):
    workload = mxnet.build(small("mobilenet_v2", mode=mode))
    workload.train_step()
    train = workload.extra_figures("train")["internal_memory_forward_backward_bytes"]
    forward = workload.extra_figures("forward")["internal_memory_forward_bytes"]
    assert train > forward > 0


def test_na_precisions_say_why(mxnet):
    assert "TF32" in mxnet.unsupported_reason(small("ncf", precision="tf32"))
    assert "CUDA" in mxnet.unsupported_reason(small("ncf", precision="bf16", device="cuda"))
    assert "hybrid" in mxnet.unsupported_reason(small("ncf", precision="bf16", mode="imperative"))


def test_thread_count_fixed_at_import_is_not_silently_changed(mxnet):
    fixed = int(os.environ["OMP_NUM_THREADS"])
    mxnet.set_threads(fixed)
    with pytest.raises(ValueError, match="OMP_NUM_THREADS"):
        mxnet.set_threads(fixed + 1)


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="FTZ/DAZ are x86 MXCSR bits")
def test_denormals_are_flushed_in_mxnet_operators(mxnet):
    assert mxnet_runtime.denormals_flushed()


def test_gluon_sgd_with_weight_decay_is_pytorch_sgd(mxnet):
    """MXNet's momentum/weight-decay rule against torch.optim.SGD's, written out in float64."""
    import mxnet as mx
    import numpy as np
    from mxnet import autograd, gluon

    from fwkernels.frameworks.base import MOMENTUM

    lr, wd = 0.1, 0.05  # a decay large enough that another rule would show beyond rounding
    layer = gluon.nn.Dense(3, in_units=4)
    layer.initialize(mx.init.Normal(1.0))
    x = mx.nd.array(np.random.RandomState(0).standard_normal((5, 4)))
    trainer = gluon.Trainer(layer.collect_params(), "sgd", {
        "learning_rate": lr, "momentum": MOMENTUM, "wd": wd}, kvstore=None)
    params = [layer.weight, layer.bias]
    values = [p.data().asnumpy().astype(np.float64) for p in params]
    buffers = [None, None]
    for _ in range(3):
        with autograd.record():
            loss = (layer(x) ** 2).mean()
        loss.backward()
        grads = [p.grad().asnumpy().astype(np.float64) for p in params]
        trainer.step(1)
        for i, (value, grad) in enumerate(zip(values, grads)):
            d = grad + wd * value  # torch: d = g + wd p; b = m b + d; p -= lr b
            buffers[i] = d if buffers[i] is None else MOMENTUM * buffers[i] + d
            values[i] = value - lr * buffers[i]
        for param, value in zip(params, values):
            np.testing.assert_allclose(param.data().asnumpy(), value, rtol=1e-5, atol=1e-6)
