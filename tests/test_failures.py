"""A NaN, an OOM or a crash in one measurement is recorded as such, never as a throughput."""
import json
import os
import signal
import subprocess
import sys
import time

from fwkernels import runner, worker
from fwkernels.frameworks.base import Backend
from fwkernels.protocol import NonFiniteLoss


def test_nan_loss_is_classified():
    assert worker.classify_failure("torch", NonFiniteLoss("loss is nan"))["status"] == "nan"


def test_host_memory_exhausted_is_an_oom_in_any_framework():
    """numpy's MemoryError (Chainer's CPU arrays, a host tensor of any framework) is an OOM,
    not an error, whatever the framework's own out-of-memory types."""
    out = worker.classify_failure("chainer", MemoryError("Unable to allocate 32.0 MiB"))
    assert out == {"status": "oom", "error": "MemoryError: Unable to allocate 32.0 MiB"}


def test_a_backend_that_fails_to_import_is_an_error_with_its_message(monkeypatch):
    error = ImportError("To use Keras, you need optree")

    def broken(name):
        raise error

    monkeypatch.setattr(worker, "load_backend", broken)
    out = worker.classify_failure("keras-torch", error)
    assert out == {"status": "error", "error": "ImportError: To use Keras, you need optree"}


def test_out_of_memory_messages_are_classified():
    class Probe(Backend):
        version = device_available = set_threads = count_params = build = None

    probe = Probe(None)
    assert probe.is_out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 2 GiB"))
    assert probe.is_out_of_memory(RuntimeError("RESOURCE_EXHAUSTED: OOM when allocating"))
    assert not probe.is_out_of_memory(RuntimeError("shape mismatch"))


def test_a_crashing_worker_becomes_a_record(monkeypatch):
    # A worker killed by a signal leaves no result file: the record says so.
    monkeypatch.setattr(runner.sys, "executable", "/bin/sh")
    request = {"threads": 1, "phases": ["train"]}
    monkeypatch.setattr(runner.json, "dumps", lambda _: "-c 'kill -SEGV $$'")
    out = runner._run_worker(request, timeout_s=30)
    assert out["status"] == "crashed" and "status" in out["error"]


def test_worker_writes_a_failure_record_instead_of_raising(tmp_path):
    path = tmp_path / "result.json"
    request = {"framework": "nosuch", "phases": ["train"]}
    proc = subprocess.run([sys.executable, "-m", "fwkernels.worker", json.dumps(request), str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0
    assert json.loads(path.read_text())["status"] == "error"


def test_cpu_phases_get_a_process_each_and_gpu_phases_share_one_forward_first():
    assert runner.worker_groups("cpu", runner.PHASES) == [["train"], ["forward"]]
    assert runner.worker_groups("cuda", runner.PHASES) == [["forward", "train"]]


def test_workers_compile_into_empty_caches_unless_the_caller_sets_one(monkeypatch, tmp_path):
    for name in runner.COMPILE_CACHE_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    env = runner.worker_environment(3, str(tmp_path))
    assert env["TRITON_CACHE_DIR"].startswith(str(tmp_path)) and env["OMP_NUM_THREADS"] == "3"
    assert runner.compile_cache_setting() == runner.EMPTY_COMPILE_CACHE
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", "/warm")
    assert runner.worker_environment(3, str(tmp_path))["TORCHINDUCTOR_CACHE_DIR"] == "/warm"
    assert runner.compile_cache_setting() == "TORCHINDUCTOR_CACHE_DIR=/warm"


def test_cpu_workers_preload_the_policys_allocator(monkeypatch, tmp_path, capsys):
    find_tcmalloc = runner.tcmalloc_library.__wrapped__  # uncached
    monkeypatch.delenv("LD_PRELOAD", raising=False)
    monkeypatch.setattr(runner, "tcmalloc_library", lambda: "libtcmalloc_minimal.so.4")
    assert runner.worker_environment(1, str(tmp_path), "tcmalloc")["LD_PRELOAD"] \
        == "libtcmalloc_minimal.so.4"
    assert "LD_PRELOAD" not in runner.worker_environment(1, str(tmp_path), "glibc")
    assert "LD_PRELOAD" not in runner.worker_environment(1, str(tmp_path))  # a GPU's: as is
    # the caller's own preloads stay; an allocator among them is the caller's choice
    monkeypatch.setenv("LD_PRELOAD", "/opt/libfoo.so")
    env = runner.worker_environment(1, str(tmp_path), "tcmalloc")
    assert env["LD_PRELOAD"] == "libtcmalloc_minimal.so.4 /opt/libfoo.so"
    monkeypatch.setenv("LD_PRELOAD", "/usr/lib/libjemalloc.so.2:/opt/libfoo.so")
    assert runner.worker_environment(1, str(tmp_path), "tcmalloc")["LD_PRELOAD"] \
        == "/usr/lib/libjemalloc.so.2 /opt/libfoo.so"
    assert runner.worker_environment(1, str(tmp_path), "glibc")["LD_PRELOAD"] == "/opt/libfoo.so"
    # where TCMalloc is missing the workers run on glibc, and that is said once
    monkeypatch.delenv("LD_PRELOAD")
    monkeypatch.setattr(runner, "tcmalloc_library", find_tcmalloc)
    monkeypatch.setattr(runner.ctypes.util, "find_library", lambda name: None)
    assert "LD_PRELOAD" not in runner.worker_environment(1, str(tmp_path), "tcmalloc")
    assert "libtcmalloc-minimal4" in capsys.readouterr().err


def test_every_record_states_the_hosts_speed_around_its_measurement(monkeypatch):
    """A fixed pure-Python loop, timed before the workers start and after they end; the slower
    is the record's host speed, by which the report and compare name runs taken at different
    speeds of a shared host."""
    from fwkernels.request import Request

    assert 0.1 < runner.host_speed(0.05) < 1000  # million iterations/s of one core
    order, speeds = [], [12.5, 9.0]
    monkeypatch.setattr(runner, "host_speed", lambda: order.append("speed") or speeds.pop(0))
    monkeypatch.setattr(runner, "_run_worker", lambda message, timeout_s: order.append(
        message["phases"][0]) or {"status": "ok"})
    request = Request(framework="torch", model="ncf", device="cpu", precision="fp32",
                      mode="eager", batch=2, windows=1, steps=1, window_seconds=1.0, warmup=0,
                      threads=1)
    record = runner.run(request)
    assert record.host_speed == 9.0 and record["host_speed_probes"] == [12.5, 9.0]
    assert order == ["speed", "train", "forward", "speed"]


def test_machine_load_names_what_other_processes_took_during_the_windows():
    """The train phase's records say what share of the machine's CPU time went to other
    processes while the timed windows ran (``worker.MachineLoad``): a busy process beside the
    windows shows there."""
    # not a child of this process (a shell starts it and ends): the worker's own are not "other"
    started = subprocess.run(["sh", "-c", f"'{sys.executable}' -c 'while True: pass' "
                              ">/dev/null 2>&1 & echo $!"], capture_output=True, text=True)
    beside = int(started.stdout)
    try:
        load = worker.MachineLoad()
        for _ in range(2):  # two windows, in which this process only waits
            load.clock()
            time.sleep(0.5)
            load.clock()
    finally:
        os.kill(beside, signal.SIGKILL)
    shares = load.shares(windows=2)
    # the busy process held at least a quarter of one core, whatever else ran (another lane)
    assert 0.25 / os.cpu_count() <= shares["other_cpu_share"] <= 1 and shares["steal_share"] >= 0


def test_machine_load_counts_the_workers_descendants_as_its_own(tmp_path):
    """CNTK trains in a server process the worker starts: a live child's CPU time, and a finished
    one's, are the worker's, not another process's."""
    before = worker.process_tree_cpu_seconds(os.getpid())
    spin = ("import time; end = time.process_time() + 0.3\n"
            "while time.process_time() < end: pass\n"
            "print('spun', flush=True); time.sleep(30)")
    child = subprocess.Popen([sys.executable, "-c", spin], stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout.readline() == "spun\n"
        live = worker.process_tree_cpu_seconds(os.getpid())
    finally:
        child.kill()
        child.wait()
    assert live - before >= 0.25  # 0.3 s, counted in 10 ms ticks
    assert worker.process_tree_cpu_seconds(os.getpid()) - before >= 0.25  # finished and reaped


def test_machine_load_reads_from_the_first_window_to_the_last():
    """Warm-up and calibration read the clock too; the shares start at the first window's start,
    leave out this process's own CPU time and count steal apart."""
    load = worker.MachineLoad()

    def reading(own, busy, steal, total):
        return (own, {"busy": busy, "steal": steal, "total": total})
    load.readings = [reading(0, 0, 0, 0), reading(5, 9, 0, 10),  # warm-up: left out
                     reading(5, 9, 0, 10), reading(6, 10, 0, 12),  # window 1
                     reading(6, 10, 0, 12), reading(7, 12, 1, 14)]  # window 2
    assert load.shares(windows=2) == {"other_cpu_share": 0.25, "steal_share": 0.25}
    assert worker.MachineLoad().shares(windows=2) == {}


def test_a_failing_phase_keeps_the_figures_of_the_phases_before_it(monkeypatch, tmp_path):
    def fail(*_):
        raise NonFiniteLoss("loss is nan")

    monkeypatch.setattr(worker, "load_backend", lambda name: FakeBackend())
    monkeypatch.setitem(worker.PHASES, "forward", lambda *_: {"forward_time_s": 0.5})
    monkeypatch.setitem(worker.PHASES, "train", fail)
    request = {"framework": "fake", "model": "ncf", "device": "cuda", "batch": 4,
               "precision": "fp32", "mode": "eager", "threads": 1, "phases": ["forward", "train"]}
    worker.main([json.dumps(request), str(tmp_path / "result.json")])
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "nan" and result["failed_phase"] == "train"
    assert result["forward_time_s"] == 0.5


class FakeBackend:
    name = "fake"

    def version(self):
        return "0"

    def set_threads(self, n):
        pass

    def device_available(self, device):
        return True

    def runtime_info(self, device):
        return {}

    def unsupported_reason(self, config):
        return None

    def build(self, config):
        class Workload:
            params = 1

            def precision_settings(self):
                return {}

            def policy_settings(self):
                return {}

            def extra_figures(self, phase):
                return {}
        return Workload()

    def is_out_of_memory(self, error):
        return False


def test_a_failed_build_leaves_the_phase_to_the_runner(monkeypatch, tmp_path):
    class FailingBuild(FakeBackend):
        def build(self, config):
            raise RuntimeError("CUDA out of memory")

    monkeypatch.setattr(worker, "load_backend", lambda name: FailingBuild())
    request = {"framework": "fake", "model": "ncf", "device": "cuda", "batch": 4,
               "precision": "fp32", "mode": "eager", "threads": 1, "phases": ["forward", "train"]}
    worker.main([json.dumps(request), str(tmp_path / "result.json")])
    result = json.loads((tmp_path / "result.json").read_text())
    assert result["status"] == "error" and "failed_phase" not in result


def test_a_sigkill_is_oom_only_with_evidence(monkeypatch):
    request = {"threads": 1, "phases": ["train"]}
    kill = "kill -KILL $$"
    monkeypatch.setattr(runner, "worker_command", lambda *_: ["/bin/sh", "-c", kill])
    monkeypatch.setattr(runner, "oom_kills", lambda: 0)
    out = runner._run_worker(request, timeout_s=30)
    assert out["status"] == "killed" and "no sign of running out of memory" in out["error"]
    kill = "echo 'RuntimeError: CUDA out of memory. Tried to allocate 2 GiB'; kill -KILL $$"
    assert runner._run_worker(request, timeout_s=30)["status"] == "oom"  # the allocator's error
    kill = "kill -KILL $$"
    counts = iter([3, 4])  # the cgroup's oom_kill count before and after: the kernel killed it
    monkeypatch.setattr(runner, "oom_kills", lambda: next(counts))
    out = runner._run_worker(request, timeout_s=30)
    assert out["status"] == "oom" and "OOM killer" in out["error"]


STAND_IN_WORKER = """
import json, os, subprocess, sys, time
from fwkernels import worker
worker.end_with_the_runner()
helper = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
folder = os.environ[worker.FOLDER_VARIABLE]
with open(os.environ["PIDS"] + ".part", "w") as f:
    json.dump({"worker": os.getpid(), "helper": helper.pid, "folder": folder}, f)
os.rename(os.environ["PIDS"] + ".part", os.environ["PIDS"])
time.sleep(600)
"""


def gone(pid: int) -> bool:
    """Exited (a zombie nobody reaped counts: it runs no more)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] == "Z"
    except FileNotFoundError:
        return True


def wait_for(condition, seconds: float = 30) -> bool:
    import time

    deadline = time.monotonic() + seconds
    while not condition():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.1)
    return True


def stand_in(tmp_path):
    script = tmp_path / "stand_in.py"
    script.write_text(STAND_IN_WORKER)
    return script, tmp_path / "pids.json"


def test_workers_and_their_helpers_die_with_the_runner(tmp_path):
    """A runner killed with SIGKILL (a sweep, asv's benchmark process) leaves no process and no
    temporary folder behind."""
    import os
    import signal

    script, pids_path = stand_in(tmp_path)
    parent = subprocess.Popen([sys.executable, "-c", (
        "import sys\nfrom fwkernels import runner\n"
        f"runner.worker_command = lambda request, path: [sys.executable, {str(script)!r}]\n"
        "runner._run_worker({'threads': 1, 'phases': ['train']}, 600)\n")],
        env=dict(os.environ, PIDS=str(pids_path)))
    try:
        assert wait_for(pids_path.exists), "the stand-in worker did not start"
        pids = json.loads(pids_path.read_text())
        assert os.path.isdir(pids["folder"]) and not gone(pids["helper"])
        parent.send_signal(signal.SIGKILL)
        parent.wait()
        assert wait_for(lambda: gone(pids["worker"]) and gone(pids["helper"]))
        assert not os.path.exists(pids["folder"])
    finally:
        parent.kill()
        parent.wait()


def test_a_timeout_kills_the_workers_helpers_too(tmp_path, monkeypatch):
    import os

    script, pids_path = stand_in(tmp_path)
    monkeypatch.setenv("PIDS", str(pids_path))
    monkeypatch.setattr(runner, "worker_command", lambda *_: [sys.executable, str(script)])
    out = runner._run_worker({"threads": 1, "phases": ["train"]}, timeout_s=5)
    assert out["status"] == "timeout"
    pids = json.loads(pids_path.read_text())
    assert gone(pids["worker"]) and wait_for(lambda: gone(pids["helper"]), 5)
    assert not os.path.exists(pids["folder"])


AMD_AVX2 = {"vendor_id": "AuthenticAMD", "flags": "sse2 avx2 fma avx512f"}


def test_cpu_workers_on_a_non_intel_processor_get_mkls_avx2_kernels(monkeypatch, tmp_path):
    monkeypatch.delenv("MKL_DEBUG_CPU_TYPE", raising=False)
    monkeypatch.setattr(runner, "cpuinfo", lambda: AMD_AVX2)
    assert runner.worker_environment(1, str(tmp_path), "tcmalloc", "cpu")["MKL_DEBUG_CPU_TYPE"] \
        == runner.MKL_AVX2_CPU_TYPE
    assert "MKL_DEBUG_CPU_TYPE" not in runner.worker_environment(1, str(tmp_path), "", "cuda")
    # the caller's value stands, an empty one (MKL's own choice) too
    monkeypatch.setenv("MKL_DEBUG_CPU_TYPE", "")
    assert runner.worker_environment(1, str(tmp_path), "tcmalloc", "cpu")["MKL_DEBUG_CPU_TYPE"] == ""
    monkeypatch.delenv("MKL_DEBUG_CPU_TYPE")
    # MKL picks its own kernels on Intel's processors; and no AVX2 kernels without AVX2 and FMA
    for fields in ({**AMD_AVX2, "vendor_id": "GenuineIntel"}, {**AMD_AVX2, "flags": "sse2 avx"}):
        monkeypatch.setattr(runner, "cpuinfo", lambda: fields)
        assert "MKL_DEBUG_CPU_TYPE" not in runner.worker_environment(1, str(tmp_path), "tcmalloc",
                                                                     "cpu")
