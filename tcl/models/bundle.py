"""A trained cost model together with everything needed to score programs with it.

The weights alone are useless to TVM: scoring a candidate needs the featurizer the
model was trained with (our tokenizer: vocabularies, normalization, crop sizes; or
TVM's PerStoreFeature for Tenset-MLP), and the hardware row needs the platform's
specs. A bundle is a directory holding all three, which MLflow stores as one
artifact and TVM loads as one cost model.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Sequence

import numpy as np
import torch

from ..features.kinds import TOKENS, featurizer_class
from .base import build_model, predict

BUNDLE_FILE = "bundle.json"


def op_type_tasks(*arrays: dict[str, np.ndarray]) -> dict[str, int]:
    """Training tasks per operator type in feature arrays (their `task_key` and `op_type` columns):
    kept in a bundle's meta so that tuning knows which operators the model never learned."""
    tasks: dict[str, set] = {}
    for a in arrays:
        if "op_type" in a and "task_key" in a:
            for key, op in zip(a["task_key"].tolist(), a["op_type"].tolist()):
                tasks.setdefault(str(op), set()).add(key)
    return {op: len(keys) for op, keys in sorted(tasks.items())}


@dataclass
class ModelBundle:
    model_name: str
    model: torch.nn.Module
    featurizer: Any  # a featurizer of tcl.features.kinds: Tokenizer, PerStoreFeaturizer, PacmFeaturizer
    platform: str
    spec_vector: list[float]
    meta: dict[str, Any]

    @classmethod
    def fitted(cls, model_name: str, model: torch.nn.Module, featurizer: Any, platform: Any,
               train: dict[str, np.ndarray], **meta: Any) -> "ModelBundle":
        """A model fitted on `train` for `platform` (a tcl.platforms.Platform); the meta keeps what the fit saw
        (rows and training tasks per operator type: tuning tells familiar operators from new ones by it)."""
        return cls(model_name, model, featurizer, platform.name, list(platform.spec_vector),
                   {"train_rows": int(len(train["x"])), "op_types": op_type_tasks(train), **meta})

    def score_steps(self, steps_lists: Sequence, spec_vectors: Any = None) -> np.ndarray:
        """Scores (higher = faster) of schema step sequences, on this bundle's platform by default."""
        specs = spec_vectors if spec_vectors is not None else [self.spec_vector] * len(steps_lists)
        return predict(self.model, self.featurizer.transform(steps_lists, specs))

    def featurize_candidates(self, context, candidates: Sequence, spec_vector: Any = None) -> np.ndarray:
        """The model's input for MetaSchedule candidates of one TuneContext."""
        spec = self.spec_vector if spec_vector is None else spec_vector
        return self.featurizer.featurize_candidates(context, candidates, spec)

    def score_candidates(self, context, candidates: Sequence, spec_vector: Any = None) -> np.ndarray:
        """Scores (higher = faster) of MetaSchedule candidates, as a cost model's predict needs them."""
        return predict(self.model, self.featurize_candidates(context, candidates, spec_vector))

    @property
    def op_types(self) -> dict[str, int] | None:
        """Training tasks per operator type (`op_type_tasks`); None for a bundle saved before it was kept."""
        return self.meta.get("op_types")

    def save(self, directory: str | Path) -> Path:
        directory = Path(directory)
        directory.mkdir(parents=True, exist_ok=True)
        torch.save(self.model.state_dict(), directory / "model.pt")
        kind = self.featurizer.input_kind
        self.featurizer.save(directory / self.featurizer.file_name)
        hparams = {k: v for k, v in self.model.hparams.items() if k not in ("feat_dim", "seq_len")}
        rows, cols = self.featurizer.feature_shape
        (directory / BUNDLE_FILE).write_text(json.dumps({
            "model_name": self.model_name, "hparams": hparams, "features": kind, "feature_shape": [rows, cols],
            "platform": self.platform, "spec_vector": self.spec_vector, "meta": self.meta}, indent=2))
        return directory

    @classmethod
    def load(cls, directory: str | Path) -> "ModelBundle":
        directory = Path(directory)
        path = directory / BUNDLE_FILE
        if not path.exists():
            raise FileNotFoundError(f"{directory}: not a model bundle (no {BUNDLE_FILE})")
        info = json.loads(path.read_text())
        featurizer = featurizer_class(info.get("features", TOKENS), str(path))
        rows, cols = info["feature_shape"]
        model = build_model(info["model_name"], feat_dim=cols, seq_len=rows, **info["hparams"])
        model.load_state_dict(torch.load(directory / "model.pt", map_location="cpu", weights_only=True))
        model.eval()
        return cls(model_name=info["model_name"], model=model,
                   featurizer=featurizer.load(directory / featurizer.file_name),
                   platform=info["platform"], spec_vector=info["spec_vector"], meta=info.get("meta", {}))
