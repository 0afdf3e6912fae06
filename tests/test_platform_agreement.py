"""Platform agreement (tcl/data/agreement.py): picks transfer between platforms that rank alike, and a
reversed ranking is caught (Spearman -1, the picked program is the target's slowest)."""

from __future__ import annotations

import pandas as pd
import pytest

from tcl.data.agreement import nearest_sources, platform_agreement, render_agreement


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
    assert [src for src, _ in nearest_sources(agreement, "a")] == ["b", "c"]


def test_tasks_with_too_few_common_programs_are_left_out():
    assert platform_agreement(_records(n=5)) == {}
    assert "No two platforms" in render_agreement({})[0]
    lines = render_agreement(platform_agreement(_records()))
    assert "| a | - | 1.000 / 1.00 / 2 | 0.100 / -1.00 / 2 |" in lines
