"""Schedule-primitive tokenizer: a program's steps -> a fixed-size float32 matrix.

Follows TLP §4 (one row per primitive: kind, then numeric args, then tokens of
string args, cropped/padded) and TCL §5.1 (one extra hardware row), giving
(rows + 1, cols): 26x22 on CPU, 40+1 x 20 on GPU with the papers' defaults.

Matrix layout. Row 0 (`HW_ROW`) is the platform's hardware row (see hardware.py);
first, so a causal sequence model conditions every primitive on the hardware.
Rows 1..rows are the first `rows` primitives (TLP keeps the head and crops the
tail); missing rows are zeros. A primitive row is `[kind block | args]`:

* kind block, `kind_width = min(kind_cols, n_kinds + 1)` columns (default
  `kind_cols = cols // 2`: 11 of 22, 10 of 20). Ansor has ~11 step codes, so
  TLP's plain one-hot fits; MetaSchedule has ~30 instruction kinds, which would
  eat the whole row. So the block is a one-hot over the `kind_width - 1` most
  frequent training kinds plus one "other" column: a rarer kind sets it to
  `(rank among rare kinds + 1) / (n_rare + 1)` (distinct, in (0, 1)), an unseen
  kind sets it to 1.0. Frequent kinds keep TLP's clean one-hot, every kind stays
  distinguishable, and half the row is left for the arguments, which hold the
  sampled decisions that tell two programs of one design space apart.
  `kind_cols=1` degenerates to a single kind-id column.
* args, `cols - kind_width` columns: the numeric args in order, then the string
  args' vocabulary ids, cropped at the width - except that a row with more
  numbers than columns keeps its LAST number in the last column, since
  MetaSchedule steps end with the sampled decision (a GPU SampleCategorical has
  up to 17 numbers: candidates, probabilities, then the chosen index).
  Numbers are `slog1p(x) / s`, with `s` the largest `|slog1p|` seen in training: tile sizes and unroll steps are
  multiplicative (4->8 matters like 256->512) and span 1..1e4, while flags and
  probabilities sit in [0, 1]; one global scale (not per column) because a
  column mixes different arguments of different kinds, and the same tile size
  should read the same in Split and SamplePerfectTile. Strings become
  `id / (n_strings + 1)`: id 0 is padding, 1 unknown, known strings 2.. in
  frequency order.

Crop sizes: the defaults are the papers' (Ansor programs have ~21 steps);
MetaSchedule traces are longer (34-36 primitives for a 128^3 matmul, ~50 CPU /
~70 GPU for a small conv2d), so choose `rows` from `sequence_stats` or drop the
handle lookups (`skip_kinds=("GetLoops", "GetSBlock", ...)`) for those.

Vocabularies and scales are fitted on training data only (`fit`), stored as
JSON (`save`/`load`); `transform` never changes them. `featurize_traces` is the
tuning-time fast path: it reads MetaSchedule traces straight from TVM's
containers (one FFI call per element, no Python JSON round trip) and gives the
same matrix as `transform(trace_to_steps(trace.as_json()))`.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from pathlib import Path
from typing import Any, Iterable, Sequence

import numpy as np

from tcl.data.store import atomic_write_bytes
from tcl.features import ffi_arrays
from tcl.features.hardware import HardwareNormalizer, slog1p
from tcl.features.kinds import TOKENS, register_featurizer

FORMAT = "tcl.features.tokenizer/1"
PAD_ID, UNK_ID = 0, 1  # token ids of kinds and strings; known tokens start at 2
HW_ROW = 0
PAPER_SHAPES = {"cpu": (25, 22), "gpu": (40, 20)}  # (rows, cols) before the hardware row

Steps = Sequence[dict[str, Any]]


def _kept(steps: Steps, skip: frozenset, rows: int) -> list[dict[str, Any]]:
    """The primitives that get a row: skipped kinds dropped, then the first `rows`."""
    if skip:
        steps = [s for s in steps if s["kind"] not in skip]
    return list(steps[:rows])


def _by_frequency(counts: Counter) -> list[str]:
    """Most frequent first, ties by name: ids do not depend on the order of the data."""
    return [k for k, _ in sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))]


@register_featurizer
class Tokenizer:
    """Fitted vocabularies + scales; `transform` turns step lists into feature matrices."""

    input_kind = TOKENS
    file_name = "tokenizer.json"  # in a model bundle (tcl.models.bundle)

    def __init__(self, rows: int = 25, cols: int = 22, kind_cols: int | None = None,
                 skip_kinds: Iterable[str] = ()):
        kind_cols = cols // 2 if kind_cols is None else kind_cols
        if rows < 1 or cols < 2:
            raise ValueError(f"need rows >= 1 and cols >= 2, got {rows}x{cols}")
        if not 1 <= kind_cols < cols:
            raise ValueError(f"kind_cols must be in [1, cols), got {kind_cols} for cols={cols}")
        self.rows, self.cols, self.kind_cols = int(rows), int(cols), int(kind_cols)
        self.skip_kinds = tuple(sorted(set(skip_kinds)))
        self.kinds: list[str] = []
        self.strings: list[str] = []
        self.num_scale = 1.0
        self.hardware = HardwareNormalizer()
        self.fit_info: dict[str, Any] = {}
        self._fitted = False
        self._index()

    @classmethod
    def for_kind(cls, platform_kind: str, **kwargs: Any) -> "Tokenizer":
        """The papers' shape for a platform kind ("cpu": 25x22, "gpu": 40x20)."""
        rows, cols = PAPER_SHAPES[platform_kind]
        return cls(rows=kwargs.pop("rows", rows), cols=kwargs.pop("cols", cols), **kwargs)

    # ---- vocabulary -------------------------------------------------------------------
    @property
    def fitted(self) -> bool:
        return self._fitted

    @property
    def kind_width(self) -> int:
        return min(self.kind_cols, len(self.kinds) + 1)

    @property
    def arg_width(self) -> int:
        return self.cols - self.kind_width

    @property
    def feature_shape(self) -> tuple[int, int]:
        return self.rows + 1, self.cols

    def kind_id(self, kind: str) -> int:
        return self._kind_ids.get(kind, UNK_ID)

    def string_id(self, s: str) -> int:
        return self._string_ids.get(s, UNK_ID)

    def _index(self) -> None:
        """Derived lookups: token ids and the kind block of every kind id."""
        self._skip = frozenset(self.skip_kinds)
        self._kind_ids = {k: i + 2 for i, k in enumerate(self.kinds)}
        self._string_ids = {s: i + 2 for i, s in enumerate(self.strings)}
        kw = self.kind_width
        n_hot = kw - 1
        n_rare = max(0, len(self.kinds) - n_hot)
        table = np.zeros((len(self.kinds) + 2, kw), dtype=np.float32)
        table[UNK_ID, kw - 1] = 1.0
        for rank in range(len(self.kinds)):
            if rank < n_hot:
                table[rank + 2, rank] = 1.0
            else:
                table[rank + 2, kw - 1] = (rank - n_hot + 1) / (n_rare + 1)
        self._kind_table = table

    # ---- fit / transform ----------------------------------------------------------------
    def fit(self, steps_lists: Iterable[Steps], spec_vectors: Any) -> "Tokenizer":
        """Learn kinds, strings, the numeric scale and the hardware scales (training data only)."""
        kinds, strings = Counter(), Counter()
        max_abs, n_seq, n_steps = 0.0, 0, 0
        for steps in steps_lists:
            n_seq += 1
            for st in _kept(steps, self._skip, self.rows):
                n_steps += 1
                kinds[st["kind"]] += 1
                strings.update(st["strs"])
                for x in st["nums"]:
                    max_abs = max(max_abs, abs(float(x)))
        if n_seq == 0:
            raise ValueError("fit needs at least one training program")
        self.kinds, self.strings = _by_frequency(kinds), _by_frequency(strings)
        self.num_scale = math.log1p(max_abs) if max_abs > 0 else 1.0
        self.hardware = HardwareNormalizer().fit(spec_vectors)
        self.fit_info = {"sequences": n_seq, "steps": n_steps}
        self._fitted = True
        self._index()
        return self

    def fit_transform(self, steps_lists: Sequence[Steps], spec_vectors: Any) -> np.ndarray:
        return self.fit(steps_lists, spec_vectors).transform(steps_lists, spec_vectors)

    def transform(self, steps_lists: Sequence[Steps], spec_vectors: Any) -> np.ndarray:
        """(N, rows + 1, cols) float32. `spec_vectors`: one vector for all, or one per program."""
        if not self._fitted:
            raise RuntimeError("Tokenizer is not fitted: call fit() on training data or load()")
        steps_lists = list(steps_lists)
        n, rows, cols, kw, aw = len(steps_lists), self.rows, self.cols, self.kind_width, self.arg_width
        out = np.zeros((n, rows + 1, cols), dtype=np.float32)
        out[:, HW_ROW, :] = self.hardware.transform(spec_vectors, cols, n=n)
        if n == 0:
            return out
        # One pass in Python collects flat lists; numpy then scatters them in bulk.
        row_of, kind_of, counts, n_nums, vals = [], [], [], [], []
        kind_get, str_get, skip = self._kind_ids.get, self._string_ids.get, self._skip
        for i, steps in enumerate(steps_lists):
            base = i * (rows + 1) + 1  # row 0 of each matrix is the hardware row
            for r, st in enumerate(_kept(steps, skip, rows)):
                row_of.append(base + r)
                kind_of.append(kind_get(st["kind"], UNK_ID))
                nums = st["nums"]
                if len(nums) > aw:  # keep the head and the last one: MetaSchedule's decision
                    nums = [*nums[:aw - 1], nums[-1]]
                vals.extend(nums)
                k = len(nums)
                if k < aw:
                    strs = st["strs"][:aw - k]
                    vals.extend([str_get(s, UNK_ID) for s in strs])
                    counts.append(k + len(strs))
                else:
                    counts.append(k)
                n_nums.append(k)
        body = out.reshape(n * (rows + 1), cols)  # a view of every row of the batch
        row_idx = np.asarray(row_of, dtype=np.int64)
        body[row_idx, :kw] = self._kind_table[np.asarray(kind_of, dtype=np.int64)]
        counts_a = np.asarray(counts, dtype=np.int64)
        if counts_a.sum():
            starts = np.repeat(np.cumsum(counts_a) - counts_a, counts_a)
            col = np.arange(starts.shape[0]) - starts
            v = np.asarray(vals, dtype=np.float64)
            is_num = col < np.repeat(np.asarray(n_nums, dtype=np.int64), counts_a)
            v = np.where(is_num, slog1p(v) / self.num_scale, v / (len(self.strings) + 1))
            body[np.repeat(row_idx, counts_a), kw + col] = v
        return out

    def featurize_traces(self, traces: Sequence[Any], spec_vector: Any) -> np.ndarray:
        """Fast path for tuning: MetaSchedule Trace objects (or candidates/schedules/trace JSON)."""
        return self.transform([trace_steps(t) for t in traces], spec_vector)

    def featurize_candidates(self, context: Any, candidates: Sequence[Any], spec_vector: Any) -> np.ndarray:
        """A cost model's input from MetaSchedule candidates (the trace is all it reads; no lowering)."""
        return self.featurize_traces([c.sch.trace for c in candidates], spec_vector)

    # ---- persistence --------------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        if not self._fitted:
            raise RuntimeError("refusing to save an unfitted Tokenizer")
        return {"format": FORMAT, "rows": self.rows, "cols": self.cols, "kind_cols": self.kind_cols,
                "skip_kinds": list(self.skip_kinds), "kinds": self.kinds, "strings": self.strings,
                "num_scale": self.num_scale, "hardware": self.hardware.to_dict(),
                "fit_info": self.fit_info}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Tokenizer":
        if d.get("format") != FORMAT:
            raise ValueError(f"not a tokenizer file of format {FORMAT!r}: {d.get('format')!r}")
        tok = cls(rows=d["rows"], cols=d["cols"], kind_cols=d["kind_cols"], skip_kinds=d["skip_kinds"])
        tok.kinds, tok.strings = list(d["kinds"]), list(d["strings"])
        tok.num_scale = float(d["num_scale"])
        tok.hardware = HardwareNormalizer.from_dict(d["hardware"])
        tok.fit_info = dict(d.get("fit_info", {}))
        tok._fitted = True
        tok._index()
        return tok

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_bytes(path, (json.dumps(self.to_dict(), indent=1, sort_keys=True) + "\n").encode())
        return path

    @classmethod
    def load(cls, path: str | Path) -> "Tokenizer":
        return cls.from_dict(json.loads(Path(path).read_text()))


# ---- crop-size statistics ---------------------------------------------------------------
def _summary(xs: Sequence[float], percentiles: Sequence[float]) -> dict[str, float]:
    if not xs:
        return {"count": 0}
    a = np.asarray(xs, dtype=np.float64)
    d = {"count": int(a.size), "min": float(a.min()), "mean": float(a.mean()), "max": float(a.max())}
    d.update({f"p{p:g}": float(np.percentile(a, p)) for p in percentiles})
    return d


def sequence_stats(steps_lists: Iterable[Steps], percentiles: Sequence[float] = (50, 90, 95, 99),
                   skip_kinds: Iterable[str] = ()) -> dict[str, Any]:
    """Length (primitives per program) and width (args per primitive) distributions.

    `width` counts nums + strs of a primitive; its row also needs the kind block.
    `kinds` gives each kind's count and widest args (TLP Table 1), to pick rows/cols.
    """
    skip = frozenset(skip_kinds)
    lengths, widths = [], []
    per_kind: dict[str, dict[str, int]] = {}
    for steps in steps_lists:
        kept = [s for s in steps if s["kind"] not in skip]
        lengths.append(len(kept))
        for st in kept:
            w = len(st["nums"]) + len(st["strs"])
            widths.append(w)
            k = per_kind.setdefault(st["kind"], {"count": 0, "max_args": 0})
            k["count"] += 1
            k["max_args"] = max(k["max_args"], w)
    return {"programs": len(lengths), "length": _summary(lengths, percentiles),
            "width": _summary(widths, percentiles),
            "kinds": dict(sorted(per_kind.items(), key=lambda kv: (-kv[1]["count"], kv[0])))}


# ---- MetaSchedule traces, fast ----------------------------------------------------------
_FFI: tuple | None = None


class _Unsupported(Exception):
    """A value the fast reader does not know: that trace takes the reference path."""


def _ffi() -> tuple:
    """TVM handles for the fast reader, resolved once (deferred: importing TVM costs ~2 s)."""
    global _FFI
    if _FFI is None:
        import tvm_ffi
        from tvm.ir.prim.expr import FloatImm, IntImm
        from tvm.s_tir.schedule import _ffi_api as sched_api

        _FFI = (sched_api.TraceAsJSON, *ffi_arrays.handles(), tvm_ffi.Array, (IntImm, FloatImm), tvm_ffi.core.String)
    return _FFI


_is_rv_name = re.compile(r"^[blv]\d+$").match  # the rule of tcl.data.metaschedule: b0, l12, v3


def _flatten_ffi(x: Any, nums: list, strs: list, literal: bool, ffi: tuple) -> None:
    """Same flattening as tcl.data.metaschedule._flatten, on TVM containers."""
    _, get, size, Array, imms, String = ffi
    t = type(x)
    if t is Array:
        for i in range(size(x)):
            _flatten_ffi(get(x, i), nums, strs, literal, ffi)
    elif t is String or t is str:
        if not literal:
            if _is_rv_name(x) or x == "None":
                return
            if x[:1] == '"':
                x = json.loads(x)
        strs.append(str(x))
    elif t is bool or t is int or t is float:
        nums.append(float(x))
    elif t in imms:
        value = x.value
        if not isinstance(value, (int, float)):
            raise _Unsupported(t)
        nums.append(float(value))
    elif x is None:
        return
    else:  # Map (key order rules), IndexMap, ...: rare, left to the reference path
        raise _Unsupported(t)


def _trace_steps_ffi(trace: Any) -> list[dict[str, Any]]:
    ffi = _ffi()
    as_json, get, size = ffi[0], ffi[1], ffi[2]
    raw = as_json(trace, False)
    insts, decisions = get(raw, 0), get(raw, 1)
    decision_of = {}
    for j in range(size(decisions)):
        pair = get(decisions, j)
        idx = get(pair, 0)
        decision_of[int(getattr(idx, "value", idx))] = get(pair, 1)
    steps = []
    for i in range(size(insts)):
        inst = get(insts, i)
        nums: list[float] = []
        strs: list[str] = []
        _flatten_ffi(get(inst, 1), nums, strs, False, ffi)
        _flatten_ffi(get(inst, 2), nums, strs, True, ffi)
        if i in decision_of:
            _flatten_ffi(decision_of[i], nums, strs, True, ffi)
        steps.append({"kind": str(get(inst, 0)), "nums": nums, "strs": strs})
    return steps


def trace_steps(trace: Any) -> list[dict[str, Any]]:
    """Schema steps of a Trace / MeasureCandidate / Schedule / trace JSON.

    Equal to `tcl.data.metaschedule.trace_to_steps(trace.as_json())`, which the
    training records were made with; anything the fast reader does not know
    goes through that reference path.
    """
    from tcl.data.metaschedule import to_plain_json, trace_to_steps

    if isinstance(trace, (str, list, tuple)):
        return trace_to_steps(trace)
    if hasattr(trace, "sch"):  # MeasureCandidate
        trace = trace.sch
    if hasattr(trace, "trace") and not hasattr(trace, "insts"):  # Schedule
        trace = trace.trace
    try:
        return _trace_steps_ffi(trace)
    except (_Unsupported, ImportError, AttributeError):
        return trace_to_steps(to_plain_json(trace.as_json()))
