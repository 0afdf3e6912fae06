"""What a model is trained on: the featurize stage's tokens, or TVM's PerStoreFeature.

Every model of the train stage sees the same rows, labels, groups and splits; only `x`
differs. Tenset-MLP reads PerStoreFeature (as TVM's own MLP and XGB cost models do),
extracted from the same validated records by replaying each trace (cached per platform
next to the features, so a retrain extracts nothing again).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..features.dataset import load_tokenizer
from ..features.per_store import PerStoreFeaturizer, default_cache_path, pad_stores, per_store_splits
from ..features.tokenizer import Tokenizer
from ..features.kinds import TOKENS
from ..models import MODELS


def model_inputs(model_name: str, platform: str, params: dict[str, Any], features_dir: str | Path,
                 splits: dict[str, dict[str, np.ndarray]], records_root: str | Path = "data/records", log=print
                 ) -> tuple[dict[str, dict[str, np.ndarray]], Tokenizer | PerStoreFeaturizer]:
    """(splits with the model's `x`, the featurizer that makes that `x` from MetaSchedule candidates)."""
    features_dir = Path(features_dir)
    if MODELS[model_name].input_kind == TOKENS:
        return splits, load_tokenizer(features_dir)
    validated = Path((params.get("validate") or {}).get("validated_root", "data/validated"))
    feats, summary = per_store_splits(platform, validated / f"platform={platform}.parquet",
                                      records_root, splits, default_cache_path(platform, features_dir.parent))
    missing = {name: m["rows"] for name, m in summary["missing"].items() if m["rows"]}
    log(f"{model_name}: PerStoreFeature of {sum(len(f) for f in feats.values())} programs "
        f"(up to {summary['max_stores']} stores each); without features (scored as all zeros): {missing or 0}")
    width = int(summary["max_stores"])
    return ({name: {**arrays, "x": pad_stores(feats[name], width)} for name, arrays in splits.items()},
            PerStoreFeaturizer(width))


def restrict_to_sample(split: dict[str, np.ndarray], sample_path: str | Path) -> dict[str, np.ndarray]:
    """The rows of `split` whose program is in the sample file (training on a sampled platform)."""
    with np.load(sample_path, allow_pickle=False) as data:
        keep = np.isin(split["program_id"], data["program_id"])
    if not keep.any():
        raise ValueError(f"{sample_path}: none of its programs is in this split; the sample is stale "
                         "(re-run the sample stage after featurize)")
    return {k: v[keep] for k, v in split.items()}
