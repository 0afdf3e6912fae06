"""The pieces of TCL's distillation loss (eqs. 9-10) that the paper leaves to the reader.

Teacher scores as ranking labels: LambdaRank needs labels whose gain 2^label - 1 is
large for good programs, like measured labels (best program of a task = 1). So the
teacher's scores are min-max scaled within each task: the teacher's favourite gets 1,
its least favourite 0, and the gaps between them keep how sure the teacher is (a
within-task rank would flatten them). A task the teacher cannot tell apart (all
scores equal) gets 1 everywhere: no pair, no loss.

Phi_j (eq. 10): the teacher's own loss e_j on batch j against the measured labels,
over the phase's fixed batches (the pre-pass), then Phi_j = 1 - (e_j - min e) /
(max e - min e), so the batch where the teacher is best gets 1 and its worst 0. The
batches are fixed for the whole KD phase (only their order changes), so every e_j the
phase meets is one of the pre-pass values. e_j uses the per-task ("mean") reduction:
batches with more tasks are not worse teachers. When every e_j is equal (one batch),
Phi is 1: nothing says the teacher is less reliable on one batch than another.
"""

from __future__ import annotations

import numpy as np


def teacher_labels(scores: np.ndarray, groups: np.ndarray) -> np.ndarray:
    """Teacher scores -> labels in [0, 1], min-max within each task group."""
    scores = np.asarray(scores, dtype=np.float64)
    _, codes = np.unique(np.asarray(groups), return_inverse=True)
    lo = np.full(codes.max() + 1, np.inf)
    hi = np.full(codes.max() + 1, -np.inf)
    np.minimum.at(lo, codes, scores)
    np.maximum.at(hi, codes, scores)
    span = (hi - lo)[codes]
    return np.where(span > 0, (scores - lo[codes]) / np.where(span > 0, span, 1.0), 1.0).astype(np.float32)


def batch_confidence(teacher_losses) -> np.ndarray:
    """Phi_j of eq. 10 for each batch's teacher loss e_j: in [0, 1], 1 where the teacher is best."""
    e = np.asarray(teacher_losses, dtype=np.float64)
    if e.size == 0:
        return e
    span = e.max() - e.min()
    return np.ones_like(e) if span <= 0 else 1.0 - (e - e.min()) / span
