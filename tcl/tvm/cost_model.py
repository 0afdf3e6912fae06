"""A trained model bundle as a MetaSchedule cost model.

    ms.relax_integration.tune_relax(..., cost_model=tcl.tvm.cost_model.cost_model("models:/tcl-tcl-host-avx512-2c@champion"))

`predict` featurizes the candidates with the bundle's featurizer (our tokenizer reads
the trace alone, no lowering; Tenset-MLP's is TVM's PerStoreFeature) and scores them
in one batch. Scores are mapped through softplus: the
evolutionary search clamps scores at 0 and samples parents in proportion to
them, so they must be non-negative, and a fixed monotone map keeps scores of
different predict calls comparable (a per-batch shift would not).
With `online_steps > 0`, `update` keeps each task's measured results and
fine-tunes the model on them (LambdaRank within the task); otherwise it is a no-op.
"""

from __future__ import annotations

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import PyCostModel

from ..train.bundle import ModelBundle


def load_bundle(uri: str) -> ModelBundle:
    """A bundle from MLflow (`models:/name@alias`, `runs:/id/model`) or a local bundle directory."""
    if uri.startswith(("models:/", "runs:/")):
        from ..tracking.registry import load_registered

        return load_registered(uri)
    return ModelBundle.load(uri)


@derived_object
class LearnedCostModel(PyCostModel):
    """Scores MetaSchedule candidates with a TCL/TLP/MLP/Tenset-MLP bundle."""

    def __init__(self, bundle: ModelBundle, spec_vector=None, online_steps: int = 0, lr: float = 1e-4):
        import torch

        super().__init__()
        torch.set_num_threads(1)  # the Mamba scan's small steps: 1 thread is many times faster on CPU
        self.bundle = bundle
        self.spec_vector = list(spec_vector) if spec_vector is not None else bundle.spec_vector
        self.online_steps = int(online_steps)
        self.lr = float(lr)
        self._seen: dict[str, tuple[list, list]] = {}  # task name -> (feature rows, latencies)

    def load(self, path: str) -> None:
        self.bundle = ModelBundle.load(path)

    def save(self, path: str) -> None:
        self.bundle.save(path)

    def predict(self, context, candidates) -> np.ndarray:
        if not candidates:
            return np.zeros(0, dtype="float64")
        scores = self.bundle.score_candidates(context, candidates, self.spec_vector)
        return np.logaddexp(0.0, scores).astype("float64")

    def update(self, context, candidates, results) -> None:
        if self.online_steps <= 0:
            return
        rows, lats = self._seen.setdefault(str(context.task_name), ([], []))
        done = [(c, r) for c, r in zip(candidates, results) if r.error_msg is None and r.run_secs]
        if done:
            rows.extend(self.bundle.featurize_candidates(context, [c for c, _ in done], self.spec_vector))
            lats.extend(float(np.mean([float(x) for x in r.run_secs])) for _, r in done)
        if len(lats) >= 2:
            self._fine_tune(rows, np.asarray(lats))

    def _fine_tune(self, rows: list[np.ndarray], latencies: np.ndarray) -> None:
        import torch

        from ..features.per_store import pad_stores
        from ..models.losses import rank_loss

        model = self.bundle.model
        x = torch.from_numpy(pad_stores(rows) if self.bundle.featurizer.input_kind == "per_store"
                             else np.stack(rows))
        y = torch.from_numpy((latencies.min() / latencies).astype(np.float32))
        g = torch.zeros(len(y), dtype=torch.int64)
        opt = torch.optim.Adam(model.parameters(), lr=self.lr)
        model.train()
        for _ in range(self.online_steps):
            loss = rank_loss(model(x), y, g)
            opt.zero_grad()
            loss.backward()
            opt.step()
        model.eval()


def cost_model(uri: str, *, spec_vector=None, online_steps: int = 0) -> LearnedCostModel:
    """Load a registered or saved bundle as a MetaSchedule cost model."""
    return LearnedCostModel(load_bundle(uri), spec_vector=spec_vector, online_steps=online_steps)
