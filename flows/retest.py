"""Retest flow: measure a fixed sample of the collected programs again, for the test-retest correlation."""

from __future__ import annotations

import argparse

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from flows import _tvm_first  # noqa: F401  (must precede Prefect: see its docstring)
from prefect import flow, get_run_logger

from tcl.collect.retest import retest_stage
from flows._params import load_checked_params


@flow(name="retest", log_prints=True)
def retest_flow(params_path: str = "params.yaml", store_root: str = "data/records",
                retest_root: str = "data/retest") -> dict:
    """Re-measure `retest.fraction` of every collected platform's programs (only those not re-measured yet)."""
    return retest_stage(load_checked_params(params_path), store_root, retest_root, log=get_run_logger().info)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=retest_flow.__doc__)
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args()
    retest_flow(args.params)
