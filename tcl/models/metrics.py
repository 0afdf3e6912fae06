"""Dataset-based cost-model metrics: top-k score (TCL eq. 12, TLP §6.1) and pairwise accuracy.

Top-k asks what a tuner cares about: if it measured only the k programs the model ranks
highest for each task, how close would it get to the best program measured for that
task, weighted by how often the task (subgraph) occurs in its network?

Two conventions exist and give different numbers, so both are named explicitly:
`topk_ratio_of_sums` pools all held-out networks' tasks into one ratio (TCL eq. 12 and
TLP's formula read literally); `topk_mean_per_network` averages the per-network ratios
(Tenset's evaluation script).

Failed programs (latency NaN/inf) are not candidates: top-k ranks the programs that were
measured, as Tenset's and TLP's datasets hold successful measurements only. Counting a
failed pick as infinite latency instead would let a single one (8 of 14,698 programs
failed on zen4-avx512-1c) turn the pooled ratio of every held-out network into 0.
Tasks with no successful program at all cannot be scored; they are left out with a warning.
A task with at most k measured programs ranks nothing at top-k (every scorer, random included,
gets 1.0 there) and is left out too: on the CPU platforms' held-out splits five such tasks (one
distinct program each, elementwise) carried 17-26% of eq. 12's weight.
"""

from __future__ import annotations

import warnings
from typing import Mapping

import numpy as np
import pandas as pd

COLUMNS = ("network", "task_key", "task_weight", "latency", "score")


def _as_frame(data: pd.DataFrame | Mapping) -> pd.DataFrame:
    df = data if isinstance(data, pd.DataFrame) else pd.DataFrame(dict(data))
    missing = [c for c in COLUMNS if c not in df.columns]
    if missing:
        raise ValueError(f"top-k input lacks columns {missing}; needs {list(COLUMNS)}")
    if df[["network", "task_key", "task_weight"]].isna().any().any():
        raise ValueError("top-k input has missing network, task_key or task_weight values")
    return df


def topk_table(data: pd.DataFrame | Mapping, k: int = 1) -> pd.DataFrame:
    """One row per (network, task_key) with more than k measured programs: task_weight, best_latency,
    topk_latency, n_programs.

    Picks are the k highest-scored measured programs of the task (ties keep input order; NaN
    scores last).
    """
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    df = _as_frame(data)
    lat = pd.to_numeric(df["latency"], errors="coerce").to_numpy(dtype=float)
    keys = ["network", "task_key"]
    all_tasks = df[keys].drop_duplicates()
    measured = np.isfinite(lat) & (lat > 0)
    df, lat = df.loc[measured], lat[measured]
    score = pd.to_numeric(df["score"], errors="coerce").to_numpy(dtype=float)
    score = np.where(np.isnan(score), -np.inf, score)
    net_code, _ = pd.factorize(df["network"], sort=True)
    task_code, _ = pd.factorize(df["task_key"], sort=True)
    order = np.lexsort((-score, task_code, net_code))  # stable: ties keep input order
    frame = pd.DataFrame({
        "network": df["network"].to_numpy()[order],
        "task_key": df["task_key"].to_numpy()[order],
        "task_weight": pd.to_numeric(df["task_weight"]).to_numpy(dtype=float)[order],
        "latency": lat[order],
    })
    rank = frame.groupby(keys, sort=False).cumcount().to_numpy()
    frame["pick_latency"] = np.where(rank < k, frame["latency"], np.inf)
    table = frame.groupby(keys, sort=True).agg(
        task_weight=("task_weight", "first"),
        weight_max=("task_weight", "max"),
        weight_min=("task_weight", "min"),
        best_latency=("latency", "min"),
        topk_latency=("pick_latency", "min"),
        n_programs=("latency", "size"),
    ).reset_index()
    bad = table["weight_max"] != table["weight_min"]
    if bad.any():
        raise ValueError(f"task_weight differs within (network, task_key) groups: "
                         f"{table.loc[bad, keys].to_dict('records')[:5]}")
    if len(all_tasks) > len(table):
        unscorable = all_tasks.merge(table[keys], on=keys, how="left", indicator=True)
        unscorable = unscorable[unscorable["_merge"] == "left_only"][keys]
        warnings.warn(f"top-k: {len(unscorable)} task(s) have no successful program and "
                      f"are left out: {unscorable.to_dict('records')[:5]}", stacklevel=2)
    ranked = table["n_programs"] > k  # all of a smaller task's programs are its top k: nothing ranked
    return table.loc[ranked].drop(columns=["weight_max", "weight_min"]).reset_index(drop=True)


def _weighted_sums(table: pd.DataFrame) -> pd.DataFrame:
    """Per-row numerator (weight * best) and denominator (weight * best of the top k)."""
    w = table["task_weight"].to_numpy()
    return pd.DataFrame({"network": table["network"].to_numpy(),
                         "num": w * table["best_latency"].to_numpy(),
                         "den": w * table["topk_latency"].to_numpy()})


def topk_per_network(data: pd.DataFrame | Mapping, k: int = 1) -> pd.Series:
    """Each network's score sum_s w*best / sum_s w*best_of_topk, indexed by network."""
    sums = _weighted_sums(topk_table(data, k)).groupby("network", sort=True)[["num", "den"]].sum()
    return (sums["num"] / sums["den"]).rename(f"top{k}")


def topk_ratio_of_sums(data: pd.DataFrame | Mapping, k: int = 1) -> float:
    """TCL eq. 12: sums over every (network, task) of all held-out networks, then one ratio."""
    sums = _weighted_sums(topk_table(data, k))
    return float(sums["num"].sum() / sums["den"].sum()) if len(sums) else float("nan")


def topk_mean_per_network(data: pd.DataFrame | Mapping, k: int = 1) -> float:
    """Tenset's convention: the unweighted mean of the per-network top-k scores."""
    per_net = topk_per_network(data, k)
    return float(per_net.mean()) if len(per_net) else float("nan")


def pairwise_accuracy(scores, labels, groups, chunk: int = 1024) -> float:
    """Fraction of same-group pairs with different labels that the scores order correctly.

    Labels are higher-is-better (e.g. min_latency/latency); score ties count half.
    Rows with non-finite labels are skipped. NaN if there is no comparable pair.
    """
    s = np.asarray(scores, dtype=float).reshape(-1)
    y = np.asarray(labels, dtype=float).reshape(-1)
    g = np.asarray(groups).reshape(-1)
    if not (s.size == y.size == g.size):
        raise ValueError("scores, labels and groups must have the same length")
    keep = np.isfinite(y)
    s, y, g = s[keep], y[keep], g[keep]
    codes, _ = pd.factorize(g)
    order = np.argsort(codes, kind="stable")
    bounds = np.flatnonzero(np.diff(codes[order])) + 1
    correct = total = 0.0
    for idx in np.split(order, bounds):
        for lo in range(0, idx.size, chunk):
            rows = idx[lo:lo + chunk]
            better = y[rows, None] > y[None, idx]
            ds = s[rows, None] - s[None, idx]
            correct += np.sum(better & (ds > 0)) + 0.5 * np.sum(better & (ds == 0))
            total += np.sum(better)
    return float(correct / total) if total else float("nan")
