"""Platforms, schema, store and trace conversion: fast checks with real files."""

from __future__ import annotations

import json
import os
from datetime import datetime, timezone

import pytest

from tcl.data.metaschedule import trace_to_steps
from tcl.data.schema import RECORD_SCHEMA, make_record_id, records_to_table, summarize_times
from tcl.data.store import RecordStore
from tcl.platforms import CPU_SPEC_FIELDS, GPU_SPEC_FIELDS, host_mismatch, load_platforms

TRACE = [
    [["GetSBlock", [], ["C", "main"], ["b0"]],
     ["Annotate", ["b0", "\"SSRSRS\""], ["meta_schedule.tiling_structure"], []],
     ["GetLoops", ["b0"], [], ["l1", "l2", "l3"]],
     ["SamplePerfectTile", ["l1"], [4, 64], ["v4", "v5", "v6", "v7"]],
     ["Split", ["l1", "v4", "v5", "v6", "v7"], [True, False], ["l8", "l9", "l10", "l11"]],
     ["Split", ["l2", "None", 64], [True, False], ["l12", "l13"]],
     ["SampleCategorical", [], [[0, 16, 64], [0.5, 0.25, 0.25]], ["v14"]]],
    [[3, [1, 2, 1, 32]], [6, 2]],
]


def test_params_declare_two_host_variants_and_a_cuda_platform(params):
    platforms = load_platforms(params)
    cpus = [p for p in platforms.values() if p.kind == "cpu"]
    # a platform is a (CPU, target) pair: the same target on two CPUs is two platforms
    assert len(cpus) >= 2 and len({json.dumps([p.target, p.host], sort_keys=True) for p in cpus}) == len(cpus)
    assert any(p.kind == "gpu" and p.target["kind"] == "cuda" for p in platforms.values())
    for p in platforms.values():
        fields = CPU_SPEC_FIELDS if p.kind == "cpu" else GPU_SPEC_FIELDS
        assert len(p.spec_vector) == len(fields)
        assert p.tvm_target().kind.name == p.target["kind"]


@pytest.mark.parametrize("broken, message", [
    ({"kind": "tpu", "target": {"kind": "llvm"}, "specs": {}}, "platforms.x.kind"),
    ({"kind": "cpu", "target": "llvm -mcpu=znver4", "specs": {}}, "platforms.x.target"),
    ({"kind": "cpu", "target": {"kind": "llvm"}, "specs": {"cores": 2}}, "missing Table-1 fields"),
    ({"kind": "cpu", "specs": {}}, "missing field 'target'"),
])
def test_bad_platform_entries_name_the_field(broken, message):
    with pytest.raises(ValueError, match=message):
        load_platforms({"platforms": {"x": broken}})


ZEN1 = {"vendor": "AuthenticAMD", "family": 23, "model": 1, "name": "AMD EPYC", "flags": {"avx2", "sse4_2"}}
ZEN4 = {"vendor": "AuthenticAMD", "family": 25, "model": 17, "name": "AMD EPYC", "flags": {"avx2", "avx512f"}}
ZEN5 = {"vendor": "AuthenticAMD", "family": 26, "model": 2, "name": "AMD EPYC", "flags": {"avx2", "avx512f"}}


def test_a_platform_is_measured_only_on_its_own_cpu(params):
    platforms = load_platforms(params)
    assert host_mismatch(platforms["zen1-avx2-1c"], ZEN1) is None
    assert "family 23" in host_mismatch(platforms["zen1-avx2-1c"], ZEN4)
    assert host_mismatch(platforms["host-avx512-1c"], ZEN5) is None
    assert "family 26" in host_mismatch(platforms["host-avx512-1c"], ZEN4)
    assert host_mismatch(platforms["zen4-avx512-1c"], ZEN4) is None
    assert "model 17" in host_mismatch(platforms["zen4-avx512-1c"], {**ZEN4, "model": 1})
    assert "avx512f" in host_mismatch(platforms["zen4-avx512-1c"], {**ZEN4, "flags": {"avx2"}})
    assert host_mismatch(platforms["local-1c"], ZEN1) is None is host_mismatch(platforms["local-1c"], ZEN4)
    with pytest.raises(ValueError, match="platforms.x.host"):
        load_platforms({"platforms": {"x": {**params["platforms"]["local-1c"], "host": {"cpu": "zen"}}}})


def test_trace_steps_keep_literals_and_decisions_but_not_variable_names():
    steps = trace_to_steps(TRACE)
    assert [s["kind"] for s in steps] == ["GetSBlock", "Annotate", "GetLoops", "SamplePerfectTile", "Split",
                                          "Split", "SampleCategorical"]
    assert steps[0] == {"kind": "GetSBlock", "nums": [], "strs": ["C", "main"]}
    assert steps[1]["strs"] == ["SSRSRS", "meta_schedule.tiling_structure"]
    assert steps[2] == {"kind": "GetLoops", "nums": [], "strs": []}
    assert steps[3]["nums"] == [4.0, 64.0, 1.0, 2.0, 1.0, 32.0]  # attrs (n, max factor), then decision
    assert steps[4]["nums"] == [1.0, 0.0]
    assert steps[5]["nums"] == [64.0, 1.0, 0.0]
    assert steps[6]["nums"][-1] == 2.0


def test_trace_with_a_malformed_instruction_is_rejected():
    with pytest.raises(ValueError, match="instruction 0"):
        trace_to_steps([[["Split", []]], []])


def _row(platform="p", task="0xabc", program="[]", secs=(1e-5, 3e-5)):
    mean, median = summarize_times(secs)
    return {"record_id": make_record_id(platform, task, program), "platform": platform,
            "source": "metaschedule", "network": "n", "task_key": task, "task_name": "t", "task_weight": 1,
            "op_type": "dense", "target": "{}", "steps": trace_to_steps(TRACE), "program": program,
            "run_secs": list(secs), "mean_sec": mean, "median_sec": median, "error_code": "", "error_msg": "",
            "collected_at": datetime.now(timezone.utc)}


def test_records_to_table_names_the_missing_field():
    row = _row()
    del row["op_type"]
    with pytest.raises(ValueError, match="op_type"):
        records_to_table([row])


def test_store_appends_parts_per_task_and_reads_them_back(tmp_path):
    store = RecordStore(tmp_path)
    assert store.read("p").num_rows == 0
    store.append("p", "0xabc", records_to_table([_row(program="[1]"), _row(program="[2]")]))
    store.append("p", "0xabc", records_to_table([_row(program="[3]")]))
    store.append("p", "0xdef", records_to_table([_row(task="0xdef", program="[1]")]))
    assert store.platforms() == ["p"]
    assert store.count("p") == 4 and store.next_batch_index("p", "0xabc") == 2
    assert len(store.record_ids("p", "0xabc")) == 3
    table = store.read("p")
    assert table.schema == RECORD_SCHEMA
    assert table.column("mean_sec").to_pylist()[0] == pytest.approx(2e-5)
    assert store.append("p", "0xabc", RECORD_SCHEMA.empty_table()) is None


def test_store_refuses_records_of_another_platform(tmp_path):
    with pytest.raises(ValueError, match="other"):
        RecordStore(tmp_path).append("p", "0xabc", records_to_table([_row(platform="other")]))


def test_summarize_times_handles_even_odd_and_empty():
    assert summarize_times([3.0, 1.0, 2.0]) == (2.0, 2.0)
    assert summarize_times([1.0, 2.0, 4.0, 3.0]) == (2.5, 2.5)
    assert summarize_times([]) == (None, None)


def test_store_writer_lock_names_its_holder_and_is_freed(tmp_path):
    """flock conflicts between open files even in one process, so the busy path is testable here."""
    from tcl.data.store import StoreBusy

    store = RecordStore(tmp_path / "records")
    with store.exclusive_writer("collect"):
        with pytest.raises(StoreBusy, match=rf"being written by collect \(pid {os.getpid()}, since"):
            with RecordStore(tmp_path / "records").exclusive_writer("ingest"):
                pass
    with store.exclusive_writer("ingest"):  # released on exit
        assert "ingest" in (store.root / RecordStore.LOCK_NAME).read_text()
