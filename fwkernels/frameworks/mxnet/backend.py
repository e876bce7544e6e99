"""MXNet 1.9.1 backend: Gluon, hybridized (one static symbolic graph) or imperative.

MXNet fixes its CPU threads and its floating-point environment when it is imported: its
runtime module (fwkernels/frameworks/mxnet/runtime.py) settles both first.  docs/mxnet.md
describes the modes, precisions, threads and memory figures.
"""
from __future__ import annotations

import gc
import os
import re
import tempfile
import warnings
from typing import Callable, Dict, List, Optional, Tuple

from fwkernels.frameworks.mxnet import runtime  # first: MXNet's settings fixed at import

import numpy as np  # noqa: E402
from mxnet import autograd, gluon  # noqa: E402
from mxnet.gluon import HybridBlock  # noqa: E402

from fwkernels.frameworks import base  # noqa: E402
from fwkernels.frameworks.base import LABEL_SMOOTHING, RunConfig  # noqa: E402
from fwkernels.frameworks.mxnet.models import build as build_model  # noqa: E402
from fwkernels.frameworks.mxnet.models import count_trainable, trainable_params  # noqa: E402
from fwkernels.models import ModelSpec  # noqa: E402

mx = runtime.mx


# torchvision initialises these with He normal (fan out) convolutions, and the first two
# with N(0, 0.01) classifiers; everything else in torch_models.py keeps PyTorch's default.
HE_FAN_OUT_CONVOLUTIONS = {"vgg19", "resnet50", "mobilenet_v2"}
SMALL_NORMAL_CLASSIFIERS = {"vgg19", "mobilenet_v2"}


@mx.init.register
class ReferenceInit(mx.init.Initializer):
    """The PyTorch reference's initial weights, by layer kind: torchvision's choices above, else
    PyTorch's default U(+-1/sqrt(fan in)); PyTorch's N(0, 1) for NCF's embeddings; MLPerf GNMT's
    U(-0.1, 0.1) for GNMT v2's embeddings and LSTMs.
    Gluon's name rules zero the biases and beta and set gamma to 1 (PyTorch draws biases)."""

    def __init__(self, model: str) -> None:
        super().__init__(model=model)
        torch_default = mx.init.Xavier(rnd_type="uniform", factor_type="in", magnitude=1)
        he_fan_out = mx.init.Xavier(rnd_type="gaussian", factor_type="out", magnitude=2)
        self._by_layer = [
            (re.compile(r".*conv\d+_weight$"),
             he_fan_out if model in HE_FAN_OUT_CONVOLUTIONS else torch_default),
            (re.compile(r".*dense\d+_weight$"),
             mx.init.Normal(0.01) if model in SMALL_NORMAL_CLASSIFIERS else torch_default),
            (re.compile(r".*embedding\d+_weight$"),
             mx.init.Normal(1.0) if model == "ncf" else mx.init.Uniform(0.1)),
            (re.compile(".*"), mx.init.Uniform(0.1)),
        ]

    def _init_weight(self, name, arr) -> None:
        init = next(init for pattern, init in self._by_layer if pattern.match(str(name)))
        init._init_weight(name, arr)


# AMP lets Concat run in either type but does not cast mixed inputs to one ("Non-uniform
# data type in Concat"): NCF joins a float32 embedding product and a bf16 MLP output, so
# its Concat runs in float32.  Forcing that everywhere breaks GoogLeNet's conversion.
CONCAT_IN_FLOAT32 = {"ncf"}
AVX512_CORE = ("avx512f", "avx512bw", "avx512vl", "avx512dq")  # what oneDNN needs for bfloat16


def loss_function(spec: ModelSpec) -> Callable:
    """The torch backend's losses, written for both F = mx.nd and F = mx.sym; logits in float32."""
    def cross_entropy(F, logits, labels):
        log_p = F.log_softmax(F.cast(logits, "float32"), axis=-1)
        nll = -F.pick(log_p, labels, axis=-1)
        if spec.loss == "label_smoothed_cross_entropy":
            nll = (1 - LABEL_SMOOTHING) * nll - LABEL_SMOOTHING * F.mean(log_p, axis=-1)
        return F.mean(nll)

    def binary_cross_entropy_with_logits(F, logits, labels):
        x = F.cast(logits, "float32")
        return F.mean(F.relu(x) - x * labels + F.log1p(F.exp(-F.abs(x))))

    return binary_cross_entropy_with_logits if spec.loss == "binary_cross_entropy" else cross_entropy


class LossGraph(HybridBlock):
    """Model and loss as one block, so that hybrid mode runs the loss inside the graph."""

    def __init__(self, model: HybridBlock, loss: Callable) -> None:
        super().__init__()
        self.model, self.loss = model, loss

    def hybrid_forward(self, F, *inputs_and_labels):
        *inputs, labels = inputs_and_labels
        return self.loss(F, self.model(*inputs), labels)


class ForwardGraph(HybridBlock):
    def __init__(self, model: HybridBlock) -> None:
        super().__init__()
        self.model = model

    def hybrid_forward(self, F, *inputs):
        return self.model(*inputs)


def traced_symbol(block: HybridBlock, inputs: int) -> mx.sym.Symbol:
    """The operator graph the block runs (tracing only, no computation)."""
    return block(*[mx.sym.var(f"input{i}") for i in range(inputs)])


def bfloat16_outputs(symbol: mx.sym.Symbol) -> int:
    """How many operator outputs of the graph MXNet's type inference makes bfloat16 (float32 inputs).

    AMP's bf16 conversion shows as operator output types, not as cast nodes.
    """
    internals = symbol.get_internals()
    _, types, _ = internals.infer_type_partial(**{name: np.float32 for name in symbol.list_inputs()
                                                  if name.startswith("input")})
    return sum(1 for t in types if "bfloat16" in str(t))


def storage_peak_bytes(run: Callable[[], object], ctx: mx.Context) -> int:
    """Peak of the bytes MXNet's storage manager allocates while ``run`` executes (profiler).

    The profiler's memory counter runs on over the process and misses what is
    freed while profiling is off, so a first session reads its level.
    """
    device = f"{ctx.device_type}/{ctx.device_id}"
    config = dict(profile_memory=True, profile_symbolic=False, profile_imperative=False,
                  profile_api=False, aggregate_stats=True)

    def session(step: Callable[[], object]) -> Tuple[float, object]:
        with tempfile.TemporaryDirectory(prefix="fwkernels-mxprof-") as tmp:
            mx.profiler.set_config(filename=os.path.join(tmp, "profile.json"), **config)
            mx.nd.waitall()
            mx.profiler.set_state("run")
            kept = step()
            mx.nd.waitall()
            mx.profiler.set_state("stop")
            table = mx.profiler.dumps(reset=True)
        for line in table.splitlines():  # "Memory: cpu/0  count  min kB  max kB  avg kB"
            if line.strip().startswith(f"Memory: {device} "):
                return float(line.split()[-2]) * 1000, kept  # the profiler's kB are 1000 bytes
        raise RuntimeError(f"the MXNet profiler reported no storage figures for {device}")

    gc.collect()  # what is left to free goes now, unseen, rather than inside the measured pass
    mx.nd.waitall()
    # A session with one small allocation reports the counter's level before ``run``.
    level, marker = session(lambda: mx.nd.zeros((16,), ctx=ctx, dtype="float32"))
    peak, _ = session(run)
    del marker
    return int(round(peak - level))


class MXNetWorkload(base.Workload):
    def __init__(self, config: RunConfig) -> None:
        self.config = config
        self.ctx = runtime.context(config.device)
        self.hybrid = config.mode != "imperative"
        mx.random.seed(config.seed, ctx="all")
        self.baseline_used = self._device_used()
        # ids as float32, as Gluon embeddings take them
        self.inputs, self.labels = base.synthetic_batch(
            config, convert=lambda a: mx.nd.array(a, ctx=self.ctx, dtype="float32"))
        net = build_model(config.model.name)
        net.initialize(ReferenceInit(config.model.name), ctx=self.ctx)
        if config.precision == "bf16":
            net = self._to_bfloat16(net)
        self.model = net
        self.params = sum(p.data().size for p in trainable_params(net))
        self.loss_fn = loss_function(config.model)
        self.loss_graph = self._prepare(LossGraph(net, self.loss_fn))
        self.predictor = self._prepare(ForwardGraph(net))
        self.trainer = gluon.Trainer(
            trainable_params(net), "sgd",
            {"learning_rate": config.learning_rate, "momentum": base.MOMENTUM,
             "wd": base.WEIGHT_DECAY},
            kvstore=None)
        self._loss: Optional[mx.nd.NDArray] = None

    def _to_bfloat16(self, net: HybridBlock) -> HybridBlock:
        """AMP: the traced graph, converted to bfloat16 where MXNet's bf16 lists allow (oneDNN, CPU)."""
        from mxnet.contrib import amp

        traced = ForwardGraph(net)
        traced.hybridize()
        traced(*self.inputs)  # AMP converts the cached graph, which the first call builds
        fp32_ops = None
        if self.config.model.name in CONCAT_IN_FLOAT32:
            fp32_ops = amp.list_fp32_ops(amp.amp.bfloat16) + ["Concat", "concat"]
        with warnings.catch_warnings():  # SymbolBlock's "Cannot decide type" for the inputs
            warnings.filterwarnings("ignore", "Cannot decide type", UserWarning)
            return amp.convert_hybrid_block(traced, target_dtype="bfloat16", fp32_ops=fp32_ops,
                                            ctx=self.ctx)

    def _prepare(self, graph: HybridBlock) -> HybridBlock:
        """Hybrid mode: one static graph with memory planned and allocated once (MXNet's fastest)."""
        if self.hybrid:
            graph.hybridize(static_alloc=True, static_shape=True)
        return graph

    def _device_used(self) -> Optional[int]:
        if self.ctx.device_type != "gpu":
            return None
        free, total = mx.context.gpu_memory_info(self.ctx.device_id)
        return total - free

    def _loss_and_backward(self, loss_graph: HybridBlock) -> mx.nd.NDArray:
        with autograd.record():
            loss = loss_graph(*self.inputs, self.labels)
        loss.backward()
        return loss

    def train_step(self) -> None:
        self._loss = self._loss_and_backward(self.loss_graph)
        self.trainer.step(1)  # the loss is already the batch mean

    def forward_backward(self) -> None:
        self._loss = self._loss_and_backward(self.loss_graph)

    def forward(self) -> mx.nd.NDArray:
        return self.predictor(*self.inputs)  # outside autograd.record: inference mode

    def sync(self) -> None:
        runtime.sync()

    def loss(self) -> float:
        return float(self._loss.asscalar()) if self._loss is not None else float("nan")

    def param_fingerprint(self) -> List[float]:
        return [float(p.data().asnumpy().astype(np.float64).sum())
                for p in trainable_params(self.model)]

    def precision_settings(self) -> Dict[str, object]:
        bf16 = bfloat16_outputs(traced_symbol(self.model, len(self.inputs)))
        return {"policy": self.config.precision,
                "compute_dtype": "bfloat16" if bf16 else "float32",
                "bfloat16_operator_outputs": bf16,
                **runtime.precision_flags()}

    def policy_settings(self) -> Dict[str, object]:
        return base.policy_fields(self.config, *runtime.conv_autotune(), "NCHW")

    def peak_memory_bytes(self) -> Optional[int]:
        """On GPU: device memory in use above the pre-build level (MXNet's pool keeps its peak)."""
        used = self._device_used()
        return None if used is None else used - self.baseline_used

    def extra_figures(self, phase: str) -> Dict[str, object]:
        """MXNet's own internal-memory figure of one pass (the MXNet paper's memory figure)."""
        if phase == "train":
            key, fresh = "internal_memory_forward_backward_bytes", LossGraph(self.model, self.loss_fn)
            run: Callable[[], object] = lambda: self._loss_and_backward(fresh)
        else:
            key, fresh = "internal_memory_forward_bytes", ForwardGraph(self.model)
            run = lambda: fresh(*self.inputs)
        self._prepare(fresh)  # a new graph allocates its buffers anew in its first pass
        return {key: storage_peak_bytes(run, self.ctx),
                "internal_memory_source": "MXNet profiler (profile_memory): storage peak of one "
                                          "fresh pass above the level before it"}


class Backend(base.Backend):
    runtime = runtime

    def unsupported_reason(self, config: RunConfig) -> Optional[str]:
        if config.precision == "tf32":
            return ("MXNet 1.9.1 has no TF32 switch (cuDNN may pick TF32 for its float32 "
                    "convolutions, nothing selects it elsewhere); fp32 runs strict float32")
        if config.precision == "bf16":
            if config.device == "cuda":
                return "MXNet 1.9.1's bfloat16 AMP covers oneDNN CPU operators only, none on CUDA"
            if config.mode == "imperative":
                return ("bf16 is measured in hybrid mode (amp.convert_hybrid_block); imperative "
                        "AMP (amp.init) patches MXNet's operators for the whole process, for good")
            if not runtime.cpu_has(AVX512_CORE):
                return "oneDNN's bfloat16 kernels in MXNet 1.9.1 need AVX-512 (avx512_core)"
        return None

    def count_params(self, model: ModelSpec) -> int:
        return count_trainable(build_model(model.name))

    def build(self, config: RunConfig) -> base.Workload:
        return MXNetWorkload(config)

    def is_out_of_memory(self, error: BaseException) -> bool:
        return runtime.is_out_of_memory(error) or super().is_out_of_memory(error)
