"""Featurize a platform's validated records into training arrays.

The tokenizer (vocabularies, normalization) is fitted on the training split only
and saved next to the arrays; validation and test rows are transformed with it,
so nothing about held-out networks leaks into the features.
Output, per platform directory: `{train,validation,test}.npz` with
`x` (N, rows+1, cols) float32, `label`, `group` (task index), `task_key`,
`network`, `task_weight`, `mean_sec`; `tokenizer.json`; `stats.json`.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from ..data.splits import SPLITS, split_tables
from ..platforms import Platform
from .tokenizer import Tokenizer, sequence_stats

ARRAY_FIELDS = ("x", "label", "group", "task_key", "network", "task_weight", "mean_sec")


def _arrays(table: pa.Table, tokenizer: Tokenizer, spec: list[float]) -> dict[str, np.ndarray]:
    steps = table.column("steps").to_pylist()
    keys = np.asarray(table.column("task_key").to_pylist(), dtype=object)
    _, group = np.unique(keys, return_inverse=True) if len(keys) else (None, np.zeros(0, np.int64))
    mean = np.asarray([m if m is not None else np.nan for m in table.column("mean_sec").to_pylist()],
                      dtype=np.float64)
    return {
        "x": tokenizer.transform(steps, spec) if steps else np.zeros((0, *tokenizer.feature_shape), np.float32),
        "label": np.asarray(table.column("label").to_pylist(), dtype=np.float32),
        "group": group.astype(np.int64),
        "task_key": keys.astype(str),
        "network": np.asarray(table.column("network").to_pylist(), dtype=str),
        "task_weight": np.asarray(table.column("task_weight").to_pylist(), dtype=np.float64),
        "mean_sec": mean,
    }


def featurize_platform(platform: Platform, params: dict[str, Any], validated: str | Path,
                       out_dir: str | Path) -> dict[str, Any]:
    """Write the split feature arrays of one platform; returns the stats written to stats.json."""
    cfg = params.get("features", {}).get(platform.kind, {})
    table = pq.read_table(validated)
    splits = split_tables(table, params)
    if splits["train"].num_rows == 0:
        raise ValueError(f"{validated}: no training records for {platform.name} after holding out "
                         f"{params.get('split', {}).get('holdout_networks')}; collect more networks")
    tokenizer = Tokenizer.for_kind(platform.kind, **cfg)
    tokenizer.fit(splits["train"].column("steps").to_pylist(), [platform.spec_vector])
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(out / "tokenizer.json")
    for name in SPLITS:
        np.savez_compressed(out / f"{name}.npz", **_arrays(splits[name], tokenizer, platform.spec_vector))
    stats = {
        "platform": platform.name,
        "feature_shape": list(tokenizer.feature_shape),
        "rows": {name: splits[name].num_rows for name in SPLITS},
        "tasks": {name: len(set(splits[name].column("task_key").to_pylist())) for name in SPLITS},
        "sequence": sequence_stats(table.column("steps").to_pylist()),
    }
    (out / "stats.json").write_text(json.dumps(stats, indent=2, default=float))
    return stats


def load_split(directory: str | Path, split: str) -> dict[str, np.ndarray]:
    with np.load(Path(directory) / f"{split}.npz", allow_pickle=False) as data:
        return {k: data[k] for k in ARRAY_FIELDS}
