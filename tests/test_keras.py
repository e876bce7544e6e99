"""Keras-specific checks (docs/keras.md); the generic ones (parity, training, shapes) are in
test_models.py.  Run in the session of the framework each Keras backend runs on."""
import pytest

from fwkernels.frameworks.base import RunConfig
from fwkernels.models import get_model


def test_a_window_is_one_fit_call_of_that_many_steps(backend, framework):
    """train_steps(n) is one `fit` epoch of n optimizer steps on the resident batch, and the
    record says which loop and steps_per_execution trained (docs/keras.md, *What is timed*)."""
    if not framework.startswith("keras-"):
        pytest.skip(f"{framework} is not a Keras backend")
    workload = backend.build(RunConfig(model=get_model("ncf"), batch=8, small=True,
                                       mode=backend.info.default_mode))
    iterations = workload.model.optimizer.iterations
    before = int(workload.keras.ops.convert_to_numpy(iterations.value))
    workload.train_steps(3)
    assert int(workload.keras.ops.convert_to_numpy(iterations.value)) == before + 3
    steps_per_execution = 1 if framework == "keras-torch" else 32
    assert workload.precision_settings()["training_loop"] == \
        f"fit, steps_per_execution={steps_per_execution}"
