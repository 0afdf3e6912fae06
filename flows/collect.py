"""Collect flow: each task's program pool drawn on the source platform and measured on every local platform."""

from __future__ import annotations

import argparse

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from flows import _tvm_first  # noqa: F401  (must precede Prefect: see its docstring)
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows._tasks import retry_options, stopping_on_signals
from tcl.collect.collector import collect_pools, measure_task
from tcl.collect.settings import overlaid
from flows._params import load_checked_params
from tcl.data.store import RecordStore


@task(name="measure", cache_policy=NO_CACHE, task_run_name="{platform.name} {tvm_task.network}:{tvm_task.name}")
def measure(tvm_task, platform, source, store, measurer, cfg, seed, on_progress) -> tuple[int, int]:
    """One catalog task on one platform: the programs of its pool the platform lacks, batch by batch.

    Every batch is committed as it finishes, so a retry measures only what the failed try left."""
    return measure_task(tvm_task, platform, source, store, measurer, cfg, seed, on_progress)


@flow(name="collect", log_prints=True)
def collect_flow(params_path: str = "params.yaml", store_root: str = "data/records", progress: bool = True,
                 section: str | None = None) -> list:
    """Measure every catalog task's pool on every `collect.platforms` entry, resuming from the store
    (`section`: a collection of its own, e.g. gpu_collect: its collect keys and its store)."""
    params = load_checked_params(params_path)
    if section:
        params, store_root = overlaid(params, section)
    with stopping_on_signals():  # `kill -- -<pid>` or Ctrl-C: no retry starts the measuring processes again
        summaries = collect_pools(params, RecordStore(store_root), progress,
                                  measure=measure.with_options(**retry_options(params, "measure")))
    logger = get_run_logger()
    for s in summaries:
        if s.skipped:
            logger.warning("platform %s: not measured here: %s", s.platform, s.skipped)
        logger.info("platform %s: %d tasks, %d measured now (%d failed), %d were already there, %d records in store",
                    s.platform, s.tasks, s.measured_now, s.failed_now, s.already_had, s.total_records)
    return [vars(s) for s in summaries]


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=collect_flow.__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--store", default="data/records")
    ap.add_argument("--section", help="a collection of its own, e.g. gpu_collect (its store replaces --store)")
    args = ap.parse_args()
    collect_flow(args.params, args.store, section=args.section)
