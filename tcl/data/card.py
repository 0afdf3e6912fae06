"""The dataset card: what a user reads before trusting a model trained on this data.

Computed from the record store itself (and the retest store): tasks by operator type
and network, programs and failures per platform, programs paired across platforms,
latency ranges, measurement time and load, the test-retest correlation, how far
apart the platforms' rankings are (tcl/data/agreement.py), bytes on disk and the DVC
data version. Written as `reports/dataset.md` and as flat JSON
metrics (`reports/dataset.json`) that `dvc metrics diff` can compare.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import yaml

from ..workloads.inputs import base_network
from .agreement import platform_agreement, render_agreement
from .footprint import RAW_OUTPUTS, footprint
from .store import RecordStore

COLUMNS = ["record_id", "platform", "task_key", "program_id", "op_type", "network", "median_sec",
           "error_code", "collected_at", "load_avg"]
# Gaps between two batches of one task longer than this are pauses (a stopped collection), not measuring.
MAX_BATCH_GAP_S = 600


def _frame(store: RecordStore) -> pd.DataFrame:
    frames = [store.read(p, columns=COLUMNS).to_pandas() for p in store.platforms()]
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame(columns=COLUMNS)


def _spearman(a: np.ndarray, b: np.ndarray) -> float:
    """Rank correlation (average ranks for ties); NaN with fewer than 3 pairs."""
    if len(a) < 3:
        return float("nan")
    ra, rb = pd.Series(a).rank().to_numpy(), pd.Series(b).rank().to_numpy()
    return float(np.corrcoef(ra, rb)[0, 1])


def measuring_hours(df: pd.DataFrame) -> float:
    """Sum over (platform, task) of the time between its first and last batch, pauses excluded."""
    total = 0.0
    for _, g in df.groupby(["platform", "task_key"]):
        stamps = pd.to_datetime(g["collected_at"].dropna(), utc=True).unique()
        t = np.sort(np.array([s.timestamp() for s in stamps]))
        gaps = np.diff(t)
        total += float(gaps[gaps <= MAX_BATCH_GAP_S].sum())
    return total / 3600


def retest_stats(df: pd.DataFrame, retest: pd.DataFrame) -> dict[str, dict[str, float]]:
    """Per platform: Spearman of latencies and of within-task labels, original vs re-measured."""
    ok = df[df["error_code"] == ""]
    best = ok.groupby(["platform", "task_key"])["median_sec"].transform("min")
    ok = ok.assign(label=best / ok["median_sec"])
    again = retest[retest["error_code"] == ""][["record_id", "median_sec"]]
    joined = ok.merge(again, on="record_id", suffixes=("", "_retest"))
    out = {}
    for platform, g in joined.groupby("platform"):
        ratio = g["median_sec_retest"] / g["median_sec"]
        out[platform] = {
            "n": int(len(g)),
            "spearman_latency": _spearman(g["median_sec"].to_numpy(), g["median_sec_retest"].to_numpy()),
            # the label a model learns, the task's best original latency / this program's latency,
            # with the re-measured latency in place of the original one
            "spearman_label": _spearman(g["label"].to_numpy(), (g["label"] / ratio).to_numpy()),
            "median_rel_diff": float(np.median(np.abs(ratio - 1))),
        }
    return out


def dvc_data_version(lock_path: Path, out: str = "data/records") -> str:
    """The md5 DVC recorded for the collect stage's output, or a note when it is not locked yet."""
    if not lock_path.exists():
        return "not locked yet"
    lock = yaml.safe_load(lock_path.read_text()) or {}
    for o in (lock.get("stages", {}).get("collect", {}) or {}).get("outs", []):
        if o.get("path") == out:
            return str(o.get("md5"))
    return "not locked yet"


def _bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file()) if path.exists() else 0


def platform_rows(df: pd.DataFrame) -> dict[str, dict[str, Any]]:
    """Per platform of a store's frame: programs, failures, programs per task, latency range, hours, load."""
    ok = df[df["error_code"] == ""]
    rows = {}
    for platform, g in df.groupby("platform"):
        per_task = g.groupby("task_key").size()
        ms = ok[ok["platform"] == platform]["median_sec"].to_numpy() * 1e3
        rows[platform] = {
            "programs": int(len(g)),
            "failed": int((g["error_code"] != "").sum()),
            "failed_by_code": {k: int(v) for k, v in g[g["error_code"] != ""]["error_code"].value_counts().items()},
            "programs_per_task": {"min": int(per_task.min()), "median": float(per_task.median()),
                                  "max": int(per_task.max())},
            "latency_ms": {q: float(np.percentile(ms, p)) if len(ms) else float("nan")
                           for q, p in (("min", 0), ("p5", 5), ("median", 50), ("p95", 95), ("max", 100))},
            "measuring_hours": round(measuring_hours(g), 3),
            "load_avg": {"median": float(g["load_avg"].median()), "p95": float(g["load_avg"].quantile(0.95))},
        }
    return rows


def dataset_card(records_root: str | Path, retest_root: str | Path, lock_path: str | Path,
                 remote_dir: str | Path | None = None, repo_dir: str | Path | None = None,
                 other_stores: list[str | Path] = ()) -> dict[str, Any]:
    """Every figure of the card, as one JSON-able dict (`repo_dir`: add the repository's footprint;
    `other_stores`: collections of their own, e.g. params gpu_collect's, counted beside the main store)."""
    store = RecordStore(records_root)
    df = _frame(store)
    tasks = df.drop_duplicates("task_key")
    members: dict[str, dict[str, int]] = {}
    for platform in store.platforms():
        for row in store.tasks(platform):
            members[row["task_key"]] = row.get("networks") or {row["network"]: row["weight"]}
    measured = set(tasks["task_key"])
    instances = sorted({i for k in measured for i in members.get(k, {})})
    card: dict[str, Any] = {
        "tasks": int(len(tasks)),
        "tasks_by_op_type": {k: int(v) for k, v in tasks["op_type"].value_counts().sort_index().items()},
        "tasks_by_network": {n: int(sum(1 for k in measured if any(base_network(i) == n for i in members.get(k, {}))))
                             for n in sorted({base_network(i) for i in instances})},
        "workload_instances": instances,
        "platforms": {},
    }
    ok = df[df["error_code"] == ""]
    card["platforms"] = platform_rows(df)
    card["other_stores"] = {}
    for root in other_stores:
        other = _frame(RecordStore(root))  # a store not there yet reads as no records
        card["other_stores"][str(root)] = {"tasks": int(other["task_key"].nunique()), "platforms": platform_rows(other)}
    card["programs_total"] = int(len(df)) + sum(p["programs"] for o in card["other_stores"].values()
                                                 for p in o["platforms"].values())
    platforms = sorted(card["platforms"])
    ran = ok.groupby("program_id")["platform"].nunique()
    card["paired_programs"] = int((ran == len(platforms)).sum()) if platforms else 0
    card["agreement"] = platform_agreement(df)
    retest_store = RecordStore(retest_root)
    card["retest"] = retest_stats(df, _frame(retest_store)) if retest_store.platforms() else {}
    card["bytes"] = {"records": _bytes(Path(records_root)), "retest": _bytes(Path(retest_root))}
    if remote_dir is not None:
        card["bytes"]["dvc_remote"] = _bytes(Path(remote_dir))
    card["dvc_data_version"] = dvc_data_version(Path(lock_path))
    if repo_dir is not None:
        card["repository"] = footprint(records_root, lock_path, remote_dir, repo_dir)
    return card


def render_markdown(card: dict[str, Any]) -> str:
    """The card as Markdown: a few lines and tables."""
    lines = ["# Dataset card", "",
             f"{card['tasks']} tasks from {len(card['tasks_by_network'])} networks "
             f"({len(card['workload_instances'])} workload instances), measured on {len(card['platforms'])} "
             f"platforms; {card['paired_programs']} programs ran on every platform (paired labels). "
             f"DVC data version `{card['dvc_data_version']}`.", "",
             "## Tasks by operator type", "", "| op type | tasks |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in card["tasks_by_op_type"].items()]
    lines += ["", "## Tasks by network", "", "| network | tasks |", "|---|---|"]
    lines += [f"| {k} | {v} |" for k, v in card["tasks_by_network"].items()]
    lines += ["", f"Workload instances: {', '.join(card['workload_instances'])}.", "",
              "## Platforms", "",
              "| platform | programs | failed | programs/task min-median-max | latency ms min / p5 / median / p95 / max "
              "| measuring hours | load avg median (p95) |", "|---|---|---|---|---|---|---|"]
    others = card.get("other_stores") or {}
    rows = [*card["platforms"].items(), *((f"{name} ({root})", p) for root, o in others.items()
                                          for name, p in o["platforms"].items())]
    for name, p in rows:
        lat, ppt = p["latency_ms"], p["programs_per_task"]
        lines.append(f"| {name} | {p['programs']} | {p['failed']} {p['failed_by_code'] or ''} "
                     f"| {ppt['min']}-{ppt['median']:g}-{ppt['max']} "
                     f"| {lat['min']:.3f} / {lat['p5']:.3f} / {lat['median']:.3f} / {lat['p95']:.2f} / {lat['max']:.2f} "
                     f"| {p['measuring_hours']:.2f} | {p['load_avg']['median']:.2f} ({p['load_avg']['p95']:.2f}) |")
    if others:
        lines += ["", f"{card['programs_total']:,} programs in all: "
                  f"{sum(p['programs'] for p in card['platforms'].values()):,} in the main store, "
                  + ", ".join(f"{sum(p['programs'] for p in o['platforms'].values()):,} on {o['tasks']} tasks in "
                              f"`{root}` (a collection of its own)" for root, o in others.items()) + "."]
    lines += ["", "## Platforms against each other", "", *render_agreement(card.get("agreement") or {})]
    lines += ["", "## Test-retest", ""]
    if card["retest"]:
        lines += ["The same programs measured again later (`retest` stage). Spearman of the latencies, and of the "
                  "label a model learns (task's best latency / latency).", "",
                  "| platform | programs | Spearman latency | Spearman label | median abs(retest/original - 1) |",
                  "|---|---|---|---|---|"]
        lines += [f"| {k} | {r['n']} | {r['spearman_latency']:.4f} | {r['spearman_label']:.4f} "
                  f"| {r['median_rel_diff']:.4f} |" for k, r in card["retest"].items()]
    else:
        lines.append("Not measured yet (run the `retest` stage).")
    b = card["bytes"]
    lines += ["", "## On disk", "", f"records {b['records'] / 1e6:.1f} MB, retest {b['retest'] / 1e6:.2f} MB"
              + (f", DVC remote {b['dvc_remote'] / 1e6:.1f} MB" if "dvc_remote" in b else "") + "."]
    if "repository" in card:
        lines += render_repository(card["repository"])
    return "\n".join(lines) + "\n"


def render_repository(repo: dict[str, Any]) -> list[str]:
    """The "Repository" section: clone size and time, the remote by output, growth per 10,000 programs."""
    per, git = repo["bytes_per_10k_programs"], repo["git"]
    lines = ["", "## Repository", ""]
    if git:
        lines.append(f"Packed git repository {git['pack_bytes'] / 1e6:.1f} MB; a fresh `git clone --no-local` "
                     f"took {git.get('clone_seconds', float('nan')):.1f} s and is "
                     f"{git.get('clone_bytes', 0) / 1e6:.1f} MB on disk (working tree + .git), before `dvc pull`.")
    lines += ["", f"10,000 more programs add {per['records_per_platform'] / 1e6:.2f} MB of records per platform that "
              f"measures them, plus {per['pool'] / 1e6:.2f} MB of pool once (shared by every platform).", "",
              f"The DVC remote in the repository: {repo['remote_raw_bytes'] / 1e6:.1f} MB of measurements "
              f"({', '.join(RAW_OUTPUTS)}: always pushed), {repo['remote_derived_bytes'] / 1e6:.1f} MB of derived "
              "artifacts (recomputed by `make run` within its budget).", "",
              "| output | MB in the remote |", "|---|---|"]
    lines += [f"| {k} | {v / 1e6:.2f} |" for k, v in repo["remote_by_output"].items()]
    return lines


def flat_metrics(card: dict[str, Any]) -> dict[str, Any]:
    """The card's numbers without the long lists, for `dvc metrics`."""
    return {k: v for k, v in card.items() if k != "workload_instances"}


def write_card(card: dict[str, Any], markdown_path: str | Path, json_path: str | Path) -> None:
    for path in (Path(markdown_path), Path(json_path)):
        path.parent.mkdir(parents=True, exist_ok=True)
    Path(markdown_path).write_text(render_markdown(card))
    Path(json_path).write_text(json.dumps(flat_metrics(card), indent=2, default=float))
