"""Ingest-tuning flow: MetaSchedule tuning databases (`tuning_ingest.sources`) into the knowledge base."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from flows import _tvm_first  # noqa: F401  (must precede Prefect: see its docstring)
from prefect import flow, get_run_logger

from flows._params import load_checked_params
from tcl.data.store import atomic_write_bytes
from tcl.data.tuning_dbs import TuningIngestSettings, ingest_tuning_databases
from tcl.tracking.headline import write_headline

REPORT = Path("reports/tuning_ingest.json")  # a metric, not in the store: a rerun that finds nothing new changes no data


@flow(name="ingest-tuning", log_prints=True)
def ingest_tuning_flow(params_path: str = "params.yaml") -> list[dict]:
    """Every database under `tuning_ingest.sources`, as records of its platform, into `tuning_ingest.store`."""
    params = load_checked_params(params_path)
    cfg = TuningIngestSettings.from_params(params)
    store = Path(cfg.store)
    store.mkdir(parents=True, exist_ok=True)  # the stage's output exists even with no sources
    summaries = ingest_tuning_databases(params, store_root=store, known_roots=list(cfg.known_stores),
                                        quarantine_dir=cfg.quarantine_dir, chunk_size=int(cfg.chunk_size))
    logger = get_run_logger()
    for s in summaries:
        logger.info("platform %s: %d databases (%d unchanged), %d ingested now: %d records, %d already known, "
                    "%d quarantined; %d records in store%s", s.platform, s.databases, s.skipped, s.ingested,
                    s.records_now, s.duplicates, s.quarantined_now, s.total_records,
                    f"; no database yet under {s.missing_sources}" if s.missing_sources else "")
    result = [vars(s) for s in summaries]
    REPORT.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(REPORT, (json.dumps({s["platform"]: s for s in result}, indent=1, sort_keys=True) + "\n").encode())
    write_headline("ingest_tuning", REPORT, REPORT.parent / "metrics" / "ingest_tuning.json")
    return result


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=ingest_tuning_flow.__doc__)
    ap.add_argument("--params", default="params.yaml")
    ingest_tuning_flow(ap.parse_args().params)
