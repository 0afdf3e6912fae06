"""PaCM's input (Pruner §4.2): TVM's per-store features plus the program's temporal dataflow.

Pruner describes a tiled program by the data blocks it moves between memory levels, in the order
they are used. Here a block is one buffer access of one statement, in program order (a statement's
loads, then its store), with the bytes of it that move into each level of a CPU core's storage
(registers, L1, L2, L3; tcl.features.loop_nest, the analysis PSA estimates latency from), the tile
of it kept there, its reuse, stride and the loops around it (parallel, vector, unroll): one row of
DATAFLOW_DIM, log-scaled as TVM scales its own features.

A model reads both kinds of rows in one dense (programs, stores + blocks, PACKED_DIM) array: the
stores first, then the blocks, the last column saying which a row is (1 store, 2 block, 0 padding),
because the shared training loop takes dense arrays.
"""

from __future__ import annotations

import math
from functools import partial
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from .kinds import PACM, register_featurizer
from .loop_nest import PARALLEL, VECTORIZED, LoopNest, StatementTiles, cpu_levels, loop_nest, moves
from .per_store import (EXTRACTOR_CONFIG, FEATURE_DIM, RowKind, candidate_stores, pad_stores, read_featurizer_file, replay,
                        write_featurizer_file)

DATAFLOW_VERSION = 1     # bump when a row's meaning changes: caches of another version are ignored
DATAFLOW_DIM = 25
PACKED_DIM = FEATURE_DIM + 1
STORE_ROW, BLOCK_ROW = 1.0, 2.0
LEVEL_NAMES = ("registers", "l1", "l2", "l3")  # cpu_levels' order; a row's columns follow it
L1 = LEVEL_NAMES.index("l1")


def default_cache_path(platform: str, features_root: str | Path = "data/features") -> Path:
    """Beside the platform's features, like the PerStoreFeature cache (.dvcignore keeps both out)."""
    return Path(features_root) / f"{platform}.dataflow.npz"


def platform_levels(platform) -> list[tuple[str, float, int]]:
    """The storage levels a platform's blocks move through; CPUs only (a GPU's would be registers,
    shared and global memory, which this extractor does not describe yet)."""
    if platform.kind != "cpu":
        raise ValueError(f"PaCM's dataflow features describe CPU cache levels; platform '{platform.name}' "
                         f"is of kind {platform.kind!r}")
    return [(name, float(capacity), int(unit)) for name, capacity, unit in cpu_levels(platform.specs)]


def _log(x: float) -> float:
    return math.log2(1.0 + max(float(x), 0.0))


def _stride(access, loop: int) -> int:
    """Elements the access moves per iteration of `loop` (row-major)."""
    stride, inner = 0, 1
    for ix, size in zip(reversed(access.indices), reversed(access.shape)):
        stride += dict(ix.coefs).get(loop, 0) * inner
        inner *= min(size, 1 << 20)
    return abs(stride)


def block_rows(nest: LoopNest, levels: Sequence[tuple[str, float, int]]) -> np.ndarray:
    """(blocks, DATAFLOW_DIM) float32: one row per buffer access of each statement, in program order."""
    if [name for name, _, _ in levels] != list(LEVEL_NAMES):
        raise ValueError(f"dataflow rows need the storage levels {list(LEVEL_NAMES)} in that order, got "
                         f"{[name for name, _, _ in levels]}")
    rows = []
    last = max(len(nest.statements) - 1, 1)
    for pos, stmt in enumerate(nest.statements):
        loops = [nest.loops[i] for i in stmt.loops]
        inner_id = stmt.loops[-1] if stmt.loops else None
        inner = loops[-1] if loops else None
        iterations = nest.iterations(stmt)
        parallel = math.prod(lp.extent for lp in loops if lp.kind == PARALLEL)
        per_level, depths, tiles = [], [], StatementTiles(stmt, nest)
        for _, capacity, unit in levels:
            depth, moved = moves(stmt, nest, capacity, unit, tiles)
            per_level.append(moved)
            depths.append(depth)
        order = sorted(range(len(stmt.accesses)), key=lambda j: stmt.accesses[j].buffer == stmt.store)
        for j in order:
            a = stmt.accesses[j]
            tiles = [per_level[k][j][1] for k in range(len(levels))]
            moved = [per_level[k][j][2] for k in range(len(levels))]
            size = math.prod(min(s, 1 << 20) for s in a.shape) * a.dtype_bytes
            rows.append([
                float(a.buffer == stmt.store), float(a.scope == "global"), _log(a.dtype_bytes), _log(size),
                float(inner_id is not None and a.contiguous_in(inner_id)),
                _log(_stride(a, inner_id)) if inner_id is not None else 0.0,
                float(inner_id is not None and a.depends_on(inner_id)),
                float(all(ix.exact for ix in a.indices)),
                *(_log(m) for m in moved), *(_log(t) for t in tiles),
                _log(iterations * a.dtype_bytes / max(moved[L1], 1.0)),
                _log(iterations), _log(stmt.ops), _log(parallel),
                _log(inner.extent) if inner is not None and inner.kind == VECTORIZED else 0.0,
                _log(inner.unroll_step) if inner is not None else 0.0,
                pos / last, _log(len(loops)),
                depths[L1] / max(len(loops), 1),
            ])
    return np.asarray(rows, np.float32).reshape(-1, DATAFLOW_DIM)


def extract_dataflow_task(mod, target, programs: Sequence[str], num_threads: int = 1,
                          levels: Sequence = ()) -> tuple[list[np.ndarray | None], list[str]]:
    """Block rows of several programs (trace JSON strings) of one workload, as per_store.extract_task."""
    import tvm

    del target, num_threads  # the loop nest does not depend on them; the levels carry the hardware
    if isinstance(mod, str):
        mod = tvm.ir.load_json(mod)
    cands, errors = replay(mod, programs)
    feats: list[np.ndarray | None] = []
    for i, cand in enumerate(cands):
        if cand is None:
            feats.append(None)
            continue
        try:
            feats.append(block_rows(loop_nest(cand.sch.mod), levels))
        except Exception as exc:  # noqa: BLE001 - one program's analysis failing is that record's outcome
            feats.append(None)
            errors[i] = f"dataflow failed: {str(exc).strip()[-300:]}"
    return feats, errors


def dataflow_rows(levels: Sequence) -> RowKind:
    """The RowKind of block rows for these storage levels (a cache made for other levels is ignored)."""
    levels = [list(level) for level in levels]
    return RowKind("dataflow", DATAFLOW_DIM, partial(extract_dataflow_task, levels=levels),
                   {"dataflow": DATAFLOW_VERSION, "levels": levels})


def pack(stores: Sequence[np.ndarray | None], blocks: Sequence[np.ndarray | None], max_stores: int,
         max_blocks: int) -> np.ndarray:
    """(N, max_stores + max_blocks, PACKED_DIM) float32: stores, then blocks, each row typed in the
    last column; a program's extra rows beyond the widths are cut."""
    out = np.zeros((len(stores), max_stores + max_blocks, PACKED_DIM), np.float32)
    out[:, :max_stores, :FEATURE_DIM] = pad_stores(stores, max_stores)[:, :max_stores]
    for i, (s, b) in enumerate(zip(stores, blocks)):
        out[i, :min(0 if s is None else len(s), max_stores), -1] = STORE_ROW
        if b is not None and len(b):
            n = min(len(b), max_blocks)
            out[i, max_stores:max_stores + n, :DATAFLOW_DIM] = b[:n]
            out[i, max_stores:max_stores + n, -1] = BLOCK_ROW
    return out


@register_featurizer
class PacmFeaturizer:
    """PaCM's input for MetaSchedule candidates: TVM's PerStoreFeature and the block rows, packed.

    Plays the tokenizer's part in a model bundle: it keeps the training widths and the storage
    levels of the platform the model was trained for (its blocks are described in those levels)."""

    input_kind = PACM
    file_name = "pacm.json"
    lowers_programs = True  # PerStoreFeature lowers each candidate: worth caching (tcl.tvm.cost_model)

    def __init__(self, max_stores: int, max_blocks: int, levels: Sequence):
        self.max_stores, self.max_blocks = int(max_stores), int(max_blocks)
        self.levels = [tuple(level) for level in levels]

    @property
    def feature_shape(self) -> tuple[int, int]:
        return self.max_stores + self.max_blocks, PACKED_DIM

    def pack(self, stores: Sequence, blocks: Sequence) -> np.ndarray:
        return pack(stores, blocks, self.max_stores, self.max_blocks)

    def featurize_candidates(self, context, candidates: Sequence, spec_vector: Any = None) -> np.ndarray:
        candidates = list(candidates)
        blocks = [block_rows(loop_nest(c.sch.mod), self.levels) for c in candidates]
        return self.pack(candidate_stores(context, candidates), blocks)

    def save(self, path: str | Path) -> Path:
        return write_featurizer_file(path, "tcl-pacm-1", {
            "max_stores": self.max_stores, "max_blocks": self.max_blocks, "levels": [list(x) for x in self.levels],
            "extractor": EXTRACTOR_CONFIG, "dataflow": DATAFLOW_VERSION})

    @classmethod
    def load(cls, path: str | Path) -> "PacmFeaturizer":
        info = read_featurizer_file(path, "tcl-pacm-1", {"extractor": EXTRACTOR_CONFIG, "dataflow": DATAFLOW_VERSION})
        return cls(info["max_stores"], info["max_blocks"], info["levels"])
