"""The cost model f of Algorithm 1: retrained from scratch on the labelled programs each round."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np

from ..models import build_model
from ..train.loop import TrainConfig, fit
from ..models.base import predict
from .rounds import Predictions


def relabel_within(label: np.ndarray, group: np.ndarray, rows: np.ndarray) -> np.ndarray:
    """Labels of `rows` relative to the best labelled program of each task (best = 1, failed = 0).

    A pool's stored labels are relative to the best program of the whole pool, which
    a sampler has not seen; training on them would leak the unlabelled optimum.
    """
    y, g = label[rows].astype(np.float64), group[rows]
    best = np.zeros(int(group.max()) + 1 if len(group) else 0)
    np.maximum.at(best, g, y)
    return np.divide(y, best[g], out=np.zeros_like(y), where=best[g] > 0)


class ModelScorer:
    """`scorer(labelled_rows)` -> Predictions for every row of the pool.

    ensemble > 1 trains that many members (seeds seed, seed+1, ...) and returns their
    predictions as `ensemble` (ALT's disagreement); `scores` is their mean. Features
    for BALTO are the programs' token rows averaged: a fixed embedding of each program.
    """

    def __init__(self, x: np.ndarray, label: np.ndarray, group: np.ndarray, model: str, train: TrainConfig,
                 hparams: dict[str, Any] | None = None, ensemble: int = 1):
        if ensemble < 1:
            raise ValueError(f"ensemble must be >= 1, got {ensemble}")
        self.x, self.label, self.group = x, np.asarray(label), np.asarray(group)
        self.model, self.train, self.hparams, self.ensemble = model, train, dict(hparams or {}), ensemble
        self.features = x.mean(axis=1)

    def __call__(self, labelled: np.ndarray) -> Predictions:
        if len(labelled) == 0:
            return Predictions(scores=np.zeros(len(self.x)), features=self.features)
        y = relabel_within(self.label, self.group, labelled)
        members = []
        for i in range(self.ensemble):
            cfg = replace(self.train, seed=self.train.seed + i)
            model = build_model(self.model, feat_dim=self.x.shape[2], seq_len=self.x.shape[1], seed=cfg.seed,
                                **self.hparams)
            fit(model, self.x[labelled], y, self.group[labelled], cfg)
            members.append(predict(model, self.x))
        stacked = np.stack(members)
        return Predictions(scores=stacked.mean(axis=0), ensemble=stacked if self.ensemble > 1 else None,
                           features=self.features)
