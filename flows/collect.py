"""Collect flow: each task's program pool drawn on the source platform and measured on every local platform."""

from __future__ import annotations

import argparse

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from flows import _tvm_first  # noqa: F401  (must precede Prefect: see its docstring)
from prefect import flow, get_run_logger

from tcl.collect.collector import collect_pools
from tcl.config import load_params
from tcl.data.store import RecordStore


@flow(name="collect", log_prints=True)
def collect_flow(params_path: str = "params.yaml", store_root: str = "data/records", progress: bool = True) -> list:
    """Measure every catalog task's pool on every `collect.platforms` entry, resuming from the store."""
    params = load_params(params_path)
    summaries = collect_pools(params, RecordStore(store_root), progress)
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
    args = ap.parse_args()
    collect_flow(args.params, args.store)
