"""Tuning databases feed the knowledge base: TVM-written JSONDatabases (the committed fixture)
ingested as records of their platform, deduplicated by program id, quarantined when bad,
resumable without duplicates, held-out networks kept in test."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pyarrow as pa
import pytest

from tcl.data.ms_database import RECORD_FILE
from tcl.data.quarantine import read_quarantine
from tcl.data.schema import records_to_table
from tcl.data.splits import task_splits
from tcl.data.store import RecordStore
from tcl.data.tuning_dbs import ingest_tuning_databases, parse_sources
from tcl.platforms import this_cpu

FIXTURE = Path(__file__).parent / "fixtures" / "ms_database"
SPECS = {"cores": 1, "threads": 1, "turbo_ghz": 3.0, "boost_ghz": 3.0, "l1_kb": 32, "l2_kb": 512, "l3_kb": 8192,
         "mem_channels": 2, "mem_capacity_gb": 16, "mem_bandwidth_gbs": 40, "simd_bytes": 16}


def _params(sources, host=True):
    cpu = this_cpu()
    here = {"vendor": cpu["vendor"], "family": cpu["family"]} if host else None
    platforms = {"here-1c": {"kind": "cpu", "target": {"kind": "llvm", "num-cores": 1}, "specs": SPECS, "host": here},
                 "here-znver4-1c": {"kind": "cpu", "target": {"kind": "llvm", "mcpu": "znver4", "num-cores": 1},
                                    "specs": SPECS, "host": here},
                 "anywhere-1c": {"kind": "cpu", "target": {"kind": "llvm", "num-cores": 1}, "specs": SPECS}}
    return {"platforms": platforms, "tuning_ingest": {"sources": sources}}


def _ingest(tmp_path, params):
    return ingest_tuning_databases(params, store_root=tmp_path / "tuning", known_roots=[tmp_path / "records"],
                                   quarantine_dir=tmp_path / "q")


def _work_dirs(tmp_path):
    """A tuning work dir with two databases of the same runs (a rerun's copy): the fixture twice."""
    root = tmp_path / "work"
    for name in ("run-a", "run-b/nested"):
        shutil.copytree(FIXTURE, root / name, ignore=shutil.ignore_patterns("*.py", "*.md"))
    return root


@pytest.mark.slow
def test_databases_become_deduplicated_records_of_their_platform(tmp_path):
    root = _work_dirs(tmp_path)
    params = _params([{"path": str(root), "platform": "here-1c", "network": "resnet50@224"}])
    (s,) = _ingest(tmp_path, params)
    # 6 records a database: 4 measured, 1 failure sentinel (kept, label 0), 1 without run times (quarantined).
    assert (s.databases, s.ingested, s.records_now, s.duplicates, s.quarantined_now) == (2, 2, 5, 5, 2)
    store = RecordStore(tmp_path / "tuning")
    table = store.read("here-1c")
    assert table.num_rows == 5 and len(set(table.column("record_id").to_pylist())) == 5
    assert set(table.column("network").to_pylist()) == {"resnet50@224"}
    assert sorted(table.column("error_code").to_pylist()) == ["", "", "", "", "ms_failed"]
    q = read_quarantine(tmp_path / "q" / "tuning-here-1c.jsonl")
    assert {e["reason"] for e in q} == {"unmeasured"} and all(e["source_file"].endswith(RECORD_FILE) for e in q)
    (task,) = store.tasks("here-1c")
    # classified from the workload (the fixture's te matmul block is named "C": a reduction to the classifier)
    assert task["networks"] == {"resnet50@224": 1} and task["op_type"] == "reduction" and task["flops"] > 0
    assert set(table.column("op_type").to_pylist()) == {"reduction"}   # and so are its records
    # Held out by network: the task of a held-out network's tuning run lands in test.
    assert set(task_splits(table, holdout_networks=["resnet50"]).values()) == {"test"}

    # Resumable: nothing changed, nothing read; a database that grew is redone without duplicates.
    (again,) = _ingest(tmp_path, params)
    assert (again.skipped, again.ingested, again.total_records) == (2, 0, 5)
    rec = root / "run-a" / RECORD_FILE
    lines = rec.read_text().splitlines()
    first = json.loads(lines[0])
    first[1][1] = [7e-5]                                       # the same program, measured again: a duplicate
    extra = json.loads(lines[1])
    extra[1][0][0][-1] = ["EnterPostproc", [], [], []]         # a trace the workload cannot replay
    rec.write_text("\n".join(lines + [json.dumps(first), json.dumps(extra), "{torn"]) + "\n")
    (grown,) = _ingest(tmp_path, params)
    assert (grown.skipped, grown.ingested, grown.total_records) == (1, 1, 5)
    q = read_quarantine(tmp_path / "q" / "tuning-here-1c.jsonl")
    reasons = sorted(e["reason"] for e in q)
    assert reasons.count("unmeasured") == 2 and "bad JSON" in reasons   # run-a's earlier entries replaced, not doubled
    assert any(e["line"] == len(lines) + 3 for e in q if e["reason"] == "bad JSON")

    # The work dirs gone (another machine, a cleaned scratch dir): nothing is lost and the report still counts it.
    shutil.rmtree(root)
    (gone,) = _ingest(tmp_path, params)
    assert (gone.databases, gone.ingested, gone.missing_sources, gone.total_records) == (0, 0, [str(root)], 5)


@pytest.mark.slow
def test_known_programs_and_foreign_targets_are_not_filed(tmp_path):
    root = _work_dirs(tmp_path) / "run-a"
    # The collected store measured one of these programs already: not filed twice.
    first = _ingest(tmp_path / "probe", _params([{"path": str(root), "platform": "here-1c", "network": "n@1"}]))
    probe = RecordStore(tmp_path / "probe" / "tuning").read("here-1c").to_pylist()[:1]
    RecordStore(tmp_path / "records").append("here-1c", probe[0]["task_key"],
                                             records_to_table(probe).cast(pa.schema(records_to_table(probe).schema)))
    (s,) = _ingest(tmp_path, _params([{"path": str(root), "platform": "here-1c", "network": "n@1"}]))
    assert first[0].records_now == 5 and (s.records_now, s.duplicates) == (4, 1)
    # A database tuned for generic x86 is not the znver4 platform's: every record quarantined, by reason.
    (z,) = _ingest(tmp_path / "z", _params([{"path": str(root), "platform": "here-znver4-1c", "network": "n@1"}]))
    assert z.records_now == 0
    q = read_quarantine(tmp_path / "z" / "q" / "tuning-here-znver4-1c.jsonl")
    assert {e["reason"] for e in q} == {"target mismatch"} and "mcpu=None" in q[0]["detail"]


def test_sources_are_checked_against_the_platforms():
    with pytest.raises(ValueError, match=r"tuning_ingest.sources\[0\].platform: 'anywhere-1c' names no host"):
        parse_sources(_params([{"path": "x", "platform": "anywhere-1c", "network": "n@1"}]))
    with pytest.raises(ValueError, match=r"sources\[0\].platform: 'nope' is not declared"):
        parse_sources(_params([{"path": "x", "platform": "nope", "network": "n@1"}]))
    with pytest.raises(ValueError, match=r"sources\[1\]: expected exactly the fields path, platform, network"):
        parse_sources(_params([{"path": "x", "platform": "here-1c", "network": "n"}, {"path": "x"}]))
    with pytest.raises(ValueError, match=r"sources\[0\].network: expected a non-empty string"):
        parse_sources(_params([{"path": "x", "platform": "here-1c", "network": ""}]))
