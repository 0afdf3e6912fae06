"""Offline mode: choose from an already-measured pool (the paper's experiments) and save the picks
(tcl.train.inputs.restrict_to_sample reads them back for training)."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Callable

import numpy as np

from ..data.store import atomic_write_npz
from .rounds import RoundLog, SampleRun, sample_rounds
from .scorer import ModelScorer
from .settings import SamplingSettings


def sample_offline(split: dict[str, np.ndarray], params: dict[str, Any], settings: SamplingSettings, seed: int,
                   on_round: Callable[[RoundLog], None] | None = None) -> SampleRun:
    """Pick `settings.rate` of a featurized split (labels known, so nothing is measured)."""
    scorer = ModelScorer(split["x"], split["label"], split["group"], settings.model,
                         settings.train_config(params, seed), settings.hparams(params), settings.ensemble)
    return sample_rounds(settings.sampler(seed), split["op_type"], split["task_key"], settings.rate,
                         settings.rounds, settings.first_batch, seed, scorer, on_round=on_round)


def save_sample(path: str | Path, program_ids: np.ndarray, run: SampleRun, meta: dict[str, Any]) -> None:
    """The picked programs (in pick order, with their round) as one small npz: what training reads."""
    rounds = np.concatenate([np.full(r.picked, r.round) for r in run.rounds]) if run.rounds else np.zeros(0)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_npz(Path(path), program_id=np.asarray(program_ids, dtype=str), round=rounds.astype(np.int64),
                     **{f"meta_{k}": np.asarray(v) for k, v in meta.items()})
