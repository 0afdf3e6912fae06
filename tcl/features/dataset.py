"""Featurize the validated records of every training platform into training arrays.

One tokenizer (vocabularies, kind columns, number scaling) is fitted once, on the
union of all platforms' training splits, and one hardware normalizer on the spec
vectors of every registered platform of the kind: the same program gets the same
tokens on every platform and only the hardware row tells platforms apart, which is
what lets one model be shared or carried from platform to platform. The split is by
task and the same on every platform; nothing of the held-out networks is fitted on.
Output under `out_root`: `tokenizer.json`, `stats.json`, and per platform
`<platform>/{train,validation,test}.npz` with `x` (N, rows+1, cols) float32, `label`,
`group` (task index), `task_key`, `program_id`, `network`, `op_type`, `task_weight`, `mean_sec`.
Every file is written atomically: a killed run leaves whole files (a rerun redoes them all).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..compute import ComputeSettings, Units, serial_units
from ..data.splits import SPLITS, SplitSettings, add_labels, task_networks_of, task_splits
from ..data.store import atomic_write_bytes, atomic_write_npz
from ..platforms import Platform, load_platforms
from .settings import FeatureSettings
from .tokenizer import Tokenizer, sequence_stats

ARRAY_FIELDS = ("x", "label", "group", "task_key", "program_id", "network", "op_type", "task_weight", "mean_sec")


def featurize_steps(tokenizer: Tokenizer, steps: pa.Array, spec: list[float]) -> np.ndarray:
    """The unit of work: one chunk of programs' steps -> matrices (runs here or on a Dask worker)."""
    return tokenizer.transform(steps.to_pylist(), spec)


def _features(table: pa.Table, tokenizer: Tokenizer, spec: list[float], units: Units,
              chunk_rows: int) -> np.ndarray:
    """`x` of a split, `chunk_rows` programs per unit; rows are independent, so the chunks put
    together are the matrix of the whole split."""
    n = table.num_rows
    x = np.zeros((n, *tokenizer.feature_shape), np.float32)
    steps = table.column("steps")
    starts = range(0, n, chunk_rows)
    # A copy per chunk: a pickled slice would carry its whole parent column to a worker.
    jobs = ({"tokenizer": tokenizer, "steps": pa.concat_arrays(steps.slice(i, chunk_rows).chunks), "spec": spec}
            for i in starts)
    for i, chunk in zip(starts, units(featurize_steps, jobs)):
        x[i:i + len(chunk)] = chunk
    return x


def _arrays(table: pa.Table, tokenizer: Tokenizer, spec: list[float], units: Units = serial_units,
            chunk_rows: int = 20_000) -> dict[str, np.ndarray]:
    keys = np.asarray(table.column("task_key").to_pylist(), dtype=object)
    _, group = np.unique(keys, return_inverse=True) if len(keys) else (None, np.zeros(0, np.int64))
    mean = np.asarray([m if m is not None else np.nan for m in table.column("mean_sec").to_pylist()],
                      dtype=np.float64)
    return {
        "x": _features(table, tokenizer, spec, units, chunk_rows),
        "label": np.asarray(table.column("label").to_pylist(), dtype=np.float32),
        "group": group.astype(np.int64),
        "task_key": keys.astype(str),
        "program_id": np.asarray(table.column("program_id").to_pylist(), dtype=str),
        "network": np.asarray(table.column("network").to_pylist(), dtype=str),
        "op_type": np.asarray(table.column("op_type").to_pylist(), dtype=str),
        "task_weight": np.asarray(table.column("task_weight").to_pylist(), dtype=np.float64),
        "mean_sec": mean,
    }


def hardware_scale_specs(params: dict[str, Any], kind: str) -> list[list[float]]:
    """The spec vectors the hardware row's scale is fitted on: features.hardware_scale_platforms (pinned, so
    a platform declared later does not rescale every trained model's input), or every declared platform of
    `kind` when that is null."""
    declared = load_platforms(params)
    names = FeatureSettings.from_params(params).hardware_scale_platforms
    if names is None:
        return [p.spec_vector for p in declared.values() if p.kind == kind]
    unknown = [n for n in names if n not in declared]
    if unknown:
        raise ValueError(f"params.yaml features.hardware_scale_platforms: {unknown} not declared under `platforms:`")
    specs = [declared[n].spec_vector for n in names if declared[n].kind == kind]
    if not specs:
        raise ValueError(f"params.yaml features.hardware_scale_platforms names no {kind} platform")
    return specs


def featurize_platforms(platforms: list[Platform], params: dict[str, Any], validated_root: str | Path,
                        records_root: str | Path, out_root: str | Path,
                        units: Units = serial_units) -> dict[str, Any]:
    """Write every platform's split arrays and the one shared tokenizer; returns the stats written.

    `units` turns chunks of `compute.chunk_rows` programs into matrices (`featurize_steps`): in
    this process by default, or on Dask workers (tcl.compute); the arrays are the same either way.
    """
    kinds = {p.kind for p in platforms}
    if len(kinds) != 1:
        raise ValueError(f"train.platforms mixes kinds {sorted(kinds)}: CPU and GPU features need their own "
                         "featurize runs (their hardware rows have different fields)")
    kind = kinds.pop()
    tables = {p.name: pq.read_table(Path(validated_root) / f"platform={p.name}.parquet") for p in platforms}
    splits = platform_splits(tables, params, records_root)
    train_steps = [s for parts in splits.values() for s in parts["train"].column("steps").to_pylist()]
    if not train_steps:
        raise ValueError(f"{validated_root}: no training records after holding out "
                         f"{list(SplitSettings.from_params(params).holdout_networks)}; collect more networks")
    tokenizer = Tokenizer.for_kind(kind, **FeatureSettings.from_params(params).tokenizer_args(kind))
    tokenizer.fit(train_steps, hardware_scale_specs(params, kind))
    chunk_rows = ComputeSettings.from_params(params).chunk_rows
    out = Path(out_root)
    out.mkdir(parents=True, exist_ok=True)
    tokenizer.save(out / "tokenizer.json")
    stats: dict[str, Any] = {"feature_shape": list(tokenizer.feature_shape), "platforms": {}}
    for p in platforms:
        (out / p.name).mkdir(exist_ok=True)
        for name in SPLITS:
            arrays = _arrays(splits[p.name][name], tokenizer, p.spec_vector, units, chunk_rows)
            atomic_write_npz(out / p.name / f"{name}.npz", **arrays)
        stats["platforms"][p.name] = {
            "rows": {name: splits[p.name][name].num_rows for name in SPLITS},
            "tasks": {name: len(set(splits[p.name][name].column("task_key").to_pylist())) for name in SPLITS},
            "hardware_row": [round(float(v), 4) for v in tokenizer.hardware.transform(p.spec_vector, len(p.spec_vector))[0]],
            "sequence": sequence_stats(tables[p.name].column("steps").to_pylist()),
        }
    atomic_write_bytes(out / "stats.json", json.dumps(stats, indent=2, default=float).encode())
    return stats


def platform_splits(tables: dict[str, pa.Table], params: dict[str, Any],
                    records_root: str | Path) -> dict[str, dict[str, pa.Table]]:
    """{platform: {split: labelled table}}: one split by task for all platforms, with every task
    of a held-out network (by the instances in `_tasks.jsonl`) in test."""
    members: dict[str, list[str]] = {}
    for name in tables:
        members.update(task_networks_of(Path(records_root) / f"platform={name}"))
    union = pa.concat_tables(t.select(["task_key", "network"]) for t in tables.values())
    split_of = task_splits(union, **SplitSettings.from_params(params).kwargs(), task_networks=members)
    out = {}
    for name, table in tables.items():
        table = add_labels(table)
        marks = pa.array([split_of[k] for k in table.column("task_key").to_pylist()], pa.string())
        out[name] = {s: table.filter(pc.equal(marks, s)) for s in SPLITS}
    return out


def load_tokenizer(features_dir: str | Path) -> Tokenizer:
    """The shared tokenizer of a platform's feature directory (it lives one level up, for all platforms)."""
    return Tokenizer.load(Path(features_dir).parent / "tokenizer.json")


def load_split(directory: str | Path, split: str) -> dict[str, np.ndarray]:
    with np.load(Path(directory) / f"{split}.npz", allow_pickle=False) as data:
        return {k: data[k] for k in ARRAY_FIELDS}
