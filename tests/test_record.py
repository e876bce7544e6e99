"""The record: one typed, versioned model, written and read by fwkernels.record alone."""
import glob
import json
import math
import os

import pytest

from fwkernels import record
from fwkernels.record import SCHEMA_VERSION, Record, RecordError

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
COMMITTED = sorted(glob.glob(os.path.join(REPO, "records", "*", "*.jsonl"))
                   + glob.glob(os.path.join(REPO, "docs", "figures", "**", "*.jsonl"),
                               recursive=True)
                   + glob.glob(os.path.join(REPO, "tests", "data", "records", "*", "*.jsonl")))


@pytest.mark.parametrize("path", COMMITTED, ids=lambda p: os.path.relpath(p, REPO))
def test_every_committed_record_loads_and_round_trips(path, tmp_path):
    records = record.read(path)
    # version 0 (no field) before versions; the H200 records of the fairness policy are version 2
    assert records and all((r.schema or 0) <= SCHEMA_VERSION for r in records)
    copy = tmp_path / "copy.jsonl"
    for r in records:
        record.append(str(copy), r)
    with open(path) as original, open(copy) as written:
        assert [json.loads(line) for line in written] == \
            [json.loads(line) for line in original if line.strip()]


def test_fields_are_typed_attributes_and_mapping_keys():
    r = Record.new(framework="mxnet", mode="hybrid", model="ncf", precision="fp32", status="ok",
                   samples_per_s=12.5, internal_memory_forward_bytes=1024)
    assert r.schema == SCHEMA_VERSION and list(r)[0] == "schema"
    assert r.samples_per_s == r["samples_per_s"] == 12.5 and r.ok
    assert r.error is None and r.get("error") is None
    assert r["internal_memory_forward_bytes"] == 1024  # a framework's own field, kept
    assert r.target == "mxnet" and r.with_fields(mode="imperative").target == "mxnet:imperative"
    assert r.with_fields(asv_machine="h200").asv_machine == "h200" and "asv_machine" not in r


def test_unknown_fields_and_nulls_survive_a_round_trip(tmp_path):
    path = str(tmp_path / "records.jsonl")
    data = {"framework": "paddle", "mode": "dynamic", "model": "ncf", "precision": "fp32",
            "status": "ok", "blas_threads": "2", "use_mkldnn": "False", "flops_per_step": None,
            "loss": math.nan}
    record.append(path, Record.new(**data))
    [back] = record.read(path)
    assert {k: v for k, v in back.items() if k != "loss"} == {
        "schema": SCHEMA_VERSION, **{k: v for k, v in data.items() if k != "loss"}}
    assert math.isnan(back.loss) and "flops_per_step" in back


@pytest.mark.parametrize("line, problem", [
    ('{"framework": "torch", "mode": "eager"', "not JSON"),
    ('[1, 2]', "a record is a JSON object"),
    ('{"framework": "torch", "mode": "eager", "model": "ncf", "precision": "fp32"}',
     "missing status"),
    ('{"framework": "torch", "mode": "eager", "model": "ncf", "precision": "fp32", '
     '"status": "ok", "batch": "four"}', "batch is str, expected int"),
    ('{"framework": "torch", "mode": "eager", "model": "ncf", "precision": "fp32", '
     '"status": "ok", "autotune": "on"}', "autotune is str, expected bool"),
    ('{"schema": 99, "framework": "torch"}', "schema 99 is newer"),
])
def test_a_damaged_line_is_one_error_naming_the_file_and_line(tmp_path, line, problem):
    path = tmp_path / "records.jsonl"
    good = '{"framework": "torch", "mode": "eager", "model": "ncf", "precision": "fp32", ' \
           '"status": "ok"}'
    path.write_text(good + "\n" + line + "\n")
    with pytest.raises(RecordError, match=f"records.jsonl:2: .*{problem}"):
        record.read(str(path))


def test_a_missing_file_has_no_records(tmp_path):
    assert record.read(str(tmp_path / "none.jsonl")) == []
