"""The measurement record: one typed, versioned result per combination, and its JSON-lines files.

Every writer (the runner, ``fwkernels sweep``, the asv suite, the experiments) and every reader
(the report, ``compare``, ``render`` and the record-analysis commands) goes through this module.

A record is a mapping, so ``record["samples_per_s"]`` and ``record.get("error")`` work, and the
fields below are its schema: ``record.samples_per_s`` is the same value, typed.  Fields a
framework adds of its own (``blas_threads``, ``use_mkldnn``, MXNet's internal-memory figures,
``xla_flags``, ...) are kept as they came and survive a round trip.  To add a field, add a line
below: every field but the four that name the combination and ``status`` is optional.

Schema versions: 1 adds the ``schema`` field itself; a record without it (everything written
before) is version 0, which has the same fields, and loads unchanged. 2 adds ``release`` (the
ledger release measured) and ``harness_commit`` (the fwkernels commit that measured it).
``autotune``, ``autotune_setting`` and ``layout`` (docs/fairness.md) are optional fields of version
2: a record without them was measured before the fairness policy; so are ``allocator``,
``allocator_settings``, ``mkl_debug_cpu_type`` and ``window_seconds``, which a record measured
before they existed lacks.
"""
from __future__ import annotations

import json
import math
import os
import sys
from collections.abc import Mapping
from typing import Any, Dict, Generic, Iterable, Iterator, List, Optional, Tuple, TypeVar

SCHEMA_VERSION = 2
STATUSES = ("ok", "n/a", "error", "oom", "nan", "crashed", "killed", "timeout")

T = TypeVar("T")


class RecordError(ValueError):
    """A record or records file that cannot be read: the message names the place and the fault."""


class Field(Generic[T]):
    """One field of the schema: its type and what it means; reading it gives its value or None."""

    def __init__(self, kind: Tuple[type, ...], meaning: str, required: bool = False) -> None:
        self.kind, self.meaning, self.required = kind, meaning, required
        self.name = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.name = name
        owner.FIELDS = {**getattr(owner, "FIELDS", {}), name: self}  # type: ignore[attr-defined]

    def __get__(self, record: Optional["Record"], owner: type) -> Any:
        if record is None:
            return self
        return record.get(self.name)

    def problem(self, value: Any) -> Optional[str]:
        if value is None or isinstance(value, self.kind):
            return None
        return f"{self.name} is {type(value).__name__}, expected {self.kind[0].__name__}"


TEXT, INT, NUMBER, LIST, MAP, BOOL = (str,), (int,), (int, float), (list,), (dict,), (bool,)


class Record(Mapping):
    """One measurement of one (framework, mode, model, precision), finished or not."""

    FIELDS: Dict[str, Field] = {}

    schema = Field[int](INT, "schema version of this record (0: written before versions)")
    # what was measured
    framework = Field[str](TEXT, "registry name (fwkernels list)", required=True)
    mode = Field[str](TEXT, "execution mode; the framework's first is its default", required=True)
    model = Field[str](TEXT, "model name (fwkernels/models.py)", required=True)
    precision = Field[str](TEXT, "fp32, tf32 or bf16", required=True)
    device = Field[str](TEXT, "cpu or cuda")
    batch = Field[int](INT, "samples per step, in the model's batch dimension")
    threads = Field[int](INT, "CPU threads given to the framework")
    windows = Field[int](INT, "timing windows K")
    window_seconds = Field[float](NUMBER, "target length of a timing window, which calibrates "
                                  "steps_per_window (unless the steps were given)")
    warmup = Field[int](INT, "warm-up steps")
    framework_title = Field[str](TEXT, "the framework's name in the papers")
    task = Field[str](TEXT, "the model's task")
    unit = Field[str](TEXT, "images, tokens or samples")
    samples_per_step = Field[int](INT, "samples (in unit) per training step")
    canonical_params = Field[int](INT, "the model's canonical trainable parameter count")
    expected_params = Field[int](INT, "the count this framework's build must have")
    # how it went
    status = Field[str](TEXT, "ok, n/a, error, oom, nan, crashed, killed (a SIGKILL with no sign "
                        "of running out of memory) or timeout", required=True)
    error = Field[str](TEXT, "why it is not ok (the N/A reason, the exception's first line)")
    failed_phase = Field[str](TEXT, "the phase that failed (train, forward; install: the release)")
    log_tail = Field[str](TEXT, "the end of a failed worker's output")
    # the figures
    samples_per_s = Field[float](NUMBER, "training throughput, mean over the windows")
    samples_per_s_std = Field[float](NUMBER, "its standard deviation (n-1)")
    samples_per_s_median = Field[float](NUMBER, "its median")
    samples_per_s_cv = Field[float](NUMBER, "its coefficient of variation")
    window_samples_per_s = Field[list](LIST, "training throughput of each window")
    steps_per_window = Field[int](INT, "steps per timing window N")
    step_time_s = Field[float](NUMBER, "mean train step (forward, backward, update), s/batch")
    forward_backward_time_s = Field[float](NUMBER, "mean forward+backward, s/batch")
    forward_time_s = Field[float](NUMBER, "mean forward-only, s/batch")
    forward_samples_per_s = Field[float](NUMBER, "forward-only throughput, mean over windows")
    forward_samples_per_s_cv = Field[float](NUMBER, "its coefficient of variation")
    peak_memory_bytes = Field[int](INT, "peak training memory")
    forward_peak_memory_bytes = Field[int](INT, "peak forward-only memory")
    peak_memory_source = Field[str](TEXT, "device allocator peak, or process RSS above baseline")
    warmup_s = Field[float](NUMBER, "training warm-up (compile, autotune) time")
    loss = Field[float](NUMBER, "loss after the last training step")
    params = Field[int](INT, "trainable parameters of the built model")
    flops_per_step = Field[float](NUMBER, "model FLOPs of one training step, where countable")
    flops_per_sample = Field[float](NUMBER, "flops_per_step / samples_per_step")
    achieved_tflops = Field[float](NUMBER, "flops_per_step / step_time_s")
    precision_settings = Field[dict](MAP, "the precision flags as the framework reports them")
    autotune = Field[bool](BOOL, "whether the framework times cuDNN's convolution algorithms "
                           "for these shapes (None: no such choice, e.g. on the CPU)")
    autotune_setting = Field[str](TEXT, "the switch that decides it, as read back "
                                  "(cudnn.benchmark=True, TF_CUDNN_USE_AUTOTUNE=1, ...)")
    layout = Field[str](TEXT, "the image tensors' layout (NCHW, NHWC); none: no image input")
    # where the time went
    import_s = Field[float](NUMBER, "framework import")
    build_s = Field[float](NUMBER, "model, optimizer and batch build")
    flops_s = Field[float](NUMBER, "FLOP counting")
    measure_s = Field[float](NUMBER, "the whole measurement, worker processes included")
    # where and when
    framework_version = Field[str](TEXT, "the framework's version, as it reports it")
    timestamp = Field[str](TEXT, "UTC start time, ISO 8601")
    host = Field[str](TEXT, "host name")
    cpu = Field[str](TEXT, "CPU model")
    instruction_sets = Field[list](LIST, "which of avx2, fma, avx512f, avx512_bf16, amx_tile the CPU has")
    device_name = Field[str](TEXT, "GPU name, where one is used")
    compile_cache = Field[str](TEXT, "how the workers' on-disk compiler caches were set")
    allocator = Field[str](TEXT, "the worker's malloc: glibc, or the allocator preloaded into it "
                           "(LD_PRELOAD), e.g. tcmalloc_minimal")
    allocator_settings = Field[dict](MAP, "the variables set that tune it (GLIBC_TUNABLES, "
                                     "MALLOC_CONF, THP_MEM_ALLOC_ENABLE, ...)")
    mkl_debug_cpu_type = Field[str](TEXT, "MKL_DEBUG_CPU_TYPE in the worker, where set: 5 makes an "
                                    "MKL before 2020.1 run its AVX2 kernels on a non-Intel CPU "
                                    "(the CPU policy sets it there)")
    other_cpu_share = Field[float](NUMBER, "the share of the machine's CPU time that other processes "
                                   "used while the timed training windows ran (/proc/stat's busy "
                                   "time less the worker's and its descendants')")
    steal_share = Field[float](NUMBER, "the share of the machine's CPU time the hypervisor gave to "
                               "others while the timed training windows ran (/proc/stat's steal)")
    host_speed = Field[float](NUMBER, "the host's speed: the slower of host_speed_probes")
    host_speed_probes = Field[list](LIST, "millions of iterations/s of a fixed pure-Python loop on "
                                    "one core, just before and just after the measurement "
                                    "(fwkernels.runner.host_speed)")
    fwkernels_version = Field[str](TEXT, "fwkernels' version")
    asv_commit = Field[str](TEXT, "the commit asv measured (suite records)")
    asv_env = Field[str](TEXT, "asv's environment name (suite records)")
    asv_machine = Field[str](TEXT, "asv's machine name (suite records)")
    release = Field[str](TEXT, "the ledger release measured, <framework>-<version> (suite records)")
    harness_commit = Field[str](TEXT, "the fwkernels commit that measured it (+changes: with "
                                "uncommitted changes)")

    def __init__(self, data: Mapping[str, Any]) -> None:
        self._data = dict(data)

    @classmethod
    def new(cls, **fields: Any) -> "Record":
        """A record written now: the current schema version first, then ``fields``."""
        return cls({"schema": SCHEMA_VERSION, **fields})

    @classmethod
    def from_dict(cls, data: Any, where: str = "record") -> "Record":
        """A record read from JSON; RecordError names ``where`` and what is wrong."""
        if not isinstance(data, dict):
            raise RecordError(f"{where}: a record is a JSON object, not {type(data).__name__}")
        version = data.get("schema", 0)
        if not isinstance(version, int) or version > SCHEMA_VERSION:
            raise RecordError(f"{where}: schema {version!r} is newer than this fwkernels reads "
                              f"({SCHEMA_VERSION})")
        missing = [f.name for f in cls.FIELDS.values() if f.required and f.name not in data]
        problems = [p for f in cls.FIELDS.values() if (p := f.problem(data.get(f.name)))]
        if missing or problems:
            raise RecordError(f"{where}: " + "; ".join(
                ([f"missing {', '.join(missing)}"] if missing else []) + problems))
        return cls(data)

    def with_fields(self, **fields: Any) -> "Record":
        return type(self)({**self._data, **fields})

    def to_dict(self) -> Dict[str, Any]:
        return dict(self._data)

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def target(self) -> str:
        """asv's framework parameter: the framework, with ":mode" unless it is the default."""
        from fwkernels.request import target_name

        return target_name(self.framework, self.mode)

    def __getitem__(self, key: str) -> Any:
        return self._data[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._data)

    def __len__(self) -> int:
        return len(self._data)

    def __repr__(self) -> str:
        return f"Record({self._data!r})"


# Other work beside a measurement, above this share of the machine's CPU time, is named by
# sweep, report and compare (docs/reports.md, *Other work beside a measurement*)
BESIDE_TOLERANCE = 0.05


def share_beside(record: Mapping[str, Any]) -> Optional[float]:
    """The share of the machine's CPU time that went to other processes and, through the
    hypervisor, to other guests while a record's timed training windows ran (None: a record
    measured before records said)."""
    shares = [record[key] for key in ("other_cpu_share", "steal_share")
              if record.get(key) is not None]
    return sum(shares) if shares else None


# ---- JSON lines ----

def dumps(record: Mapping[str, Any]) -> str:
    """One line of JSON (non-JSON values, numpy scalars say, as their text)."""
    data = record.to_dict() if isinstance(record, Record) else dict(record)
    return json.dumps(data, default=str)


def loads(text: str, where: str = "record") -> Record:
    try:
        data = json.loads(text, parse_constant=_constant)
    except ValueError as error:
        raise RecordError(f"{where}: not JSON ({error})") from None
    return Record.from_dict(data, where)


def _constant(name: str) -> float:
    """Python's json writes NaN and Infinity bare; read them back as floats."""
    return {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}[name]


def append(path: str, record: Mapping[str, Any]) -> None:
    """Add one record to a JSON-lines file (an interrupted run loses nothing measured before)."""
    with open(path, "a") as f:
        f.write(dumps(record) + "\n")


def read(path: str, required: bool = False) -> List[Record]:
    """Every record of a JSON-lines file; a missing file has none (``required``: a RecordError).
    A last line without its newline that is not JSON is what a run killed while appending
    leaves: skipped with a warning."""
    if not os.path.exists(path) and not required:
        return []
    try:
        with open(path) as f:
            lines = f.readlines()
    except OSError as error:
        raise RecordError(f"{path}: cannot read a records file there ({error.strerror})") from None
    except UnicodeDecodeError:
        raise RecordError(f"{path}: not a records file (not text)") from None
    records = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            records.append(loads(line, f"{path}:{number}"))
        except RecordError:
            if number < len(lines) or line.endswith("\n"):
                raise
            warn(f"{path}:{number}: skipped a partial last line (a run interrupted while "
                 "writing it)")
    return records


def warn(message: str) -> None:
    print(f"fwkernels: warning: {message}", file=sys.stderr)


def read_all(paths: Iterable[str]) -> List[Record]:
    """Every record of files a user named: each must exist, or a typo would read as no records."""
    return [record for path in paths for record in read(path, required=True)]


def write_one(path: str, record: Mapping[str, Any]) -> None:
    """One record as a JSON file (the asv suite's per-combination cache)."""
    with open(path, "w") as f:
        f.write(dumps(record))


def read_one(path: str) -> Record:
    with open(path) as f:
        return loads(f.read(), path)
