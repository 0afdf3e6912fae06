"""What a model is trained on: the featurize stage's tokens, TVM's PerStoreFeature, or PaCM's
PerStoreFeature + dataflow blocks.

Every model of the train stage sees the same rows, labels, groups and splits; only `x`
differs. Tenset-MLP reads PerStoreFeature (as TVM's own MLP and XGB cost models do),
extracted from the same validated records by replaying each trace (cached per platform
next to the features, so a retrain extracts nothing again); PaCM adds the dataflow blocks of
each replayed program in the training platform's cache levels (cached the same way).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from ..features import dataflow, per_store
from ..features.dataset import load_tokenizer
from ..features.kinds import PACM, PER_STORE, TOKENS
from ..models import MODELS
from ..platforms import get_platform


def model_inputs(model_name: str, platform: str, params: dict[str, Any], features_dir: str | Path,
                 splits: dict[str, dict[str, np.ndarray]], records_root: str | Path = "data/records", log=print
                 ) -> tuple[dict[str, dict[str, np.ndarray]], Any]:
    """(splits with the model's `x`, the featurizer that makes that `x` from MetaSchedule candidates)."""
    features_dir = Path(features_dir)
    kind = MODELS[model_name].input_kind
    if kind == TOKENS:
        return splits, load_tokenizer(features_dir)
    if kind not in (PER_STORE, PACM):
        raise ValueError(f"{model_name}: no training inputs for input kind {kind!r}")
    validated = Path((params.get("validate") or {}).get("validated_root", "data/validated"))
    records = validated / f"platform={platform}.parquet"
    roots = workload_stores(params, records_root)
    stores, summary = per_store.split_features(platform, records, roots, splits,
                                               per_store.default_cache_path(platform, features_dir.parent))
    missing = {name: m["rows"] for name, m in summary["missing"].items() if m["rows"]}
    log(f"{model_name}: PerStoreFeature of {sum(len(f) for f in stores.values())} programs "
        f"(up to {summary['max_rows']} stores each); without features (scored as all zeros): {missing or 0}")
    if kind == PER_STORE:
        width = int(summary["max_rows"])
        return ({name: {**arrays, "x": per_store.pad_stores(stores[name], width)} for name, arrays in splits.items()},
                per_store.PerStoreFeaturizer(width))
    levels = dataflow.platform_levels(get_platform(params, platform))
    blocks, flow = per_store.split_features(platform, records, roots, splits,
                                            dataflow.default_cache_path(platform, features_dir.parent),
                                            kind=dataflow.dataflow_rows(levels))
    missing = {name: m["rows"] for name, m in flow["missing"].items() if m["rows"]}
    log(f"{model_name}: dataflow blocks of the same programs (up to {flow['max_rows']} each, mean "
        f"{flow['mean_rows']:.1f}); without blocks: {missing or 0}")
    featurizer = dataflow.PacmFeaturizer(int(summary["max_rows"]), int(flow["max_rows"]), levels)
    return ({name: {**arrays, "x": featurizer.pack(stores[name], blocks[name])} for name, arrays in splits.items()},
            featurizer)


def workload_stores(params: dict[str, Any], records_root: str | Path = "data/records") -> list[str]:
    """Where the validated records' workloads are: `records_root` first, then every store that
    `validate.stores` reads (Tenset's, the tuning runs' -- a held-out network's tuning records
    would otherwise get no PerStoreFeature at all)."""
    roots = [str(records_root), *map(str, (params.get("validate") or {}).get("stores") or [])]
    return list(dict.fromkeys(roots))


def restrict_to_sample(split: dict[str, np.ndarray], sample_path: str | Path) -> dict[str, np.ndarray]:
    """The rows of `split` whose program is in the sample file (training on a sampled platform)."""
    with np.load(sample_path, allow_pickle=False) as data:
        keep = np.isin(split["program_id"], data["program_id"])
    if not keep.any():
        raise ValueError(f"{sample_path}: none of its programs is in this split; the sample is stale "
                         "(re-run the sample stage after featurize)")
    return {k: v[keep] for k, v in split.items()}
