"""Collect flow: measure MetaSchedule candidates of the configured networks on one platform."""

from __future__ import annotations

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from flows import _tvm_first  # noqa: F401  (must precede Prefect: see its docstring)
from flows._cli import run_platform_flow
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


if __name__ == "__main__":
    run_platform_flow(collect_flow)
