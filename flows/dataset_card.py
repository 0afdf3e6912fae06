"""Dataset card flow: reports/dataset.md and reports/dataset.json from the record and retest stores."""

from __future__ import annotations

import argparse

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from prefect import flow, get_run_logger

from flows._params import load_checked_params
from tcl.data.card import dataset_card, write_card
from tcl.tracking.headline import write_headline


@flow(name="dataset-card", log_prints=True)
def dataset_card_flow(records: str = "data/records", retest: str = "data/retest", lock: str = "dvc.lock",
                      remote: str = "dvc-store") -> dict:
    """Count, range and test-retest figures of the dataset, as Markdown and DVC metrics (a GPU's collection,
    params gpu_collect.store, counted beside the main store)."""
    gpu_store = (load_checked_params("params.yaml").get("gpu_collect") or {}).get("store")
    card = dataset_card(records, retest, lock, remote, repo_dir=".", other_stores=[gpu_store] if gpu_store else [])
    write_card(card, "reports/dataset.md", "reports/dataset.json")
    write_headline("dataset_card", "reports/dataset.json", "reports/metrics/dataset_card.json")
    get_run_logger().info("%d tasks, %d paired programs; platforms: %s; retest: %s", card["tasks"],
                          card["paired_programs"], {k: v["programs"] for k, v in card["platforms"].items()},
                          {k: round(v["spearman_latency"], 4) for k, v in card["retest"].items()})
    return card


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=dataset_card_flow.__doc__)
    ap.add_argument("--records", default="data/records")
    ap.add_argument("--retest", default="data/retest")
    args = ap.parse_args()
    dataset_card_flow(args.records, args.retest)
