"""The loop nest of a scheduled TIR program, read without building it, and the bytes its tiles move
through a memory hierarchy: what PSA (tcl.tvm.psa) estimates latency from and PaCM's dataflow
features (tcl.features.dataflow) describe.

Every BufferStore is a statement under a chain of loops (extent, kind, the unroll step in force)
with the buffer accesses it makes. Block iteration variables are replaced by the loop expressions
bound to them, so each index is an affine form of loop variables where it can be (inexact
otherwise: floordiv/floormod of a fused loop), which is all a footprint needs.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import NamedTuple

from .ffi_arrays import items as _items

# What a loop does with its iterations, as PSA tells them apart.
SERIAL, PARALLEL, VECTORIZED, UNROLLED, THREAD = "serial", "parallel", "vectorized", "unrolled", "thread"
_FOR_KINDS = {0: SERIAL, 1: PARALLEL, 2: VECTORIZED, 3: UNROLLED, 4: THREAD}
_ARITH = {"Add", "Sub", "Mul", "Div", "FloorDiv", "FloorMod", "Mod", "Max", "Min", "Call"}


@dataclass(frozen=True)
class Loop:
    extent: int
    kind: str
    unroll_step: int = 0   # pragma_auto_unroll_max_step in force at this loop (0: none)
    thread_tag: str = ""   # blockIdx.x, threadIdx.y, ... for THREAD loops


class Index(NamedTuple):
    """One buffer dimension's index: coefficients by loop id, exact when the index is affine. A named tuple:
    the walk makes one per dimension of every access, and a frozen dataclass takes twice as long to build."""

    coefs: tuple[tuple[int, int], ...]
    exact: bool

    def span(self, loops: dict[int, Loop], inside: set[int], size: int) -> int:
        """Distinct positions this dimension takes while the loops in `inside` run."""
        if self.exact:
            n = 1 + sum(abs(c) * (loops[i].extent - 1) for i, c in self.coefs if i in inside)
        else:
            n = math.prod(loops[i].extent for i, _ in self.coefs if i in inside)
        return max(1, min(n, size))

    def depends_on(self, loop: int) -> bool:
        return any(i == loop for i, _ in self.coefs)


@dataclass(frozen=True)
class Access:
    buffer: str
    scope: str
    dtype_bytes: int
    shape: tuple[int, ...]
    indices: tuple[Index, ...]

    def depends_on(self, loop: int) -> bool:
        return any(ix.depends_on(loop) for ix in self.indices)

    def contiguous_in(self, loop: int) -> bool:
        """Stride-1 in `loop`: its last dimension moves by one element per iteration."""
        return bool(self.indices) and self.indices[-1].exact and dict(self.indices[-1].coefs).get(loop) == 1 \
            and not any(ix.depends_on(loop) for ix in self.indices[:-1])


@dataclass(frozen=True)
class Statement:
    loops: tuple[int, ...]        # loop ids, outermost first
    ops: int                      # arithmetic operations per iteration (at least 1)
    dtype_bytes: int              # of the stored value
    accesses: tuple[Access, ...]  # loads and the store, one per distinct (buffer, index)
    store: str = ""               # the buffer it writes


@dataclass
class LoopNest:
    loops: dict[int, Loop] = field(default_factory=dict)
    statements: list[Statement] = field(default_factory=list)
    allocs: list[tuple[str, str, int]] = field(default_factory=list)  # (buffer, scope, bytes)

    def iterations(self, stmt: Statement) -> int:
        return math.prod(self.loops[i].extent for i in stmt.loops)


def _int(expr, default: int = 1) -> int:
    value = expr if isinstance(expr, int) else getattr(expr, "value", None)
    return int(value) if isinstance(value, int) else default


_DTYPE_BYTES: dict[str, int] = {}


def _bytes(dtype) -> int:
    dtype = str(dtype)
    if dtype not in _DTYPE_BYTES:
        bits = int("".join(ch for ch in dtype.split("x")[0] if ch.isdigit()) or 32)
        lanes = int(dtype.split("x")[1]) if "x" in dtype else 1
        _DTYPE_BYTES[dtype] = max(1, bits // 8) * lanes
    return _DTYPE_BYTES[dtype]


_OPERANDS = ("a", "b", "value", "condition", "true_value", "false_value")
_OPERANDS_OF: dict[type, tuple[str, ...]] = {}  # expression type -> the operands of _OPERANDS it has


def _operands(expr) -> tuple[str, ...]:
    kind = type(expr)
    if kind not in _OPERANDS_OF:
        _OPERANDS_OF[kind] = tuple(c for c in _OPERANDS if hasattr(expr, c))
    return _OPERANDS_OF[kind]


_CONSTANT: tuple[dict, bool] = ({}, True)  # shared: affine forms are never changed in place

# buffer address -> (the buffer, its name, scope, dtype bytes, shape). The candidates of a task share their
# parameters' buffers, so each is read through the FFI once for a whole population rather than once per program.
# An entry holds its buffer, so the address cannot be reused by another object while it is here; a full cache
# is cleared.
_BUFFERS: dict[int, tuple] = {}
_MAX_BUFFERS = 4096


def _buffer_info(buffer) -> tuple:
    """(name, scope, dtype bytes, shape) of a buffer."""
    entry = _BUFFERS.get(hash(buffer))
    if entry is None:
        if len(_BUFFERS) >= _MAX_BUFFERS:
            _BUFFERS.clear()
        entry = _BUFFERS[hash(buffer)] = (buffer, str(buffer.name), str(buffer.scope()), _bytes(buffer.dtype),
                                          tuple(_int(s, 1 << 30) for s in _items(buffer.shape)))
    return entry[1:]


class _Walker:
    """Builds a LoopNest; `env` maps a variable to its affine form (coefs by loop id, exact).

    Variables are keyed by their object hash: a TIR Var's `==` builds an expression, slow as a dict key.
    Every attribute read is a call into TVM's FFI, most of the walk's time: each is read once, a buffer once for
    every program that uses it (`_buffer_info`)."""

    def __init__(self):
        self.nest = LoopNest()
        self.env: dict = {}

    def affine(self, expr) -> tuple[dict[int, int], bool]:
        kind = type(expr).__name__
        if kind == "Var":
            return self.env.get(hash(expr), _CONSTANT)
        if kind == "IntImm":
            return _CONSTANT
        if kind == "Cast":
            return self.affine(expr.value)
        if kind in ("Add", "Sub"):
            (a, ea), (b, eb) = self.affine(expr.a), self.affine(expr.b)
            out, sign = dict(a), 1 if kind == "Add" else -1
            for k, v in b.items():
                out[k] = out.get(k, 0) + sign * v
            return out, ea and eb
        if kind == "Mul":
            a, b = expr.a, expr.b
            for x, y in ((a, b), (b, a)):
                if type(y).__name__ == "IntImm":
                    coefs, exact = self.affine(x)
                    c = int(y.value)
                    return {k: v * c for k, v in coefs.items()}, exact
        deps: dict[int, int] = {}
        for child in _operands(expr):
            deps.update({k: 1 for k in self.affine(getattr(expr, child))[0]})
        return deps, False

    def index(self, expr) -> Index:
        coefs, exact = self.affine(expr)
        return Index(tuple(sorted((k, v) for k, v in coefs.items() if v)), exact)

    def access(self, buffer, indices) -> Access:
        return Access(*_buffer_info(buffer), tuple(self.index(i) for i in _items(indices)))

    def ops_and_loads(self, expr, loads: list) -> int:
        """Arithmetic operations in `expr`; its BufferLoads are appended to `loads`."""
        kind = type(expr).__name__
        if kind in ("BufferLoad", "TensorLoad"):  # TVM 0.27 names a load TensorLoad, its buffer `source`
            loads.append(self.access(getattr(expr, "buffer", None) or expr.source, expr.indices))
            return 0
        ops = 1 if kind in _ARITH else 0
        if kind == "Call":
            return ops + sum(self.ops_and_loads(arg, loads) for arg in _items(expr.args))
        for child in _operands(expr):
            sub = getattr(expr, child)
            if hasattr(sub, "same_as"):  # an expression (IntImm's `value` is a Python int)
                ops += self.ops_and_loads(sub, loads)
        return ops

    def visit(self, stmt, loops: tuple[int, ...], unroll: int) -> None:
        kind = type(stmt).__name__
        if kind == "SeqStmt":
            for s in _items(stmt.seq):
                self.visit(s, loops, unroll)
        elif kind == "For":
            step = _int(stmt.annotations.get("pragma_auto_unroll_max_step", 0), 0) or unroll
            extent = _int(stmt.extent)
            if extent == 1:  # a loop of one iteration is a constant: no footprint, no overhead, no parallelism
                self.env[hash(stmt.loop_var)] = _CONSTANT
                self.visit(stmt.body, loops, step)
                return
            loop_id = len(self.nest.loops)
            binding = stmt.thread_binding
            tag = str(binding.thread_tag) if binding is not None else ""
            self.nest.loops[loop_id] = Loop(extent, _FOR_KINDS.get(int(stmt.kind), SERIAL), step, tag)
            self.env[hash(stmt.loop_var)] = ({loop_id: 1}, True)
            self.visit(stmt.body, loops + (loop_id,), step)
        elif kind == "SBlockRealize":
            block = stmt.block
            for iv, value in zip(_items(block.iter_vars), _items(stmt.iter_values)):
                self.env[hash(iv.var)] = self.affine(value)
            for buf in _items(block.alloc_buffers):
                size = math.prod(_int(s, 1) for s in _items(buf.shape)) * _bytes(buf.dtype)
                self.nest.allocs.append((str(buf.name), str(buf.scope()), size))
            init = block.init
            if init is not None:
                self.visit(init, loops, unroll)
            self.visit(block.body, loops, unroll)
        elif kind == "BufferStore":
            loads: list[Access] = []
            ops = self.ops_and_loads(stmt.value, loads)
            store = self.access(stmt.buffer, stmt.indices)
            accesses = {(a.buffer, a.indices): a for a in [*loads, store]}
            self.nest.statements.append(Statement(loops, max(ops, 1), store.dtype_bytes,
                                                  tuple(accesses.values()), store.buffer))
        elif kind == "IfThenElse":
            self.visit(stmt.then_case, loops, unroll)
            else_case = stmt.else_case
            if else_case is not None:
                self.visit(else_case, loops, unroll)
        elif hasattr(stmt, "body"):  # SBlock, AttrStmt, LetStmt, DeclBuffer, ...
            self.visit(stmt.body, loops, unroll)


def loop_nest(mod) -> LoopNest:
    """The LoopNest of an IRModule's `main` (or its only function), e.g. a MeasureCandidate's `sch.mod`."""
    funcs = list(mod.functions.items())
    func = next((f for gv, f in funcs if gv.name_hint == "main"), funcs[0][1])
    walker = _Walker()
    walker.visit(func.body, (), 0)
    return walker.nest


def statement_key(stmt: Statement, nest: LoopNest) -> tuple:
    """What a statement's work and footprints depend on: its loops (ids and what they are), ops and accesses.
    Two programs' statements with equal keys cost the same, so an analysis can be looked up by it."""
    loops = nest.loops
    return stmt.loops, tuple([loops[i] for i in stmt.loops]), stmt.ops, stmt.dtype_bytes, stmt.accesses


def footprint(stmt: Statement, nest: LoopNest, inside: set[int], unit: int, access=None) -> float:
    """Bytes the accesses of `stmt` (or one `access`) touch while the loops in `inside` run; the last
    dimension is rounded up to `unit` bytes (a cache line, a memory transaction)."""
    total = 0.0
    for a in ([access] if access is not None else stmt.accesses):
        spans = [ix.span(nest.loops, inside, size) for ix, size in zip(a.indices, a.shape)] or [1]
        row = math.ceil(spans[-1] * a.dtype_bytes / unit) * unit
        total += row * math.prod(spans[:-1])
    return total


class StatementTiles:
    """One statement's access footprints with the loops from each depth inward running, for every depth
    at once: what `moves` asks of each storage level. The same figures as `footprint` with `inside` the
    statement's loops from depth d on, in one pass over the loops instead of one per depth and level
    (PSA scores whole populations with it). Working sets are kept by (depth, unit) across levels."""

    def __init__(self, stmt: Statement, nest: LoopNest):
        self.stmt = stmt
        ids = stmt.loops
        position = {loop: p for p, loop in enumerate(ids)}
        extents = [nest.loops[i].extent for i in ids]
        self.row_bytes: list[list[int]] = []     # [access][depth]: bytes of its last dimension's span
        self.rows: list[list[int]] = []          # [access][depth]: product of the other dimensions' spans
        self.outer: list[list[int]] = []         # [access][depth]: iterations of the loops its tile reloads for
        n = len(ids)
        for a in stmt.accesses:
            dims = []
            for ix, size in zip(a.indices, a.shape):
                # the span with the loops from depth d inward running: exact, 1 + the sum of |coef| x (extent - 1)
                # of those loops; inexact, the product of their extents; at most the dimension's size
                grow = [0 if ix.exact else 1] * n
                for loop, coef in ix.coefs:
                    p = position.get(loop)
                    if p is not None:
                        grow[p] = abs(coef) * (extents[p] - 1) if ix.exact else extents[p]
                running, spans = 1, [1] * (n + 1)
                for d in range(n - 1, -1, -1):
                    running = running + grow[d] if ix.exact else running * grow[d]
                    spans[d] = max(1, min(running, size))
                dims.append(spans)
            dims = dims or [[1] * (n + 1)]
            self.row_bytes.append([span * a.dtype_bytes for span in dims[-1]])
            self.rows.append([math.prod(dim[d] for dim in dims[:-1]) for d in range(n + 1)])
            # a tile is loaded again for every iteration of the outer loops up to the innermost one it depends on
            outer, product, deepest = [1] * (len(ids) + 1), 1, 1
            used = {loop for ix in a.indices for loop, _ in ix.coefs}
            for d in range(len(ids)):
                product *= extents[d]
                if ids[d] in used:
                    deepest = product
                outer[d + 1] = deepest
            self.outer.append(outer)
        self._sets: dict[tuple[int, int], float] = {}

    def tile(self, k: int, depth: int, unit: int) -> float:
        """Bytes of access k's tile with the loops from `depth` inward running (rows rounded to `unit`)."""
        return float(math.ceil(self.row_bytes[k][depth] / unit) * unit * self.rows[k][depth])

    def working_set(self, depth: int, unit: int) -> float:
        if (depth, unit) not in self._sets:
            self._sets[depth, unit] = sum((self.tile(k, depth, unit) for k in range(len(self.rows))), 0.0)
        return self._sets[depth, unit]


def moves(stmt: Statement, nest: LoopNest, capacity: float, unit: int,
          tiles: StatementTiles | None = None) -> tuple[int, list[tuple[Access, float, float]]]:
    """How a storage level of `capacity` bytes serves `stmt`: (kept depth, [(access, its tile's bytes,
    bytes moved into the level over the whole statement)]).

    The working set of the loops from depth d inward is kept there when it fits; d is the outermost
    such depth. An access's tile is then loaded again for every iteration of the outer loops up to
    the innermost outer loop it depends on: further out, its data is the same and is reused.
    Pass one `StatementTiles` of `stmt` for all levels: its footprints serve every level.
    """
    tiles = tiles or StatementTiles(stmt, nest)
    n = len(stmt.loops)
    depth = next((d for d in range(n + 1) if tiles.working_set(d, unit) <= capacity), n)
    out = []
    for k, a in enumerate(stmt.accesses):
        tile = tiles.tile(k, depth, unit)
        out.append((a, tile, tile * tiles.outer[k][depth]))
    return depth, out


def traffic(stmt: Statement, nest: LoopNest, capacity: float, unit: int, tiles: StatementTiles | None = None) -> float:
    """Bytes moved into a storage level of `capacity` bytes over the whole statement (see `moves`)."""
    return sum(moved for _, _, moved in moves(stmt, nest, capacity, unit, tiles)[1])


def cpu_levels(specs: dict, vector_registers: int = 16, line_bytes: int = 64) -> list[tuple[str, float, int]]:
    """(level, capacity in bytes, rounding unit) of a CPU core's storage from a platform's specs, registers
    first: data moves into each from the next one out (tcl.tvm.psa.cpu adds the bandwidths)."""
    simd = int(specs["simd_bytes"])
    return [("registers", vector_registers * simd, 1), ("l1", specs["l1_kb"] * 1024, line_bytes),
            ("l2", specs["l2_kb"] * 1024, line_bytes), ("l3", specs["l3_kb"] * 1024, line_bytes)]
