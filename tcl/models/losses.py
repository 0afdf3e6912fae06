"""Training losses for cost models: LambdaRank within task groups (TCL eq. 6), and MSE.

Why per group: latencies of different tasks (subgraphs) are not comparable, and the
tuner only ever ranks candidates of one task against each other. Labels are
min_latency / latency in (0, 1] (1 = best program of its task, 0 = failed program);
rows whose label is NaN/inf are ignored.
"""

from __future__ import annotations

import math

import numpy as np
import torch
import torch.nn.functional as F

KINDS = ("lambdarank", "mse")
REDUCTIONS = ("sum", "mean", "none")


def group_codes(groups, device=None) -> torch.Tensor:
    """Dense int64 codes 0..G-1 (in sorted order of the ids) for any group ids."""
    if isinstance(groups, torch.Tensor):
        return torch.unique(groups.reshape(-1), return_inverse=True)[1].to(device or groups.device)
    _, codes = np.unique(np.asarray(groups), return_inverse=True)
    return torch.as_tensor(codes.reshape(-1), dtype=torch.long, device=device)


def _pad_by_group(values: torch.Tensor, codes: torch.Tensor, fill: float):
    """Scatter a flat vector into a (groups, max_group_size) matrix, padded with `fill`."""
    n_groups = int(codes.max()) + 1 if codes.numel() else 0
    counts = torch.bincount(codes, minlength=n_groups)
    order = torch.argsort(codes, stable=True)
    starts = torch.cumsum(counts, 0) - counts
    pos = torch.empty_like(codes)
    pos[order] = torch.arange(codes.numel(), device=codes.device) - starts[codes[order]]
    width = int(counts.max()) if n_groups else 0
    out = values.new_full((n_groups, width), fill)
    return out.index_put((codes, pos), values), pos


def lambdarank_loss(scores: torch.Tensor, labels: torch.Tensor, groups,
                    sigma: float = 1.0, reduction: str = "sum") -> torch.Tensor:
    """Sum over same-group pairs with label_i > label_j of
    dNDCG(i,j) * log2(1 + exp(-sigma * (s_i - s_j))).

    dNDCG(i,j) = |G_i - G_j| * |1/D_i - 1/D_j| with gain G = (2^label - 1) / maxDCG of the
    group and discount D = log2(1 + rank), rank taken from the current scores (TCL eq. 6;
    the leading minus there belongs to the log-sigmoid form). The weights carry no
    gradient. Groups are padded to one (G, M) matrix, so cost is G * M^2 pairs.
    reduction: "sum" (eq. 6), "mean" (over groups that have at least one pair), or
    "none" (one loss per group, in sorted group-id order).
    """
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    scores = scores.reshape(-1)
    labels = labels.reshape(-1).to(scores.dtype)
    codes = group_codes(groups, scores.device)
    if not (scores.numel() == labels.numel() == codes.numel()):
        raise ValueError("scores, labels and groups must have the same length")
    if scores.numel() == 0:
        return scores.sum()

    S, _ = _pad_by_group(scores, codes, 0.0)
    Y, _ = _pad_by_group(labels.detach(), codes, float("nan"))
    valid = torch.isfinite(Y)
    with torch.no_grad():
        rank_key = S.detach().masked_fill(~valid, float("-inf"))
        order = torch.argsort(rank_key, dim=1, descending=True, stable=True)
        y_ranked = Y.gather(1, order)
        ok = valid.gather(1, order)
        gain = torch.where(ok, torch.exp2(y_ranked) - 1, torch.zeros_like(y_ranked))
        discount = torch.log2(torch.arange(S.shape[1], device=S.device, dtype=S.dtype) + 2.0)
        ideal = torch.sort(gain, dim=1, descending=True).values
        max_dcg = (ideal / discount).sum(1, keepdim=True).clamp_min(1e-10)
        g = gain / max_dcg
        inv_d = 1.0 / discount
        weight = (g[:, :, None] - g[:, None, :]).abs() * (inv_d[:, None] - inv_d[None, :]).abs()
        pairs = ok[:, :, None] & ok[:, None, :] & (y_ranked[:, :, None] > y_ranked[:, None, :])
        weight = weight * pairs
    s_ranked = S.gather(1, order)
    diff = s_ranked[:, :, None] - s_ranked[:, None, :]
    per_pair = weight * F.softplus(-sigma * diff) / math.log(2.0)
    per_group = per_pair.sum(dim=(1, 2))
    if reduction == "none":
        return per_group
    if reduction == "mean":
        return per_group.sum() / pairs.any(dim=(1, 2)).sum().clamp_min(1)
    return per_group.sum()


def mse_loss(scores: torch.Tensor, labels: torch.Tensor, groups=None,
             reduction: str = "mean") -> torch.Tensor:
    """Squared error to the normalized label; "none" gives each group's summed error."""
    if reduction not in REDUCTIONS:
        raise ValueError(f"reduction must be one of {REDUCTIONS}, got {reduction!r}")
    scores, labels = scores.reshape(-1), labels.reshape(-1).to(scores.dtype)
    ok = torch.isfinite(labels)
    sq = torch.where(ok, scores - torch.nan_to_num(labels), torch.zeros_like(scores)) ** 2
    if reduction == "mean":
        return sq.sum() / ok.sum().clamp_min(1)
    if reduction == "sum":
        return sq.sum()
    if groups is None:
        raise ValueError("reduction='none' needs groups")
    codes = group_codes(groups, scores.device)
    per_group = torch.zeros(int(codes.max()) + 1, dtype=sq.dtype, device=sq.device)
    return per_group.index_add(0, codes, sq)


def rank_loss(scores: torch.Tensor, labels: torch.Tensor, groups, kind: str = "lambdarank",
              reduction: str | None = None, **kwargs) -> torch.Tensor:
    """The cost-model training loss by name; reduction defaults to the kind's usual one
    ("sum" for lambdarank as in TCL eq. 6, "mean" for mse)."""
    if kind == "lambdarank":
        return lambdarank_loss(scores, labels, groups, reduction=reduction or "sum", **kwargs)
    if kind == "mse":
        return mse_loss(scores, labels, groups, reduction=reduction or "mean")
    raise ValueError(f"kind must be one of {KINDS}, got {kind!r}")
