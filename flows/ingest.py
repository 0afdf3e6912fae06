"""Ingest flow: stream a Tenset/TCL directory of Ansor logs into the record store, resumably."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from prefect import flow, get_run_logger

from tcl.compute import run_units
from flows._params import load_checked_params
from tcl.data.ingest import IngestSettings, ingest_ansor_dir
from tcl.data.store import atomic_write_bytes
from tcl.platforms import get_platform

STATUS = "_ingest_status.json"


@flow(name="ingest", log_prints=True)
def ingest_flow(params_path: str = "params.yaml", progress: bool = True) -> dict:
    """Ingest `ingest.tenset_dir` for `ingest.platform`; a clean no-op when no directory is set.
    Files run where `compute.runner` says (in this process, or one per Dask task)."""
    params = load_checked_params(params_path)
    cfg = IngestSettings.from_params(params)
    store = Path(cfg.store)
    store.mkdir(parents=True, exist_ok=True)  # the stage's output exists even when there is nothing to do
    logger = get_run_logger()
    if not cfg.tenset_dir:
        logger.info("ingest.tenset_dir is not set in %s: nothing to ingest, skipping", params_path)
        result = {"skipped": True, "reason": "ingest.tenset_dir is empty"}
    else:
        platform = get_platform(params, cfg.platform).name  # must be a declared platform
        summary = run_units(params, "ingest", lambda units: ingest_ansor_dir(
            cfg.tenset_dir, platform=platform, store_root=store,
            quarantine_dir=cfg.quarantine_dir or str(store / "_quarantine"),
            task_weights_path=cfg.task_weights or None,
            chunk_size=int(cfg.chunk_size), progress=progress, units=units))
        logger.info("platform %s: %d files, %d skipped (already ingested), %d ingested now with %d records; "
                    "%d lines quarantined (%s); %d records in store",
                    platform, summary.files, summary.skipped, summary.ingested, summary.records_now,
                    summary.quarantined_now, summary.quarantine.get("path"), summary.total_records)
        result = {"skipped": False, **vars(summary)}
    atomic_write_bytes(store / STATUS, (json.dumps(result, indent=1, sort_keys=True) + "\n").encode())
    return result


def main() -> None:
    ap = argparse.ArgumentParser(description=ingest_flow.__doc__)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--no-progress", action="store_true")
    args = ap.parse_args()
    ingest_flow(args.params, progress=not args.no_progress)


if __name__ == "__main__":
    main()
