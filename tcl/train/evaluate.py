"""Ranking quality of a model on a held-out split, with how far the figure can be trusted.

The one evaluation that train, sampling, transfer, the promotion gate and the benchmarks
use. TCL eq. 12 (`top{k}_ratio_of_sums`) pools every held-out task into one ratio weighted
by task weight x best latency, so a handful of heavy tasks decide it (on zen4-avx512-1c 5
test tasks carry over half of the weight): a single number from one run is not evidence.
Next to it come Tenset's mean per network and the mean per task (every task counts once),
each with a percentile bootstrap confidence interval (eq. 12 and the mean per task resample
the held-out tasks with replacement, the mean per network its own unit, the networks; a
fixed seed, `train.eval.bootstrap` draws at level `train.eval.ci`). Given the
scores of several training seeds, the point figure is the mean over seeds, the interval
bootstraps the seed-mean (the same task draw for every seed) and `_seed_std` is the spread
between seeds. `composition` says what the held-out set is made of.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any, Mapping, Sequence

import numpy as np
import pandas as pd

from ..config import check_keys
from ..models.metrics import pairwise_accuracy, topk_table

Split = Mapping[str, np.ndarray]
# the figures of one k: eq. 12, Tenset's mean per network, the mean per task
FIGURES = ("ratio_of_sums", "mean_per_network", "mean_per_task")


@dataclass(frozen=True)
class EvalSettings:
    """How the confidence intervals are drawn (params.yaml `train.eval`)."""

    bootstrap: int = 1000   # task resamples; 0 leaves the intervals out
    ci: float = 0.95        # two-sided percentile interval
    seed: int = 0           # the resampling is fixed: the same split gives the same interval

    def __post_init__(self):
        if self.bootstrap < 0 or not 0 < self.ci < 1:
            raise ValueError(f"train.eval: bootstrap must be >= 0 and 0 < ci < 1, got {self}")

    @classmethod
    def from_params(cls, params: Mapping[str, Any] | None) -> "EvalSettings":
        cfg = ((params or {}).get("train") or {}).get("eval") or {}
        check_keys(cfg, ("bootstrap", "ci", "seed"), "train.eval")
        return cls(bootstrap=int(cfg.get("bootstrap", cls.bootstrap)), ci=float(cfg.get("ci", cls.ci)),
                   seed=int(cfg.get("seed", cls.seed)))


def _frame(split: Split, scores: np.ndarray) -> pd.DataFrame:
    latency = np.where(split["label"] > 0, split["mean_sec"], np.inf)
    return pd.DataFrame({"network": split["network"], "task_key": split["task_key"],
                         "task_weight": split["task_weight"], "latency": latency, "score": scores})


def task_scores(split: Split, scores: np.ndarray, k: int = 1) -> pd.DataFrame:
    """One row per held-out (network, task): weight, best and top-k latency, `num` = w*best,
    `den` = w*best-of-top-k and `ratio` = best / best-of-top-k (the task's own top-k)."""
    table = topk_table(_frame(split, np.asarray(scores, dtype=float)), k=k)
    w = table["task_weight"].to_numpy()
    return table.assign(num=w * table["best_latency"], den=w * table["topk_latency"],
                        ratio=table["best_latency"] / table["topk_latency"])


def _figures(task_counts: np.ndarray, net_counts: np.ndarray, tables: list[pd.DataFrame], net_code: np.ndarray
             ) -> dict[str, np.ndarray]:
    """Every figure for each draw (row of `task_counts`: how often each task is drawn; of `net_counts`:
    how often each network is), averaged over the seeds' tables."""
    onehot = np.eye(net_counts.shape[1])[net_code]          # tasks x networks
    out = {f: np.zeros(len(task_counts)) for f in FIGURES}
    for t in tables:
        num, den, ratio = (t[c].to_numpy() for c in ("num", "den", "ratio"))
        out["ratio_of_sums"] += (task_counts @ num) / (task_counts @ den)
        out["mean_per_task"] += (task_counts @ ratio) / task_counts.sum(axis=1)
        per_net = (num @ onehot) / (den @ onehot)
        out["mean_per_network"] += (net_counts @ per_net) / net_counts.sum(axis=1)
    return {f: v / len(tables) for f, v in out.items()}


def _resample(n: int, settings: EvalSettings, salt: int) -> np.ndarray:
    """bootstrap x n: how often each of n units is drawn, n draws with replacement per row."""
    rng = np.random.default_rng([settings.seed, salt])
    counts = np.zeros((settings.bootstrap, n))
    np.add.at(counts, (np.arange(settings.bootstrap)[:, None], rng.integers(0, n, (settings.bootstrap, n))), 1)
    return counts


def ranking_metrics(split: Split, scores: np.ndarray | Sequence[np.ndarray], ks=(1, 5),
                    settings: EvalSettings | None = None) -> dict[str, float]:
    """Flat figures (MLflow- and JSON-ready) of one model's scores, or of several seeds' scores.

    For each k: `top{k}_<figure>` for figure in FIGURES (eq. 12, mean per network, mean per task),
    with `_ci_low`/`_ci_high` (bootstrap over tasks) and, for several seeds, `_seed_std`; plus
    `pairwise_accuracy` (seed mean). Empty when there is nothing to score.
    """
    runs = _as_runs(scores)
    if not runs or len(runs[0]) == 0:
        return {}
    settings = settings or EvalSettings()
    out: dict[str, float] = {}
    for k in ks:
        tables = [task_scores(split, s, k) for s in runs]
        net_code, nets = pd.factorize(tables[0]["network"], sort=True)
        n_tasks = len(tables[0])
        per_seed = [_figures(np.ones((1, n_tasks)), np.ones((1, len(nets))), [t], net_code) for t in tables]
        boot = None
        if settings.bootstrap and n_tasks:
            boot = _figures(_resample(n_tasks, settings, 0), _resample(len(nets), settings, 1), tables, net_code)
        tail = (1 - settings.ci) / 2 * 100
        for f in FIGURES:
            values = np.array([s[f][0] for s in per_seed])
            out[f"top{k}_{f}"] = float(values.mean())
            if boot is not None:
                lo, hi = np.percentile(boot[f], [tail, 100 - tail])
                out[f"top{k}_{f}_ci_low"], out[f"top{k}_{f}_ci_high"] = float(lo), float(hi)
            if len(runs) > 1:
                out[f"top{k}_{f}_seed_std"] = float(values.std(ddof=1))
    out["pairwise_accuracy"] = float(np.mean([pairwise_accuracy(s, split["label"], split["group"]) for s in runs]))
    return out


def _as_runs(scores) -> list[np.ndarray]:
    """One array per seed: a 1-D array is one run, a list or 2-D array is one run per row."""
    if isinstance(scores, np.ndarray) and scores.ndim == 1:
        return [scores.astype(float)]
    return [np.asarray(s, dtype=float).reshape(-1) for s in scores]


def gate_top1(split: Split, scores: np.ndarray) -> float:
    """The figure the promotion gate compares: top-1 as the mean per task (NaN if any score is
    non-finite or nothing is scored). Each held-out task counts once, so unlike eq. 12 the figure
    does not turn on whether the model happens to rank the two or three heaviest tasks well."""
    scores = np.asarray(scores, dtype=float)
    if len(scores) == 0 or not np.all(np.isfinite(scores)):
        return math.nan
    return float(task_scores(split, scores, k=1)["ratio"].mean())


def per_task(split: Split, scores: np.ndarray, k: int = 1) -> dict[str, float]:
    """Top-k of each held-out task ("network/task_key" -> best / best-of-top-k)."""
    t = task_scores(split, scores, k)
    return {f"{n}/{key}": float(r) for n, key, r in zip(t["network"], t["task_key"], t["ratio"])}


def per_network(split: Split, scores: np.ndarray, k: int = 1) -> dict[str, float]:
    """Top-k of each held-out network (eq. 12 within the network)."""
    sums = task_scores(split, scores, k).groupby("network", sort=True)[["num", "den"]].sum()
    return {str(n): float(v) for n, v in (sums["num"] / sums["den"]).items()}


def composition(split: Split, heavy: int = 5) -> dict[str, Any]:
    """What the held-out set is made of: tasks (and how many of them top-1 ranks: more than one measured
    program), programs, networks and op types (programs each), and the share of eq. 12's weight (task
    weight x best latency) that its `heavy` heaviest ranked tasks carry."""
    if len(split["label"]) == 0:
        return {"tasks": 0, "ranked_tasks": 0, "programs": 0, "networks": {}, "op_types": {}}
    t = task_scores(split, np.zeros(len(split["label"])), k=1)
    share = np.sort(t["num"].to_numpy())[::-1] / t["num"].sum()
    frame = pd.DataFrame({"network": split["network"], "op_type": split["op_type"]})
    tasks = len(set(zip(split["network"].tolist(), split["task_key"].tolist())))
    return {"tasks": tasks, "ranked_tasks": int(len(t)), "programs": int(len(split["label"])),
            "networks": {str(k): int(v) for k, v in frame["network"].value_counts().sort_index().items()},
            "op_types": {str(k): int(v) for k, v in frame["op_type"].value_counts().sort_index().items()},
            f"eq12_weight_share_top{heavy}_tasks": float(share[:heavy].sum())}


def random_scorer_metrics(split: Split, seeds: int = 20, ks=(1, 5), settings: EvalSettings | None = None
                          ) -> dict[str, float]:
    """The floor a model must beat: `ranking_metrics` of `seeds` draws of uniformly random scores,
    taken as seeds (with a few dozen programs per task, random top-1 is far above zero)."""
    if len(split["label"]) == 0:
        return {}
    runs = [np.random.default_rng(s).random(len(split["label"])) for s in range(seeds)]
    return ranking_metrics(split, runs, ks, settings)
