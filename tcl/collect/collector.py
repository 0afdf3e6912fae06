"""Collect the dataset: one program pool per task, measured on every local platform.

For each task of the catalog (see catalog.py), in order:
1. its pool is drawn once for the *source* platform's target: `pool_size` distinct
   programs from MetaSchedule's evolutionary search with a random cost model, saved
   with the store before anything is measured;
2. every platform of `collect.platforms` (the source too) builds the same programs for
   its own target and measures them, so each program has one label per platform;
3. the task's parts are compacted into one file per platform.
Going task by task means a collection stopped anywhere leaves finished tasks with
paired labels on every platform, not one platform finished and the others empty.

Resuming is the default: the store is the state. The saved pool is reused and only
the programs a platform has not measured yet are measured.
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
from ..platforms import Platform, get_platform, unmeasurable
from ..workloads.settings import WorkloadSettings
from .candidates import CandidateSource, trace_json
from .catalog import task_catalog, tier_pool_size
from .measure import LocalMeasurer, make_measurer, pinned_to
from .remote import measure_mode, remote_board
from .replay import replay_candidates
from .runner_log import note_runner

log = logging.getLogger(__name__)

# Batches in a row that bring no new program before a design space counts as exhausted.
MAX_STALLED_BATCHES = 3


@dataclass
class CollectSummary:
    platform: str
    tasks: int
    measured_now: int
    already_had: int
    failed_now: int
    total_records: int
    skipped: str = ""  # why nothing was measured on this platform here (another host's platform)


def pool_seed(seed: int, platform: str, task_key: str) -> int:
    """A per-task seed: a redrawn pool is the same pool, different tasks draw differently."""
    digest = hashlib.sha1(f"{seed}/{platform}/{task_key}/0".encode()).digest()
    return int.from_bytes(digest[:4], "little") & 0x7FFFFFFF


def program_text(program: list) -> str:
    """The canonical text of a trace: what record ids and program ids hash."""
    return json.dumps(program, separators=(",", ":"))


def _record(platform: Platform, task, program: list, outcome, now: datetime, load: float) -> dict[str, Any]:
    text = program_text(program)
    mean, median = summarize_times(outcome.run_secs)
    return {
        "record_id": make_record_id(platform.name, task.key, text),
        "platform": platform.name, "source": "metaschedule", "network": task.network,
        "task_key": task.key, "task_name": task.name, "task_weight": int(task.weight),
        "op_type": task.op_type, "target": platform.target_json,
        "steps": trace_to_steps(program), "program": text,
        "run_secs": outcome.run_secs, "mean_sec": mean, "median_sec": median,
        "error_code": outcome.error_code, "error_msg": outcome.error_msg[-2000:],
        "collected_at": now, "load_avg": load,
    }


def _commit(store: RecordStore, platform: Platform, task, programs: list, outcomes, load: float | None) -> None:
    now = datetime.now(timezone.utc)
    store.append(platform.name, task.key, records_to_table(
        [_record(platform, task, p, o, now, load) for p, o in zip(programs, outcomes)]))


def draw_pool(task, platform: Platform, cfg: dict[str, Any], seed: int) -> list[str]:
    """`pool_size` distinct programs (trace JSON text) from the task's design space, unmeasured.

    The search ranks candidates with a random cost model, so measured times would not
    steer it: each batch is reported back as not measured, and drawing the pool costs
    only the search. A design space with fewer programs gives a smaller pool (logged).
    """
    from tvm.s_tir import meta_schedule as ms

    size, batch_size = int(cfg["pool_size"]), int(cfg["batch_size"])
    source = CandidateSource(task.mod, platform.tvm_target(), search=cfg.get("search", "evolutionary"),
                             seed=pool_seed(seed, platform.name, task.key), max_trials=size * 4,
                             batch_size=batch_size, population=int(cfg.get("population", 128)),
                             threads=platform.threads)
    pool: dict[str, None] = {}
    stalls = 0
    while len(pool) < size and stalls < MAX_STALLED_BATCHES:
        batch = source.next_batch()
        if not batch:
            break
        before = len(pool)
        for cand in batch:
            if len(pool) < size:
                pool.setdefault(program_text(trace_json(cand)))
        stalls = 0 if len(pool) > before else stalls + 1
        source.notify(batch, [ms.runner.RunnerResult(run_secs=None, error_msg="not measured (pool drawing)")
                              for _ in batch])
    if len(pool) < size:
        log.warning("%s: design space gave %d distinct programs of %d asked", task.name, len(pool), size)
    return list(pool)


def task_pool(store: RecordStore, task, platform: Platform, cfg: dict[str, Any], seed: int) -> list[str]:
    """The task's saved pool, or a freshly drawn one (saved before anything is measured)."""
    pool = store.pool(task.key)
    if pool is None:
        pool = draw_pool(task, platform, cfg, seed)
        store.save_pool(task.key, pool)
    return pool


def replay_task(task, platform: Platform, pool: list[str], store: RecordStore, measurer: LocalMeasurer,
                batch_size: int, on_progress: Callable[[int], None]) -> tuple[int, int]:
    """Measure on `platform` the pool's programs it has not measured yet; returns (measured, failed).

    When the measurer allows it (`can_overlap`), batch k+1 is built while batch k runs.
    """
    known = set(store.read(platform.name, task.key, columns=["program"]).column("program").to_pylist())
    todo = [p for p in pool if p not in known]
    if todo:
        note_runner(store, platform.name, measurer.runner_info)  # where these are timed (runner_log.py)
    batches = [todo[i:i + batch_size] for i in range(0, len(todo), batch_size)]
    counts = [0, 0]

    def finish(texts: list[str], job) -> None:
        outcomes, _ = measurer.collect(job)
        _commit(store, platform, task, [json.loads(t) for t in texts], outcomes, measurer.machine_load())
        counts[0] += len(texts)
        counts[1] += sum(1 for o in outcomes if o.error_code)
        on_progress(len(texts))

    pending = None
    for texts in batches:
        if pending is not None and not measurer.can_overlap:
            finish(*pending)
            pending = None
        job = measurer.submit(replay_candidates(task.mod, texts))
        if pending is not None:
            finish(*pending)
        pending = (texts, job)
    if pending is not None:
        finish(*pending)
    return counts[0], counts[1]


def measure_task(task, platform: Platform, source: Platform, store: RecordStore, measurer: LocalMeasurer,
                 cfg: dict[str, Any], seed: int, on_progress: Callable[[int], None]) -> tuple[int, int]:
    """One task on one platform: its pool (drawn for `source`'s target unless saved already),
    measured where `platform` lacks it; returns (measured now, failed now)."""
    import tvm

    store.save_workload(platform.name, task.key, tvm.ir.save_json(task.mod))
    pool = task_pool(store, task, source, cfg, seed)
    return replay_task(task, platform, pool, store, measurer, int(cfg["batch_size"]), on_progress)


class LazyMeasurers:
    """One measurer per platform (`make_measurer`: local, or its board over RPC), started on first
    use: a resumed collection with nothing left to measure starts no builder or runner processes
    (each imports TVM, ~25 s)."""

    def __init__(self, cfg: dict[str, Any]):
        self.cfg, self._by_name = cfg, {}

    def get(self, platform: Platform) -> LocalMeasurer:
        if platform.name not in self._by_name:
            self._by_name[platform.name] = make_measurer(platform, self.cfg.get("builder", {}),
                                                         self.cfg.get("runner", {}))
        return self._by_name[platform.name]


def collect_pools(params: dict[str, Any], store: RecordStore, progress: bool = True,
                  measure: Callable[..., tuple[int, int]] = measure_task,
                  on_task_done: Callable[[int, int], None] | None = None) -> list[CollectSummary]:
    """Collect every catalog task: the pool on `collect.source`, replayed on `collect.platforms`.

    `measure` (measure_task's signature) measures one task on one platform: the flow passes
    measure_task wrapped as a Prefect task with retries. `on_task_done(done, total)` is called
    after each task is finished and compacted on every local platform, while the store holds
    only whole files (the checkpoints of `tcl.collect.grow` commit and push the store then)."""
    cfg = params["collect"]
    source = get_platform(params, cfg["source"])
    platforms = [get_platform(params, name) for name in cfg["platforms"]]
    others = [p for p in platforms if p.name != source.name]
    wrong = [p.name for p in others if p.kind != source.kind]
    if wrong:
        raise ValueError(f"collect.platforms {wrong} are not {source.kind} platforms like the source "
                         f"'{source.name}': a pool drawn for one kind cannot be replayed on another")
    here, away = [], {}
    remote = measure_mode(cfg.get("runner") or {}) == "rpc"  # boards are timed elsewhere: no host check here
    # The source draws the pools; it is timed only when it is one of `platforms` (grow --platforms may leave it out).
    for p in [source, *others] if source.name in cfg["platforms"] else others:
        # Pools are drawn here all the same: search needs no device, so a GPU machine's time goes to timing.
        reason = None if remote else unmeasurable(p)
        if reason:
            away[p.name] = reason
            log.warning("%s: its pools are drawn here and its tasks left for a machine that can time them", reason)
        else:
            if remote:
                remote_board(p, cfg.get("runner") or {})  # a platform without a board fails now, by name
            here.append(p)
    # the search stays off the measurement cores
    with store.exclusive_writer("collect"), pinned_to(tuple(cfg.get("search_cpus") or ())):
        catalog = task_catalog(store, source.name, cfg, source.tvm_target(), source.target_json,
                               batch=WorkloadSettings.from_params(params).batch)
        if int(cfg.get("max_tasks") or 0):  # a prefix of the catalog: every network, fewer tasks each
            catalog = catalog[: int(cfg["max_tasks"])]
        for p in others:  # every platform's partition describes the same tasks
            store.copy_catalog(source.name, p.name)
        # Each tier's pool size (tier 1: extra_pool_size) is the `pool_size` its tasks are drawn with.
        tier_cfg = {t: {**cfg, "pool_size": tier_pool_size(cfg, t)} for t in (0, 1)}
        size_of = {c.task.key: tier_pool_size(cfg, c.tier) for c in catalog}
        measurers = LazyMeasurers(cfg)
        counts = {p.name: store.count_by_task(p.name) for p in [source, *others]}
        had = {name: sum(min(n, size_of.get(k, 0)) for k, n in c.items()) for name, c in counts.items()}
        now = {p.name: [0, 0] for p in [source, *others]}
        seed = int(params.get("seed", 0))
        total = sum(size_of.values()) * len(here)
        with tqdm(total=total, initial=sum(had[p.name] for p in here), unit="program", disable=not progress,
                  desc="collect", smoothing=0.05) as bar:
            for i, entry in enumerate(catalog):
                task, task_cfg = entry.task, tier_cfg[entry.tier]
                bar.set_postfix_str(f"task {i + 1}/{len(catalog)} {task.network}:{task.name}")
                pool = task_pool(store, task, source, task_cfg, seed)  # drawn even if no platform is measured here
                for p in here:
                    if counts[p.name].get(task.key, 0) >= len(pool):
                        continue  # done (a pool can be smaller than pool_size: a small design space)
                    m, f = measure(task, p, source, store, measurers.get(p), task_cfg, seed, bar.update)
                    now[p.name][0] += m
                    now[p.name][1] += f
                for p in here:
                    store.compact(p.name, task.key)
                if on_task_done is not None:
                    on_task_done(i + 1, len(catalog))
    return [CollectSummary(platform=name, tasks=len(catalog), measured_now=m, already_had=had[name],
                           failed_now=f, total_records=store.count(name), skipped=away.get(name, ""))
            for name, (m, f) in now.items()]
