"""Continual knowledge distillation (TCL §6): a knowledge base (KB) and an active column (AC).

Per platform of the order (sources first, the target last), with only that
platform's training data loaded:

- CL phase (eq. 8): the KB is frozen; the AC and its laterals from the KB (eq. 7,
  tcl.models.ckd_model) learn the platform's labels with LambdaRank under a cosine
  LR restarted every `cl_period` epochs. The AC carries over from platform to
  platform; it is never reset.
- KD phase (eqs. 9-10), on every platform but the target: the AC (with the laterals)
  is frozen and teaches the KB, the student:
  beta * L(KB, labels) + (1 - beta) * Phi_j * L(KB, teacher) + EWC, LR x0.1 every
  `kd_step` epochs. The teacher's scores are taken once, before KD, with the KB as
  CL left it: the teacher reads the KB through its laterals, and a teacher that
  moves with its student is no fixed target. How scores become labels and Phi_j
  come from: tcl.transfer.distill. EWC (tcl.transfer.ewc) anchors the KB at its
  weights before this KD with the Fisher measured after the previous platform's
  KD; the first KD has no earlier knowledge to protect and no EWC term.

After the target's CL there is no KD: the deployable model is the AC with its KB
laterals (`ckd_ac`), whose size does not depend on the number of platforms. The AC's
own scores move during a KD phase although its weights do not, because its laterals
read the KB being distilled into (the paper's Fig. 8 shows them flat).
"""

from __future__ import annotations

import numpy as np
import torch

from ..models import CKDModel, param_count
from ..models.losses import rank_loss
from ..train.loop import group_batches
from ..models.base import predict
from .base import PhaseRecord, SequenceHooks, TransferMethod, TransferResult, register_method
from .data import PlatformData
from .distill import batch_confidence, teacher_labels
from .ewc import EWCPenalty, fisher_diagonal
from .phase import PhaseTensors


def set_trainable(params, flag: bool) -> None:
    for p in params:
        p.requires_grad_(flag)


@register_method("ckd")
class ContinualDistillation(TransferMethod):
    """CL then KD on each source, CL alone on the target; returns the AC with its KB laterals."""

    def _fit(self, data: PlatformData, order: list[str], hooks: SequenceHooks) -> TransferResult:
        model: CKDModel | None = None
        ewc: EWCPenalty | None = None
        history: list[PhaseRecord] = []
        for i, platform in enumerate(order):
            arrays = data.train(platform)
            if model is None:
                model = self.build("ckd_ac", arrays, lateral_dim=self.settings.lateral_dim,
                                   **self.hparams.get("tcl", {}))
            tensors = PhaseTensors(arrays, self.settings.device)
            model.to(tensors.device)
            seen = order[:i + 1]
            history.append(self.continual_learning(model, seen, data, tensors, hooks))
            if i == len(order) - 1:
                break
            history.append(self.distill(model, seen, data, arrays, tensors, hooks, ewc))
            ewc = EWCPenalty(model.kb, fisher_diagonal(model.kb, tensors, self.settings.loss),
                             self.settings.ewc_lambda)
        set_trainable(model.parameters(), True)
        return TransferResult(model.cpu(), "ckd_ac", history, param_count(model))

    def continual_learning(self, model: CKDModel, seen: list[str], data: PlatformData, tensors: PhaseTensors,
                           hooks: SequenceHooks) -> PhaseRecord:
        """Eq. 8: the AC (with laterals) learns this platform's labels; the KB is frozen."""
        set_trainable(model.kb.parameters(), False)
        set_trainable(model.active_parameters(), True)
        return self.run_phase("cl", seen, data, model, model.active_parameters(),
                              self.ranking_loss(model, tensors), tensors, hooks, {"ac": model, "kb": model.kb})

    def distill(self, model: CKDModel, seen: list[str], data: PlatformData, arrays: dict[str, np.ndarray],
                tensors: PhaseTensors, hooks: SequenceHooks, ewc: EWCPenalty | None) -> PhaseRecord:
        """Eq. 9: the KB learns from the labels and from the frozen AC, weighted per batch by Phi_j."""
        s = self.settings
        set_trainable(model.parameters(), False)
        set_trainable(model.kb.parameters(), True)
        scores = predict(model, arrays["x"])  # the teacher, once, with the KB as CL left it
        teacher = torch.from_numpy(scores.astype(np.float32)).to(tensors.device)
        taught = torch.from_numpy(teacher_labels(scores, arrays["group"])).to(tensors.device)
        batches = group_batches(tensors.groups, s.batch_size, np.random.default_rng(self.seed))
        phi_of_row = torch.empty(len(scores), device=tensors.device)
        rows_of = [tensors.index(b) for b in batches]
        teacher_loss = [float(rank_loss(teacher[r], tensors.y[r], tensors.g[r], kind=s.loss, reduction="mean"))
                        for r in rows_of]  # e_j of the pre-pass
        for rows, phi in zip(rows_of, batch_confidence(teacher_loss)):
            phi_of_row[rows] = float(phi)

        def batch_loss(rows: torch.Tensor) -> torch.Tensor:
            student, g = model.kb(tensors.x[rows]), tensors.g[rows]
            loss = (s.beta * rank_loss(student, tensors.y[rows], g, kind=s.loss)
                    + (1 - s.beta) * phi_of_row[rows[0]] * rank_loss(student, taught[rows], g, kind=s.loss))
            return loss + ewc() if ewc is not None else loss

        return self.run_phase("kd", seen, data, model.kb, model.kb.parameters(), batch_loss,
                              tensors, hooks, {"ac": model, "kb": model.kb}, epochs=s.kd_epochs, schedule="step",
                              fixed_batches=batches, snapshot=model.kb)
