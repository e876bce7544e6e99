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


def test_keras_on_tensorflow_feeds_fit_without_tf_data_autotuning(backend, framework):
    """The resident batch reaches `fit` through a tf.data dataset with autotuning off (with it on,
    CPU windows jump between two speeds in one process: docs/keras.md, *Threads*), and the record
    says so."""
    if framework != "keras-tensorflow":
        pytest.skip(f"{framework} does not feed fit through tf.data")
    workload = backend.build(RunConfig(model=get_model("ncf"), batch=8, small=True,
                                       mode=backend.info.default_mode))
    assert workload._batches(2).options().autotune.enabled is False
    assert workload.precision_settings()["tf_data_autotune"] is False


def test_the_seed_alone_decides_every_layers_initial_weights(backend, framework):
    """Every layer draws its own initial weights from the seed keras.utils.set_random_seed sets:
    the same seed gives the same weights, another seed other weights, and no two layers of the
    same shape start equal (a shared unseeded Keras initializer gives them the same values, and
    a seed drawn at import differs from process to process)."""
    if framework != "tensorflow" and not framework.startswith("keras-"):
        pytest.skip(f"{framework} does not build the Keras models")
    import keras
    import numpy as np

    from fwkernels.frameworks.keras import models

    def kernels(seed):
        keras.utils.set_random_seed(seed)
        model = models.build("vgg_a", small=True)
        weights = [keras.ops.convert_to_numpy(w.value) for w in model.trainable_weights
                   if len(w.shape) > 1]
        keras.backend.clear_session()
        return weights

    first, again, other = kernels(0), kernels(0), kernels(1)
    assert all(np.array_equal(a, b) for a, b in zip(first, again))
    assert not any(np.array_equal(a, b) for a, b in zip(first, other))
    same_shape = [(i, j) for i in range(len(first)) for j in range(i + 1, len(first))
                  if first[i].shape == first[j].shape]
    assert same_shape, "VGG-A has convolutions of the same shape"
    assert not any(np.array_equal(first[i], first[j]) for i, j in same_shape)


def test_the_compiled_mode_trains_what_the_default_mode_trains(backend, framework):
    """keras-torch `jit` (``torch.compile``) and keras-tensorflow `xla` compile Keras' own train
    step (``jit_compile=True``): from the same seed and batch, two `fit` steps end at the default
    mode's loss and weights, the compiled forward-backward pass gives its loss, and the record
    says which was compiled."""
    if not framework.startswith("keras-") or not backend.info.tuned_modes:
        pytest.skip(f"{framework} is not a Keras backend with a compiled mode besides its default")
    compiled = backend.info.tuned_modes[0]

    def trained(mode):
        workload = backend.build(RunConfig(model=get_model("ncf"), batch=8, small=True,
                                           mode=mode))
        workload.forward_backward()
        workload.sync()
        first = workload.loss()
        workload.train_steps(2)
        return (first, workload.loss(), workload.param_fingerprint(),
                workload.precision_settings()["jit_compile"])

    first, loss, weights, jit = trained(backend.info.default_mode)
    compiled_first, compiled_loss, compiled_weights, compiled_jit = trained(compiled)
    assert (jit, compiled_jit) == (False, True)
    assert compiled_first == pytest.approx(first, rel=1e-5)
    assert compiled_loss == pytest.approx(loss, rel=1e-4)
    assert compiled_weights == pytest.approx(weights, rel=1e-4, abs=1e-6)
