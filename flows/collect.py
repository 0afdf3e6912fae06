"""Collect flow: measure MetaSchedule candidates of the configured networks on one platform."""

from __future__ import annotations

import argparse

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from flows import _tvm_first  # noqa: F401  (must precede Prefect: see its docstring)
from prefect import flow, get_run_logger

from tcl.collect.collector import collect_platform
from tcl.config import load_params
from tcl.data.store import RecordStore
from tcl.platforms import get_platform


@flow(name="collect", log_prints=True)
def collect_flow(platform: str, params_path: str = "params.yaml", store_root: str = "data/records",
                 progress: bool = True) -> dict:
    """Measure every selected task on `platform`, resuming from what the store already holds."""
    params = load_params(params_path)
    summary = collect_platform(get_platform(params, platform), params, RecordStore(store_root), progress)
    get_run_logger().info(
        "platform %s: %d tasks, %d measured now (%d failed), %d were already there, %d records in store",
        summary.platform, summary.tasks, summary.measured_now, summary.failed_now,
        summary.already_had, summary.total_records)
    return vars(summary)


def main() -> None:
    ap = argparse.ArgumentParser(description=collect_flow.__doc__)
    ap.add_argument("--platform", required=True)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--store", default="data/records")
    args = ap.parse_args()
    collect_flow(args.platform, args.params, args.store)


if __name__ == "__main__":
    main()
