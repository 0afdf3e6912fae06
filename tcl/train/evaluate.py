"""Ranking quality of a model on a split: top-k (both conventions) and pairwise accuracy."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..models.metrics import pairwise_accuracy, topk_mean_per_network, topk_ratio_of_sums


def ranking_metrics(split: dict[str, np.ndarray], scores: np.ndarray, ks=(1, 5)) -> dict[str, float]:
    """top-k per TCL eq. 12 (ratio of sums over networks) and Tenset's mean per network, plus pairwise accuracy."""
    if len(scores) == 0:
        return {}
    latency = np.where(split["label"] > 0, split["mean_sec"], np.inf)
    frame = pd.DataFrame({"network": split["network"], "task_key": split["task_key"],
                          "task_weight": split["task_weight"], "latency": latency, "score": scores})
    out = {}
    for k in ks:
        out[f"top{k}_ratio_of_sums"] = float(topk_ratio_of_sums(frame, k=k))
        out[f"top{k}_mean_per_network"] = float(topk_mean_per_network(frame, k=k))
    out["pairwise_accuracy"] = float(pairwise_accuracy(scores, split["label"], split["group"]))
    return out


def random_scorer_metrics(split: dict[str, np.ndarray], seeds: int = 20, ks=(1, 5)) -> dict[str, float]:
    """The floor a model must beat: `ranking_metrics` of uniformly random scores, averaged over
    `seeds` draws (with a few dozen programs per task, random top-1 is far above zero)."""
    runs = [ranking_metrics(split, np.random.default_rng(s).random(len(split["label"])), ks) for s in range(seeds)]
    if not runs or not runs[0]:
        return {}
    return {k: float(np.mean([r[k] for r in runs])) for k in runs[0]}
