"""JAX-specific checks: pieces the generic tests cannot see (adaptive pooling, optimizer, loss, threads)."""
import os
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("flax", reason="the JAX/Flax backend is tested in the jax nox session")

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
import optax  # noqa: E402

from fwkernels.frameworks.base import LABEL_SMOOTHING  # noqa: E402
from fwkernels.frameworks.jax import backend as jax_backend  # noqa: E402
from fwkernels.frameworks.jax import models as flax_models  # noqa: E402
from fwkernels.frameworks.jax import runtime as jax_runtime  # noqa: E402


def test_adaptive_pool_bins_follow_pytorch():
    # torch: bin i of m over n inputs spans floor(i*n/m) .. ceil((i+1)*n/m) - 1
    third = 1 / 3
    np.testing.assert_allclose(flax_models.adaptive_pool_matrix(5, 3), [
        [0.5, 0.5, 0, 0, 0], [0, third, third, third, 0], [0, 0, 0, 0.5, 0.5]])
    # a 2x2 map pooled to 7x7 (VGG on the small test images): bins repeat inputs
    np.testing.assert_allclose(flax_models.adaptive_pool_matrix(2, 7)[:, 0],
                               [1, 1, 1, 0.5, 0, 0, 0])
    np.testing.assert_array_equal(flax_models.adaptive_pool_matrix(6, 6), np.eye(6))


def test_adaptive_pool_is_identity_at_full_size_and_averages_otherwise():
    x = jnp.arange(2 * 6 * 6 * 3, dtype=jnp.float32).reshape(2, 6, 6, 3)
    assert flax_models.adaptive_avg_pool(x, 6) is x
    pooled = flax_models.adaptive_avg_pool(x, 1)
    np.testing.assert_allclose(pooled[:, 0, 0], x.mean(axis=(1, 2)), rtol=1e-6)


def test_optimizer_is_torch_sgd_with_coupled_weight_decay():
    lr, wd, momentum = 0.1, 1e-4, 0.9
    tx = jax_backend.optimizer(lr)
    params = jnp.array([1.0, -2.0])
    grads = [jnp.array([0.5, 0.25]), jnp.array([-1.0, 2.0])]
    state = tx.init(params)
    expected, buffer = np.array([1.0, -2.0]), None
    for g in grads:  # torch.optim.SGD: g += wd p; buf = momentum buf + g; p -= lr buf
        updates, state = tx.update(g, state, params)
        params = optax.apply_updates(params, updates)
        d = np.asarray(g) + wd * expected
        buffer = d if buffer is None else momentum * buffer + d
        expected = expected - lr * buffer
    np.testing.assert_allclose(params, expected, rtol=1e-6)


def test_label_smoothing_matches_the_one_hot_definition():
    logits = jax.random.normal(jax.random.key(0), (2, 3, 7))
    labels = jnp.array([[0, 6, 3], [1, 1, 2]])
    smoothed = optax.smooth_labels(jax.nn.one_hot(labels, 7), LABEL_SMOOTHING)
    expected = optax.softmax_cross_entropy(logits, smoothed).mean()
    np.testing.assert_allclose(jax_backend.label_smoothed_cross_entropy(logits, labels), expected,
                               rtol=1e-6)


def test_precision_read_back_sees_the_lowered_matmuls():
    line = ("%2 = stablehlo.convolution(%0, %1) {precision_config = [#stablehlo<precision HIGH>, "
            "#stablehlo<precision HIGH>]} : (tensor<1x4x4x3xbf16>, tensor<3x3x3x3xbf16>) -> "
            "tensor<1x4x4x3xf32>")
    assert jax_backend.lowered_precision(line) == {"matmul_precisions": {"HIGH": 1},
                                                   "matmul_operand_types": {"bf16": 2}}


@pytest.mark.parametrize("threads", [1, 3])
def test_set_threads_sizes_the_xla_cpu_thread_pool(threads):
    code = ("import jax.numpy as jnp; from fwkernels.frameworks import load_backend; "
            f"backend = load_backend('jax'); backend.set_threads({threads}); "
            "(jnp.ones((64, 64)) @ jnp.ones((64, 64))).block_until_ready(); "
            "print(backend.runtime_info('cpu')['xla_cpu_threads'])")
    env = {k: v for k, v in os.environ.items() if k != jax_runtime.THREADS_VARIABLE}
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split()[-1] == str(threads)


def test_flops_count_the_lowered_step_and_not_a_loop():
    from fwkernels.frameworks.base import RunConfig
    from fwkernels.models import get_model

    def workload(model):
        return jax_backend.JaxWorkload(RunConfig(model=get_model(model), batch=2, mode="jit",
                                                 small=True))

    # AlexNet-OWT's small-input step: conv and dense FLOPs of forward, backward and update
    flops = workload("alexnet_owt").flops_per_step()
    assert flops and flops > 1e8
    assert workload("gnmt_v2").flops_per_step() is None  # scanned LSTMs: a body counted once


def test_xla_autotuning_is_stated_in_xla_flags_before_the_import(monkeypatch):
    """docs/fairness.md: the runtime puts XLA's default level in XLA_FLAGS explicitly; a level the
    user set is kept, and the record reads the one XLA uses (the last)."""
    assert "--xla_gpu_autotune_level=" in os.environ["XLA_FLAGS"]
    monkeypatch.setenv("XLA_FLAGS", "--xla_gpu_autotune_level=4 --xla_gpu_autotune_level=0")
    assert jax_runtime.conv_autotune() == (False, "--xla_gpu_autotune_level=0")
