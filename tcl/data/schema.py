"""The one record schema every reader and the collector emit.

A record is one measured tensor program: which task it schedules, on which
platform, the schedule as a sequence of primitives (kind + numeric args + string
args per step), and what the measurement gave (run times, or an error). Failed
builds/runs are records too: they carry `error_code`/`error_msg` and no times.
"""

from __future__ import annotations

import hashlib
import math
from typing import Any, Iterable, Iterator

import pyarrow as pa

STEP_TYPE = pa.struct([
    ("kind", pa.string()),          # instruction kind (MetaSchedule) or step code (Ansor: SP, CA, ...)
    ("nums", pa.list_(pa.float64())),  # numeric literal args, in argument order
    ("strs", pa.list_(pa.string())),   # string literal args (block/stage names, annotation keys...)
])

RECORD_SCHEMA = pa.schema([
    ("record_id", pa.string()),     # sha1(platform, task_key, program) -> dedup key
    ("platform", pa.string()),
    ("source", pa.string()),        # "metaschedule" | "ansor"
    ("network", pa.string()),
    ("task_key", pa.string()),      # stable task identity (structural hash of the workload / Ansor key)
    ("task_name", pa.string()),
    ("task_weight", pa.int32()),    # occurrences of the task (subgraph) in the network
    ("op_type", pa.string()),       # conv2d, dense, depthwise_conv2d, pool, softmax, elementwise, ...
    ("target", pa.string()),        # TVM target as JSON
    ("steps", pa.list_(STEP_TYPE)),  # the schedule primitive sequence
    ("program", pa.string()),       # the raw schedule: MetaSchedule trace JSON / Ansor record line
    ("run_secs", pa.list_(pa.float64())),
    ("mean_sec", pa.float64()),     # null when the program failed
    ("median_sec", pa.float64()),
    ("error_code", pa.string()),    # "" ok | build_error | run_error | timeout | ...
    ("error_msg", pa.string()),
    ("collected_at", pa.timestamp("us", tz="UTC")),
])

ERROR_OK = ""
SOURCES = ("metaschedule", "ansor")


def make_record_id(platform: str, task_key: str, program: str) -> str:
    """Identity of a measurement: the same program on the same task and platform is one record."""
    h = hashlib.sha1()
    for part in (platform, task_key, program):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def summarize_times(run_secs: Iterable[float]) -> tuple[float | None, float | None]:
    """Mean and median of the repeats, or (None, None) if there are none."""
    xs = sorted(float(x) for x in run_secs)
    if not xs:
        return None, None
    n = len(xs)
    median = xs[n // 2] if n % 2 else 0.5 * (xs[n // 2 - 1] + xs[n // 2])
    return math.fsum(xs) / n, median


def records_to_table(records: list[dict[str, Any]]) -> pa.Table:
    """Build a table in RECORD_SCHEMA from dict rows (fields missing from a row are an error)."""
    names = RECORD_SCHEMA.names
    for i, rec in enumerate(records):
        missing = [n for n in names if n not in rec]
        if missing:
            raise ValueError(f"record {i} ({rec.get('record_id', '?')}): missing fields {missing}")
    return pa.Table.from_pylist(records, schema=RECORD_SCHEMA)


def tables_in_chunks(rows: Iterable[dict[str, Any]], chunk_size: int) -> Iterator[pa.Table]:
    """RECORD_SCHEMA tables of at most `chunk_size` rows, so readers stream in bounded memory."""
    if chunk_size < 1:
        raise ValueError(f"chunk_size must be >= 1, got {chunk_size}")
    batch: list[dict[str, Any]] = []
    for row in rows:
        batch.append(row)
        if len(batch) >= chunk_size:
            yield records_to_table(batch)
            batch = []
    if batch:
        yield records_to_table(batch)
