"""A trained model bundle as a MetaSchedule cost model.

    ms.relax_integration.tune_relax(..., cost_model=tcl.tvm.cost_model.cost_model("models:/tcl-tcl-zen4-avx512-1c@champion"))

`predict` featurizes the candidates with the bundle's featurizer (our tokenizer reads
the trace alone, no lowering; Tenset-MLP's and XGB's is TVM's PerStoreFeature) and scores
them in one batch. Scores are mapped through softplus: the evolutionary search clamps
scores at 0 and samples parents in proportion to them, so they must be non-negative, and
a fixed monotone map keeps scores of different predict calls comparable (a per-batch
shift would not).

`adaptation` names how the model learns while tuning (tcl.tvm.online): "frozen" (as it
was trained), "ft", "moa" (MoA-Pruner) or "boost" (pretrained XGB); `update` hands each
task's measured programs to it. An ensemble (tcl.tvm.ensemble) is the same cost model with a
`prior` scoring in place of the bundle's own network.
"""

from __future__ import annotations

import numpy as np
from tvm.ir.utils import derived_object
from tvm.s_tir.meta_schedule.cost_model import PyCostModel

from ..models.bundle import ModelBundle
from .online import OnlineSettings, make_adapter
from .memo import ProgramMemo
from .online.base import concat_rows


def load_bundle(uri: str) -> ModelBundle:
    """A bundle from MLflow (`models:/name@alias`, `runs:/id/model`) or a local bundle directory."""
    if uri.startswith(("models:/", "runs:/")):
        from ..tracking.registry import load_registered

        return load_registered(uri)
    return ModelBundle.load(uri)


class FeatureCache:
    """Model inputs of candidates already featurized in this tuning run, by task and program
    (tcl.tvm.memo). Only featurizers that lower each program (TVM's PerStoreFeature: milliseconds
    a candidate) are cached; featurizers that read only the trace (our tokenizer) are not."""

    MAX_ENTRIES = 50_000  # ~5 KB each

    def __init__(self, bundle: ModelBundle, spec_vector):
        self.bundle, self.spec_vector = bundle, spec_vector
        self.enabled = bool(getattr(bundle.featurizer, "lowers_programs", False))
        self.memo = ProgramMemo(self.MAX_ENTRIES)

    def of(self, context, candidates) -> np.ndarray:
        """The model's input for `candidates` of `context`'s task, featurizing only the ones not seen yet."""
        featurize = lambda cs: self.bundle.featurize_candidates(context, cs, self.spec_vector)  # noqa: E731
        if not self.enabled:
            return featurize(candidates)
        return concat_rows([row[None] for row in self.memo.lookup(context, candidates, featurize)])

    @property
    def hits(self) -> int:
        return self.memo.hits

    @property
    def misses(self) -> int:
        return self.memo.misses

    @property
    def hit_rate(self) -> float | None:
        """None where nothing is cached (a featurizer that reads only the trace): not a 0% hit rate."""
        return self.hits / max(self.hits + self.misses, 1) if self.enabled else None


@derived_object
class LearnedCostModel(PyCostModel):
    """Scores MetaSchedule candidates with a TCL/TLP/MLP/Tenset-MLP/XGB bundle, adapting as configured."""

    def __init__(self, bundle: ModelBundle, spec_vector=None, adaptation: str = "frozen",
                 settings: OnlineSettings | None = None, prior=None):
        """`prior`: an ensemble (tcl.tvm.ensemble) scoring in place of `bundle`'s model, which then only
        featurizes."""
        import torch

        super().__init__()
        torch.set_num_threads(1)  # the Mamba scan's small steps: 1 thread is many times faster on CPU
        self.bundle = bundle
        self.spec_vector = list(spec_vector) if spec_vector is not None else bundle.spec_vector
        self.adapter = make_adapter(adaptation, bundle, settings, prior)
        self.features = FeatureCache(bundle, self.spec_vector)

    def load(self, path: str) -> None:
        self.bundle = ModelBundle.load(path)
        self.adapter = make_adapter(self.adapter.name, self.bundle, self.adapter.settings, self.adapter.prior)
        self.features = FeatureCache(self.bundle, self.spec_vector)

    def save(self, path: str) -> None:
        self.bundle.save(path)

    def predict(self, context, candidates) -> np.ndarray:
        if not candidates:
            return np.zeros(0, dtype="float64")
        x = self.features.of(context, candidates)
        scores = self.adapter.score(str(context.task_name), x)
        return np.logaddexp(0.0, scores).astype("float64")

    def update(self, context, candidates, results) -> None:
        if not self.adapter.learns:
            return
        done = [(c, r) for c, r in zip(candidates, results) if r.error_msg is None and r.run_secs]
        if not done:
            return
        x = self.features.of(context, [c for c, _ in done])
        latencies = np.asarray([np.mean([float(s) for s in r.run_secs]) for _, r in done])
        self.adapter.observe(str(context.task_name), x, latencies)


def cost_model(uri: str, *, spec_vector=None, adaptation: str = "frozen",
               settings: OnlineSettings | None = None) -> LearnedCostModel:
    """Load a registered or saved bundle as a MetaSchedule cost model."""
    return LearnedCostModel(load_bundle(uri), spec_vector=spec_vector, adaptation=adaptation, settings=settings)
