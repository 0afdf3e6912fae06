"""A transfer sequence as MLflow runs, with every knowledge-base snapshot and the target model registered.

- One parent run `transfer-<method>-<target>` (tag stage=transfer): the settings, the
  order, the data version; the forgetting PNG and the phase history as artifacts.
- One nested run per phase (`cl-<platform>`, `kd-<platform>`, ...): per-epoch loss and
  top-1 on every platform seen so far (tcl.transfer.monitor).
- After each KD phase the KB is logged as a new version of ONE registered model,
  `<prefix>-kb-tcl`, tagged with the platforms it has absorbed, the seed and the
  provenance tags every version carries (tcl.tracking.provenance: data version, git
  commit, params hash with the `transfer` block, held-out top-1).
- At the end the target's deployable model is registered as
  `<prefix>-<method>-<target>` and goes through the promotion gate
  (tcl.train.promotion): its champion alias moves only if it beats the current champion
  re-scored now on the target's held-out split, since a score kept from another data
  version was not measured on it.

With tracking off (tcl.tracking) the sequence runs the same and nothing is logged or registered.

The bundles carry the shared tokenizer and the platform's specs, so TVM loads them
through tcl.tvm.cost_model like any trained model (`ckd_ac` is rebuilt by name).
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, fields
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from .. import tracking
from ..data.store import atomic_write_bytes
from ..features.tokenizer import Tokenizer
from ..models import param_count
from ..models.bundle import ModelBundle
from ..train.evaluate import gate_top1
from ..models.base import predict
from ..train.promotion import promote
from .base import PhaseRecord, TransferMethod, TransferResult
from .data import PlatformData
from .forgetting import plot_forgetting
from .monitor import Monitor


@dataclass
class TrackingContext:
    params: dict[str, Any]              # tracking: and registry: blocks, and what the params hash covers
    featurizer: Tokenizer               # the one tokenizer every platform's features share
    spec_vectors: dict[str, list[float]]
    data_version: str
    out_dir: Path                       # bundles and the forgetting PNG go here


@dataclass
class TrackedOutcome:
    result: TransferResult
    run_id: str
    kb_versions: list[str] = field(default_factory=list)
    registered_model: str = ""
    version: str = ""
    champion: bool = False
    held_out_top1: float = float("nan")
    champion_top1: float = float("nan")   # the previous champion on the same held-out split (NaN: none)


def held_out_top1(model: torch.nn.Module, split: dict[str, np.ndarray]) -> float:
    """The promotion gate's top-1 (mean per task, tcl.train.evaluate.gate_top1), so that the score a
    version is registered with is the one the gate compares."""
    return gate_top1(split, predict(model, split["x"]))


class TrackedHooks(Monitor):
    """The monitor's per-epoch top-1, logged into one nested run per phase; KB snapshots registered."""

    def __init__(self, data: PlatformData, ctx: TrackingContext, seed: int):
        super().__init__(data)
        self.ctx, self.seed = ctx, seed
        self.kb_name = f"{ctx.params['registry']['prefix']}-kb-tcl"
        self.kb_versions: list[str] = []
        self.step = 0
        self.open = False

    def phase_start(self, phase: str, platform: str) -> None:
        tracking.start_run(self.ctx.params, f"{phase}-{platform}",
                           {"stage": "transfer", "phase": phase, "platform": platform}, nested=True)
        self.open = True

    def epoch_end(self, record: PhaseRecord, epoch: int, loss: float,
                  models: dict[str, torch.nn.Module]) -> dict[str, float]:
        metrics = super().epoch_end(record, epoch, loss, models)
        tracking.log_metrics({"loss": loss, **metrics}, step=self.step)
        self.step += 1
        return metrics

    def phase_end(self, record: PhaseRecord, snapshot: torch.nn.Module | None) -> None:
        if snapshot is not None and tracking.live():
            self.kb_versions.append(self._register_kb(record, snapshot))
        self.close("FINISHED")

    def close(self, status: str) -> None:
        """End the phase's nested run if it is still open (a phase that raised ends FAILED)."""
        if self.open:
            tracking.end_run(status)
            self.open = False

    def _register_kb(self, record: PhaseRecord, kb: torch.nn.Module) -> str:
        bundle = ModelBundle("tcl", kb, self.ctx.featurizer, record.platform, self.ctx.spec_vectors[record.platform],
                             {"platforms": record.seen, "data_version": self.ctx.data_version,
                              "op_types": self.data.op_types})
        bundle_dir = bundle.save(self.ctx.out_dir / "kb" / f"{len(self.kb_versions) + 1}-{record.platform}")
        held_out = self._held_out(record.platform)
        tags = {"platforms": ",".join(record.seen), "seed": str(self.seed),
                **version_tags(self.ctx, {"val_top1": held_out_top1(kb, held_out)})}
        return tracking.registry.log_version(bundle, bundle_dir, self.kb_name, held_out["x"][:4], tags)


def version_tags(ctx: TrackingContext, scores: dict[str, float]) -> dict[str, str]:
    """Provenance tags of a transfer model version: the training params plus the `transfer` block."""
    return tracking.version_tags(ctx.params, ctx.data_version, scores, extra_sections=("transfer",))


def run_tracked(method: TransferMethod, data: PlatformData, ctx: TrackingContext,
                order: Sequence[str] | None = None) -> TrackedOutcome:
    """Run `method` over `order` as one parent MLflow run with nested phase runs; register as described above."""
    order = list(order or method.settings.order)
    target = order[-1]
    with tracking.run(ctx.params, f"transfer-{method.name}-{target}",
                      {"stage": "transfer", "method": method.name, "target": target}) as run:
        settings = {f.name: getattr(method.settings, f.name) for f in fields(method.settings)}
        tracking.log_params({**{k: v for k, v in settings.items() if not isinstance(v, list)},
                             "order": ",".join(order), "seed": method.seed, "data_version": ctx.data_version})
        hooks = TrackedHooks(data, ctx, method.seed)
        try:
            result = method.fit_sequence(data, order, hooks)
        finally:
            hooks.close("FAILED")
        outcome = TrackedOutcome(result, run.run_id or "", hooks.kb_versions)
        held_out = data.evaluation(target)
        outcome.held_out_top1 = held_out_top1(result.model, held_out)
        tracking.log_metrics({"target_held_out_top1": outcome.held_out_top1, "params_total": result.params_total,
                              "params_deployed": param_count(result.model)})
        out = Path(ctx.out_dir)
        out.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(out / "history.json", json.dumps([asdict(r) for r in result.history], indent=1).encode())
        tracking.log_artifact(str(out / "history.json"))
        tracking.log_artifact(str(plot_forgetting(result.history, out / "forgetting.png",
                                                  f"{method.name}: {' -> '.join(order)}")))
        if run.tracked:
            _register_target(outcome, method, ctx, order, held_out, data.op_types)
    return outcome


def _register_target(outcome: TrackedOutcome, method: TransferMethod, ctx: TrackingContext, order: list[str],
                     held_out: dict[str, np.ndarray], op_types: dict[str, int]) -> None:
    """The target's model as a new version; the promotion gate scores it and the current champion on
    `held_out` (the features every model of this sequence reads) and moves `champion` only if it is better."""
    target, result = order[-1], outcome.result
    name = tracking.registered_name(ctx.params["registry"]["prefix"], target, method.name)
    bundle = ModelBundle(result.model_name, result.model, ctx.featurizer, target, ctx.spec_vectors[target],
                         {"method": method.name, "order": order, "data_version": ctx.data_version,
                          "op_types": op_types})
    outcome.registered_model = name
    tags = {"platform": target, "method": method.name, "platforms": ",".join(order), "seed": str(method.seed),
            **version_tags(ctx, {"val_top1": outcome.held_out_top1})}
    outcome.version = tracking.registry.log_version(bundle, bundle.save(Path(ctx.out_dir) / "target"), name,
                                                    held_out["x"][:4], tags)
    decision = promote(name, outcome.version, lambda _bundle: held_out)
    outcome.champion, outcome.champion_top1 = decision.promoted, decision.champion_top1
