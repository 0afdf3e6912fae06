"""Ansor/Tenset readers on TVM's real example logs, corrupted copies of them, and task pickles."""

from __future__ import annotations

import json
import pickle
import sys
import types
from collections import Counter
from datetime import datetime, timezone
from pathlib import Path

import pyarrow as pa
import pytest

from tcl.data.ansor import (STEP_KINDS, RecordError, parse_ansor_line, read_ansor_log,
                            task_key_of)
from tcl.data.quarantine import Quarantine, read_quarantine
from tcl.data.schema import RECORD_SCHEMA
from tcl.data.tenset_tasks import (TaskPickleError, load_task_pkl, network_of_task_pkl,
                                   read_task_weights_mapping, restricted_load,
                                   task_weights_from_pkl)

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "ansor"

# Step kinds in TVM's example logs (counted by hand-checkable script; SA never occurs there).
FIXTURE_KINDS = {
    "conv2d.json": {"AN": 7, "CA": 3, "CHR": 2, "CI": 2, "FFSP": 2, "FSP": 4, "FU": 5,
                    "PR": 1, "RE": 2, "SP": 9},
    "matmul.json": {"AN": 3, "CA": 1, "FSP": 2, "FU": 1, "PR": 1, "RE": 2, "SP": 3},
    "resnet-18-NHWC-B1-cuda.json": {"AN": 327, "CA": 76, "CHR": 42, "CHW": 16, "CI": 76,
                                    "FFSP": 42, "FSP": 83, "FU": 145, "PR": 49, "RE": 66,
                                    "SP": 250},
    "resnet-50-NHWC-B1-llvm.json": {"AN": 74, "CA": 25, "CHW": 4, "CI": 41, "CR": 5,
                                    "FSP": 80, "FU": 33, "PR": 29, "RE": 45, "RF": 2, "SP": 163},
    "sparse_dense.json": {"AN": 2, "CA": 1, "CI": 3, "FSP": 2, "FU": 1, "PR": 1, "RE": 2, "SP": 2},
}
FIXTURE_RECORDS = {"conv2d.json": 1, "matmul.json": 1, "resnet-18-NHWC-B1-cuda.json": 24,
                   "resnet-50-NHWC-B1-llvm.json": 26, "sparse_dense.json": 1}


def _data_lines(name: str) -> list[str]:
    text = (FIXTURES / name).read_text()
    return [ln for ln in text.splitlines() if ln.strip() and not ln.startswith("#")]


def _read_all(path, q, **kw) -> pa.Table:
    tables = list(read_ansor_log(path, platform="test-cpu", quarantine=q, **kw))
    return pa.concat_tables(tables) if tables else RECORD_SCHEMA.empty_table()


@pytest.fixture
def quarantine(tmp_path):
    with Quarantine(tmp_path / "quarantine", "ansor") as q:
        yield q


# ---------------------------------------------------------------- real fixtures

@pytest.mark.parametrize("name", sorted(FIXTURE_KINDS))
def test_fixture_parses_completely(name, quarantine):
    table = _read_all(FIXTURES / name, quarantine)
    assert table.schema == RECORD_SCHEMA
    assert table.num_rows == FIXTURE_RECORDS[name]
    assert len(quarantine) == 0
    kinds = Counter(s["kind"] for steps in table.column("steps").to_pylist() for s in steps)
    assert dict(kinds) == FIXTURE_KINDS[name]
    assert set(table.column("error_code").to_pylist()) == {""}
    assert all(m is not None and m > 0 for m in table.column("mean_sec").to_pylist())
    assert set(table.column("source").to_pylist()) == {"ansor"}


def test_every_fixture_kind_is_known():
    seen = set().union(*FIXTURE_KINDS.values())
    assert seen == set(STEP_KINDS) - {"SA"}
    assert len(STEP_KINDS) == 14


def test_matmul_record_fields():
    line = _data_lines("matmul.json")[0]
    rec = parse_ansor_line(line)
    assert rec["program"] == line
    assert rec["task_name"] == "matmul_add"
    assert rec["target"] == "llvm -keys=cpu"
    assert rec["run_secs"] == [0.0044742]
    assert rec["mean_sec"] == rec["median_sec"] == 0.0044742
    assert rec["collected_at"] == datetime.fromtimestamp(1607112214, tz=timezone.utc)
    assert rec["task_key"] == task_key_of('["matmul_add", 1024, 1024, 1024, "float32"]')
    assert rec["steps"][0] == {"kind": "SP", "nums": [2, 0, 1024, 2, 1, 4, 1], "strs": []}
    assert rec["steps"][10] == {"kind": "PR", "nums": [2, 0, 8], "strs": ["auto_unroll_max_step"]}


def test_task_key_ignores_key_spacing():
    assert task_key_of('["f",1,[2,3]]') == task_key_of('["f", 1, [2, 3]]')
    assert task_key_of('["f", 1]') != task_key_of('["f", 2]')


# ---------------------------------------------------------------- each step kind

def _line(steps, costs=(1e-3, 2e-3, 4e-3), error_no=0, ts=1700000000) -> str:
    return json.dumps({"i": [['["hand_made", 8, 8]', "llvm -keys=cpu"], [[], steps]],
                       "r": [list(costs), error_no, 0.5, ts], "v": "v0.6"})


STEP_CASES = {
    "AN": (["AN", 1, 2, 6], [1, 2, 6], ["threadIdx.x"]),
    "FU": (["FU", 3, [0, 1, 2]], [3, 0, 1, 2], []),
    "PR": (["PR", 2, 0, "auto_unroll_max_step$64"], [2, 0, 64], ["auto_unroll_max_step"]),
    "RE": (["RE", 4, [2, 0, 1]], [4, 2, 0, 1], []),
    "SP": (["SP", 2, 1, 512, [8, None, 4], 1], [2, 1, 512, 8, 4, 1], []),
    "FSP": (["FSP", 5, 0, 3, 2], [5, 0, 3, 2], []),
    "FFSP": (["FFSP", 6, 1, [3, 4], 2, True], [6, 1, 3, 4, 2, 1], []),
    "SA": (["SA", 3, 2, 32, 1], [3, 2, 32, 1], []),
    "CA": (["CA", 2, 4, 3], [2, 4, 3], []),
    "CI": (["CI", 7], [7], []),
    "CR": (["CR", 6], [6], []),
    "CHR": (["CHR", 2, "shared", [3, 5]], [2, 3, 5], ["shared"]),
    "CHW": (["CHW", 6, "local"], [6], ["local"]),
    "RF": (["RF", 3, 2, 1], [3, 2, 1], []),
}


def test_step_cases_cover_all_kinds():
    assert set(STEP_CASES) == set(STEP_KINDS)


@pytest.mark.parametrize("kind", sorted(STEP_CASES))
def test_step_encoding(kind):
    step, nums, strs = STEP_CASES[kind]
    rec = parse_ansor_line(_line([step]))
    assert rec["steps"] == [{"kind": kind, "nums": [float(x) for x in nums], "strs": strs}]
    assert rec["mean_sec"] == pytest.approx(7e-3 / 3)
    assert rec["median_sec"] == 2e-3


def test_pragma_without_numeric_value():
    rec = parse_ansor_line(_line([["PR", 1, 0, "debug_skip_region"], ["PR", 1, 0, "x$abc"]]))
    assert rec["steps"][0] == {"kind": "PR", "nums": [1.0, 0.0], "strs": ["debug_skip_region"]}
    assert rec["steps"][1] == {"kind": "PR", "nums": [1.0, 0.0], "strs": ["x", "abc"]}


@pytest.mark.parametrize("step,reason", [
    (["ZZ", 1], "unknown step kind 'ZZ'"),
    (["SP", 1, 2], "bad SP step"),
    (["CHR", 1, 2, [3]], "bad CHR step"),
    (["FU", 1, [0, "x"]], "bad FU step"),
    (["AN", 1, 0, 99], "bad AN step"),
    ("SP", "malformed step"),
])
def test_bad_steps(step, reason):
    with pytest.raises(RecordError) as err:
        parse_ansor_line(_line([step]))
    assert err.value.reason == reason


def test_failed_measurement_is_a_record():
    rec = parse_ansor_line(_line([["CI", 1]], costs=[1e10], error_no=7))
    assert rec["error_code"] == "ansor_error_7"
    assert rec["error_msg"] == "RUN_TIMEOUT"
    assert rec["run_secs"] == [] and rec["mean_sec"] is None and rec["median_sec"] is None


def test_sentinel_cost_without_error_is_rejected():
    with pytest.raises(RecordError, match="failure cost"):
        parse_ansor_line(_line([["CI", 1]], costs=[1e10], error_no=0))


# ---------------------------------------------------------------- corrupted logs

def _edit(line: str, fn) -> str:
    obj = json.loads(line)
    fn(obj)
    return json.dumps(obj)


def test_corrupted_log_is_quarantined_line_by_line(tmp_path, quarantine):
    good = _data_lines("resnet-50-NHWC-B1-llvm.json")
    bad_kind = _edit(good[3], lambda o: o["i"][1][1][0].__setitem__(0, "ZZ"))
    lines = [
        "# comment lines are not data",      # 1 skipped
        good[0],                              # 2 ok
        good[1][: len(good[1]) // 2],         # 3 truncated
        "{this is not json",                  # 4 bad JSON
        _edit(good[2], lambda o: o["r"][0].__setitem__(0, -1e-5)),    # 5 negative cost
        _edit(good[2], lambda o: o["r"][0].__setitem__(1, float("nan"))),  # 6 NaN cost
        bad_kind,                             # 7 unknown step kind
        "",                                   # 8 skipped
        _edit(good[4], lambda o: o.pop("i")),  # 9 missing "i"
        _edit(good[5], lambda o: o.__setitem__("r", [[1e10], 4, 10.0, 1606960900])),  # 10 failed
        good[6],                              # 11 ok
    ]
    path = tmp_path / "corrupt.json"
    bad_bytes = b'{"i": "\xff\xfe not utf-8"}'
    path.write_bytes("\n".join(lines).encode() + b"\n" + bad_bytes)  # 12 invalid UTF-8, no newline

    table = _read_all(path, quarantine)
    assert table.num_rows == 3
    assert table.column("program").to_pylist() == [good[0], lines[9], good[6]]
    assert table.column("error_code").to_pylist() == ["", "ansor_error_4", ""]
    assert table.column("run_secs").to_pylist()[1] == []

    expected = [(3, "bad JSON"), (4, "bad JSON"), (5, "negative cost"), (6, "NaN cost"),
                (7, "unknown step kind 'ZZ'"), (9, "missing field 'i'"), (12, "invalid UTF-8")]
    quarantine.close()
    entries = read_quarantine(quarantine.path)
    assert [(e["line"], e["reason"]) for e in entries] == expected
    assert all(e["source_file"] == str(path) for e in entries)
    assert [e["raw"] for e in entries[:-1]] == [lines[n - 1] for n, _ in expected[:-1]]
    assert entries[-1]["raw"].encode("utf-8", "surrogateescape") == bad_bytes  # raw never lost
    assert quarantine.summary() == {
        "path": str(quarantine.path), "total": 7,
        "by_reason": {"NaN cost": 1, "bad JSON": 2, "invalid UTF-8": 1, "missing field 'i'": 1,
                      "negative cost": 1, "unknown step kind 'ZZ'": 1}}


def test_quarantine_message_names_file_and_line(tmp_path):
    with Quarantine(tmp_path, "q") as q:
        msg = q.add("logs/a.json", 17, "bad JSON", "{x", detail="Expecting value")
    assert msg == "logs/a.json:17: bad JSON (Expecting value)"
    assert read_quarantine(tmp_path / "q.jsonl")[0]["raw"] == "{x"


# ---------------------------------------------------------------- chunking, weights

def test_chunks_are_bounded_and_complete(quarantine):
    path = FIXTURES / "resnet-18-NHWC-B1-cuda.json"
    chunks = list(read_ansor_log(path, platform="p", quarantine=quarantine, chunk_size=5))
    assert [t.num_rows for t in chunks] == [5, 5, 5, 5, 4]
    whole = list(read_ansor_log(path, platform="p", quarantine=quarantine))
    assert len(whole) == 1
    assert pa.concat_tables(chunks).equals(whole[0])
    ids = whole[0].column("record_id").to_pylist()
    assert len(set(ids)) == len(ids)


def test_task_weights_and_op_types(quarantine):
    path = FIXTURES / "resnet-50-NHWC-B1-llvm.json"
    keys = [json.loads(ln)["i"][0][0] for ln in _data_lines(path.name)]
    weights = {keys[0]: 3, keys[1]: 2}
    calls = []

    def op_type_of(wk):
        calls.append(wk)
        return "dense" if wk == keys[0] else "conv2d"

    table = _read_all(path, quarantine, network="resnet_50", task_weights=weights,
                      op_type_of=op_type_of)
    rows = table.select(["network", "task_weight", "op_type"]).to_pylist()
    assert rows[0] == {"network": "resnet_50", "task_weight": 3, "op_type": "dense"}
    assert rows[1]["task_weight"] == 2
    assert {r["task_weight"] for r in rows[2:]} <= {0, 2, 3}  # unlisted tasks weigh 0
    assert len(calls) == len(set(calls)) == len(set(keys))    # once per task


# ---------------------------------------------------------------- Tenset task pickles

class _Evil:
    def __init__(self, marker: Path):
        self.marker = marker

    def __reduce__(self):
        import os
        return (os.system, (f"touch {self.marker}",))


class _EvalEvil:
    def __reduce__(self):
        return (eval, ("1 + 1",))


def test_restricted_unpickler_refuses_code(tmp_path):
    marker = tmp_path / "pwned"
    with pytest.raises(pickle.UnpicklingError, match="refusing to load global (posix|os|nt).system"):
        restricted_load(pickle.dumps(_Evil(marker)))
    assert not marker.exists()
    with pytest.raises(pickle.UnpicklingError, match="builtins.eval"):
        restricted_load(pickle.dumps(_EvalEvil()))
    path = tmp_path / "evil.task.pkl"
    path.write_bytes(pickle.dumps(([_Evil(marker)], [1])))
    with pytest.raises(TaskPickleError, match=str(path)):
        load_task_pkl(path)
    assert not marker.exists()
    assert restricted_load(pickle.dumps({"a": [1, (2.0, "x")], "b": {3}})) == \
        {"a": [1, (2.0, "x")], "b": {3}}


def _fake_tvm(monkeypatch):
    """Stand-ins under the module/class names TVM ~0.8 (Tenset's fork) pickles with.

    Assumed: Object.__reduce__ = (tvm.runtime.object._new_object, (cls,), __getstate__());
    SearchTask state = dict with workload_key & co.; other Objects -> {"handle": <node JSON>}.
    """
    stand_ins: dict[str, types.ModuleType] = {}

    def module(name):
        mod = stand_ins[name] = types.ModuleType(name)
        monkeypatch.setitem(sys.modules, name, mod)
        return mod

    for parent in ("tvm", "tvm.runtime", "tvm.target", "tvm.auto_scheduler"):
        module(parent)  # so pickle's import check never reaches the real (0.27) TVM
    obj_mod = module("tvm.runtime.object")

    def _new_object(cls):
        return cls.__new__(cls)
    _new_object.__module__, _new_object.__qualname__ = "tvm.runtime.object", "_new_object"
    obj_mod._new_object = _new_object

    class _Object:
        def __init__(self, **state):
            self.__dict__.update(state)

        def __getstate__(self):
            return {"handle": json.dumps({"root": 1, "nodes": [{"type_key": type(self).__name__}]})}

        def __reduce__(self):
            return (_new_object, (type(self),), self.__getstate__())

    def tvm_class(mod_name, name, base=_Object, **body):
        # Only ever a stand-in: the real TVM may be imported in this process, and its classes
        # must not be replaced.
        mod = stand_ins.get(mod_name) or module(mod_name)
        cls = type(name, (base,), {"__module__": mod_name, "__qualname__": name, **body})
        setattr(mod, name, cls)
        return cls

    target_cls = tvm_class("tvm.target.target", "Target")
    dag_cls = tvm_class("tvm.auto_scheduler.compute_dag", "ComputeDAG",
                        __getstate__=lambda self: {"tensors": '{"root": 1, "nodes": []}'})
    fields = ("compute_dag", "workload_key", "target", "target_host", "hardware_params",
              "layout_rewrite_option", "task_input_names")
    task_cls = tvm_class("tvm.auto_scheduler.search_task", "SearchTask",
                         __getstate__=lambda self: {f: getattr(self, f) for f in fields})

    def make_task(workload_key):
        return task_cls(compute_dag=dag_cls(), workload_key=workload_key, target=target_cls(),
                        target_host=None, hardware_params=None, layout_rewrite_option=2,
                        task_input_names=[])
    return make_task


def test_tenset_task_pickle_roundtrip(tmp_path, monkeypatch, quarantine):
    lines = _data_lines("resnet-50-NHWC-B1-llvm.json")
    keys = list(dict.fromkeys(json.loads(ln)["i"][0][0] for ln in lines))
    make_task = _fake_tvm(monkeypatch)
    path = tmp_path / "((resnet_50,[(1,3,224,224)]),llvm).task.pkl"
    path.write_bytes(pickle.dumps(([make_task(k) for k in keys], list(range(1, len(keys) + 1)))))
    monkeypatch.undo()  # the loader must not need the stand-ins (or TVM's auto_scheduler)

    tasks = load_task_pkl(path)
    assert [t.workload_key for t in tasks] == keys
    assert [t.weight for t in tasks] == list(range(1, len(keys) + 1))
    assert network_of_task_pkl(path) == "resnet_50"

    weights = task_weights_from_pkl(path)
    table = _read_all(FIXTURES / "resnet-50-NHWC-B1-llvm.json", quarantine,
                      network=network_of_task_pkl(path), task_weights=weights)
    by_key = {task_key_of(k): w for k, w in weights.items()}
    for row in table.select(["task_key", "task_weight"]).to_pylist():
        assert row["task_weight"] == by_key[row["task_key"]]


def test_task_pickle_with_wrong_layout(tmp_path):
    path = tmp_path / "x.task.pkl"
    path.write_bytes(pickle.dumps((["not a task"], [1])))
    with pytest.raises(TaskPickleError, match="expected a pickled SearchTask"):
        load_task_pkl(path)
    path.write_bytes(pickle.dumps(([], [1])))
    with pytest.raises(TaskPickleError, match="0 tasks but 1 weights"):
        load_task_pkl(path)


def test_task_weights_mapping_json_and_csv(tmp_path):
    wk = '["abc", [1, 7, 7, 512], [1, 1, 512, 2048]]'
    jpath = tmp_path / "w.json"
    jpath.write_text(json.dumps({"resnet_50": {wk: 3}}))
    assert read_task_weights_mapping(jpath) == {"resnet_50": {wk: 3}}

    import csv
    cpath = tmp_path / "w.csv"
    with open(cpath, "w", newline="") as fh:
        w = csv.writer(fh)
        w.writerows([["network", "workload_key", "weight"], ["resnet_50", wk, "3"],
                     ["bert_tiny", wk, "1"]])
    assert read_task_weights_mapping(cpath) == {"resnet_50": {wk: 3}, "bert_tiny": {wk: 1}}

    with open(cpath, "a", newline="") as fh:
        csv.writer(fh).writerow(["bert_tiny", wk, "many"])
    with pytest.raises(ValueError, match=r"w\.csv:4: weight 'many'"):
        read_task_weights_mapping(cpath)
