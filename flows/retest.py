"""Retest flow: measure a fixed sample of the collected programs again, for the test-retest correlation."""

from __future__ import annotations

import argparse

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from flows import _tvm_first  # noqa: F401  (must precede Prefect: see its docstring)
from prefect import flow, get_run_logger
from tqdm.auto import tqdm

from tcl.collect.collector import LazyMeasurers
from tcl.collect.measure import pin_to_cpus
from tcl.collect.retest import retest_platform
from tcl.config import load_params
from tcl.data.store import RecordStore
from tcl.platforms import get_platform, host_mismatch


@flow(name="retest", log_prints=True)
def retest_flow(params_path: str = "params.yaml", store_root: str = "data/records",
                retest_root: str = "data/retest") -> dict:
    """Re-measure `retest.fraction` of every collected platform's programs (only those not re-measured yet)."""
    params = load_params(params_path)
    cfg = dict(params["collect"], **params["retest"])
    pin_to_cpus(tuple(cfg.get("search_cpus") or ()))
    store, retest = RecordStore(store_root), RecordStore(retest_root)
    measurers = LazyMeasurers(cfg)
    out = {}
    with retest.exclusive_writer("retest"):
        for name in params["collect"]["platforms"]:
            platform = get_platform(params, name)
            reason = host_mismatch(platform)
            if reason:
                get_run_logger().warning("%s: not re-measured here", reason)
                out[name] = {"measured_now": 0, "skipped": reason}
                continue
            with tqdm(desc=f"retest {name}", unit="program") as bar:
                measured, sampled = retest_platform(platform, store, retest, measurers.get, cfg, bar.update)
            get_run_logger().info("%s: %d of %d sampled programs measured again now", name, measured, sampled)
            out[name] = {"measured_now": measured, "sampled": sampled}
    return out


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=retest_flow.__doc__)
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args()
    retest_flow(args.params)
