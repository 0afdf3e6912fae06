"""MetaSchedule JSONDatabase directories -> RECORD_SCHEMA tables.

A JSONDatabase is two JSON-lines files (TVM 0.27, `s_tir.meta_schedule.database`):

* `database_workload.json`: `[shash, module]` per line, `shash` the structural hash
  of the task's IRModule as a decimal string, `module` the IRModule's JSON graph,
  base64 of an 8-byte little-endian length followed by the JSON text (older
  databases store the JSON object itself; both are read);
* `database_tuning_record.json`: `[workload_index, [trace, run_secs, target, args_info]]`
  per line, `workload_index` counting the workload lines from 0.

A record's task key is `0x%016x` of the shash: exactly `ms.utils.shash2hex(mod)`,
the key the collector uses, so records from a database and from collection join.
Its program text is the trace JSON dumped as the collector dumps it, and its steps
come from `trace_to_steps`. MetaSchedule commits failed candidates with the run
time 1e10 (`AddToDatabase`); they become records with `error_code="ms_failed"`.
A record committed without run times becomes `error_code="unmeasured"`.
Lines that cannot be read go to the quarantine as `<file>:<line>: <reason>`.

By default nothing here imports TVM: a database is read as plain JSON, in bounded
chunks. The database spells boolean attributes as 0/1 where the collector's
`trace.as_json()` says true/false, so the same program gets another record_id.
`replay=True` fixes that and checks each record: the trace is replayed on its
workload with TVM (~2 ms a record) and the replayed trace is what is stored;
a trace that does not replay is quarantined.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
import struct
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow as pa

from tcl.data.ansor import RecordError
from tcl.data.metaschedule import to_plain_json, trace_to_steps
from tcl.data.quarantine import Quarantine
from tcl.data.schema import RECORD_SCHEMA, make_record_id, parse_json, show, summarize_times, tables_in_chunks

SOURCE = "metaschedule"
WORKLOAD_FILE = "database_workload.json"
RECORD_FILE = "database_tuning_record.json"
# What AddToDatabase commits as run time when a candidate failed to build or run.
MS_FAILURE_SEC = 1e10
# What _json_lines yields for a line it quarantined (JSON `null` is a value like any other).
UNREADABLE = object()


def task_key_of_shash(shash: Any) -> str:
    """Task key from a workload's structural hash (decimal string or int): `shash2hex`'s format."""
    if isinstance(shash, bool) or not isinstance(shash, (str, int)):
        raise RecordError("bad shash", show(shash))
    try:
        value = int(shash)
    except ValueError:
        raise RecordError("bad shash", show(shash)) from None
    if not 0 <= value < 2 ** 64:
        raise RecordError("bad shash", f"{value} is not a 64-bit hash")
    return f"0x{value:016x}"


def decode_workload_module(module: Any) -> str:
    """The IRModule JSON text of a workload line (`tvm.ir.load_json` reads it back)."""
    if isinstance(module, dict):  # older databases: the JSON graph inline
        return json.dumps(module)
    if not isinstance(module, str):
        raise RecordError("bad workload module", f"expected base64 text, got {type(module).__name__}")
    try:
        raw = base64.b64decode(module, validate=True)
    except (binascii.Error, ValueError) as e:
        raise RecordError("bad workload module", f"not base64: {e}") from None
    # dmlc string serialization: u64 little-endian length, then the bytes.
    if len(raw) >= 8 and struct.unpack("<Q", raw[:8])[0] == len(raw) - 8:
        raw = raw[8:]
    elif not raw.lstrip().startswith(b"{"):
        raise RecordError("bad workload module", "neither a length-prefixed nor a plain JSON graph")
    try:
        text = raw.decode("utf-8")
        parse_json(text)
    except ValueError as e:  # not UTF-8, or not JSON
        raise RecordError("bad workload module", f"not JSON: {str(e)[:200]}") from None
    return text


def _json_lines(path: Path, quarantine: Quarantine) -> Iterator[tuple[int, str, Any]]:
    """(line number, raw text, parsed JSON) of every data line; undecodable lines are quarantined.

    Yields `UNREADABLE` as the parsed value for a line that is not UTF-8 JSON (after
    quarantining it), so callers that count lines (workload indices) still see it.
    """
    with open(path, "rb") as fh:
        for lineno, raw_bytes in enumerate(fh, start=1):
            try:
                raw = raw_bytes.decode("utf-8").rstrip("\r\n")
            except UnicodeDecodeError as e:  # keep the bytes recoverable via surrogateescape
                raw = raw_bytes.decode("utf-8", errors="surrogateescape").rstrip("\r\n")
                quarantine.add(path, lineno, "invalid UTF-8", raw, str(e))
                yield lineno, raw, UNREADABLE
                continue
            text = raw.strip()
            if not text or text.startswith("#") or text.startswith("//"):
                continue  # what TVM's JSONFileReadLines skips too
            try:
                obj = parse_json(text)
            except json.JSONDecodeError as e:
                quarantine.add(path, lineno, "bad JSON", raw, f"{e.msg} at column {e.colno}")
                obj = UNREADABLE
            except ValueError as e:
                quarantine.add(path, lineno, "bad JSON", raw, str(e)[:200])
                obj = UNREADABLE
            yield lineno, raw, obj


def read_workloads(directory: str | Path, quarantine: Quarantine,
                   on_module: Callable[[str, str], None] | None = None) -> list[str | None]:
    """Task key per workload index (None where the line was unreadable and quarantined).

    Every module is decoded (a cheap check: a few per database); `on_module(task_key,
    module_json)` receives the IRModule JSON, e.g. for `RecordStore.save_workload`.
    """
    path = Path(directory) / WORKLOAD_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no MetaSchedule workload file in {directory}")
    keys: list[str | None] = []
    for lineno, raw, obj in _json_lines(path, quarantine):
        key = None
        if obj is not UNREADABLE:
            try:
                if not (isinstance(obj, list) and len(obj) == 2):
                    raise RecordError("malformed workload", "expected [shash, module]")
                key = task_key_of_shash(obj[0])
                module_json = decode_workload_module(obj[1])
                if on_module is not None:
                    on_module(key, module_json)
            except RecordError as e:
                quarantine.add(path, lineno, e.reason, raw, e.detail)
                key = None
        keys.append(key)
    return keys


def _run_secs(value: Any) -> tuple[list[float], str, str]:
    """(run_secs, error_code, error_msg) of a record's run-time field."""
    if value is None or value == []:
        return [], "unmeasured", "no run time in the database"
    if not isinstance(value, list):
        raise RecordError("bad run_secs", f"expected a list, got {show(value)}")
    secs = []
    for x in value:
        if isinstance(x, bool) or not isinstance(x, (int, float)):
            raise RecordError("bad run_secs", f"non-numeric {show(x)}")
        try:
            x = float(x)
        except OverflowError:  # an integer beyond float range: past the failure sentinel
            x = math.inf if x > 0 else -math.inf
        if math.isnan(x) or x < 0:
            raise RecordError("bad run_secs", f"{x!r} is not a time")
        secs.append(x)
    if any(x >= MS_FAILURE_SEC for x in secs):
        return [], "ms_failed", f"MetaSchedule failure sentinel run_secs={max(secs):g}: build or run failed"
    return secs, "", ""


def parse_tuning_record(obj: Any, workload_keys: list[str | None],
                        replay: Callable[[str, Any], Any] | None = None) -> dict[str, Any]:
    """One parsed tuning-record line -> record fields without platform/network/task metadata.

    `replay(task_key, trace)` may replace the trace by its canonical form (see `_Replayer`).
    """
    if not (isinstance(obj, list) and len(obj) == 2 and isinstance(obj[1], list)):
        raise RecordError("malformed record", "expected [workload_index, [trace, run_secs, target, args_info]]")
    index, body = obj
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < len(workload_keys):
        raise RecordError("unknown workload index", f"{show(index)} (the workload file has {len(workload_keys)})")
    task_key = workload_keys[index]
    if task_key is None:
        raise RecordError("unknown workload index", f"workload {index} was quarantined")
    if len(body) < 3:
        raise RecordError("malformed record", f"expected >= 3 fields in the record body, got {len(body)}")
    trace, run_secs, target = body[0], body[1], body[2]
    try:
        if replay is not None:
            trace = replay(task_key, trace)
        steps = trace_to_steps(trace)
    except RecordError:
        raise
    except (ValueError, TypeError) as e:
        raise RecordError("bad trace", str(e)[:200]) from None
    if not isinstance(target, (dict, str)):
        raise RecordError("bad target", f"expected a JSON object, got {type(target).__name__}")
    secs, error_code, error_msg = _run_secs(run_secs)
    mean, median = summarize_times(secs)
    return {
        "source": SOURCE, "task_key": task_key,
        "target": target if isinstance(target, str) else json.dumps(target, sort_keys=True),
        "steps": steps, "program": json.dumps(trace, separators=(",", ":")),
        "run_secs": secs, "mean_sec": mean, "median_sec": median,
        "error_code": error_code, "error_msg": error_msg, "collected_at": None,
    }


class _Replayer:
    """Replays database traces on their workloads with TVM: canonical trace JSON, or RecordError."""

    def __init__(self) -> None:
        import tvm
        from tvm.s_tir.schedule import Schedule, Trace

        self._load, self._schedule, self._trace = tvm.ir.load_json, Schedule, Trace
        self.module_json: dict[str, str] = {}
        self._mods: dict[str, Any] = {}

    def __call__(self, task_key: str, trace: Any) -> Any:
        try:
            if task_key not in self._mods:
                self._mods[task_key] = self._load(self.module_json[task_key])
        except Exception as e:  # a module that decodes as JSON but is no IRModule
            raise RecordError("workload does not load", _last_line(e)) from None
        sch = self._schedule(self._mods[task_key])
        try:
            self._trace.apply_json_to_schedule(trace, sch)
        except Exception as e:  # TVM reports replay failures as plain errors
            raise RecordError("trace does not replay", _last_line(e)) from None
        return to_plain_json(sch.trace.as_json())


def _last_line(error: Exception) -> str:
    lines = str(error).strip().splitlines()
    return lines[-1][:200] if lines else type(error).__name__


def read_ms_database(directory: str | Path, *, platform: str, quarantine: Quarantine,
                     tasks: dict[str, dict[str, Any]] | None = None, network: str = "",
                     chunk_size: int = 10_000, replay: bool = False,
                     on_module: Callable[[str, str], None] | None = None) -> Iterator[pa.Table]:
    """Stream a JSONDatabase directory as RECORD_SCHEMA tables of at most `chunk_size` rows.

    `tasks` maps task key -> `{network, task_name, weight, op_type}` (the store's
    `_tasks.jsonl` rows); a task without an entry gets `network`, weight 1, no name/op type.
    """
    directory = Path(directory)
    replayer = _Replayer() if replay else None

    def keep_module(key: str, module_json: str) -> None:
        if replayer is not None:
            replayer.module_json[key] = module_json
        if on_module is not None:
            on_module(key, module_json)

    keys = read_workloads(directory, quarantine, keep_module)
    path = directory / RECORD_FILE
    if not path.is_file():
        raise FileNotFoundError(f"{path}: no MetaSchedule tuning-record file in {directory}")
    tasks = tasks or {}

    def rows() -> Iterator[dict[str, Any]]:
        for lineno, raw, obj in _json_lines(path, quarantine):
            if obj is UNREADABLE:
                continue
            try:
                rec = parse_tuning_record(obj, keys, replayer)
            except RecordError as e:
                quarantine.add(path, lineno, e.reason, raw, e.detail)
                continue
            meta = tasks.get(rec["task_key"], {})
            rec.update(record_id=make_record_id(platform, rec["task_key"], rec["program"]),
                       platform=platform, network=meta.get("network", network),
                       task_name=meta.get("task_name", ""), task_weight=int(meta.get("weight", 1)),
                       op_type=meta.get("op_type", ""))
            yield rec

    yield from tables_in_chunks(rows(), chunk_size)


def read_ms_database_table(directory: str | Path, *, platform: str,
                           on_module: Callable[[str, str], None] | None = None) -> pa.Table:
    """A whole JSONDatabase as one table, for a report that reads a tuning run and stores nothing of it: lines
    that cannot be read are left out and counted on stdout, their quarantine file thrown away with its
    temporary directory (ingesting a run for keeps is tcl.data.tuning_dbs's, with a real quarantine)."""
    import tempfile

    with tempfile.TemporaryDirectory() as tmp, Quarantine(tmp, "database") as quarantine:
        table = pa.concat_tables([RECORD_SCHEMA.empty_table(),  # a run that measured nothing yet: no rows
                                  *read_ms_database(directory, platform=platform, quarantine=quarantine,
                                                    on_module=on_module)])
        if quarantine.counts:
            print(f"{directory}: left out {dict(quarantine.counts)}", flush=True)
    return table
