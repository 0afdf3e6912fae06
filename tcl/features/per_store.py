"""TVM's PerStoreFeature for stored records: the input of the Tenset-MLP and XGB baselines.

A record keeps only the trace JSON; the features need the scheduled program. So each
record's schedule is rebuilt the way MetaSchedule's own `TuningRecord.as_measure_candidate`
does it (a fresh `Schedule` of the task's IRModule, `Trace.apply_json_to_schedule`), wrapped
in a `MeasureCandidate`, and handed to `PerStoreFeature.extract_from` with a `TuneContext`
for the workload and the record's target. One context per (task, target) batch.

A program gives one 164-wide vector per BufferStore (already log-scaled by TVM), so the
result is a ragged list of (n_stores, 164) float32 arrays, or None where no features
exist (no workload saved, e.g. Ansor records; a trace that no longer replays): the
reason is kept, nothing is dropped silently.

Extraction lowers every program and is slow, so results are cached per platform in one
.npz keyed by record_id; a rerun extracts only records the cache has not seen, and a
cache made by another TVM version or extractor configuration is ignored.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable, Sequence

import numpy as np
import pyarrow as pa

from ..data.store import atomic_write_bytes, atomic_write_npz
from .kinds import PER_STORE, register_featurizer

log = logging.getLogger(__name__)

FEATURE_DIM = 164  # PerStoreFeature() with its defaults (5 buffers/store, 10 curve samples, no workload part)
COLUMNS = ("record_id", "task_key", "target", "program")
EXTRACTOR_CONFIG = {"buffers_per_store": 5, "arith_intensity_curve_num_samples": 10,
                    "cache_line_bytes": 64, "extract_workload": False}


def default_cache_path(platform: str, features_root: str | Path = "data/features") -> Path:
    """Beside the platform's features; .dvcignore keeps it out of the featurize stage's output."""
    return Path(features_root) / f"{platform}.per_store.npz"


def workload_dir(store_root: str | Path, platform: str) -> Path:
    return Path(store_root) / f"platform={platform}" / "_workloads"


NO_WORKLOAD = "no workload"  # an error of where a run looked, not of the program: never a cached answer


def _tvm_version() -> str:
    import tvm

    return str(tvm.__version__)


def _target(target_json: str):
    import tvm

    return tvm.target.Target(json.loads(target_json))


def context(mod, target, num_threads: int = 1):
    """The TuneContext PerStoreFeature reads the target from.

    Constructing one imports TVM's tensor intrinsics: minutes in a process that has loaded MLflow
    and Prefect (the train flow), seconds through tcl.collect.intrinsics, so they are loaded that way first."""
    from tvm.s_tir import meta_schedule as ms

    from ..collect.intrinsics import load_tensor_intrinsics

    load_tensor_intrinsics()
    return ms.TuneContext(mod=mod, target=target, num_threads=num_threads)


def extractor():
    """TVM's PerStoreFeature with the configuration the cache is keyed on."""
    from tvm.s_tir import meta_schedule as ms

    return ms.feature_extractor.PerStoreFeature(**EXTRACTOR_CONFIG)


def replay(mod, programs: Sequence[str]) -> tuple[list, list[str]]:
    """MeasureCandidates rebuilt from trace JSON strings, as TuningRecord.as_measure_candidate does.

    Returns (candidates, errors); a trace that does not replay gives None and its error.
    """
    import tvm
    from tvm.s_tir import meta_schedule as ms

    args_info = ms.arg_info.ArgInfo.from_prim_func(mod["main"])
    cands, errors = [], []
    for program in programs:
        try:
            sch = tvm.s_tir.Schedule(mod)
            tvm.s_tir.Trace.apply_json_to_schedule(json.loads(program), sch)
        except Exception as exc:  # noqa: BLE001 - a trace that no longer replays is a per-record outcome
            msg = str(exc).strip()
            cands.append(None)
            errors.append("replay failed: " + (msg.splitlines()[-1] if msg else repr(exc))[:300])
            continue
        cands.append(ms.MeasureCandidate(sch, args_info))
        errors.append("")
    return cands, errors


def extract_task(mod, target, programs: Sequence[str], num_threads: int = 1,
                 chunk: int = 256) -> tuple[list[np.ndarray | None], list[str]]:
    """Features of several programs (trace JSON strings) of ONE workload on ONE target.

    Returns (features, errors): features[i] is (n_stores, 164) float32 or None, errors[i] is
    "" or why there are none.
    """
    import tvm

    if isinstance(mod, str):
        mod = tvm.ir.load_json(mod)
    if isinstance(target, str):
        target = _target(target)
    ctx = context(mod, target, num_threads)
    fe = extractor()
    replayed, errors = replay(mod, programs)
    feats: list[np.ndarray | None] = [None] * len(programs)
    where = [i for i, c in enumerate(replayed) if c is not None]
    cands = [replayed[i] for i in where]
    for lo in range(0, len(cands), chunk):
        batch, idx = cands[lo:lo + chunk], where[lo:lo + chunk]
        try:
            out = [f.numpy().astype(np.float32) for f in fe.extract_from(ctx, batch)]
        except Exception:  # noqa: BLE001 - one bad program must not sink its batch: retry one by one
            out = []
            for cand in batch:
                try:
                    out.append(fe.extract_from(ctx, [cand])[0].numpy().astype(np.float32))
                except Exception as exc:  # noqa: BLE001
                    out.append(f"extract failed: {str(exc).strip()[-300:]}")
        for i, f in zip(idx, out):
            if isinstance(f, str):
                errors[i] = f
            else:
                feats[i] = f.reshape(-1, FEATURE_DIM)
    return feats, errors


@dataclass(frozen=True)
class RowKind:
    """A kind of ragged per-program feature rows made from replayed records (PerStoreFeature's stores
    here, PaCM's dataflow blocks in tcl.features.dataflow): how one task's programs are extracted,
    and what a cache of them depends on besides TVM's version."""

    label: str
    dim: int
    extract_task: Callable  # (mod, target, programs, num_threads) -> (features, errors), as extract_task
    config: dict

    def meta(self) -> dict:
        return {"tvm": _tvm_version(), "extractor": self.config, "dim": self.dim}


PER_STORE_ROWS = RowKind("PerStoreFeature", FEATURE_DIM, extract_task, EXTRACTOR_CONFIG)


def extract_records(table: pa.Table, workload_dirs: Iterable[str | Path], num_threads: int = 1,
                    kind: RowKind = PER_STORE_ROWS) -> tuple[list[np.ndarray | None], list[str]]:
    """Features of every row of a record table, batched by (task_key, target)."""
    dirs = [Path(d) for d in workload_dirs]
    keys = table.column("task_key").to_pylist()
    targets = table.column("target").to_pylist()
    programs = table.column("program").to_pylist()
    feats: list[np.ndarray | None] = [None] * len(keys)
    errors = [""] * len(keys)
    batches: dict[tuple[str, str], list[int]] = {}
    for i, (k, t) in enumerate(zip(keys, targets)):
        batches.setdefault((k, t), []).append(i)
    for (key, target), rows in batches.items():
        path = next((d / f"{key}.json" for d in dirs if (d / f"{key}.json").exists()), None)
        if path is None:
            for i in rows:
                errors[i] = f"{NO_WORKLOAD} {key}.json in {[str(d) for d in dirs]}"
            continue
        f, e = kind.extract_task(path.read_text(), target, [programs[i] for i in rows], num_threads)
        for i, fi, ei in zip(rows, f, e):
            feats[i], errors[i] = fi, ei
    return feats, errors


@dataclass
class FeatureCache:
    """record_id -> (n_rows, kind.dim) features or an error, persisted as one .npz."""

    path: Path
    feats: dict[str, np.ndarray | None]
    errors: dict[str, str]
    kind: RowKind = PER_STORE_ROWS

    @classmethod
    def load(cls, path: str | Path, kind: RowKind = PER_STORE_ROWS) -> "FeatureCache":
        path = Path(path)
        cache = cls(path, {}, {}, kind)
        if not path.exists():
            return cache
        with np.load(path, allow_pickle=False) as z:
            meta = json.loads(str(z["meta"]))
            if meta != kind.meta():
                log.warning("%s was made by %s; ignoring it (now %s)", path, meta, kind.meta())
                return cache
            ids, offsets, data, errs = z["record_id"], z["offsets"], z["features"], z["error"]
        for j, rid in enumerate(ids.tolist()):
            cache.errors[rid] = str(errs[j])
            cache.feats[rid] = None if errs[j] else data[offsets[j]:offsets[j + 1]]
        return cache

    def save(self) -> None:
        ids = sorted(self.feats)
        sizes = [0 if self.feats[r] is None else len(self.feats[r]) for r in ids]
        offsets = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        parts = [self.feats[r] for r in ids if self.feats[r] is not None]
        data = np.concatenate(parts) if parts else np.zeros((0, self.kind.dim), np.float32)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_npz(self.path, meta=json.dumps(self.kind.meta()), record_id=np.asarray(ids, dtype=str),
                         offsets=offsets, features=data.astype(np.float32),
                         error=np.asarray([self.errors[r] for r in ids], dtype=str))


def record_features(table: pa.Table, workload_dirs: Iterable[str | Path], cache_path: str | Path | None = None,
                    num_threads: int = 1, kind: RowKind = PER_STORE_ROWS
                    ) -> tuple[list[np.ndarray | None], list[str]]:
    """Features (and errors) of `kind` for every row of `table`, extracting only what the cache lacks."""
    cache = FeatureCache.load(cache_path, kind) if cache_path else FeatureCache(Path(), {}, {}, kind)
    ids = table.column("record_id").to_pylist()
    missing = sorted({r for r in ids if r not in cache.feats or cache.errors.get(r, "").startswith(NO_WORKLOAD)})
    if missing:
        wanted = pa.array(missing)
        import pyarrow.compute as pc

        todo = table.select(list(COLUMNS)).filter(pc.is_in(table.column("record_id"), value_set=wanted))
        _, first = np.unique(np.asarray(todo.column("record_id").to_pylist(), dtype=object), return_index=True)
        todo = todo.take(pa.array(np.sort(first)))
        log.info("%s: extracting %d record(s) (%d cached)", kind.label, todo.num_rows, len(ids) - len(missing))
        feats, errors = extract_records(todo, workload_dirs, num_threads, kind)
        learned = False  # a retry that again found no workload has nothing new to write
        for rid, f, e in zip(todo.column("record_id").to_pylist(), feats, errors):
            learned |= cache.errors.get(rid) != e or rid not in cache.feats
            cache.feats[rid], cache.errors[rid] = f, e
        if cache_path and learned:
            cache.save()
    return [cache.feats[r] for r in ids], [cache.errors[r] for r in ids]


def pad_stores(feats: Sequence[np.ndarray | None], max_stores: int | None = None) -> np.ndarray:
    """(N, S, 164) float32, zero rows after each program's stores (see TensetMLP for why zeros are safe).

    Programs with more than `max_stores` stores are truncated (logged); None becomes all zeros.
    """
    sizes = [0 if f is None else len(f) for f in feats]
    width = max(max_stores if max_stores is not None else max(sizes, default=0), 1)
    out = np.zeros((len(feats), width, FEATURE_DIM), np.float32)
    cut = 0
    for i, f in enumerate(feats):
        if f is not None and len(f):
            cut += len(f) > width
            out[i, :min(len(f), width)] = f[:width]
    if cut:
        log.warning("pad_stores: %d program(s) have more than %d stores and were truncated", cut, width)
    return out


def sum_stores(feats: Sequence[np.ndarray | None]) -> np.ndarray:
    """(N, 164): per-program sum over stores (TVM XGBModel's pack-sum, taken on the input side)."""
    out = np.zeros((len(feats), FEATURE_DIM), np.float32)
    for i, f in enumerate(feats):
        if f is not None and len(f):
            out[i] = f.sum(axis=0)
    return out


def split_features(platform: str, validated: str | Path, store_roots: Sequence[str | Path],
                   token_splits: dict[str, dict[str, np.ndarray]], cache_path: str | Path | None = None,
                   num_threads: int = 1, kind: RowKind = PER_STORE_ROWS
                   ) -> tuple[dict[str, list[np.ndarray | None]], dict[str, Any]]:
    """Features of `kind` (PerStoreFeature by default) of every split, row for row with the featurize
    stage's token arrays, plus a summary.

    Rows are matched by program id against the platform's validated records (the program, its
    task and target are all the features depend on), so the splits are exactly the featurize
    stage's; a program the records lack means stale features and fails loudly. A task's workload
    is looked up in every store of `store_roots` (validated records come from several: the
    collection's, Tenset's, the tuning runs')."""
    import time

    import pyarrow.parquet as pq

    table = pq.read_table(validated, columns=[*COLUMNS, "program_id"])
    row_of: dict[str, int] = {}
    for i, pid in enumerate(table.column("program_id").to_pylist()):
        row_of.setdefault(pid, i)
    feats, summary = {}, {"cache": str(cache_path or ""), "missing": {}}
    for name, arr in token_splits.items():
        rows = [row_of.get(pid) for pid in arr["program_id"].tolist()]
        if None in rows:
            raise ValueError(f"{validated} lacks {rows.count(None)} program(s) of the {name} features of "
                             f"{platform}: the features are stale, run `dvc repro featurize` first")
        part = table.take(pa.array(rows, pa.int64()))
        start = time.perf_counter()
        feats[name], errors = record_features(part, [workload_dir(r, platform) for r in store_roots], cache_path,
                                              num_threads, kind)
        bad = [e for e in errors if e]
        summary["missing"][name] = {"rows": len(bad), "first_errors": sorted(set(bad))[:3]}
        summary[f"{name}_seconds"] = round(time.perf_counter() - start, 2)
    sizes = [len(f) for fs in feats.values() for f in fs if f is not None]
    summary["max_rows"] = max(sizes, default=1)
    summary["mean_rows"] = float(np.mean(sizes)) if sizes else 0.0
    return feats, summary


def candidate_stores(context, candidates: Sequence) -> list[np.ndarray]:
    """PerStoreFeature rows, (n_stores, FEATURE_DIM) float32, of MetaSchedule candidates of one TuneContext:
    what the featurizers of live candidates (Tenset-MLP's, PaCM's) start from."""
    return [f.numpy().astype(np.float32).reshape(-1, FEATURE_DIM)
            for f in extractor().extract_from(context, list(candidates))]


def write_featurizer_file(path: str | Path, fmt: str, fields: dict) -> Path:
    """A featurizer's settings as a model-bundle file, stamped with its format."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, (json.dumps({"format": fmt, **fields}, indent=1) + "\n").encode())
    return path


def read_featurizer_file(path: str | Path, fmt: str, made_by: dict) -> dict:
    """A featurizer file's settings; ValueError naming the file when it is of another format or was made by
    another extractor than this code's (`made_by`: the fields that must match, e.g. the extractor config),
    since a model trained on other features would score candidates with inputs it never saw."""
    info = json.loads(Path(path).read_text())
    if info.get("format") != fmt:
        raise ValueError(f"{path}: not a {fmt} featurizer file (format {info.get('format')!r})")
    found = {key: info.get(key) for key in made_by}
    if found != made_by:
        raise ValueError(f"{path}: trained on features made by {found}; this code makes {made_by}")
    return info


@register_featurizer
class PerStoreFeaturizer:
    """The model input of Tenset-MLP for MetaSchedule candidates: TVM's own extractor, padded stores.

    Plays the tokenizer's part in a model bundle. It has nothing fitted: TVM's features are
    already log-scaled, and the model sums over however many stores a program has, so
    `max_stores` (the training width) is recorded for information and the padding only
    has to be wide enough for the batch at hand.
    """

    input_kind = PER_STORE
    file_name = "per_store.json"  # in a model bundle (tcl.models.bundle)
    lowers_programs = True  # each candidate is lowered to extract it: worth caching (tcl.tvm.cost_model)

    def __init__(self, max_stores: int = 1):
        self.max_stores = int(max_stores)

    @property
    def feature_shape(self) -> tuple[int, int]:
        return self.max_stores, FEATURE_DIM

    def featurize_candidates(self, context, candidates: Sequence, spec_vector: Any = None) -> np.ndarray:
        """(N, stores, 164) float32 for candidates of one TuneContext (its target decides the features)."""
        return pad_stores(candidate_stores(context, candidates))

    def save(self, path: str | Path) -> Path:
        return write_featurizer_file(path, "tcl-per-store-1", {"max_stores": self.max_stores, **PER_STORE_ROWS.meta()})

    @classmethod
    def load(cls, path: str | Path) -> "PerStoreFeaturizer":
        return cls(read_featurizer_file(path, "tcl-per-store-1", {"extractor": EXTRACTOR_CONFIG})["max_stores"])
