"""How far apart two platforms are, read from the programs both measured.

A new CPU is worth measuring only if its rankings differ from the knowledge base's. For every
ordered pair (source, target) of platforms and every task both measured with enough common
programs, two figures: the Spearman correlation of the latencies, and "pick on the source, run
on the target" -- the target's best latency over the latency there of the program that was best
on the source. The second is the top-1 (mean per task) that a model reproducing the source's
labels exactly would score zero-shot on the target. A learned model of the source is not bound
by it: on Zen 3 the AVX-512 platforms' models rank better than their labels do (docs/results.md,
"A Zen 3 EPYC").
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

COLUMNS = ["platform", "task_key", "program_id", "median_sec", "error_code"]
MIN_COMMON_PROGRAMS = 8  # fewer common programs in a task: too few for a rank correlation or a pick


def _pair_frame(a: pd.DataFrame, b: pd.DataFrame, min_common: int) -> pd.DataFrame:
    """The programs both platforms measured, one row each: task, source and target latency."""
    both = a.merge(b, on=["task_key", "program_id"], suffixes=("_src", "_dst"))
    sizes = both.groupby("task_key")["program_id"].transform("size")
    return both[sizes >= min_common]


def _per_task(both: pd.DataFrame) -> pd.DataFrame:
    """Per task: Spearman of the two latencies and the pick-on-source top-1 on the target."""
    g = both.groupby("task_key")
    r_src = g["median_sec_src"].rank()
    r_dst = g["median_sec_dst"].rank()
    ranks = pd.DataFrame({"task_key": both["task_key"], "a": r_src, "b": r_dst})
    spearman = ranks.groupby("task_key")[["a", "b"]].corr().xs("a", level=1)["b"]
    picked = both.loc[g["median_sec_src"].idxmin(), ["task_key", "median_sec_dst"]].set_index("task_key")
    best = g["median_sec_dst"].min()
    return pd.DataFrame({"spearman": spearman, "pick_top1": best / picked["median_sec_dst"]})


def platform_agreement(records: pd.DataFrame, min_common: int = MIN_COMMON_PROGRAMS,
                       targets: list[str] | None = None) -> dict[str, Any]:
    """{source: {target: {tasks, spearman (median over tasks), pick_top1 (mean over tasks)}}} for every
    ordered pair of the successful records' platforms (into `targets` only, when given) that share a
    task with `min_common` programs."""
    ok = records[(records["error_code"] == "") & (records["median_sec"] > 0)]
    # one frame per platform, split once: every pair reads two of them
    frames = {p: g[["task_key", "program_id", "median_sec"]] for p, g in ok.groupby("platform")}
    platforms = sorted(frames)
    out: dict[str, Any] = {}
    for source in platforms:
        for target in platforms if targets is None else targets:
            if source == target or target not in frames:
                continue
            both = _pair_frame(frames[source], frames[target], min_common)
            if both.empty:
                continue
            tasks = _per_task(both)
            out.setdefault(source, {})[target] = {
                "tasks": int(len(tasks)),
                "spearman": float(np.nanmedian(tasks["spearman"])) if tasks["spearman"].notna().any() else float("nan"),
                "pick_top1": float(tasks["pick_top1"].mean()),
            }
    return out


def agreement_into(records_root: str | Path, target: str, min_common: int = MIN_COMMON_PROGRAMS
                   ) -> dict[str, dict[str, float]]:
    """{source: {tasks, spearman, pick_top1}} of every platform of the record store at `records_root`
    against `target`'s measurements there; empty when the store has none for `target`."""
    from .store import RecordStore

    store = RecordStore(records_root)
    platforms = store.platforms()
    if target not in platforms:
        return {}
    records = pd.concat([store.read(p, columns=COLUMNS).to_pandas() for p in platforms], ignore_index=True)
    return {src: cells[target] for src, cells in platform_agreement(records, min_common, [target]).items()}


def render_agreement(agreement: dict[str, Any]) -> list[str]:
    """Markdown: a matrix of pick-on-source top-1 (rows: source, columns: target), Spearman beside."""
    platforms = sorted({p for src, cells in agreement.items() for p in (src, *cells)})
    if not platforms:
        return ["No two platforms share a task with enough common programs yet."]
    lines = ["Rows: the platform whose best program is picked; columns: the platform it runs on. Each cell: "
             "the target's best latency / the picked program's latency there (mean over the tasks both measured "
             f"with >= {MIN_COMMON_PROGRAMS} common programs; 1 = the same best program), then the median per-task "
             "Spearman of the latencies, then the number of tasks. A model that reproduced the row platform's labels "
             "exactly would score this top-1 on the column platform.", "",
             "| source \\ target | " + " | ".join(platforms) + " |", "|---" * (len(platforms) + 1) + "|"]
    for src in platforms:
        cells = []
        for dst in platforms:
            c = agreement.get(src, {}).get(dst)
            cells.append("-" if c is None else f"{c['pick_top1']:.3f} / {c['spearman']:.2f} / {c['tasks']}")
        lines.append(f"| {src} | " + " | ".join(cells) + " |")
    return lines
