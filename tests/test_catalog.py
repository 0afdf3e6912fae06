"""Task selection for the dataset, and the store's compaction of finished tasks."""

from __future__ import annotations

from types import SimpleNamespace

import pyarrow.parquet as pq

from tcl.collect.catalog import interleave, pick_tasks, workload_instances
from tcl.workloads.inputs import base_network
from tcl.data.schema import records_to_table
from tcl.data.store import RecordStore


def _task(name, op_type, weight, flops):
    return SimpleNamespace(name=name, key=f"0x{name}", op_type=op_type, weight=weight, flops=flops,
                           weighted_flops=weight * flops)


def test_pick_covers_each_op_type_before_filling_with_the_heaviest():
    tasks = sorted([_task("c1", "conv2d", 1, 900), _task("c2", "conv2d", 1, 800), _task("c3", "conv2d", 1, 700),
                    _task("d1", "dense", 1, 50), _task("p1", "pool", 1, 5), _task("p2", "pool", 1, 4)],
                   key=lambda t: -t.weighted_flops)
    assert [t.name for t in pick_tasks(tasks, 4, set())] == ["c1", "c2", "d1", "p1"]
    # Tasks already taken by an earlier network are skipped, not counted.
    assert [t.name for t in pick_tasks(tasks, 3, {"0xc1", "0xd1"})] == ["c2", "c3", "p1"]


def test_instances_interleave_so_a_cut_collection_covers_every_network():
    assert interleave([[1, 2, 3], ["a"], [10, 20]]) == [1, "a", 10, 2, 20, 3]
    cfg = {"networks": ["resnet18", "bert_tiny"], "image_sizes": [224, 160], "seq_lens": [128]}
    assert workload_instances(cfg) == [("resnet18", 224), ("resnet18", 160), ("bert_tiny", 128)]
    assert base_network("resnet50@224") == "resnet50"


def _rows(task, n, start=0):
    return records_to_table([{
        "record_id": f"{task}-{i}", "platform": "p", "source": "metaschedule", "network": "n@1",
        "task_key": task, "task_name": "t", "task_weight": 1, "op_type": "dense", "target": "{}", "steps": [],
        "program": f"[{i}]", "run_secs": [1e-3], "mean_sec": 1e-3, "median_sec": 1e-3, "error_code": "",
        "error_msg": "", "collected_at": None} for i in range(start, start + n)])


def test_compaction_merges_parts_and_survives_a_crash_halfway(tmp_path):
    store = RecordStore(tmp_path)
    for b in range(3):
        store.append("p", "0xa", _rows("0xa", 2, 2 * b))
    store.append("p", "0xb", _rows("0xb", 1))
    merged = store.compact("p", "0xa")
    assert merged.name == "part-0xa-00000-00002.parquet"
    assert sorted(x.name for x in store.platform_dir("p").glob("part-0xa-*")) == [merged.name]
    assert pq.ParquetFile(merged).metadata.num_rows == 6
    assert store.count("p") == 7 and store.count_by_task("p") == {"0xa": 6, "0xb": 1}
    # A crash after the merged file was renamed in but before the small parts were deleted:
    # the leftover part is covered by the merged one and never read twice.
    store.append("p", "0xa", _rows("0xa", 1, 100))  # batch 3 (a new, uncovered batch)
    leftover = store.platform_dir("p") / "part-0xa-00001.parquet"
    pq.write_table(_rows("0xa", 2, 2), leftover)
    assert store.count_by_task("p")["0xa"] == 7
    assert len(store.record_ids("p", "0xa")) == 7
    assert store.next_batch_index("p", "0xa") == 4
    again = store.compact("p", "0xa")
    assert again.name == "part-0xa-00000-00003.parquet" and not leftover.exists()
    assert sorted(store.read("p", "0xa").column("record_id").to_pylist()) == sorted(
        [f"0xa-{i}" for i in range(6)] + ["0xa-100"])
    assert store.compact("p", "0xb") is None  # one part: nothing to merge
