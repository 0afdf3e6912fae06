"""Dataset layer: MetaSchedule database reader, GE validation, splits, resumable ingest.

Real components throughout: a JSONDatabase written by TVM itself, TVM's example
Ansor logs, Great Expectations, MLflow on a temporary sqlite store.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tcl.data.ansor import STEP_KINDS, read_ansor_log
from tcl.data.ingest import MANIFEST, ingest_ansor_dir, read_manifest
from tcl.data.metaschedule import trace_to_steps
from tcl.data.ms_database import RECORD_FILE, WORKLOAD_FILE, read_ms_database
from tcl.data.quarantine import Quarantine, read_quarantine
from tcl.data.schema import RECORD_SCHEMA, make_record_id, records_to_table
from tcl.data.splits import add_labels, assign_splits, split_tables, task_splits
from tcl.data.store import RecordStore
from tcl.data.validation.batches import SchemaError
from tcl.data.validation.platform import ValidationFailed, validate_platform
from tcl.data.validation.suite import METASCHEDULE_STEP_KINDS, registered_instruction_kinds

from conftest import FIXTURES
from conftest import REPO, toy_matmul_task

ANSOR = FIXTURES / "ansor"
RESNET50 = ANSOR / "resnet-50-NHWC-B1-llvm.json"


# ================================================================ MetaSchedule JSONDatabase

@pytest.fixture(scope="module")
def ms_db(tmp_path_factory):
    """A JSONDatabase written by TVM: 16x16 matmul, 6 candidates of a tiny TuneContext.

    Records 0-3 measured, 4 committed without run times, 5 with MetaSchedule's
    failure sentinel (1e10), as AddToDatabase commits a failed build/run.
    """
    import tvm
    from tvm.s_tir import meta_schedule as ms

    from tcl.collect.candidates import trace_json

    task = toy_matmul_task(16)
    target = tvm.target.Target({"kind": "llvm", "num-cores": 1})
    work = tmp_path_factory.mktemp("ms_db")
    db = ms.database.JSONDatabase(work_dir=str(work))

    from fixtures.ms_database.generate import space  # the committed fixture's design space

    generator = ms.space_generator.ScheduleFn(space, sch_rules=[], postprocs=[], mutator_probs={})
    ctx = ms.TuneContext(task.mod, target=target, space_generator=generator, search_strategy="replay-trace",
                         rand_state=7, num_threads=1)
    ctx.pre_tuning(max_trials=6, num_trials_per_iter=6, database=db, cost_model=None)
    cands = list(ctx.generate_measure_candidates())
    assert len(cands) == 6
    workload = db.commit_workload(task.mod)
    args_info = ms.arg_info.ArgInfo.from_prim_func(task.mod["main"])
    run_secs = [[1e-5, 1.2e-5], [2e-5], [3e-5, 3e-5, 3.3e-5], [4e-5], None, [1e10]]
    for cand, secs in zip(cands, run_secs):
        db.commit_tuning_record(ms.database.TuningRecord(cand.sch.trace, workload, secs, target, args_info))
    return {"dir": work, "task": task, "traces": [trace_json(c) for c in cands], "run_secs": run_secs}


def _read_db(directory, quarantine, **kw):
    tables = list(read_ms_database(directory, platform="host-avx512-2c", quarantine=quarantine, **kw))
    return tables, pa.concat_tables(tables) if tables else RECORD_SCHEMA.empty_table()


@pytest.mark.slow
def test_ms_database_round_trip(ms_db, tmp_path):
    import tvm
    from tvm.s_tir import meta_schedule as ms

    modules = {}
    meta = {ms_db["task"].key: {"network": "toy", "task_name": "matmul16", "weight": 2, "op_type": "dense"}}
    with Quarantine(tmp_path, "ms") as q:
        _, table = _read_db(ms_db["dir"], q, tasks=meta, on_module=modules.__setitem__)
    assert len(q) == 0 and table.schema == RECORD_SCHEMA and table.num_rows == 6
    rows = table.to_pylist()
    key = ms_db["task"].key
    assert {r["task_key"] for r in rows} == {key}  # == ms.utils.shash2hex(mod), the collector's key
    assert ms.utils.shash2hex(tvm.ir.load_json(modules[key])) == key  # the module reads back, same hash
    for row, trace in zip(rows, ms_db["traces"]):
        program = json.dumps(trace, separators=(",", ":"))  # what the collector stores
        # The database spells bools 0/1 (the collector: true/false); the steps are the same.
        assert row["program"] == program.replace("true", "1").replace("false", "0")
        assert row["steps"] == trace_to_steps(trace)
        assert (row["network"], row["task_name"], row["task_weight"], row["op_type"]) == \
            ("toy", "matmul16", 2, "dense")
        assert row["source"] == "metaschedule" and json.loads(row["target"])["kind"] == "llvm"
    for row, secs in zip(rows[:4], ms_db["run_secs"][:4]):
        assert row["error_code"] == "" and row["run_secs"] == pytest.approx(secs)
        assert row["mean_sec"] == pytest.approx(sum(secs) / len(secs))
    assert (rows[4]["error_code"], rows[4]["mean_sec"], rows[4]["run_secs"]) == ("unmeasured", None, [])
    assert (rows[5]["error_code"], rows[5]["mean_sec"]) == ("ms_failed", None)
    kinds = {s["kind"] for r in rows for s in r["steps"]}
    assert {"SamplePerfectTile", "Split", "SampleCategorical", "Annotate"} <= kinds <= set(METASCHEDULE_STEP_KINDS)

    # Replayed on the workload with TVM: the collector's exact program text and record_id.
    with Quarantine(tmp_path, "ms-replay") as q:
        _, replayed = _read_db(ms_db["dir"], q, replay=True)
    assert len(q) == 0
    for row, trace in zip(replayed.to_pylist(), ms_db["traces"]):
        program = json.dumps(trace, separators=(",", ":"))
        assert row["program"] == program
        assert row["record_id"] == make_record_id("host-avx512-2c", key, program)


def test_a_whole_database_reads_as_one_table_even_before_its_first_record(ms_db, tmp_path):
    from tcl.data.ms_database import read_ms_database_table

    table = read_ms_database_table(ms_db["dir"], platform="host-avx512-2c")
    assert table.schema == RECORD_SCHEMA and table.num_rows == 6
    started = tmp_path / "started"  # a tuning run that committed its workloads and measured nothing yet
    started.mkdir()
    shutil.copy(ms_db["dir"] / WORKLOAD_FILE, started / WORKLOAD_FILE)
    (started / RECORD_FILE).write_text("")
    empty = read_ms_database_table(started, platform="host-avx512-2c")
    assert empty.schema == RECORD_SCHEMA and empty.num_rows == 0


@pytest.mark.slow
def test_ms_database_bad_lines_are_quarantined_with_file_and_line(ms_db, tmp_path):
    db = tmp_path / "db"
    shutil.copytree(ms_db["dir"], db)
    lines = (db / RECORD_FILE).read_text().splitlines()
    good = json.loads(lines[0])
    negative = [0, [good[1][0], [-1.0], *good[1][2:]]]
    bad_trace = [0, [[["Split"]], [1e-5], *good[1][2:]]]
    extra = ["{not json", json.dumps([7, good[1]]), json.dumps(negative), json.dumps(bad_trace), "", "# comment"]
    (db / RECORD_FILE).write_text("\n".join(lines + extra) + "\n")
    with (db / WORKLOAD_FILE).open("a") as f:
        f.write('["12", "%%% not base64"]\n')
    with Quarantine(tmp_path, "ms") as q:
        tables, table = _read_db(db, q, chunk_size=4)
    assert table.num_rows == 6 and [t.num_rows for t in tables] == [4, 2]
    entries = read_quarantine(q.path)
    where = {(Path(e["source_file"]).name, e["line"]): e["reason"] for e in entries}
    assert where == {(WORKLOAD_FILE, 2): "bad workload module",
                     (RECORD_FILE, 7): "bad JSON", (RECORD_FILE, 8): "unknown workload index",
                     (RECORD_FILE, 9): "bad run_secs", (RECORD_FILE, 10): "bad trace"}

    # A trace that is well-formed JSON but not a schedule of this workload fails the replay.
    alien = json.loads(lines[0])
    alien[1][0][0][0][1] = []                     # GetSBlock without its arguments...
    alien[1][0][0][0][2] = ["no_such_block", "main"]  # ...naming a block the matmul lacks
    (db / RECORD_FILE).write_text(lines[0] + "\n" + json.dumps(alien) + "\n")
    with Quarantine(tmp_path, "ms-replay") as q:
        _, table = _read_db(db, q, replay=True)
    assert table.num_rows == 1
    assert [(Path(e["source_file"]).name, e["line"], e["reason"]) for e in read_quarantine(q.path)] == \
        [(WORKLOAD_FILE, 2, "bad workload module"), (RECORD_FILE, 2, "trace does not replay")]


# ================================================================ validation

PLATFORM = "host-avx512-2c"
MS_TRACE = [[["GetSBlock", [], ["C", "main"], ["b0"]], ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]],
             ["SamplePerfectTile", ["l1"], [2, 16], ["v4", "v5"]],
             ["Split", ["l1", "v4", "v5"], [1, 0], ["l6", "l7"]],
             ["SampleCategorical", [], [[0, 16, 64], [0.3, 0.3, 0.4]], ["v8"]],
             ["Annotate", ["b0", "v8"], ["meta_schedule.unroll_explicit"], []],
             ["EnterPostproc", [], [], []]],
            [[2, [8, 2]], [4, 1]]]


def _params(tmp_path, **validate):
    return {"seed": 0,
            "platforms": {PLATFORM: {}, "host-avx2-2c": {}},
            "validate": {"max_failed_share": 0.05, "min_steps": 1, "max_steps": 100, **validate},
            "tracking": {"mlflow_uri": f"sqlite:///{tmp_path}/mlflow.db", "experiment": "dataset-test"}}


def _ms_row(i: int) -> dict:
    program = json.dumps(MS_TRACE, separators=(",", ":")) + " " * i  # distinct programs, same steps
    return {"record_id": make_record_id(PLATFORM, "0xfeed", program), "platform": PLATFORM,
            "source": "metaschedule", "network": "toy", "task_key": "0xfeed", "task_name": "matmul16",
            "task_weight": 1, "op_type": "dense", "target": "{}", "steps": trace_to_steps(MS_TRACE),
            "program": program, "run_secs": [1e-5 * (i + 1)], "mean_sec": 1e-5 * (i + 1),
            "median_sec": 1e-5 * (i + 1), "error_code": "", "error_msg": "", "collected_at": None}


@pytest.fixture
def good_table(tmp_path):
    """26 real Ansor records (ResNet-50, TVM's example log), 1 failed one, 3 MetaSchedule ones."""
    with Quarantine(tmp_path / "q", "ansor") as q:
        ansor = pa.concat_tables(read_ansor_log(RESNET50, platform=PLATFORM, network="resnet50", quarantine=q))
    rows = ansor.to_pylist()
    failed = dict(rows[0], program=rows[0]["program"] + " ", error_code="ansor_error_4",
                  error_msg="RUNTIME_DEVICE", run_secs=[], mean_sec=None, median_sec=None)
    failed["record_id"] = make_record_id(PLATFORM, failed["task_key"], failed["program"])
    return records_to_table(rows + [failed] + [_ms_row(i) for i in range(3)])


def _validate(tmp_path, params, **kw):
    return validate_platform(PLATFORM, params, stores=[tmp_path / "records"],
                             validated_root=tmp_path / "validated", quarantine_dir=tmp_path / "quarantine",
                             report_dir=tmp_path / "reports", **kw)


@pytest.fixture
def mlflow_cwd(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # MLflow's default artifact root is relative to the working directory
    monkeypatch.delenv("MLFLOW_TRACKING_URI", raising=False)
    return tmp_path


def test_good_table_passes_and_is_published(tmp_path, good_table, mlflow_cwd):
    RecordStore(tmp_path / "records").append(PLATFORM, "good", good_table)
    summary = _validate(tmp_path, _params(tmp_path))
    assert summary.passed and summary.rows == 30 and summary.failed_rows == 0
    assert all(e["success"] for e in summary.expectations.values()), summary.describe()
    assert {"columns_match_schema", "type:mean_sec", "not_null:record_id", "platform_known",
            "ok_mean_sec_positive_finite", "step_kinds_known", "steps_length_in_bounds",
            "record_id_unique"} <= set(summary.expectations)
    validated = pq.read_table(tmp_path / "validated" / f"platform={PLATFORM}.parquet")
    assert validated.schema == RECORD_SCHEMA and validated.num_rows == 30
    assert (tmp_path / "quarantine" / f"validate-{PLATFORM}.jsonl").read_text() == ""
    report = json.loads((tmp_path / "reports" / f"{PLATFORM}.json").read_text())
    assert report["passed"] and report["failed_share"] == 0


def _break(table: pa.Table) -> tuple[pa.Table, dict[int, str]]:
    """Break rows of a good table, one defect each; returns the table and row -> expected reason."""
    rows = table.to_pylist()
    expected = {}

    def edit(i, reason, **changes):
        rows[i] = dict(rows[i], **changes)
        expected[i] = reason

    edit(1, "ok_mean_sec_present", mean_sec=math.nan)
    edit(2, "ok_mean_sec_positive_finite", mean_sec=-1e-3)
    edit(3, "ok_mean_sec_positive_finite", mean_sec=math.inf)
    edit(4, "platform_known", platform="tpu-v9")
    edit(5, "step_kinds_known", steps=rows[5]["steps"][:2] + [{"kind": "XX", "nums": [], "strs": []}])
    edit(6, "record_id_unique", record_id=rows[0]["record_id"])  # a later copy of row 0's id
    edit(7, "steps_length_in_bounds", steps=rows[7]["steps"] * 200)
    edit(8, "not_null:task_key", task_key=None)
    edit(9, "not_null:program; ok_run_secs_present", program=None, run_secs=[])
    edit(27, "step_kinds_known", steps=[{"kind": "SP", "nums": [], "strs": []}])  # Ansor kind in an MS trace
    assert rows[26]["error_code"] and rows[26]["mean_sec"] is None  # failed records need no time
    return pa.Table.from_pylist(rows, schema=RECORD_SCHEMA), expected


def _write_broken(tmp_path, good_table) -> dict[int, str]:
    broken, expected = _break(good_table)
    pdir = RecordStore(tmp_path / "records").platform_dir(PLATFORM)
    pdir.mkdir(parents=True)
    pq.write_table(broken, pdir / "part-broken-00000.parquet")  # as a foreign writer would: mixed platforms
    return expected


def test_broken_rows_are_quarantined_with_expectation_names(tmp_path, good_table, mlflow_cwd):
    expected = _write_broken(tmp_path, good_table)
    summary = _validate(tmp_path, _params(tmp_path, max_failed_share=0.5))
    assert summary.passed and summary.failed_rows == len(expected) == 10
    entries = read_quarantine(tmp_path / "quarantine" / f"validate-{PLATFORM}.jsonl")
    got = {e["line"] - 1: e["reason"] for e in entries}
    assert got == expected
    assert all(e["source_file"].endswith("part-broken-00000.parquet") for e in entries)
    unknown = next(e for e in entries if e["line"] == 6)
    assert "_unknown_step_kind='XX'" in unknown["detail"] and json.loads(unknown["raw"])["steps"][2]["kind"] == "XX"
    assert summary.quarantined_by_expectation == dict(Counter(n for r in expected.values() for n in r.split("; ")))
    exp = summary.expectations
    assert exp["ok_mean_sec_positive_finite"]["unexpected_count"] == 2 and not exp["platform_known"]["success"]
    assert exp["columns_match_schema"]["success"] and exp["not_null:record_id"]["success"]
    validated = pq.read_table(tmp_path / "validated" / f"platform={PLATFORM}.parquet")
    assert validated.num_rows == 30 - 10
    assert len(set(validated.column("record_id").to_pylist())) == validated.num_rows


def test_failed_share_over_threshold_fails_loudly_and_is_tracked(tmp_path, good_table, mlflow_cwd):
    from mlflow.tracking import MlflowClient

    _write_broken(tmp_path, good_table)
    params = _params(tmp_path, max_failed_share=0.1)
    with pytest.raises(ValidationFailed) as err:
        _validate(tmp_path, params)
    message = str(err.value)
    assert "10 of 30 rows failed (33.33%; allowed 10.00%)" in message
    assert "FAILED step_kinds_known [expect_column_values_to_be_null(_unknown_step_kind)]: unexpected 2 of 30" \
        in message
    assert "FAILED platform_known" in message and "FAILED record_id_unique" in message
    assert not (tmp_path / "validated" / f"platform={PLATFORM}.parquet").exists()
    report = json.loads((tmp_path / "reports" / f"{PLATFORM}.json").read_text())
    assert not report["passed"] and report["failed_rows"] == 10
    assert report["expectations"]["platform_known"]["unexpected_share"] == pytest.approx(1 / 30)

    client = MlflowClient(tracking_uri=params["tracking"]["mlflow_uri"])
    exp = client.get_experiment_by_name("dataset-test")
    (run,) = client.search_runs([exp.experiment_id])
    assert run.data.tags["stage"] == "validate" and run.data.tags["platform"] == PLATFORM
    assert run.info.status == "FAILED" and run.data.metrics["failed_rows"] == 10
    assert run.data.metrics["unexpected.platform_known"] == 1
    names = {a.path for a in client.list_artifacts(run.info.run_id, "validation")}
    assert names == {f"validation/{PLATFORM}.json", f"validation/{PLATFORM}.ge.json"}
    ge = json.loads(Path(client.download_artifacts(run.info.run_id, f"validation/{PLATFORM}.ge.json",
                                                   str(tmp_path / "dl"))).read_text())
    assert ge[0]["success"] is False and ge[0]["suite_name"] == "tcl_records"


def test_part_with_wrong_schema_names_file_and_column(tmp_path, good_table):
    pdir = RecordStore(tmp_path / "records").platform_dir(PLATFORM)
    pdir.mkdir(parents=True)
    bad = good_table.set_column(good_table.schema.get_field_index("mean_sec"), "mean_sec",
                                pa.array(["fast"] * good_table.num_rows))
    pq.write_table(bad, pdir / "part-x-00000.parquet")
    with pytest.raises(SchemaError, match=r"part-x-00000.parquet: 'mean_sec' is string, expected double"):
        _validate(tmp_path, _params(tmp_path), track=False)
    pq.write_table(good_table.drop_columns(["steps"]), pdir / "part-x-00000.parquet")
    with pytest.raises(SchemaError, match=r"part-x-00000.parquet: missing columns \['steps'\]"):
        _validate(tmp_path, _params(tmp_path), track=False)


def test_no_records_is_an_error(tmp_path):
    with pytest.raises(ValidationFailed, match="no records for platform"):
        _validate(tmp_path, _params(tmp_path), track=False)


def test_known_metaschedule_kinds_are_tvms_registered_instruction_kinds():
    assert registered_instruction_kinds() == set(METASCHEDULE_STEP_KINDS)
    assert not set(METASCHEDULE_STEP_KINDS) & set(STEP_KINDS)


# ================================================================ splits

def _split_table() -> tuple[pa.Table, dict[str, set[str]]]:
    """40 tasks on 2 platforms, 3 records each (one failed); networks in Tenset and our spelling."""
    nets = ["resnet18"] * 20 + ["bert_tiny"] * 5 + ["resnet_50"] * 5 + ["vit"] * 10
    rows = []
    for t, net in enumerate(nets):
        for platform in ("host-avx512-2c", "host-avx2-2c"):
            for k, (secs, err) in enumerate([(2e-3, ""), (1e-3 * (1 + t % 3), ""), (None, "run_error")]):
                program = f"{t}-{k}"
                rows.append({"record_id": make_record_id(platform, f"t{t:02d}", program), "platform": platform,
                             "source": "ansor", "network": net, "task_key": f"t{t:02d}", "task_name": "",
                             "task_weight": 1, "op_type": "", "target": "", "steps": [], "program": program,
                             "run_secs": [secs] if secs else [], "mean_sec": secs, "median_sec": secs,
                             "error_code": err, "error_msg": "", "collected_at": None})
    shared = {"t00": {"resnet18", "mobilenet_v2"}}  # a resnet18 task that MobileNet-V2 also has
    return records_to_table(rows), shared


def test_splits_hold_out_whole_networks_and_split_tasks_9_to_1():
    table, shared = _split_table()
    of = task_splits(table, seed=3, task_networks=shared)
    test = {k for k, s in of.items() if s == "test"}
    assert test == {f"t{t:02d}" for t in range(20, 30)} | {"t00"}  # bert_tiny, resnet_50, the shared task
    rest = [k for k in of if k not in test]
    assert len(rest) == 29 and sum(of[k] == "validation" for k in rest) == 3  # round(29 * 0.1)
    assert task_splits(table, seed=3, task_networks=shared) == of  # deterministic
    assert task_splits(table, seed=4, task_networks=shared) != of  # and seeded

    parts = split_tables(table, {"seed": 3, "split": {"holdout_networks": ["resnet50", "bert_tiny", "mobilenet_v2"]}},
                         shared)
    assert sum(p.num_rows for p in parts.values()) == table.num_rows
    keys = {name: set(p.column("task_key").to_pylist()) for name, p in parts.items()}
    assert not (keys["train"] & keys["validation"]) and not (keys["train"] | keys["validation"]) & keys["test"]
    assert {n for n in parts["test"].column("network").to_pylist()} == {"bert_tiny", "resnet_50", "resnet18"}
    assert len(keys["validation"]) == 3 and len(keys["train"]) == 26
    # every platform's records of a task are in one split
    marked = assign_splits(table, seed=3, task_networks=shared)
    per_task = {}
    for k, s in zip(marked.column("task_key").to_pylist(), marked.column("split").to_pylist()):
        per_task.setdefault(k, set()).add(s)
    assert all(len(s) == 1 for s in per_task.values())


def test_labels_are_min_latency_over_latency_per_platform_and_task():
    table, _ = _split_table()
    labeled = add_labels(table).to_pylist()
    for r in labeled:
        if r["error_code"]:
            assert r["label"] == 0.0
        else:
            best = min(x["mean_sec"] for x in labeled if x["task_key"] == r["task_key"]
                       and x["platform"] == r["platform"] and not x["error_code"])
            assert r["label"] == pytest.approx(best / r["mean_sec"]) and 0 < r["label"] <= 1
    assert max(r["label"] for r in labeled if r["task_key"] == "t01") == 1.0


# ================================================================ ingest

def _copy_fixtures(dest: Path) -> Path:
    dest.mkdir(parents=True)
    for p in ANSOR.glob("*.json"):
        shutil.copy(p, dest / p.name)
    with (dest / "matmul.json").open("a") as f:
        f.write('{"i": [broken\n')
    return dest


def _ingest(tmp_path, logs, **kw):
    return ingest_ansor_dir(logs, platform="tenset-cpu", store_root=tmp_path / "tenset",
                            quarantine_dir=tmp_path / "quarantine", chunk_size=10, progress=False, **kw)


def test_ingest_is_resumable_without_duplicates(tmp_path):
    logs = _copy_fixtures(tmp_path / "logs")
    store = RecordStore(tmp_path / "tenset")
    first = _ingest(tmp_path, logs)
    assert (first.files, first.ingested, first.records_now, first.quarantined_now) == (5, 5, 53, 1)
    ids = store.read("tenset-cpu", columns=["record_id"]).column("record_id").to_pylist()
    assert len(ids) == 53 == len(set(ids)) and len(list(store.platform_dir("tenset-cpu").glob("part-*"))) == 9

    second = _ingest(tmp_path, logs)
    assert (second.skipped, second.ingested, second.total_records) == (5, 0, 53)

    # A run killed half-way through resnet-50: its manifest entry missing, only its first part there.
    manifest = read_manifest(store, "tenset-cpu")
    fid = manifest["files"].pop("resnet-50-NHWC-B1-llvm.json")["file_id"]
    (store.platform_dir("tenset-cpu") / MANIFEST).write_text(json.dumps(manifest))
    for p in sorted(store.platform_dir("tenset-cpu").glob(f"part-{fid}-*"))[1:]:
        p.unlink()
    assert store.count("tenset-cpu") == 53 - 16
    third = _ingest(tmp_path, logs)
    assert (third.skipped, third.ingested, third.records_now, third.total_records) == (4, 1, 26, 53)
    ids = store.read("tenset-cpu", columns=["record_id"]).column("record_id").to_pylist()
    assert len(ids) == len(set(ids)) == 53

    # A changed file is re-read as a whole; its quarantine entries are replaced, not repeated.
    line = next(ln for ln in (logs / "matmul.json").read_text().splitlines() if ln.startswith('{"i": [["'))
    with (logs / "matmul.json").open("a") as f:
        f.write(line.replace('"r": [[', '"r": [[0.5, ') + "\n")
    fourth = _ingest(tmp_path, logs)
    assert (fourth.ingested, fourth.records_now, fourth.total_records) == (1, 2, 54)
    entries = read_quarantine(tmp_path / "quarantine" / "ingest-tenset-cpu.jsonl")
    assert [(Path(e["source_file"]).name, e["line"], e["reason"]) for e in entries] == \
        [("matmul.json", 3, "bad JSON")]


def test_ingest_task_weights_set_networks(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    shutil.copy(RESNET50, logs / RESNET50.name)
    keys = [json.loads(ln)["i"][0][0] for ln in RESNET50.read_text().splitlines() if ln.startswith("{")]
    mapping = {"resnet_50": {k: 1 + i % 3 for i, k in enumerate(keys[:20])}, "bert_tiny": {keys[0]: 4}}
    (logs / "weights.json").write_text(json.dumps(mapping))  # in the directory, but not a log
    summary = _ingest(tmp_path, logs, task_weights_path=logs / "weights.json")
    assert summary.files == 1 and summary.quarantined_now == 0
    table = RecordStore(tmp_path / "tenset").read("tenset-cpu")
    nets = Counter(table.column("network").to_pylist())
    assert nets == {"bert_tiny": 1, "resnet_50": 19, "": 6}  # first network by name; unlisted tasks: ''
    weights = dict(zip(table.column("network").to_pylist(), table.column("task_weight").to_pylist()))
    assert weights["bert_tiny"] == 4 and weights[""] == 0
    tasks = RecordStore(tmp_path / "tenset").tasks("tenset-cpu")
    assert {t["network"] for t in tasks if t["workload_key"] == keys[0]} == {"resnet_50", "bert_tiny"}


# ================================================================ flows (the DVC stage commands)

def _run_flow(tmp_path, *args):
    env = dict(os.environ, PYTHONPATH=str(REPO), PREFECT_HOME=str(tmp_path / "prefect"),
               MLFLOW_TRACKING_URI=f"sqlite:///{tmp_path}/mlflow.db")
    return subprocess.run([sys.executable, "-m", *args], cwd=tmp_path, env=env, capture_output=True,
                          text=True, timeout=300)


@pytest.mark.slow
def test_flows_skip_ingest_and_fail_validation_loudly(tmp_path, good_table):
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["ingest"] = {"tenset_dir": None, "store": str(tmp_path / "tenset")}
    params["validate"] = {"max_failed_share": 0.1, "max_steps": 100, "stores": [str(tmp_path / "records")],
                          "validated_root": str(tmp_path / "validated"),
                          "quarantine_dir": str(tmp_path / "quarantine"), "report_dir": str(tmp_path / "reports")}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(params))
    done = _run_flow(tmp_path, "flows.ingest", "--params", "params.yaml")
    assert done.returncode == 0, done.stderr[-2000:]
    assert json.loads((tmp_path / "tenset" / "_ingest_status.json").read_text())["skipped"] is True
    assert "nothing to ingest" in done.stdout + done.stderr

    _write_broken(tmp_path, good_table)
    failed = _run_flow(tmp_path, "flows.validate", "--platform", PLATFORM, "--params", "params.yaml")
    assert failed.returncode == 1
    assert "VALIDATION FAILED" in failed.stderr and "FAILED platform_known" in failed.stderr
