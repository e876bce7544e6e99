"""JAX backend: Flax (linen) models, optax SGD, the whole training step under one ``jax.jit``.

Each step function is traced under the precision policy's matmul precision,
compiled ahead of time on its first call (so compilation lands in the warm-up)
and called with the training state donated: parameters, batch-norm statistics
and momentum are updated in place.  The synthetic batch stays on the device.
"""
from __future__ import annotations

import functools
import os
import re
from collections import Counter
from typing import Any, Callable, Dict, List, Optional, Tuple

import jax
import jax.numpy as jnp
import numpy as np
import optax

from fwkernels.frameworks import base
from fwkernels.frameworks.base import LABEL_SMOOTHING, RunConfig
from fwkernels.frameworks.jax import runtime
from fwkernels.frameworks.jax.models import build as build_module
from fwkernels.models import ModelSpec, get_model

COMPUTE_DTYPE = {"fp32": jnp.float32, "tf32": jnp.float32, "bf16": jnp.bfloat16}

State = Dict[str, Any]


def image_layout(shape: Tuple[int, ...]) -> Tuple[int, ...]:
    """(batch, C, H, W) as the specs give it, to JAX's natural NHWC."""
    batch, channels, height, width = shape
    return batch, height, width, channels


def loss_function(spec: ModelSpec) -> Callable[[jax.Array, jax.Array], jax.Array]:
    """The model's loss on float32 logits, like the torch backend's."""
    if spec.loss == "binary_cross_entropy":
        return lambda logits, labels: optax.sigmoid_binary_cross_entropy(
            logits.astype(jnp.float32), labels).mean()
    if spec.loss == "label_smoothed_cross_entropy":
        return label_smoothed_cross_entropy
    return lambda logits, labels: optax.softmax_cross_entropy_with_integer_labels(
        logits.astype(jnp.float32), labels).mean()


def label_smoothed_cross_entropy(logits: jax.Array, labels: jax.Array) -> jax.Array:
    """torch's cross_entropy(label_smoothing=0.1), without a (tokens x vocab) one-hot."""
    log_probs = jax.nn.log_softmax(logits.astype(jnp.float32), axis=-1)
    target = jnp.take_along_axis(log_probs, labels[..., None], axis=-1)[..., 0]
    return -((1 - LABEL_SMOOTHING) * target + LABEL_SMOOTHING * log_probs.mean(-1)).mean()


def optimizer(learning_rate: float) -> optax.GradientTransformation:
    """torch.optim.SGD(momentum=0.9, weight_decay=1e-4): decay added to the gradient first."""
    return optax.chain(optax.add_decayed_weights(base.WEIGHT_DECAY),
                       optax.sgd(learning_rate, momentum=base.MOMENTUM))


def model_inputs(spec: ModelSpec, batch: int = 1, small: bool = False) -> tuple:
    """Abstract inputs of the model's forward (shapes and dtypes only)."""
    shapes = spec.input_shapes(batch, small)
    if "image" in shapes:
        return (jax.ShapeDtypeStruct(image_layout(shapes["image"]), jnp.float32),)
    return tuple(jax.ShapeDtypeStruct(shape, jnp.int32) for shape in shapes.values())


def count_trainable(variables: Dict[str, Any]) -> int:
    """Elements of the "params" collection; batch_stats are state, not trainable."""
    return sum(int(np.prod(leaf.shape)) for leaf in jax.tree_util.tree_leaves(variables["params"]))


def lowered_precision(hlo_text: str) -> Dict[str, Any]:
    """Operand precisions and element types of every dot and convolution in a lowered program."""
    precisions: Counter = Counter()
    operand_types: Counter = Counter()
    for line in hlo_text.splitlines():
        if "stablehlo.dot_general" not in line and "stablehlo.convolution" not in line:
            continue
        found = re.findall(r"precision[ =<]+\[?(\w+)", line)
        precisions.update(found[:1] or ["DEFAULT"])
        operands = line.rsplit(" : (", 1)[-1]
        operand_types.update(re.findall(r"x(f32|bf16|f16)>", operands.split("->")[0]))
    return {"matmul_precisions": dict(precisions), "matmul_operand_types": dict(operand_types)}


def _one_or_mixed(values: set) -> Any:
    return values.pop() if len(values) == 1 else "mixed"


@functools.partial(jax.jit, static_argnums=(1, 2, 3, 4))
def initial_state(key: jax.Array, model: str, precision: str, small: bool,
                  learning_rate: float) -> State:
    """Parameters, batch-norm statistics, optimizer state and step counter, in one program:
    Flax init on a one-sample batch, then the optimizer's zeros (eagerly, each parameter
    shape would be a program of its own)."""
    spec = get_model(model)
    dummy = tuple(jnp.zeros(s.shape, s.dtype) for s in model_inputs(spec, 1, small))
    variables = build_module(model, COMPUTE_DTYPE[precision]).init(key, *dummy)
    params = variables["params"]
    return {"params": params, "batch_stats": variables.get("batch_stats", {}),
            "opt_state": optimizer(learning_rate).init(params), "step": jnp.zeros((), jnp.int32)}


class JaxWorkload(base.Workload):
    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.device = runtime.jax_device(config.device)
        self.matmul_precision = runtime.MATMUL_PRECISION[config.precision]
        self.model = build_module(config.model.name, COMPUTE_DTYPE[config.precision])
        self.loss_fn = loss_function(config.model)
        self.tx = optimizer(config.learning_rate)
        # The initial state (a random initializer per parameter: hundreds of small fusions)
        # is computed on the host CPU, then copied to the device.  On an H200 host this cut
        # the deep models' build from 20-33 s (on the GPU, the optimizer's zeros op by op)
        # to 6-9 s (docs/gpu.md).
        with jax.default_device(jax.devices("cpu")[0]):
            key = jax.random.key(config.seed)
            state = initial_state(key, config.model.name, config.precision, config.small,
                                  config.learning_rate)
        self.state: State = jax.device_put(state, self.device)
        self.dropout_key = jax.device_put(jax.random.fold_in(key, 1), self.device)
        self.params = count_trainable(self.state)
        inputs, labels = base.synthetic_batch(config, layout="NHWC")
        self.inputs = tuple(jax.device_put(x, self.device) for x in inputs)
        self.labels = jax.device_put(labels, self.device)
        self._lowered: Dict[str, Any] = {}
        self._compiled: Dict[str, Any] = {}
        self._loss: jax.Array = jnp.zeros(())
        self._pending: Any = None

    # ---- the pure functions that jax.jit compiles ----

    def _loss_and_updates(self, params: Any, state: State, inputs: tuple, labels: jax.Array):
        variables = {"params": params, "batch_stats": state["batch_stats"]}
        rngs = {"dropout": jax.random.fold_in(self.dropout_key, state["step"])}
        logits, updates = self.model.apply(variables, *inputs, train=True, rngs=rngs,
                                           mutable=["batch_stats"])
        return self.loss_fn(logits, labels), updates

    def _gradients(self, state: State, inputs: tuple, labels: jax.Array):
        grad_fn = jax.value_and_grad(self._loss_and_updates, has_aux=True)
        return grad_fn(state["params"], state, inputs, labels)

    def _train_step(self, state: State, inputs: tuple, labels: jax.Array):
        (loss, updates), grads = self._gradients(state, inputs, labels)
        steps, opt_state = self.tx.update(grads, state["opt_state"], state["params"])
        new_state = {"params": optax.apply_updates(state["params"], steps),
                     "batch_stats": updates.get("batch_stats", state["batch_stats"]),
                     "opt_state": opt_state, "step": state["step"] + 1}
        return new_state, loss

    def _forward_backward(self, state: State, inputs: tuple, labels: jax.Array):
        (loss, _), grads = self._gradients(state, inputs, labels)
        return loss, grads

    def _forward(self, state: State, inputs: tuple):
        variables = {"params": state["params"], "batch_stats": state["batch_stats"]}
        return self.model.apply(variables, *inputs, train=False)

    # ---- traced and compiled on first use, under the policy's matmul precision ----

    def _lowered_step(self, name: str):
        if name not in self._lowered:
            function, donate, args = {
                "train": (self._train_step, 0, (self.labels,)),
                "forward_backward": (self._forward_backward, (), (self.labels,)),
                "forward": (self._forward, (), ())}[name]
            with jax.default_matmul_precision(self.matmul_precision):
                self.traced_precision = jax.config.jax_default_matmul_precision
                traced = jax.jit(function, donate_argnums=donate).trace(
                    self.state, self.inputs, *args)
                self._lowered[name] = traced.lower()
        return self._lowered[name]

    def _compiled_step(self, name: str):
        if name not in self._compiled:
            self._compiled[name] = self._lowered_step(name).compile()
        return self._compiled[name]

    def train_step(self) -> None:
        self.state, self._loss = self._compiled_step("train")(self.state, self.inputs, self.labels)
        self._pending = self._loss

    def forward_backward(self) -> None:
        self._loss, grads = self._compiled_step("forward_backward")(
            self.state, self.inputs, self.labels)
        self._pending = (self._loss, grads)

    def forward(self) -> jax.Array:
        self._pending = self._compiled_step("forward")(self.state, self.inputs)
        return self._pending

    def sync(self) -> None:
        jax.block_until_ready(self._pending)

    def loss(self) -> float:
        return float(self._loss)

    def param_fingerprint(self) -> List[float]:
        leaves = jax.tree_util.tree_leaves(self.state["params"])
        return [float(np.asarray(leaf, dtype=np.float64).sum()) for leaf in leaves]

    def precision_settings(self) -> Dict[str, object]:
        """Read from the lowered training step: the precision and operand type of each matmul."""
        lowered = lowered_precision(self._lowered_step("train").as_text())
        precisions, types = lowered["matmul_precisions"], lowered["matmul_operand_types"]
        # A float32 dot or convolution below HIGHEST may use TF32 on GPUs.
        tf32 = [p != "HIGHEST" for p in precisions] if types.get("f32") else [False]
        dtypes = {{"f32": "float32", "bf16": "bfloat16", "f16": "float16"}[t] for t in types}
        return {"policy": self.config.precision, "tf32_enabled": base.tf32_state(tf32),
                "compute_dtype": _one_or_mixed(dtypes or {"float32"}),
                "jax_default_matmul_precision": self.traced_precision,
                "param_dtype": _one_or_mixed({str(leaf.dtype) for leaf in
                                              jax.tree_util.tree_leaves(self.state["params"])}),
                **lowered}

    def policy_settings(self) -> Dict[str, object]:
        return base.policy_fields(self.config, *runtime.conv_autotune(), "NHWC")

    def peak_memory_bytes(self) -> Optional[int]:
        return runtime.peak_memory_bytes(self.config.device)

    def flops_per_step(self) -> Optional[float]:
        """XLA's cost analysis of the training step (forward, backward, update) as lowered,
        before optimisation, traced on CPU placements: the same count whatever the device.
        A compiled GPU program's convolutions and many dots are cuDNN/cuBLAS custom calls,
        which its analysis counts as nothing, and jax analyses no lowered program on a
        PJRT-plugin backend such as CUDA (NotImplementedError, returned as None).

        None where the program loops (GNMT's scanned LSTMs): the analysis counts a
        loop's body once, not once per time step.
        """
        on_cpu = jax.sharding.SingleDeviceSharding(jax.devices("cpu")[0])
        abstract = jax.tree.map(lambda x: jax.ShapeDtypeStruct(x.shape, x.dtype, sharding=on_cpu),
                                (self.state, self.inputs, self.labels))
        with jax.default_matmul_precision(self.matmul_precision):
            traced = jax.jit(self._train_step).trace(*abstract)
        if re.search(r"\b(scan|while)\[", str(traced.jaxpr)):
            return None
        analysis = traced.lower().cost_analysis()
        if isinstance(analysis, (list, tuple)):  # older jax: one dict per program
            analysis = analysis[0] if analysis else None
        flops = (analysis or {}).get("flops")
        return float(flops) if flops and flops > 0 else None


class Backend(base.Backend):
    runtime = runtime

    def version(self) -> str:
        import flax

        return f"{jax.__version__} (flax {flax.__version__}, optax {optax.__version__})"

    def count_params(self, model: ModelSpec) -> int:
        module = build_module(model.name)
        variables = jax.eval_shape(module.init, jax.random.key(0), *model_inputs(model))
        return count_trainable(variables)

    def build(self, config: RunConfig) -> base.Workload:
        return JaxWorkload(config)

    def runtime_info(self, device: str) -> Dict[str, Optional[str]]:
        return {"xla_flags": os.environ.get("XLA_FLAGS"),
                "xla_cpu_threads": runtime.xla_cpu_threads(), **runtime.runtime_info(device)}
