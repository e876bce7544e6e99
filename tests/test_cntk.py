"""CNTK-only behaviour: the Python 3.6 process, threads read back, denormals, N/A precisions and
GPU, the one-bias LSTM count, the learner's rule, the missing-interpreter reason."""
import json
import os
import subprocess
import sys

import pytest

from fwkernels.frameworks import load_backend, unavailable_reason
from fwkernels.frameworks.base import RunConfig
from fwkernels.models import GNMT_HIDDEN, get_model

_chosen = os.environ.get("FWKERNELS_TEST_FRAMEWORKS")
if unavailable_reason("cntk") or (_chosen is not None and "cntk" not in _chosen.split(",")):
    pytest.skip("CNTK is not tested in this environment", allow_module_level=True)

from fwkernels.frameworks.cntk import interpreter, runtime  # noqa: E402


@pytest.fixture(scope="module")
def cntk_backend():
    return load_backend("cntk")


def small(model, **kwargs):
    spec = get_model(model)
    return RunConfig(model=spec, batch=2, small=True, lr=spec.lr * 0.1, mode="graph", **kwargs)


def test_runs_on_python_36_with_cntk_27(cntk_backend):
    assert cntk_backend.version() == "2.7"
    assert runtime.process().hello["python"].startswith("3.6.")


def test_set_threads_is_read_back(cntk_backend):
    cores = len(os.sched_getaffinity(0))
    cntk_backend.set_threads(1)
    assert cntk_backend.runtime_info("cpu")["cntk_threads"] == "1"
    cntk_backend.set_threads(cores)
    assert cntk_backend.runtime_info("cpu")["cntk_threads"] == str(cores)


def test_mkl_runs_its_avx2_kernels_on_a_non_intel_processor(check_mkl_kernels):
    check_mkl_kernels(
        interpreter.python(), os.path.join(interpreter.site_packages(), "cntk", "libs",
                                           "libmklml_intel.so"), interpreter.process_environment())


@pytest.mark.skipif(os.uname().machine != "x86_64", reason="FTZ/DAZ are x86 MXCSR bits")
def test_denormals_are_flushed_in_numpy_and_cntk(cntk_backend):
    settings = cntk_backend.build(small("ncf")).precision_settings()
    assert settings["flush_denormal"] is True and settings["compute_dtype"] == "float32"


def test_bf16_and_gpu_are_na_with_the_reason(cntk_backend):
    assert "bfloat16" in cntk_backend.unsupported_reason(small("ncf", precision="bf16"))
    assert "CUDA 10" in cntk_backend.unsupported_reason(small("ncf", device="cuda"))
    assert not cntk_backend.device_available("cuda")
    assert "CUDA 10" in cntk_backend.device_unavailable_reason("cuda")


def test_lstm_has_one_bias_per_gate_set_and_the_count_is_declared(cntk_backend):
    spec = get_model("gnmt_v2")
    assert spec.expected_params("cntk") == spec.params - 9 * 4 * GNMT_HIDDEN
    assert cntk_backend.count_params(spec) == spec.expected_params("cntk")


def test_peak_memory_is_the_cntk_process_own(cntk_backend):
    workload = cntk_backend.build(small("alexnet_owt"))
    workload.train_step()
    assert workload.peak_memory_bytes() > 0
    assert "CNTK process" in workload.peak_memory_source


SGD_CHECK = r"""
import json, sys
import numpy as np
sys.path.insert(0, sys.argv[1])
import server36
C = server36.C
lr, momentum, wd, batch = 0.1, 0.9, 0.05, 5
x = C.input_variable(4)
layer = C.layers.Dense(3, init=C.initializer.normal(1.0), init_bias=0.5)
z = layer(x)
loss = C.reduce_sum(C.square(z))  # per sample; the Trainer sums over the batch
data = np.random.RandomState(0).standard_normal((batch, 4)).astype(np.float32)
params = [layer.W, layer.b]
trainer = C.Trainer(z, (loss, None), [server36.pytorch_sgd(params, lr, momentum, wd, batch)])
values = [p.value.astype(np.float64) for p in params]
buffers = [np.zeros_like(v) for v in values]
errors = []
for _ in range(3):
    w, b = values
    y = data.astype(np.float64) @ w + b
    grads = [data.T.astype(np.float64) @ (2 * y) / batch, (2 * y).sum(0) / batch]  # mean loss
    trainer.train_minibatch({x: data})
    for i in range(2):  # torch: d = g + wd p; b = m b + d; p -= lr b
        buffers[i] = momentum * buffers[i] + grads[i] + wd * values[i]
        values[i] = values[i] - lr * buffers[i]
    errors.append(max(float(np.abs(p.value - v).max()) for p, v in zip(params, values)))
print(json.dumps(errors))
"""


def test_learner_is_pytorch_sgd_with_weight_decay():
    """server36.pytorch_sgd (momentum_sgd, no unit gain, per-minibatch rate, L2) against
    torch.optim.SGD's rule on the mean loss, in float64, run in the CNTK process's Python."""
    folder = os.path.dirname(runtime.SERVER)
    out = subprocess.run([interpreter.python(), "-c", SGD_CHECK, folder], capture_output=True,
                         text=True, env=interpreter.process_environment(), check=True)
    errors = json.loads(out.stdout.strip().splitlines()[-1])
    assert len(errors) == 3 and max(errors) < 1e-4, errors


def test_a_missing_interpreter_is_one_line_naming_the_remedy(tmp_path):
    env = dict(os.environ, FWKERNELS_CNTK_PYTHON=str(tmp_path / "bin" / "python"))
    code = "from fwkernels.frameworks import unavailable_reason; print(unavailable_reason('cntk'))"
    reason = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True,
                            text=True, check=True).stdout.strip()
    assert "not installed" in reason and "scripts/cntk-env.sh" in reason
    assert len(reason.splitlines()) == 1
