"""The `transfer:` block of params.yaml as one object: platform order, budget, CKD's constants."""

from __future__ import annotations

from dataclasses import dataclass, field, fields
from typing import Any

from ..config import check_keys


@dataclass
class TransferSettings:
    order: list[str]              # platforms, sources first, the target last
    rate: float = 0.10            # share of the target's training programs it learns from
    sampler: str = "rdu"          # which tcl.sampling strategy picks them ("random" costs no training)
    sampler_epochs: int = 30      # epochs of RDU's model f per round
    model: str = "tcl"            # the model of no-transfer, fine-tuning and Moses (CKD's columns are TCL's)
    cl_epochs: int = 30           # every training on one platform's labels (CL; the baselines' phases)
    kd_epochs: int = 15
    batch_size: int = 64          # whole tasks per batch (a larger task is a batch alone): KD's Phi_j needs several
    lr: float = 7e-4
    loss: str = "lambdarank"
    cl_period: int = 10           # cosine LR, restarted every cl_period epochs (TCL §6)
    kd_step: int = 5              # KD: LR x kd_gamma every kd_step epochs (TCL §6)
    kd_gamma: float = 0.1
    beta: float = 0.5             # eq. 9: share of the student's own loss on the labels
    ewc_lambda: float = 10000.0   # eq. 9's lambda
    lateral_dim: int = 32         # width of each lateral adapter V_i (eq. 7)
    moses_keep: float = 0.5       # Moses: share of each weight tensor that is transferable
    moses_decay: float = 10.0     # Moses eq. 4: a non-transferable weight w -> w - lr * moses_decay * w per step
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    methods: list[str] = field(default_factory=lambda: ["none", "finetune", "mtl", "moses", "ckd"])
    threads: int = 1
    device: str = "cpu"

    def __post_init__(self):
        if len(self.order) < 2 or len(set(self.order)) != len(self.order):
            raise ValueError(f"transfer.order must list at least one source and the target, each once; "
                             f"got {self.order}")
        if not 0.0 <= self.beta <= 1.0:
            raise ValueError(f"transfer.beta must be in [0, 1], got {self.beta}")
        if not 0.0 < self.moses_keep <= 1.0:
            raise ValueError(f"transfer.moses_keep must be in (0, 1], got {self.moses_keep}")
        if not 0.0 < self.rate <= 1.0:
            raise ValueError(f"transfer.rate must be in (0, 1], got {self.rate}")

    @property
    def target(self) -> str:
        return self.order[-1]

    @classmethod
    def from_params(cls, params: dict[str, Any], **overrides) -> TransferSettings:
        """The `transfer:` block, overridden by any non-None keyword; unknown keys raise naming them."""
        block = dict(params.get("transfer") or {})
        check_keys(block, [f.name for f in fields(cls)], "transfer")
        if "order" not in block:
            raise ValueError("params.yaml transfer.order is missing: list the source platforms, then the target")
        block.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**block)

    def hparams(self, params: dict[str, Any], model: str) -> dict[str, Any]:
        """The train stage's hyperparameters of `model` (`train.hparams.<model>`), the same in every method."""
        from ..train.loop import model_hparams

        return model_hparams(params, model)
