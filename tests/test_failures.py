"""A NaN, an OOM or a crash in one measurement is recorded as such, never as a throughput."""
import json
import subprocess
import sys

from fwkernels import runner, worker
from fwkernels.frameworks.base import Backend
from fwkernels.protocol import NonFiniteLoss


def test_nan_loss_is_classified():
    assert worker.classify_failure("torch", NonFiniteLoss("loss is nan"))["status"] == "nan"


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
    request = {"threads": 1, "phase": "train"}
    monkeypatch.setattr(runner.json, "dumps", lambda _: "-c 'kill -SEGV $$'")
    out = runner._run_worker(request, timeout_s=30)
    assert out["status"] == "crashed" and "status" in out["error"]


def test_worker_writes_a_failure_record_instead_of_raising(tmp_path):
    path = tmp_path / "result.json"
    request = {"framework": "nosuch", "phase": "train"}
    proc = subprocess.run([sys.executable, "-m", "fwkernels.worker", json.dumps(request), str(path)],
                          capture_output=True, text=True)
    assert proc.returncode == 0
    assert json.loads(path.read_text())["status"] == "error"
