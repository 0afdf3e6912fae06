"""MTL-TLP (Zhai et al., TLP §5.2): one TLP backbone shared by every platform, one head per platform.

Each row is one program with its label on every platform of the order, paired by
(task, program_id). Where a platform has no label for it (not measured there, or a
target program outside the target's sample) the label is masked (NaN, which
LambdaRank skips), so that head gets no gradient from the row. The loss is the sum
over heads of LambdaRank per task.

Choices: every row's input carries the target's hardware row. MTL-TLP tells
platforms apart by its heads, not by its input (TLP's features have no hardware
row), and the deployed target model then reads the inputs it was trained on. Unlike
CKD, MTL needs all platforms' data at once: it reads every platform of the order and
keeps their joint table for its whole (single) phase of `cl_epochs` epochs over it.
The backbone with the target's head is a plain TLPModel, the deployable model; every
other platform adds a head, so the parameters grow with the number of platforms.
"""

from __future__ import annotations

import numpy as np
import torch
import torch.nn as nn

from ..features.tokenizer import HW_ROW
from ..models import TLPModel, param_count
from ..models.losses import rank_loss
from ..models.base import mlp
from .base import SequenceHooks, TransferMethod, TransferResult, register_method
from .data import PlatformData
from .phase import PhaseTensors


class MultiHeadTLP(nn.Module):
    """A TLPModel (backbone + the target's head) and one more head per other platform."""

    def __init__(self, target_model: TLPModel, platforms: list[str], seed: int):
        super().__init__()
        self.platforms, self.target_model = list(platforms), target_model
        hp = target_model.hparams
        dims = [hp["upsample_dims"][-1], *hp["head_dims"], 1]
        with torch.random.fork_rng():
            torch.manual_seed(seed)
            self.aux_heads = nn.ModuleDict({p: mlp(dims, hp["activation"], final_activation=False)
                                            for p in self.platforms[:-1]})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """(batch, seq_len, feat_dim) -> (batch, platforms) scores, one column per platform of the order."""
        h = self.target_model.backbone(x)
        heads = [*(self.aux_heads[p] for p in self.platforms[:-1]), self.target_model.head]
        return torch.stack([head(h).squeeze(-1).sum(dim=1) for head in heads], dim=1)


def joint_table(data: PlatformData, order: list[str]) -> dict[str, np.ndarray]:
    """Every platform's training programs as one table: x, a (rows, platforms) label matrix (NaN = masked), groups."""
    row_of: dict[tuple[str, str], int] = {}
    xs, tasks, cells = [], [], []
    for j, platform in enumerate(order):
        arrays = data.train(platform)
        for i, key in enumerate(zip(arrays["task_key"].tolist(), arrays["program_id"].tolist())):
            if key not in row_of:
                row_of[key] = len(xs)
                xs.append(arrays["x"][i])
                tasks.append(key[0])
            cells.append((row_of[key], j, float(arrays["label"][i])))
    x = np.stack(xs)
    x[:, HW_ROW, :] = arrays["x"][0, HW_ROW]  # the target's, loaded last
    label = np.full((len(xs), len(order)), np.nan, dtype=np.float32)
    r, c, v = zip(*cells)
    label[list(r), list(c)] = v
    return {"x": x, "label": label, "group": np.unique(np.asarray(tasks), return_inverse=True)[1]}


@register_method("mtl")
class MultiTaskTLP(TransferMethod):
    """Shared backbone + per-platform heads trained together on all platforms' labels."""

    def _fit(self, data: PlatformData, order: list[str], hooks: SequenceHooks) -> TransferResult:
        table = joint_table(data, order)
        target_model = self.build("tlp", table)
        model = MultiHeadTLP(target_model, order, self.seed + 1)
        tensors = PhaseTensors(table, self.settings.device)
        model.to(tensors.device)

        def batch_loss(rows: torch.Tensor) -> torch.Tensor:
            scores, y, g = model(tensors.x[rows]), tensors.y[rows], tensors.g[rows]
            return sum(rank_loss(scores[:, j], y[:, j], g, kind=self.settings.loss) for j in range(len(order)))

        record = self.run_phase("mtl", order, data, model, model.parameters(), batch_loss,
                                tensors, hooks, {"model": target_model}, resident=tuple(order))
        return TransferResult(target_model.cpu(), "tlp", [record], param_count(model))
