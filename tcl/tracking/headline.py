"""The few figures of each stage that `dvc metrics show` lists.

DVC tabulates the union of every metrics file's keys, so declaring the stages' full reports
(every model's scores, every expectation's result, every platform's latency percentiles) as
metrics made a table hundreds of columns wide. The full reports stay plain outputs; each stage
also writes reports/metrics/<stage>[-<item>].json (its dvc.yaml metrics) with the handful of keys
below, named so that stages share columns (`<model>.test_top1` for train and transfer).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

from ..data.store import atomic_write_bytes

def _per_entry(report: dict, field: str, column: str) -> dict[str, Any]:
    """{"<key>.<column>": report[key][field]} for every entry of `report` that has `field`."""
    return {f"{key}.{column}": entry[field] for key, entry in report.items()
            if isinstance(entry, dict) and field in entry}


HEADLINES: dict[str, Callable[[dict], dict[str, Any]]] = {
    "ingest_tuning": lambda r: {"records": sum(e["total_records"] for e in r.values()),
                                "quarantined": sum(e["quarantined_now"] for e in r.values())},
    "validate": lambda r: {"rows": r["valid_rows"], "failed_share": r["failed_share"]},
    "dataset_card": lambda r: {"tasks": r["tasks"], "programs": sum(p["programs"] for p in r["platforms"].values())},
    "sample": lambda r: {"picked": r["picked"], "pool_size": r["pool_size"]},
    "train": lambda r: _per_entry(r, "test_top1_ratio_of_sums", "test_top1"),
    "transfer": lambda r: {f"{r['method']}.test_top1": r["test_top1_ratio_of_sums"]},
    "tune": lambda r: _per_entry(r, "tuned_ms", "tuned_ms"),
}


def write_headline(stage: str, report_path: str | Path, path: str | Path) -> Path:
    """The headline figures of the stage's full report at `report_path`, written to `path`."""
    pick, report = HEADLINES[stage], json.loads(Path(report_path).read_text())
    try:
        figures = pick(report)
    except KeyError as e:
        raise KeyError(f"{report_path}: no field {e} for the {stage} stage's headline metrics") from e
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, (json.dumps(figures, indent=1, sort_keys=True) + "\n").encode())
    return path
