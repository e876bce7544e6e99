"""A NaN, an OOM or a crash in one measurement is recorded as such, never as a throughput."""
import json
import subprocess
import sys

from fwkernels import runner, worker
from fwkernels.frameworks.base import Backend
from fwkernels.protocol import NonFiniteLoss


def test_nan_loss_is_classified():
    assert worker.classify_failure("torch", NonFiniteLoss("loss is nan"))["status"] == "nan"


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
