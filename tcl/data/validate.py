"""Great Expectations validation of a platform's records: bad rows quarantined, loud failure.

Each platform's records (from every configured store root) are checked in batches
of at most `batch_rows` rows with one Great Expectations suite (ephemeral context,
pandas datasource). Row-level expectations (keys not null, platform and source
known, successful programs have a finite positive time, step kinds known, sequence
length within bounds, record_id unique) decide which rows are quarantined; the
table-level ones (columns, column types) describe the batch as a whole. Outputs:

* `<validated_root>/platform=<name>.parquet`: the rows that passed (RECORD_SCHEMA);
* `<quarantine_dir>/validate-<name>.jsonl`: one line per failed row, `reason` = the
  failed expectation names, `source_file`/`line` = the part file and row (1-based);
* `<report_dir>/<name>.json`: per-expectation success and unexpected counts, failed share;
* one MLflow run (tag stage=validate) with that JSON and GE's own result as artifacts.

If the failed share exceeds `validate.max_failed_share`, or a table-level
expectation fails, `ValidationFailed` is raised after everything above is written
(the validated file is then not published), with a summary naming each failing
expectation and its counts: the DVC stage exits non-zero.

What GE sees: the flat columns of RECORD_SCHEMA, with the three bulky ones
(`steps`, `program`, `run_secs`) replaced by compact columns derived with Arrow:
`_n_steps`, `_unknown_step_kind` (first step kind unknown for the row's source),
`_program_bytes` (null when the program is), `_n_run_secs`, and
`_first_occurrence` for uniqueness. GE's pandas engine fingerprints and copies
the whole frame per validation; with the bulky columns in it, 100k Ansor rows
took 6x the time and +1.6 GB. The full schema, nested types included, is
enforced on the Arrow side when each part is read (a `SchemaError` names the
file and column). Uniqueness keeps the FIRST copy of a record_id (across
batches) and quarantines the later ones.
"""

from __future__ import annotations

import json
import logging
import math
import os
import threading
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tcl.compute import Units, serial_units
from tcl.data.ansor import STEP_KINDS as ANSOR_STEP_KINDS
from tcl.data.quarantine import Quarantine
from tcl.data.schema import RECORD_SCHEMA, SOURCES
from tcl.data.store import RecordStore, atomic_write_bytes

log = logging.getLogger(__name__)

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


class ValidationFailed(RuntimeError):
    """The records of a platform failed validation beyond what the params tolerate."""


class SchemaError(ValueError):
    """A part file whose columns cannot be read as RECORD_SCHEMA."""


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


# ---------------------------------------------------------------- a platform

def _read_part(path: Path) -> pa.Table:
    """A part as RECORD_SCHEMA; a part that cannot be is a SchemaError naming file and columns."""
    table = pq.read_table(path)
    missing = [n for n in RECORD_SCHEMA.names if n not in table.column_names]
    if missing:
        raise SchemaError(f"{path}: missing columns {missing}")
    table = table.select(RECORD_SCHEMA.names)
    if table.schema.equals(RECORD_SCHEMA, check_metadata=False):
        return table
    try:
        return table.cast(RECORD_SCHEMA)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, ValueError) as e:
        bad = [f"'{f.name}' is {table.schema.field(f.name).type}, expected {f.type}"
               for f in RECORD_SCHEMA if table.schema.field(f.name).type != f.type]
        raise SchemaError(f"{path}: {'; '.join(bad)} ({e})") from None


def platform_parts(stores: list[str | Path], platform: str) -> list[Path]:
    """Every committed record part of `platform` under the store roots, in a stable order
    (the store's own listing: parts a compacted file already holds are left out)."""
    return [p for root in stores for p in RecordStore(root).parts(platform)]


def _read_batch(parts: list[Path]) -> tuple[pa.Table, list[tuple[Path, int]]]:
    """The parts concatenated, with (part, first row index) per part."""
    tables, origins, rows = [], [], 0
    for path in parts:
        table = _read_part(path)
        origins.append((path, rows))
        tables.append(table)
        rows += table.num_rows
    return pa.concat_tables(tables), origins


def _origin(origins: list[tuple[Path, int]], row: int) -> tuple[Path, int]:
    path, start = origins[0]
    for p, s in origins:
        if s > row:
            break
        path, start = p, s
    return path, row - start + 1


def _missing_columns(path: Path) -> None:
    missing = [n for n in RECORD_SCHEMA.names if n not in pq.read_schema(path).names]
    if missing:
        raise SchemaError(f"{path}: missing columns {missing}")


def plan_batches(parts: list[Path], batch_rows: int) -> list[tuple[list[Path], list[int]]]:
    """Parts grouped into batches of about `batch_rows` rows, each with the rows that repeat an
    earlier record_id: uniqueness spans batches, so it is decided here, in one pass over the ids,
    and the batches can be validated apart (in any process) with the serial loop's flags."""
    plan, group, duplicates, rows = [], [], [], 0
    seen: set[str] = set()
    for path in parts:
        _missing_columns(path)
        ids = pq.read_table(path, columns=["record_id"]).column("record_id")
        try:
            ids = pc.cast(ids, pa.string())
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise SchemaError(f"{path}: 'record_id' is {ids.type}, expected string ({e})") from None
        first = first_occurrences(ids, seen).to_numpy(zero_copy_only=False)
        duplicates.extend(int(i) + rows for i in (~first).nonzero()[0])
        group.append(path)
        rows += len(ids)
        if rows >= batch_rows:
            plan.append((group, duplicates))
            group, duplicates, rows = [], [], 0
    if group:
        plan.append((group, duplicates))
    return plan


@dataclass
class BatchOutcome:
    """What one validated batch gives the stage: counts, quarantine lines, the rows that passed."""
    result: BatchResult
    quarantine: list[tuple[str, int, str, str, str]]
    passed: pa.Table


_VALIDATORS = threading.local()


def _validator(cfg: ValidateConfig) -> Validator:
    """One GE context and suite per config and thread (building one takes a while)."""
    cache = _VALIDATORS.__dict__.setdefault("by_config", {})
    if cfg not in cache:
        cache[cfg] = Validator(cfg)
    return cache[cfg]


def validate_batch(parts: list[Path], duplicates: list[int], cfg: ValidateConfig) -> BatchOutcome:
    """The unit of work: the parts of one planned batch, validated (runs here or on a Dask worker)."""
    table, origins = _read_batch(parts)
    first = [True] * table.num_rows
    for i in duplicates:
        first[i] = False
    validator = _validator(cfg)
    batch = validator.validate(table, pa.array(first, pa.bool_()))
    passed = table
    if batch.failed:
        passed = table.filter(pa.array([i not in batch.failed for i in range(table.num_rows)]))
    return BatchOutcome(batch, _quarantine_entries(table, origins, batch, validator.checks), passed)


def _detail(row: dict[str, Any], names: list[str], checks: dict[str, Check]) -> str:
    cols = []
    for name in names:
        for c in checks[name].columns:
            if c not in cols:
                cols.append(c)
    return "; ".join(f"{c}={row.get(c)!r:.80}" for c in cols)


def _quarantine_entries(table: pa.Table, origins: list[tuple[Path, int]], batch: BatchResult,
                        checks: dict[str, Check]) -> list[tuple[str, int, str, str, str]]:
    """Quarantine.add arguments for the batch's failed rows, in row order."""
    if not batch.failed:
        return []
    idx = sorted(batch.failed)
    derived = batch.derived.take(idx).to_pylist()
    entries = []
    for i, row, extra in zip(idx, table.take(idx).to_pylist(), derived):
        path, line = _origin(origins, i)
        names = batch.failed[i]
        entries.append((str(path), line, "; ".join(names), json.dumps(row, default=str, sort_keys=True),
                        _detail({**row, **extra}, names, checks)))
    return entries


def _share(stats: dict[str, Any]) -> float | None:
    if stats["unexpected_count"] is None or not stats["element_count"]:
        return None
    return stats["unexpected_count"] / stats["element_count"]


@dataclass
class ValidationSummary:
    platform: str
    rows: int = 0
    failed_rows: int = 0
    max_failed_share: float = 0.0
    expectations: dict[str, dict[str, Any]] = field(default_factory=dict)
    quarantined_by_expectation: dict[str, int] = field(default_factory=dict)
    table_level_failures: list[str] = field(default_factory=list)
    paths: dict[str, str] = field(default_factory=dict)
    parts: int = 0

    @property
    def failed_share(self) -> float:
        return self.failed_rows / self.rows if self.rows else 0.0

    @property
    def passed(self) -> bool:
        return not self.table_level_failures and self.failed_share <= self.max_failed_share

    def to_json(self) -> dict[str, Any]:
        return {"platform": self.platform, "passed": self.passed, "rows": self.rows,
                "valid_rows": self.rows - self.failed_rows, "failed_rows": self.failed_rows,
                "failed_share": self.failed_share, "max_failed_share": self.max_failed_share,
                "parts": self.parts, "table_level_failures": self.table_level_failures,
                "quarantined_by_expectation": self.quarantined_by_expectation,
                "expectations": {name: {**st, "unexpected_share": _share(st)}
                                 for name, st in self.expectations.items()},
                "paths": self.paths}

    def describe(self) -> str:
        """Readable lines: the verdict, then every failing expectation with its counts."""
        lines = [f"validation of platform '{self.platform}': {self.failed_rows} of {self.rows} rows failed "
                 f"({self.failed_share:.2%}; allowed {self.max_failed_share:.2%})"]
        for name, st in self.expectations.items():
            if not st["success"]:
                what = f"{st['type']}({st['column']})" if st["column"] else st["type"]
                lines.append(f"  FAILED {name} [{what}]: unexpected {st['unexpected_count']} of "
                             f"{st['element_count']}" + (f", observed {st['observed_value']!r:.120}"
                                                         if st["unexpected_count"] is None else ""))
        if self.table_level_failures:
            lines.append(f"  table-level failures: {', '.join(self.table_level_failures)}")
        return "\n".join(lines)

    def merge(self, batch: BatchResult) -> None:
        self.rows += batch.rows
        self.failed_rows += len(batch.failed)
        for names in batch.failed.values():
            for n in names:
                self.quarantined_by_expectation[n] = self.quarantined_by_expectation.get(n, 0) + 1
        for name, st in batch.stats.items():
            acc = self.expectations.setdefault(name, {**st, "element_count": 0, "unexpected_count": None})
            acc["success"] = acc["success"] and st["success"]
            if st["element_count"] is not None:
                acc["element_count"] = (acc["element_count"] or 0) + st["element_count"]
            if st["unexpected_count"] is not None:
                acc["unexpected_count"] = (acc["unexpected_count"] or 0) + st["unexpected_count"]
            if not st["success"]:
                acc["observed_value"] = st["observed_value"]
                acc["partial_unexpected_list"] = st["partial_unexpected_list"]
                acc["exception"] = acc.get("exception") or st["exception"]
            if not st["success"] and not st["row_level"] and name not in self.table_level_failures:
                self.table_level_failures.append(name)


def validate_platform(platform: str, params: dict[str, Any], *, stores: list[str | Path],
                      validated_root: str | Path = "data/validated",
                      quarantine_dir: str | Path = "data/quarantine",
                      report_dir: str | Path = "reports/validation", track: bool = True,
                      units: Units = serial_units) -> ValidationSummary:
    """Validate every record of `platform` in `stores`; raise ValidationFailed past the threshold.

    `units` runs the batches (`validate_batch`): in this process by default, or on Dask
    workers (tcl.compute); their outcomes are written in batch order either way."""
    cfg = ValidateConfig.from_params(params)
    parts = platform_parts(stores, platform)
    if not parts:
        raise ValidationFailed(f"no records for platform '{platform}' under {[str(s) for s in stores]}")
    validated = Path(validated_root) / f"platform={platform}.parquet"
    tmp = validated.with_name(f".{validated.name}.tmp")
    report = Path(report_dir) / f"{platform}.json"
    ge_report = Path(report_dir) / f"{platform}.ge.json"
    qpath = Path(quarantine_dir) / f"validate-{platform}.jsonl"
    for p in (validated.parent, report.parent, qpath.parent):
        p.mkdir(parents=True, exist_ok=True)
    # Redone from scratch, never appended to; a killed run leaves no earlier output looking current.
    for p in (qpath, validated, report, ge_report):
        p.unlink(missing_ok=True)

    summary = ValidationSummary(platform, max_failed_share=cfg.max_failed_share, parts=len(parts),
                                paths={"validated": str(validated), "quarantine": str(qpath),
                                       "report": str(report), "ge_result": str(ge_report)})
    ge_results = []
    try:
        with Quarantine(quarantine_dir, f"validate-{platform}") as quarantine, \
                pq.ParquetWriter(tmp, RECORD_SCHEMA, compression="zstd") as writer:
            jobs = ({"parts": group, "duplicates": duplicates, "cfg": cfg}
                    for group, duplicates in plan_batches(parts, cfg.batch_rows))
            for outcome in units(validate_batch, jobs):
                summary.merge(outcome.result)
                ge_results.append(outcome.result.ge_result)
                for entry in outcome.quarantine:
                    quarantine.add(*entry)
                writer.write_table(outcome.passed)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    atomic_write_bytes(report, (json.dumps(summary.to_json(), indent=2, sort_keys=True) + "\n").encode())
    atomic_write_bytes(ge_report, (json.dumps(ge_results, indent=1, default=str) + "\n").encode())
    if summary.passed:
        os.replace(tmp, validated)
    else:
        tmp.unlink(missing_ok=True)
    if track:
        log_to_mlflow(summary, cfg, params, report, ge_report)
    if not summary.passed:
        raise ValidationFailed(summary.describe() + f"\n  quarantined rows: {qpath}\n  report: {report}")
    log.info(summary.describe())
    return summary


def log_to_mlflow(summary: ValidationSummary, cfg: ValidateConfig, params: dict[str, Any],
                  report: Path, ge_report: Path) -> str | None:
    """One MLflow run for this validation (a failed validation is a FAILED run, with its artifacts);
    returns its run id, None when tracking is off."""
    from tcl import tracking

    with tracking.run(params, f"validate-{summary.platform}",
                      {"stage": "validate", "platform": summary.platform,
                       "passed": str(summary.passed).lower()}) as run:
        run.status = "FINISHED" if summary.passed else "FAILED"
        tracking.log_params({"max_failed_share": cfg.max_failed_share, "min_steps": cfg.min_steps,
                             "max_steps": cfg.max_steps, "max_mean_sec": cfg.max_mean_sec,
                             "batch_rows": cfg.batch_rows, "parts": summary.parts})
        metrics = {"rows": summary.rows, "failed_rows": summary.failed_rows,
                   "failed_share": summary.failed_share}
        for name, st in summary.expectations.items():
            key = name.replace(":", "_")
            metrics[f"success.{key}"] = float(st["success"])
            if st["unexpected_count"] is not None:
                metrics[f"unexpected.{key}"] = st["unexpected_count"]
        tracking.log_metrics(metrics)
        tracking.log_artifact(str(report), artifact_path="validation")
        tracking.log_artifact(str(ge_report), artifact_path="validation")
    return run.run_id
