"""The one record schema every reader and the collector emit.

A record is one measured tensor program: which task it schedules, on which
platform, the schedule as a sequence of primitives (kind + numeric args + string
args per step), and what the measurement gave (run times, or an error). Failed
builds/runs are records too: they carry `error_code`/`error_msg` and no times.
"""

from __future__ import annotations

import hashlib
import json
import math
import reprlib
from typing import Any, Iterable, Iterator

import pyarrow as pa

STEP_TYPE = pa.struct([
    ("kind", pa.string()),          # instruction kind (MetaSchedule) or step code (Ansor: SP, CA, ...)
    ("nums", pa.list_(pa.float64())),  # numeric literal args, in argument order
    ("strs", pa.list_(pa.string())),   # string literal args (block/stage names, annotation keys...)
])

RECORD_SCHEMA = pa.schema([
    ("record_id", pa.string()),     # sha1(platform, task_key, program) -> dedup key
    ("program_id", pa.string()),    # sha1(task_key, program text): the same program on every platform
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
    ("load_avg", pa.float64()),     # the machine's 1-minute load average when the batch was measured
])

# Columns a record may leave out: filled in by records_to_table.
OPTIONAL_FIELDS = ("program_id", "load_avg")

ERROR_OK = ""
SOURCES = ("metaschedule", "ansor")


def make_record_id(platform: str, task_key: str, program: str) -> str:
    """Identity of a measurement: the same program on the same task and platform is one record."""
    h = hashlib.sha1()
    for part in (platform, task_key, program):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


def make_program_id(task_key: str, program: str) -> str:
    """Identity of a program, independent of where it was measured: it pairs a program's
    labels across platforms (MTL-TLP and CKD train on those pairs)."""
    h = hashlib.sha1()
    for part in (task_key, program):
        h.update(part.encode())
        h.update(b"\0")
    return h.hexdigest()


_SHORT = reprlib.Repr()
_SHORT.maxlevel, _SHORT.maxstring, _SHORT.maxother, _SHORT.maxlong = 2, 40, 40, 40


def show(value: Any) -> str:
    """A repr for messages about outside input, bounded in length and depth (it can be huge or deep)."""
    return _SHORT.repr(value)


def parse_json(text: str) -> Any:
    """`json.loads` for outside input: whatever cannot become a record is a ValueError.

    `json.loads` raises ValueError for bad syntax and for integers over 4300 digits, but
    RecursionError for deep nesting, and it accepts `\\ud800`-style escapes that leave lone
    surrogates in strings, which Arrow (UTF-8) refuses only later, when a whole chunk
    of records is converted.
    """
    try:
        value = json.loads(text)
        if "\\ud" in text or "\\uD" in text:  # a surrogate escape: is it half of a pair?
            json.dumps(value, ensure_ascii=False).encode()
    except RecursionError:
        raise ValueError("nested too deeply") from None
    except UnicodeEncodeError:
        raise ValueError("a string holds a lone UTF-16 surrogate (\\ud800-\\udfff escape)") from None
    return value


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
        missing = [n for n in names if n not in rec and n not in OPTIONAL_FIELDS]
        if missing:
            raise ValueError(f"record {i} ({rec.get('record_id', '?')}): missing fields {missing}")
        if rec.get("program_id") is None:
            rec["program_id"] = make_program_id(str(rec["task_key"]), str(rec["program"]))
        rec.setdefault("load_avg", None)
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
