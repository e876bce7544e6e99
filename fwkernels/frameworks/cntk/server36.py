"""The CNTK process: CNTK 2.7 runs on Python 3.6 only, fwkernels on 3.11, so the CNTK backend
(backend.py, runtime.py) starts this script with the 3.6 interpreter and sends it calls.

    python3.6 server36.py        (started by runtime.py; numpy and cntk only)

One JSON object a line on stdin: {"call": NAME, "args": {...}}; one JSON object a line back on
the original stdout: {"result": ...} or {"error": "Type: message", "type": "Type"}.  CNTK's own
messages go to stderr (stdout is pointed there), so they never mix with the replies.  Holds at
most one workload: a "build" replaces the one before.
"""
import ctypes
import json
import os
import resource
import sys
import traceback
import warnings

import numpy

_FTZ_DAZ = 0x8040  # x86 MXCSR flush-to-zero and denormals-are-zero bits


def flush_denormals():
    """FTZ/DAZ for this thread, before CNTK starts its OpenMP and MKL threads (they inherit it):
    CNTK has no switch of its own, and a fixed synthetic batch drives gradients into denormals
    (fwkernels/frameworks/base.py, flush_denormals_x86, does the same in the 3.11 backends)."""
    if os.uname().machine != "x86_64":
        return
    libm = ctypes.CDLL("libm.so.6")
    env = ctypes.create_string_buffer(32)  # glibc x86-64 fenv_t; MXCSR at offset 28
    if libm.fegetenv(env) == 0:
        mxcsr = int.from_bytes(env.raw[28:32], "little") | _FTZ_DAZ
        env[28:32] = mxcsr.to_bytes(4, "little")
        libm.fesetenv(env)


flush_denormals()
# CNTK's import warns that it supports Ubuntu only and that GPU libraries are missing: noise here
warnings.filterwarnings("ignore", module="cntk.cntk_py_init")
import cntk as C  # noqa: E402  (after FTZ/DAZ)

import models36  # noqa: E402  (this script's folder is first on sys.path)


def peak_rss_bytes():
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # Linux reports KiB


BASELINE_RSS = peak_rss_bytes()  # after the CNTK import: the figures are the run's own


def denormals_flushed():
    """Read back in numpy's loop and in CNTK's own matrix product: do denormal products come out 0?"""
    product = numpy.full(1 << 20, 1e-38, numpy.float32) * numpy.float32(1e-5)  # else 1e-43
    tiny = numpy.full((256, 256), 1e-22, numpy.float32)  # 1e-44 products
    return not product.any() and not C.times(tiny, tiny).eval().any()


def input_variables(description):
    """The model's inputs: images (C, H, W); ids as one float each, read with C.gather (GNMT's on
    two sequence axes, source and target)."""
    shapes = description["input_shapes"]
    if description["unit"] == "tokens":
        return [C.sequence.input_variable(1, sequence_axis=C.Axis(name + "_axis"), name=name)
                for name in ("src", "tgt")]
    return [C.input_variable(tuple(shape[1:]) or (1,), name=name) for name, shape in shapes]


def label_variable(description, model_output):
    if description["unit"] == "tokens":  # one id a target token, on the target's axis
        return C.sequence.input_variable(description["num_classes"], is_sparse=True,
                                         sequence_axis=model_output.dynamic_axes[1], name="labels")
    if description["num_classes"] == 1:  # NCF: one 0/1 label a pair
        return C.input_variable((), name="labels")
    return C.input_variable(description["num_classes"], name="labels")  # one-hot


def loss_function(description, z, labels, smoothing):
    """The PyTorch backend's losses, per sample (the Trainer sums them; the learner's rate is per
    mean, ``minibatch_size`` below)."""
    if description["loss"] == "binary_cross_entropy":  # with logits, written out stably
        return C.relu(z) - z * labels + C.log(1 + C.exp(-C.abs(z)))
    cross_entropy = C.cross_entropy_with_softmax(z, labels)
    if description["loss"] != "label_smoothed_cross_entropy":
        return cross_entropy
    uniform = C.reduce_log_sum_exp(z) - C.reduce_mean(z)  # -mean(log_softmax(z))
    return (1 - smoothing) * cross_entropy + smoothing * uniform


def pytorch_sgd(parameters, learning_rate, momentum, weight_decay, samples):
    """PyTorch's SGD (b = m b + g + wd w; w -= lr b) for a loss summed over ``samples``.
    momentum_sgd without unit gain keeps b = m b + g; a rate given for a minibatch of ``samples``
    is applied to the summed gradient / samples, and CNTK's L2 weight (per sample) is scaled by
    the samples as well, so both act on the mean gradient (tests/test_cntk.py checks the rule)."""
    return C.learners.momentum_sgd(parameters, lr=learning_rate, momentum=momentum,
                                   unit_gain=False, l2_regularization_weight=weight_decay,
                                   minibatch_size=samples)


class Workload(object):
    def __init__(self, args):
        description = args["description"]
        C.cntk_py.set_fixed_random_seed(args["seed"] + 1)  # CNTK's seeds start at 1
        self.inputs = input_variables(description)
        self.model = models36.build(description, self.inputs)
        self.labels = label_variable(description, self.model)
        self.criterion = loss_function(description, self.model, self.labels,
                                       args["label_smoothing"])
        self.params = models36.count_trainable(self.model)
        batch = numpy.load(args["batch_path"])
        arrays = [batch["input%d" % i] for i in range(len(self.inputs))]
        self.samples = int(numpy.prod(batch["labels"].shape))  # labels: one per sample or token
        self.data = dict(zip(self.inputs, [self.value(v, a) for v, a in zip(self.inputs, arrays)]))
        self.data[self.labels] = self.label_value(description, batch["labels"])
        self.input_data = {v: self.data[v] for v in self.inputs}
        learner = pytorch_sgd(self.model.parameters, args["learning_rate"], args["momentum"],
                              args["weight_decay"], self.samples)
        self.trainer = C.Trainer(self.model, (self.criterion, None), [learner])

    def value(self, variable, array):
        """A resident CNTK Value, made once: every step reads it."""
        if variable.dynamic_axes and len(variable.dynamic_axes) > 1:  # sequences of ids
            return C.Value.create(variable, [seq.reshape(-1, 1).astype(numpy.float32)
                                             for seq in array])
        if array.dtype.kind in "iu":
            array = array.reshape(-1, 1)
        return C.Value(batch=numpy.ascontiguousarray(array, dtype=numpy.float32))

    def label_value(self, description, labels):
        if description["unit"] == "tokens":
            return C.Value.one_hot([[int(t) for t in seq] for seq in labels],
                                   description["num_classes"])
        if description["num_classes"] == 1:
            return C.Value(batch=labels.astype(numpy.float32))
        one_hot = numpy.zeros((labels.shape[0], description["num_classes"]), numpy.float32)
        one_hot[numpy.arange(labels.shape[0]), labels] = 1
        return C.Value(batch=one_hot)

    def train_step(self):
        self.trainer.train_minibatch(self.data)

    def forward_backward(self):
        # the gradients of every parameter, training-mode forward (batch statistics, dropout)
        self.criterion.grad(self.data, wrt=self.model.parameters, as_numpy=False)

    def forward(self):
        # eval: inference mode (BatchNorm's running statistics, no dropout), no backward state
        return self.model.eval(self.input_data, as_numpy=False)

    def loss(self):
        if self.trainer.total_number_of_samples_seen == 0:
            return float("nan")
        return float(self.trainer.previous_minibatch_loss_average)

    def output_shape(self):
        return list(self.forward().shape)

    def param_fingerprint(self):
        return [float(p.value.sum(dtype=numpy.float64)) for p in self.model.parameters]

    def precision_settings(self):
        dtypes = set(str(numpy.dtype(p.dtype)) for p in self.model.parameters)
        return {"compute_dtype": dtypes.pop() if len(dtypes) == 1 else "mixed",
                "flush_denormal": denormals_flushed()}


class Server(object):
    def __init__(self):
        self.workload = None

    def hello(self):
        return {"version": C.__version__, "numpy_version": numpy.__version__,
                "python": sys.version.split()[0]}

    def set_threads(self, threads):
        C.cntk_py.set_max_num_cputhreads(threads)
        return C.cntk_py.get_max_num_cputhreads()

    def threads(self):
        return C.cntk_py.get_max_num_cputhreads()

    def devices(self):
        return sorted(set("cpu" if d.type() == C.device.DeviceKind.CPU else "cuda"
                          for d in C.device.all_devices()))

    def count_params(self, description):
        return models36.count_trainable(models36.build(description, input_variables(description)))

    def build(self, **args):
        self.workload = None  # the previous one's memory goes first
        self.workload = Workload(args)
        return {"params": self.workload.params}

    def peak_memory_bytes(self):
        return peak_rss_bytes() - BASELINE_RSS

    def call(self, name, args):
        if hasattr(self, name):
            return getattr(self, name)(**args)
        if self.workload is None:
            raise RuntimeError("no workload built")
        result = getattr(self.workload, name)(**args)
        return None if name == "forward" else result


def main():
    replies = os.fdopen(os.dup(1), "w")
    os.dup2(2, 1)  # CNTK's messages (and print) go to stderr
    server = Server()
    for line in sys.stdin:
        message = json.loads(line)
        try:
            reply = {"result": server.call(message["call"], message.get("args", {}))}
        except BaseException as error:
            traceback.print_exc()
            text = "%s: %s" % (type(error).__name__, error)
            reply = {"error": text.strip().splitlines()[0][:500], "type": type(error).__name__}
        replies.write(json.dumps(reply) + "\n")
        replies.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
