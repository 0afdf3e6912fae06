"""Measure a task's program pool on another platform: the same schedules, rebuilt for its target.

Each stored trace is applied to the task's workload again (as MetaSchedule's database
does for a tuning record) and the resulting candidate is built for the new target and
run. The programs stay identical across platforms, so every program gets one label per
platform: the paired labels MTL-TLP and CKD learn from.
"""

from __future__ import annotations

import json


def replay_candidates(mod, programs: list[str]) -> list:
    """MeasureCandidates for `programs` (trace JSON text) on `mod`, in the same order."""
    from tvm.s_tir import meta_schedule as ms

    workload = ms.database.Workload(mod)
    out = []
    for text in programs:
        record = ms.database.TuningRecord.from_json([json.loads(text), None, None, None], workload)
        out.append(record.as_measure_candidate())
    return out
