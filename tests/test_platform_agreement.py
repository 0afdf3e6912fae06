"""Platform agreement (tcl/data/agreement.py): picks transfer between platforms that rank alike, and a
reversed ranking is caught (Spearman -1, the picked program is the target's slowest)."""

from __future__ import annotations

import pandas as pd
import pytest

from tcl.data.agreement import agreement_into, platform_agreement, render_agreement


def _records(n: int = 10) -> pd.DataFrame:
    rows = []
    for task in ("0x1", "0x2"):
        for i in range(n):
            lat = 1e-3 * (i + 1)
            rows += [{"platform": "a", "task_key": task, "program_id": f"p{i}", "median_sec": lat, "error_code": ""},
                     # b: a's ranking, every program twice as slow
                     {"platform": "b", "task_key": task, "program_id": f"p{i}", "median_sec": 2 * lat, "error_code": ""},
                     # c: a's ranking reversed
                     {"platform": "c", "task_key": task, "program_id": f"p{i}", "median_sec": 1e-3 * (n - i),
                      "error_code": ""}]
    # a failed record's time is not a latency: were it read, p9 would be b's best of task 0x1
    rows.append({"platform": "b", "task_key": "0x1", "program_id": "p9", "median_sec": 1e-6, "error_code": "timeout"})
    return pd.DataFrame(rows)


def test_alike_platforms_transfer_their_pick_and_a_reversed_one_does_not():
    agreement = platform_agreement(_records())
    assert agreement["a"]["b"] == {"tasks": 2, "spearman": pytest.approx(1.0), "pick_top1": pytest.approx(1.0)}
    # a's best program (p0) is c's slowest: c's best latency is 1 ms, p0 runs 10 ms there
    assert agreement["a"]["c"]["spearman"] == pytest.approx(-1.0)
    assert agreement["a"]["c"]["pick_top1"] == pytest.approx(0.1)
    assert agreement["b"]["a"]["pick_top1"] == pytest.approx(1.0) and agreement["c"]["a"]["pick_top1"] == pytest.approx(0.1)


def test_tasks_with_too_few_common_programs_are_left_out():
    assert platform_agreement(_records(n=5)) == {}
    assert "No two platforms" in render_agreement({})[0]
    lines = render_agreement(platform_agreement(_records()))
    assert "| a | - | 1.000 / 1.00 / 2 | 0.100 / -1.00 / 2 |" in lines


def test_agreement_into_reads_a_record_store_and_knows_a_platform_it_lacks(tmp_path):
    from tcl.data.schema import records_to_table
    from tcl.data.store import RecordStore

    store = RecordStore(tmp_path / "records")
    frame = _records()
    for platform, rows in frame.groupby("platform"):
        for task, g in rows.groupby("task_key"):
            store.append(platform, task, records_to_table([
                {"record_id": f"{platform}/{task}/{r.program_id}/{i}", "platform": platform, "source": "metaschedule",
                 "network": "resnet50@224", "task_key": task, "task_name": task, "task_weight": 1,
                 "op_type": "conv2d", "target": "{}", "steps": [], "program": r.program_id,
                 "run_secs": [r.median_sec], "mean_sec": r.median_sec, "median_sec": r.median_sec,
                 "error_code": r.error_code, "error_msg": "", "collected_at": None, "load_avg": 0.0}
                for i, r in enumerate(g.itertuples())]))
    into_a = agreement_into(store.root, "a")
    assert sorted(into_a) == ["b", "c"] and into_a["c"]["spearman"] == pytest.approx(-1.0)
    assert agreement_into(store.root, "absent") == {}
