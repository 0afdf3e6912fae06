"""Collect measured programs for one platform: tasks of the configured networks,
a trial budget per task, every outcome committed to the append-only store.

Resuming is the default: the store is the state. Each task's committed records
are counted and seed the search, and only the remaining budget is measured.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any, Callable

from tqdm.auto import tqdm

from ..data.metaschedule import trace_to_steps
from ..data.schema import make_record_id, records_to_table, summarize_times
from ..data.store import RecordStore
from ..platforms import Platform, require_device
from .candidates import CandidateSource, trace_json
from .measure import LocalMeasurer

log = logging.getLogger(__name__)

# Batches in a row that bring only already-measured programs before a task counts as exhausted.
MAX_STALLED_BATCHES = 3


@dataclass
class CollectSummary:
    platform: str
    tasks: int
    measured_now: int
    already_had: int
    failed_now: int
    total_records: int


def task_seed(seed: int, platform: str, task_key: str, batch_index: int) -> int:
    """A per-(task, batch) seed: reruns and resumes draw the same way, tasks draw differently."""
    digest = hashlib.sha1(f"{seed}/{platform}/{task_key}/{batch_index}".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def select_tasks(platform: Platform, cfg: dict[str, Any], workload_cfg: dict[str, Any]) -> list:
    """The tasks to measure: the heaviest `tasks_per_network` of each network, deduplicated."""
    from ..workloads import extract_tasks

    target = platform.tvm_target()
    chosen, seen = [], set()
    for network in cfg["networks"]:
        tasks = extract_tasks(network, target, batch=int(workload_cfg.get("batch", 1)),
                              image_size=int(workload_cfg.get("image_size", 32)),
                              seq_len=int(workload_cfg.get("seq_len", 16)))
        limit = int(cfg.get("tasks_per_network", 0)) or len(tasks)
        fresh = [t for t in tasks if t.key not in seen][:limit]
        seen.update(t.key for t in fresh)
        chosen.extend(fresh)
    return chosen


def _record(platform: Platform, task, program: list, outcome, now: datetime) -> dict[str, Any]:
    text = json.dumps(program, separators=(",", ":"))
    mean, median = summarize_times(outcome.run_secs)
    return {
        "record_id": make_record_id(platform.name, task.key, text),
        "platform": platform.name, "source": "metaschedule", "network": task.network,
        "task_key": task.key, "task_name": task.name, "task_weight": int(task.weight),
        "op_type": task.op_type, "target": platform.target_json,
        "steps": trace_to_steps(program), "program": text,
        "run_secs": outcome.run_secs, "mean_sec": mean, "median_sec": median,
        "error_code": outcome.error_code, "error_msg": outcome.error_msg[-2000:],
        "collected_at": now,
    }


def collect_task(task, platform: Platform, store: RecordStore, measurer: LocalMeasurer,
                 cfg: dict[str, Any], seed: int, on_progress: Callable[[int], None]) -> tuple[int, int]:
    """Measure one task up to its trial budget; returns (measured now, failed now)."""
    import tvm

    store.save_workload(platform.name, task.key, tvm.ir.save_json(task.mod))
    existing = store.read(platform.name, task.key, columns=["record_id", "program", "run_secs"])
    known = set(existing.column("record_id").to_pylist())
    budget = int(cfg["trials_per_task"])
    remaining = budget - len(known)
    if remaining <= 0:
        return 0, 0
    batch_size = int(cfg["batch_size"])
    source = CandidateSource(
        task.mod, measurer.target, search=cfg.get("search", "evolutionary"),
        seed=task_seed(seed, platform.name, task.key, store.next_batch_index(platform.name, task.key)),
        max_trials=remaining * 4, batch_size=batch_size,  # head-room: already-measured draws are skipped
        population=int(cfg.get("population", 128)), threads=platform.threads,
        measured=zip(existing.column("program").to_pylist(), existing.column("run_secs").to_pylist()))
    measured = failed = stalls = 0
    while measured < remaining:
        batch = source.next_batch()
        if not batch or stalls >= MAX_STALLED_BATCHES:
            log.warning("%s: no new programs left to draw after %d (design space exhausted)", task.name, measured)
            break
        programs = [trace_json(c) for c in batch]
        fresh = []
        for cand, program in zip(batch, programs):
            rid = make_record_id(platform.name, task.key, json.dumps(program, separators=(",", ":")))
            if rid not in known and len(fresh) < remaining - measured:
                known.add(rid)
                fresh.append((cand, program))
        if not fresh:
            stalls += 1
            continue
        stalls = 0
        outcomes, runner_results = measurer.measure([c for c, _ in fresh])
        now = datetime.now(timezone.utc)
        rows = [_record(platform, task, p, o, now) for (_, p), o in zip(fresh, outcomes)]
        store.append(platform.name, task.key, records_to_table(rows))
        source.notify([c for c, _ in fresh], runner_results)
        measured += len(rows)
        failed += sum(1 for o in outcomes if o.error_code)
        on_progress(len(rows))
    return measured, failed


def collect_platform(platform: Platform, params: dict[str, Any], store: RecordStore,
                     progress: bool = True) -> CollectSummary:
    """Collect every selected task of the configured networks on one platform."""
    cfg = params["collect"]
    require_device(platform)
    tasks = select_tasks(platform, cfg, params.get("workloads", {}))
    store.save_tasks(platform.name, [
        {"network": t.network, "task_key": t.key, "task_name": t.name, "weight": int(t.weight),
         "op_type": t.op_type, "flops": float(t.flops)} for t in tasks])
    budget = int(cfg["trials_per_task"])
    had = {t.key: len(store.record_ids(platform.name, t.key)) for t in tasks}
    already = sum(min(n, budget) for n in had.values())
    measurer = LocalMeasurer(platform.tvm_target(), platform.threads, cfg.get("builder", {}), cfg.get("runner", {}))
    measured_total = failed_total = 0
    with tqdm(total=budget * len(tasks), initial=already, unit="trial", disable=not progress,
              desc=f"collect {platform.name}") as bar:
        for i, task in enumerate(tasks):
            bar.set_postfix_str(f"task {i + 1}/{len(tasks)} {task.network}:{task.name}")
            measured, failed = collect_task(task, platform, store, measurer, cfg, int(params.get("seed", 0)),
                                            bar.update)
            measured_total += measured
            failed_total += failed
    return CollectSummary(platform=platform.name, tasks=len(tasks), measured_now=measured_total,
                          already_had=already, failed_now=failed_total, total_records=store.count(platform.name))
