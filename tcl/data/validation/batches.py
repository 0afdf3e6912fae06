"""A platform's record parts, read and validated in batches (the unit of work, local or on Dask).

Parts come from every configured store root and are grouped into batches of about
`batch_rows` rows. The full schema, nested types included, is enforced on the Arrow
side when each part is read (a `SchemaError` names the file and column). Uniqueness
keeps the FIRST copy of a record_id (across batches) and quarantines the later ones:
it is decided when the batches are planned, so each batch can be validated apart.
A validated batch gives its quarantine entries (`source_file`/`line` = the part file
and row, 1-based; `reason` = the failed expectation names) and the rows that passed.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from tcl.data.schema import RECORD_SCHEMA
from tcl.data.store import RecordStore
from tcl.data.validation.suite import BatchResult, Check, ValidateConfig, Validator, first_occurrences


class SchemaError(ValueError):
    """A part file whose columns cannot be read as RECORD_SCHEMA."""


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
