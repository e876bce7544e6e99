"""MXNet 1.9.1 backend: Gluon, hybridized (one static symbolic graph) or imperative.

MXNet fixes its CPU threads and its floating-point environment when it is
imported, so both are settled here before ``import mxnet``.  docs/mxnet.md
describes the modes, precisions, threads and memory figures.
"""
from __future__ import annotations

import ctypes
import gc
import os
import re
import struct
import tempfile
import warnings
from typing import Callable, Dict, List, Optional, Tuple

# ---- process settings that MXNet reads once, at import ----

# Operators run one at a time (MXNet's default, made explicit), each on OMP_NUM_THREADS
# OpenMP threads (oneDNN included): the intra-op count is the common thread count.
os.environ["MXNET_CPU_WORKER_NTHREADS"] = "1"
os.environ.setdefault("OMP_NUM_THREADS", str(len(os.sched_getaffinity(0))))
# MXNet 1.9.1 has no TF32 switch, but its float32 convolutions ask cuDNN for the default
# math, which uses TF32 on Ampere and newer: NVIDIA's override keeps float32 strict.
os.environ["NVIDIA_TF32_OVERRIDE"] = "0"

_FTZ_DAZ = 0x8040  # MXCSR flush-to-zero and denormals-are-zero bits


def _flush_denormals() -> None:
    """Set FTZ/DAZ for this thread; threads started later (MXNet's engine, OpenMP) inherit it.

    MXNet has no switch for it.  A fixed synthetic batch drives gradients into
    denormals, ~100x slower on x86 CPUs (PyTorch flushes them too, via its own switch).
    """
    libm = ctypes.CDLL("libm.so.6")
    env = ctypes.create_string_buffer(32)  # glibc x86-64 fenv_t; MXCSR at offset 28
    if libm.fegetenv(env) == 0:
        struct.pack_into("<I", env, 28, struct.unpack_from("<I", env.raw, 28)[0] | _FTZ_DAZ)
        libm.fesetenv(env)


if os.uname().machine == "x86_64":
    _flush_denormals()

import mxnet as mx  # noqa: E402  (after the settings above)
import numpy as np  # noqa: E402
from mxnet import autograd, gluon  # noqa: E402
from mxnet.gluon import HybridBlock  # noqa: E402

from fwkernels.frameworks import base  # noqa: E402
from fwkernels.frameworks.base import RunConfig  # noqa: E402
from fwkernels.frameworks.mxnet_models import build as build_model  # noqa: E402
from fwkernels.frameworks.mxnet_models import count_trainable, trainable_params  # noqa: E402
from fwkernels.models import NCF_ITEMS, NCF_USERS, ModelSpec  # noqa: E402

LABEL_SMOOTHING = 0.1


# torchvision initialises these with He normal (fan out) convolutions, and the first two
# with N(0, 0.01) classifiers; everything else in torch_models.py keeps PyTorch's default.
HE_FAN_OUT_CONVOLUTIONS = {"vgg19", "resnet50", "mobilenet_v2"}
SMALL_NORMAL_CLASSIFIERS = {"vgg19", "mobilenet_v2"}


@mx.init.register
class ReferenceInit(mx.init.Initializer):
    """The PyTorch reference's initial weights, by layer kind: torchvision's choices above, else
    PyTorch's default U(+-1/sqrt(fan in)); MLPerf GNMT's U(-0.1, 0.1) for embeddings and LSTMs.
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


def context(device: str) -> mx.Context:
    return mx.gpu(0) if device == "cuda" else mx.cpu(0)


def synthetic_batch(config: RunConfig, ctx: mx.Context) -> Tuple[tuple, mx.nd.NDArray]:
    """Random inputs and labels for the model's task; ids are float32, as Gluon embeddings take them."""
    rng = np.random.RandomState(config.seed)
    spec, shapes = config.model, config.input_shapes()
    if spec.name == "ncf":
        inputs: tuple = (rng.randint(0, NCF_USERS, shapes["user"]),
                         rng.randint(0, NCF_ITEMS, shapes["item"]))
        labels = rng.randint(0, 2, shapes["user"])
    elif spec.unit == "tokens":
        inputs = (rng.randint(0, spec.num_classes, shapes["src"]),
                  rng.randint(0, spec.num_classes, shapes["tgt"]))
        labels = rng.randint(0, spec.num_classes, shapes["tgt"])
    else:
        inputs = (rng.standard_normal(shapes["image"]),)
        labels = rng.randint(0, spec.num_classes, shapes["image"][:1])
    return (tuple(mx.nd.array(x, ctx=ctx, dtype="float32") for x in inputs),
            mx.nd.array(labels, ctx=ctx, dtype="float32"))


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


def denormals_flushed() -> bool:
    """Read back through MXNet's own CPU operator threads: does a denormal product come out as 0?"""
    product = mx.nd.full((1 << 20,), 1e-38, ctx=mx.cpu()) * 1e-5  # 1e-43 unless flushed
    return float(product.abs().max().asscalar()) == 0.0


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
        self.ctx = context(config.device)
        self.hybrid = config.mode != "imperative"
        mx.random.seed(config.seed, ctx="all")
        self.baseline_used = self._device_used()
        self.inputs, self.labels = synthetic_batch(config, self.ctx)
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
        mx.nd.waitall()

    def loss(self) -> float:
        return float(self._loss.asscalar()) if self._loss is not None else float("nan")

    def output_shape(self) -> Tuple[int, ...]:
        return tuple(self.forward().shape)

    def param_fingerprint(self) -> List[float]:
        return [float(p.data().asnumpy().astype(np.float64).sum())
                for p in trainable_params(self.model)]

    def precision_settings(self) -> Dict[str, object]:
        bf16 = bfloat16_outputs(traced_symbol(self.model, len(self.inputs)))
        return {"policy": self.config.precision,
                "tf32_enabled": False,  # no TF32 on CPU; on GPU NVIDIA_TF32_OVERRIDE=0 below
                "compute_dtype": "bfloat16" if bf16 else "float32",
                "bfloat16_operator_outputs": bf16,
                "NVIDIA_TF32_OVERRIDE": os.environ.get("NVIDIA_TF32_OVERRIDE"),
                "flush_denormal": denormals_flushed()}

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
    def version(self) -> str:
        return mx.__version__

    def device_available(self, device: str) -> bool:
        return device == "cpu" or (device == "cuda" and mx.context.num_gpus() > 0)

    def set_threads(self, threads: int) -> None:
        fixed = int(os.environ["OMP_NUM_THREADS"])
        if threads != fixed:
            raise ValueError(f"MXNet fixed its OpenMP thread count ({fixed}) at import; set "
                             f"OMP_NUM_THREADS={threads} before importing it")

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
            if not _cpu_has(AVX512_CORE):
                return "oneDNN's bfloat16 kernels in MXNet 1.9.1 need AVX-512 (avx512_core)"
        return None

    def count_params(self, model: ModelSpec) -> int:
        return count_trainable(build_model(model.name))

    def build(self, config: RunConfig) -> base.Workload:
        return MXNetWorkload(config)

    def runtime_info(self, device: str) -> Dict[str, Optional[str]]:
        info = {"omp_num_threads": os.environ.get("OMP_NUM_THREADS"),
                "mxnet_cpu_worker_nthreads": os.environ.get("MXNET_CPU_WORKER_NTHREADS")}
        if device == "cuda":
            info["driver_version"] = base.nvidia_driver_version()
            capability = mx.util.get_cuda_compute_capability(mx.gpu(0))
            info["compute_capability"] = f"{capability // 10}.{capability % 10}"
        return info

    def is_out_of_memory(self, error: BaseException) -> bool:
        return "cudaErrorMemoryAllocation" in str(error) or super().is_out_of_memory(error)


def _cpu_has(flags: Tuple[str, ...]) -> bool:
    try:
        with open("/proc/cpuinfo") as f:
            present = next(line for line in f if line.startswith("flags")).split()
    except (OSError, StopIteration):
        return False
    return all(flag in present for flag in flags)
