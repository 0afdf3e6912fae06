"""Test-retest: measure a fixed sample of already-measured programs again, later.

How far can a latency label be trusted on this machine? The same program, rebuilt and
timed again at another time (other load, other thermal state), should rank the same.
The sample is a fixed share of program ids, chosen by hash: the same programs on
every platform, and a sample that only grows as the dataset grows, so a resumed or
extended retest measures only what it has not measured yet. Re-measurements go to a
store of their own under the original record ids, so they join one to one.
"""

from __future__ import annotations

import hashlib
from typing import Any, Callable

import pyarrow as pa
import pyarrow.compute as pc

from ..data.store import RecordStore
from ..platforms import Platform
from .catalog import load_tasks_by_key
from .collector import replay_task


def in_sample(program_id: str, fraction: float, seed: int) -> bool:
    """Whether a program belongs to the retest sample (a hash threshold: stable, seeded)."""
    digest = hashlib.sha1(f"{seed}/{program_id}".encode()).digest()
    return int.from_bytes(digest[:8], "big") < fraction * 2**64


def sample_programs(table: pa.Table, fraction: float, seed: int) -> pa.Table:
    """The rows of programs that ran and fall in the sample."""
    ok = pc.equal(pc.fill_null(table.column("error_code"), "x"), "")
    ran = table.filter(ok)
    keep = [in_sample(p, fraction, seed) for p in ran.column("program_id").to_pylist()]
    return ran.filter(pa.array(keep, pa.bool_()))


def retest_platform(platform: Platform, store: RecordStore, retest: RecordStore, measurer_for: Callable,
                    cfg: dict[str, Any], on_progress: Callable[[int], None]) -> tuple[int, int]:
    """Re-measure the platform's sampled programs not re-measured yet; returns (measured now, total sampled)."""
    table = store.read(platform.name, columns=["task_key", "program", "program_id", "error_code"])
    sample = sample_programs(table, float(cfg["fraction"]), int(cfg.get("seed", 0)))
    done = set(retest.read(platform.name, columns=["program"]).column("program").to_pylist())
    tasks = load_tasks_by_key(store, platform.name)
    measured = 0
    by_task: dict[str, list[str]] = {}
    for key, program in zip(sample.column("task_key").to_pylist(), sample.column("program").to_pylist()):
        if program not in done:
            by_task.setdefault(key, []).append(program)
    for key, programs in by_task.items():
        m, _ = replay_task(tasks[key], platform, programs, retest, measurer_for(platform),
                           int(cfg.get("batch_size", 16)), on_progress)
        measured += m
    return measured, sample.num_rows


def retest_stage(params: dict[str, Any], store_root: str = "data/records", retest_root: str = "data/retest",
                 log: Callable[[str], None] = print) -> dict[str, dict]:
    """The retest stage: every `collect.platforms` entry this host can time (others are skipped with the
    reason), measured on `collect.runner`'s cores while the search stays on `collect.search_cpus`."""
    from tqdm.auto import tqdm

    from ..platforms import get_platform, host_mismatch
    from .collector import LazyMeasurers
    from .measure import pinned_to

    cfg = dict(params["collect"], **params["retest"])
    store, retest = RecordStore(store_root), RecordStore(retest_root)
    measurers = LazyMeasurers(cfg)
    out: dict[str, dict] = {}
    with retest.exclusive_writer("retest"), pinned_to(tuple(cfg.get("search_cpus") or ())):
        for name in params["collect"]["platforms"]:
            platform = get_platform(params, name)
            reason = host_mismatch(platform)
            if reason:
                log(f"{reason}: not re-measured here")
                out[name] = {"measured_now": 0, "skipped": reason}
                continue
            with tqdm(desc=f"retest {name}", unit="program") as bar:
                measured, sampled = retest_platform(platform, store, retest, measurers.get, cfg, bar.update)
            log(f"{name}: {measured} of {sampled} sampled programs measured again now")
            out[name] = {"measured_now": measured, "sampled": sampled}
    return out
