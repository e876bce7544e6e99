"""Per (framework, model): parameter parity, the step trains and the output has the right shape."""
import math
import statistics

import pytest

from fwkernels.frameworks import get_framework
from fwkernels.frameworks.base import RunConfig
from fwkernels.models import MODELS, get_model
from fwkernels.request import require, resolve

ALL_MODELS = list(MODELS)


# A tenth of the model's reference learning rate: a batch of 2 at the full rate
# diverges for the deep nets without batch norm (VGG).
LR_SCALE = 0.1
# Training on the fixed batch: TRAIN_STEPS steps, progress judged on the median of the last
# LAST_STEPS losses against the first (one spike among them does not decide: TensorFlow's VGG-19,
# docs/models.md). The batch-norm models train on 8 samples: with 2, their
# batch statistics make the loss swing fivefold from step to step (Paddle ResNet-50: 6.24, 1.17,
# 6.06, 1.18, 7.72, 0.003, ...), and where one particular step lands depends on the processor's
# rounding and the thread count (docs/models.md, *The training test*).
TRAIN_STEPS = 10
LAST_STEPS = 3


def recent_loss(losses):
    """What the training test compares with the first loss: the median of the last LAST_STEPS."""
    return statistics.median(losses[-LAST_STEPS:])
TRAIN_BATCH = {"resnet50": 8, "mobilenet_v2": 8}
# Keras builds every model from the same code whatever its backend (fwkernels/frameworks/keras/
# models.py): all ten train in one backend's session (PyTorch's, the shortest of the three), and
# in the other two the three kinds of model that a backend runs differently: convolutions with
# batch norm and residuals (ResNet-50), LSTMs with attention and two inputs (GNMT v2), embeddings
# (NCF). The parameter counts are checked in every backend (docs/ci.md, *Test time*).
KERAS_EVERY_MODEL = "keras-torch"
KERAS_SAMPLE = ("resnet50", "gnmt_v2", "ncf")


def small_config(backend, name, batch=2):
    spec = get_model(name)
    config = RunConfig(model=spec, batch=batch, mode=backend.info.default_mode, small=True,
                       lr=spec.lr * LR_SCALE)
    reason = backend.unsupported_reason(config)
    if reason:
        pytest.skip(f"N/A: {reason}")
    return config


@pytest.mark.parametrize("model", ALL_MODELS)
def test_trainable_parameter_count_is_canonical(backend, framework, model):
    spec = get_model(model)
    reason = backend.unsupported_reason(RunConfig(model=spec, batch=1,
                                                  mode=backend.info.default_mode))
    if reason:
        pytest.skip(f"N/A: {reason}")
    assert backend.count_params(spec) == spec.expected_params(framework)


@pytest.mark.parametrize("model", ALL_MODELS)
def test_training_step_updates_parameters_and_lowers_loss(backend, framework, model):
    """...and the forward output has the model's shape (one build for both: on 2 cores a build
    and its compilation take most of a framework's test time)."""
    if framework.startswith("keras-") and framework != KERAS_EVERY_MODEL \
            and model not in KERAS_SAMPLE:
        pytest.skip(f"Keras' {model} trains in {KERAS_EVERY_MODEL}'s session: the same Keras code")
    config = small_config(backend, model, batch=TRAIN_BATCH.get(model, 2))
    workload = backend.build(config)
    assert workload.params == config.model.expected_params(framework)
    before = workload.param_fingerprint()
    workload.train_step()
    losses = [workload.loss()]
    after = workload.param_fingerprint()
    changed = sum(a != b for a, b in zip(before, after))
    assert len(before) == len(after) > 0
    assert changed == len(before), f"{len(before) - changed} of {len(before)} tensors unchanged"
    for _ in range(TRAIN_STEPS - 1):
        workload.train_step()
        losses.append(workload.loss())
    assert all(math.isfinite(loss) for loss in losses), losses
    assert recent_loss(losses) < losses[0], losses
    assert workload.output_shape() == config.model.output_shape(config.batch, small=True)


def test_generic_tests_run_the_default_mode_the_resolver_picks(backend, framework):
    """What a run without --mode measures is what these tests build: the framework's first mode."""
    request = require(resolve(framework, "ncf"))
    assert request.mode == get_framework(framework).modes[0] == backend.info.default_mode
    assert small_config(backend, "ncf").mode == request.mode


@pytest.mark.parametrize("model", ["ncf", "gnmt_v2"])
def test_channels_last_is_na_for_models_without_images(backend, framework, model):
    if "channels_last" not in get_framework(framework).modes:
        pytest.skip(f"{framework} has no channels_last mode")
    config = RunConfig(model=get_model(model), batch=2, mode="channels_last")
    assert "image tensors" in backend.unsupported_reason(config)
    assert backend.unsupported_reason(RunConfig(model=get_model("resnet50"), batch=2,
                                                mode="channels_last")) is None
