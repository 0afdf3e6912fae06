"""Run records of the stages that log a run but register nothing: validate, sample, tune."""

from __future__ import annotations

import csv
import json
import math
from pathlib import Path

from .lock import Lock
from ..tracking.run_record import RunRecord, record_key


def validate_records(root: Path, lock: Lock) -> list[RunRecord]:
    records = []
    for platform in lock.instances("validate"):
        report = root / "reports" / "validation" / f"{platform}.json"
        ge = root / "reports" / "validation" / f"{platform}.ge.json"
        if not report.exists():
            continue
        s = json.loads(report.read_text())
        cfg = lock.params(f"validate@{platform}").get("validate") or {}
        run = RunRecord(record_key(f"validate-{platform}", report), f"validate-{platform}",
                        {"stage": "validate", "platform": platform, "passed": str(s.get("passed")).lower()})
        run.params = {**{k: cfg[k] for k in ("max_failed_share", "min_steps", "max_steps", "max_mean_sec",
                                             "batch_rows") if k in cfg}, "parts": s.get("parts", "")}
        run.add_metrics({k: s.get(k) for k in ("rows", "failed_rows", "failed_share")})
        run.artifacts = [(str(p.relative_to(root)), "validation") for p in (report, ge) if p.exists()]
        records.append(run)
    return records


def sample_records(root: Path, lock: Lock) -> list[RunRecord]:
    records = []
    for platform in lock.instances("sample"):
        report = root / "reports" / "sample" / f"{platform}.json"
        if not report.exists():
            continue
        s = json.loads(report.read_text())
        run = RunRecord(record_key(f"sample-{platform}", report), f"sample-{platform}",
                        {"stage": "sample", "platform": platform})
        run.params = {k: s[k] for k in ("mode", "strategy", "rate", "rounds", "pool_size") if k in s}
        run.add_metrics({k: s.get(k) for k in ("picked", "measured_now", "seconds")})
        run.artifacts = [(str(report.relative_to(root)), None)]
        records.append(run)
    return records


def tune_records(root: Path, lock: Lock) -> list[RunRecord]:
    records = []
    for platform in lock.instances("tune"):
        table_path = root / "reports" / "tune" / f"{platform}.json"
        curves_path = root / "reports" / "tune" / platform / "curves.csv"
        if not table_path.exists():
            continue
        table = json.loads(table_path.read_text())
        cfg = lock.params(f"tune@{platform}")
        tune = cfg.get("tune") or {}
        network = Path(str(tune.get("network", ""))).stem
        name = f"tune-{network}-{platform}"
        parent = RunRecord(record_key(name, table_path), name, {"stage": "tune", "platform": platform,
                                                                 "network": network})
        parent.params = {"network": network, "platform": platform, "trials": tune.get("trials"),
                         "num_trials_per_iter": tune.get("num_trials_per_iter"), "seed": cfg.get("seed", 0),
                         "cost_models": ",".join(table)}
        parent.artifacts = [(str(p.relative_to(root)), None)
                            for p in (root / "reports" / "tune" / f"{platform}.png", table_path) if p.exists()]
        curves = _curves(curves_path)
        for cost_model, row in table.items():
            child = RunRecord(f"{parent.key}/{cost_model}", cost_model,
                              {"stage": "tune", "cost_model": cost_model, "platform": platform})
            pin = row.get("model") if isinstance(row.get("model"), dict) else {}
            if "registered_model" in pin or "uri" in pin and pin.get("uri") != "tvm built-in":
                child.params = {f"model_{k}": v for k, v in pin.items()}
            for trial, ms in curves.get(cost_model, []):
                child.add_metrics({"estimated_latency_ms": ms}, trial)
            child.add_metrics({"tuned_latency_ms": row.get("tuned_ms"), "reference_latency_ms": row.get("reference_ms"),
                               "max_abs_diff": row.get("max_abs_diff"), "wall_seconds": row.get("wall_s"),
                               "cost_model_share": row.get("cost_model_share")})
            tuned = root / "reports" / "tune" / platform / cost_model
            if tuned.is_dir():
                child.artifacts = [(str(tuned.relative_to(root)), "tuned")]
            parent.children.append(child)
        records.append(parent)
    return records


def _curves(path: Path) -> dict[str, list[tuple[int, float]]]:
    out: dict[str, list[tuple[int, float]]] = {}
    if not path.exists():
        return out
    with path.open() as f:
        for row in csv.DictReader(f):
            ms = float(row["estimated_ms"])
            if math.isfinite(ms):
                out.setdefault(row["cost_model"], []).append((int(row["trial"]), ms))
    return out
