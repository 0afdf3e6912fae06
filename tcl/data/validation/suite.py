"""The Great Expectations suite and one batch validated against it.

Row-level expectations (keys not null, platform and source known, successful programs
have a finite positive time, step kinds known, sequence length within bounds,
record_id unique) decide which rows are quarantined; the table-level ones (columns,
column types) describe the batch as a whole. One ephemeral GE context with a pandas
datasource (`Validator`) validates as many batches as needed.

What GE sees: the flat columns of RECORD_SCHEMA, with the three bulky ones
(`steps`, `program`, `run_secs`) replaced by compact columns derived with Arrow:
`_n_steps`, `_unknown_step_kind` (first step kind unknown for the row's source),
`_program_bytes` (null when the program is), `_n_run_secs`, and
`_first_occurrence` for uniqueness. GE's pandas engine fingerprints and copies
the whole frame per validation; with the bulky columns in it, 100k Ansor rows
took 6x the time and +1.6 GB.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from tcl.config import check_keys
from tcl.data.ansor import STEP_KINDS as ANSOR_STEP_KINDS
from tcl.data.schema import RECORD_SCHEMA, SOURCES

# Every instruction kind TVM 0.27.0.post1 registers (`s_tir.schedule.InstructionKind.get`
# succeeds for each; tests check it). TVM has no API to list the registry, so the names
# were found by probing `InstructionKind.get` with every identifier in libtvm_compiler.so.
METASCHEDULE_STEP_KINDS: tuple[str, ...] = (
    "AddUnitLoop", "Annotate", "AnnotateBufferAccess", "Bind", "Blockize", "CacheIndex",
    "CacheInplace", "CacheRead", "CacheWrite", "ComputeAt", "ComputeInline", "DecomposePadding",
    "DecomposeReduction", "EnterPostproc", "Fuse", "FuseReductionEpilogue", "GetChildBlocks",
    "GetConsumers", "GetLoops", "GetOutputBlocks", "GetProducers", "GetSBlock", "LoopPartition",
    "Merge", "PadEinsum", "Parallel", "RFactor", "ReIndex", "ReadAt", "ReindexCacheRead",
    "ReindexCacheWrite", "Reorder", "ReorderBlockIterVar", "ReverseComputeAt",
    "ReverseComputeInline", "RollingBuffer", "SampleCategorical", "SampleComputeLocation",
    "SamplePartitionedTile", "SamplePerfectTile", "SetScope", "Split", "StorageAlign",
    "Tensorize", "TransformBlockLayout", "TransformLayout", "Unannotate", "Unroll",
    "UnsafeHideBufferAccess", "UnsafeSetDType", "Vectorize", "WriteAt",
)
KNOWN_STEP_KINDS: dict[str, frozenset[str]] = {
    "metaschedule": frozenset(METASCHEDULE_STEP_KINDS),
    "ansor": frozenset(ANSOR_STEP_KINDS),
}
KEY_COLUMNS = ("record_id", "platform", "task_key", "error_code")  # + program, via _program_bytes
BULKY_COLUMNS = ("steps", "program", "run_secs")
FLAT_COLUMNS = tuple(n for n in RECORD_SCHEMA.names if n not in BULKY_COLUMNS)
DERIVED_COLUMNS = ("_n_steps", "_unknown_step_kind", "_program_bytes", "_n_run_secs", "_first_occurrence")
# Pandas dtype names GE sees for the flat columns (nested ones are checked on the Arrow schema).
GE_TYPES = {"string": "str", "int32": "int32", "double": "float64"}
DEFAULTS = {"max_failed_share": 0.05, "min_steps": 1, "max_steps": 512, "max_mean_sec": 1000.0,
            "batch_rows": 25_000}
# The rest of the `validate:` section: the DVC foreach list and where the stage reads and writes (flows/validate.py).
STAGE_KEYS = ("platforms", "stores", "validated_root", "quarantine_dir", "report_dir")


def registered_instruction_kinds(names: tuple[str, ...] = METASCHEDULE_STEP_KINDS) -> set[str]:
    """The names among `names` that TVM's InstructionKind registry knows (imports TVM)."""
    from tvm.s_tir.schedule import InstructionKind

    out = set()
    for name in names:
        try:
            InstructionKind.get(name)
        except Exception:  # TVM raises a plain error for an unregistered name
            continue
        out.add(name)
    return out


@dataclass(frozen=True)
class ValidateConfig:
    known_platforms: tuple[str, ...]
    max_failed_share: float = DEFAULTS["max_failed_share"]
    min_steps: int = DEFAULTS["min_steps"]
    max_steps: int = DEFAULTS["max_steps"]
    max_mean_sec: float = DEFAULTS["max_mean_sec"]
    batch_rows: int = DEFAULTS["batch_rows"]

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "ValidateConfig":
        check_keys(params.get("validate"), (*DEFAULTS, *STAGE_KEYS), "validate")
        cfg = {**DEFAULTS, **(params.get("validate") or {})}
        platforms = tuple(sorted((params.get("platforms") or {}).keys()))
        if not platforms:
            raise ValueError("params: no `platforms` declared; validation needs the known platforms")
        if not 0 <= float(cfg["max_failed_share"]) <= 1:
            raise ValueError(f"params: validate.max_failed_share={cfg['max_failed_share']} is not in [0, 1]")
        if not 0 <= int(cfg["min_steps"]) <= int(cfg["max_steps"]):
            raise ValueError(f"params: validate.min_steps={cfg['min_steps']} / max_steps={cfg['max_steps']} "
                             "are not 0 <= min <= max")
        return cls(known_platforms=platforms, max_failed_share=float(cfg["max_failed_share"]),
                   min_steps=int(cfg["min_steps"]), max_steps=int(cfg["max_steps"]),
                   max_mean_sec=float(cfg["max_mean_sec"]), batch_rows=int(cfg["batch_rows"]))


# ---------------------------------------------------------------- the suite

@dataclass(frozen=True)
class Check:
    name: str          # stable, readable: what quarantine reasons and the summary say
    row_level: bool
    columns: tuple[str, ...]  # shown in a quarantined row's detail


def build_suite(cfg: ValidateConfig):
    """The expectation suite and our name for each expectation (GE meta 'name')."""
    import great_expectations as gx
    import great_expectations.expectations as gxe

    suite = gx.ExpectationSuite(name="tcl_records")
    checks: dict[str, Check] = {}
    ok_rows = {"row_condition": 'error_code == ""', "condition_parser": "pandas"}

    def add(name: str, expectation, row_level: bool, *columns: str) -> None:
        expectation.meta = {"name": name}
        suite.add_expectation(expectation)
        checks[name] = Check(name, row_level, columns)

    add("columns_match_schema",
        gxe.ExpectTableColumnsToMatchOrderedList(column_list=[*FLAT_COLUMNS, *DERIVED_COLUMNS]), False)
    for f in RECORD_SCHEMA:
        ge_type = GE_TYPES.get(str(f.type)) if f.name in FLAT_COLUMNS else None
        if ge_type:
            add(f"type:{f.name}", gxe.ExpectColumnValuesToBeOfType(column=f.name, type_=ge_type), False)
    for col in KEY_COLUMNS:
        add(f"not_null:{col}", gxe.ExpectColumnValuesToNotBeNull(column=col), True, col)
    add("not_null:program", gxe.ExpectColumnValuesToNotBeNull(column="_program_bytes"), True, "_program_bytes")
    add("platform_known", gxe.ExpectColumnValuesToBeInSet(
        column="platform", value_set=list(cfg.known_platforms)), True, "platform")
    add("source_known", gxe.ExpectColumnValuesToBeInSet(column="source", value_set=list(SOURCES)), True, "source")
    add("ok_mean_sec_present", gxe.ExpectColumnValuesToNotBeNull(column="mean_sec", **ok_rows), True, "mean_sec")
    add("ok_mean_sec_positive_finite", gxe.ExpectColumnValuesToBeBetween(
        column="mean_sec", min_value=0, strict_min=True, max_value=cfg.max_mean_sec, **ok_rows), True, "mean_sec")
    add("ok_run_secs_present", gxe.ExpectColumnValuesToBeBetween(column="_n_run_secs", min_value=1, **ok_rows),
        True, "_n_run_secs")
    add("step_kinds_known", gxe.ExpectColumnValuesToBeNull(column="_unknown_step_kind"), True,
        "source", "_unknown_step_kind")
    add("steps_length_in_bounds", gxe.ExpectColumnValuesToBeBetween(
        column="_n_steps", min_value=cfg.min_steps, max_value=cfg.max_steps), True, "_n_steps")
    add("record_id_unique", gxe.ExpectColumnValuesToBeInSet(column="_first_occurrence", value_set=[True]),
        True, "record_id")
    return suite, checks


# ---------------------------------------------------------------- derived columns

def unknown_step_kinds(table: pa.Table) -> pa.Array:
    """Per row: the first step kind not known for the row's source, else null."""
    steps = table.column("steps").combine_chunks()
    n = len(steps)
    if n == 0:
        return pa.nulls(0, pa.string())
    flat = pc.list_flatten(steps)
    parents = pc.list_parent_indices(steps)
    kinds = pc.struct_field(flat, "kind")
    sources = pc.take(table.column("source"), parents)
    ok = pa.array([False] * len(kinds)) if len(kinds) else pa.array([], pa.bool_())
    for source, known in KNOWN_STEP_KINDS.items():
        ok = pc.or_(ok, pc.and_(pc.equal(sources, source), pc.is_in(kinds, pa.array(sorted(known)))))
    unknown_sources = pc.invert(pc.is_in(sources, pa.array(sorted(KNOWN_STEP_KINDS))))
    union = pa.array(sorted(set().union(*KNOWN_STEP_KINDS.values())))
    ok = pc.or_(ok, pc.and_(unknown_sources, pc.is_in(kinds, union)))  # unknown source: any known kind
    bad = pc.invert(pc.fill_null(ok, False))
    out: list[str | None] = [None] * n
    for row, kind in zip(pc.filter(parents, bad).to_pylist(), pc.filter(kinds, bad).to_pylist()):
        if out[row] is None:
            out[row] = "<null>" if kind is None else kind
    return pa.array(out, pa.string())


def first_occurrences(record_ids: pa.ChunkedArray | pa.Array, seen: set[str]) -> pa.Array:
    """True where a record_id was not seen before (in `seen`, which is updated, or earlier rows)."""
    out = []
    for rid in record_ids.to_pylist():
        if rid is None:
            out.append(True)  # null ids are the not_null check's business
        elif rid in seen:
            out.append(False)
        else:
            seen.add(rid)
            out.append(True)
    return pa.array(out, pa.bool_())


def ge_frame(table: pa.Table, seen: set[str], first_occurrence: pa.Array | None = None) -> pa.Table:
    """What GE validates: the flat columns plus the derived ones (see the module docstring).

    `first_occurrence`: the uniqueness flags when the caller knows them (batches validated
    apart from each other); else they come from `seen`, which is updated."""
    def length(column: str) -> pa.Array:
        return pc.cast(pc.fill_null(pc.list_value_length(table.column(column)), 0), pa.int64())

    derived = {
        "_n_steps": length("steps"),
        "_unknown_step_kind": unknown_step_kinds(table),
        "_program_bytes": pc.cast(pc.binary_length(table.column("program")), pa.int64()),
        "_n_run_secs": length("run_secs"),
        "_first_occurrence": (first_occurrence if first_occurrence is not None
                              else first_occurrences(table.column("record_id"), seen)),
    }
    frame = table.select(list(FLAT_COLUMNS))
    for name in DERIVED_COLUMNS:
        frame = frame.append_column(name, derived[name])
    return frame


# ---------------------------------------------------------------- one batch

@dataclass
class BatchResult:
    rows: int
    failed: dict[int, list[str]]             # row index in the batch -> failed check names
    stats: dict[str, dict[str, Any]]         # check name -> success, unexpected_count, ...
    ge_result: dict[str, Any]
    derived: pa.Table                        # the derived columns (for readable quarantine details)


class Validator:
    """One GE context and suite, applied to as many batches as needed."""

    def __init__(self, cfg: ValidateConfig):
        import great_expectations as gx

        self.cfg = cfg
        self.context = gx.get_context(mode="ephemeral")
        try:  # GE prints a metrics progress bar per validation; logs are enough here
            from great_expectations.data_context.types.base import ProgressBarsConfig
            self.context.variables.progress_bars = ProgressBarsConfig(globally=False)
        except Exception:  # pragma: no cover - cosmetic only
            pass
        asset = self.context.data_sources.add_pandas("tcl_records").add_dataframe_asset("records")
        self.batch_definition = asset.add_batch_definition_whole_dataframe("batch")
        self.suite, self.checks = build_suite(cfg)
        self.seen: set[str] = set()

    def validate(self, table: pa.Table, first_occurrence: pa.Array | None = None) -> BatchResult:
        """Validate one RECORD_SCHEMA table (row indices 0..n-1)."""
        frame = ge_frame(table, self.seen, first_occurrence)
        batch = self.batch_definition.get_batch(batch_parameters={"dataframe": frame.to_pandas()})
        result = batch.validate(self.suite, result_format={"result_format": "COMPLETE"})
        failed: dict[int, list[str]] = {}
        stats: dict[str, dict[str, Any]] = {}
        for r in result.results:
            cfg = r.expectation_config
            name = (cfg.meta or {}).get("name", cfg.type)
            res = r.result or {}
            exc = (r.exception_info or {}).get("exception_message") if r.exception_info else None
            stats[name] = {"type": cfg.type, "column": cfg.kwargs.get("column"),
                           "success": bool(r.success), "element_count": res.get("element_count"),
                           "unexpected_count": res.get("unexpected_count"),
                           "observed_value": _jsonable(res.get("observed_value")),
                           "partial_unexpected_list": _jsonable(res.get("partial_unexpected_list", [])[:5]),
                           "exception": exc, "row_level": self.checks[name].row_level}
            if self.checks[name].row_level:
                for idx in res.get("unexpected_index_list") or []:
                    failed.setdefault(int(idx), []).append(name)
        order = list(self.checks)
        for names in failed.values():
            names.sort(key=order.index)
        return BatchResult(len(table), failed, stats, _capped(result.to_json_dict()),
                           frame.select(list(DERIVED_COLUMNS)))


def _jsonable(value: Any) -> Any:
    return json.loads(json.dumps(value, default=str))


def _capped(obj: Any, limit: int = 50) -> Any:
    """GE's result JSON with long lists (unexpected indices/values) cut to `limit` items."""
    if isinstance(obj, dict):
        return {k: _capped(v, limit) for k, v in obj.items()}
    if isinstance(obj, list):
        return [_capped(v, limit) for v in obj[:limit]] + ([f"... {len(obj) - limit} more"] if len(obj) > limit else [])
    if isinstance(obj, float) and not math.isfinite(obj):
        return str(obj)
    return obj
