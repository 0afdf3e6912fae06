"""Ansor (auto_scheduler) JSON record logs -> RECORD_SCHEMA tables.

Tenset and the TCL dataset ship measured programs as Ansor log lines, one JSON
object per line (v0.2 .. v0.6):

    {"i": [[workload_key, target, hardware_params, target_host, layout_rewrite, input_names],
           [stages, [step, ...]]],
     "r": [[cost_sec, ...], error_no, all_cost_sec, timestamp],
     "v": "v0.6"}

Only `workload_key` and `target` are required in the task part (older versions
stop there). Each step is `[code, args...]`; its argument layout is fixed per
code (see `STEP_LAYOUTS`, following Ansor's `WriteToRecord` in
`src/auto_scheduler/transform_step.cc`). A step becomes one schema primitive:

* kind = the step code;
* nums = numeric args in order, lists flattened, booleans as 0/1, nulls skipped;
  for `PR` the value after `$` in the pragma (`auto_unroll_max_step$512` -> 512);
* strs = string args in order: the cache scope of `CHR`/`CHW`, the pragma name of
  `PR`, and for `AN` the annotation's name (`parallel`, `threadIdx.x`, ...) so the
  integer code also reads as a token.

A line with `error_no != 0` is a failed measurement, not bad data: it is kept as
a record with `error_code = "ansor_error_<no>"` and no times. Lines that cannot be
read go to the quarantine with their file and line number, and reading goes on.
Lines starting with `#` (comments in TVM's example logs) and blank lines are skipped.

A record's `record_id` hashes the whole line: one id per measurement. Its
`program_id` hashes only what the program is (the workload key, the target and the
steps), so the same schedule measured twice is two records of one program.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Iterator

import pyarrow as pa

from tcl.data.quarantine import Quarantine
from tcl.data.schema import (make_program_id, make_record_id, parse_json, show, summarize_times,
                             tables_in_chunks)

log = logging.getLogger(__name__)

SOURCE = "ansor"

# Argument layout per step code. i: integer, b: boolean (written as 0/1),
# s: string, I: list of integers (nulls allowed).
STEP_LAYOUTS: dict[str, str] = {
    "AN": "iii",    # annotation: stage_id, iter_id, annotation code
    "FU": "iI",     # fuse: stage_id, fused iter ids
    "PR": "iis",    # pragma: stage_id, iter_id, "name$value"
    "RE": "iI",     # reorder: stage_id, new order of iter ids
    "SP": "iiiIb",  # split: stage_id, iter_id, extent (0 = unknown), lengths, inner_to_outer
    "FSP": "iiii",  # follow split: stage_id, iter_id, src_step_id, n_split
    "FFSP": "iiIib",  # follow fused split: stage_id, iter_id, src_step_ids, level, factor_or_nparts
    "SA": "iiii",   # storage align: stage_id, iter_id, factor, offset
    "CA": "iii",    # compute at: stage_id, target_stage_id, target_iter_id
    "CI": "i",      # compute inline: stage_id
    "CR": "i",      # compute root: stage_id
    "CHR": "isI",   # cache read: stage_id, scope, reader stage ids
    "CHW": "is",    # cache write: stage_id, scope
    "RF": "iii",    # rfactor: stage_id, iter_id, factor_iter_id
}
STEP_KINDS: tuple[str, ...] = tuple(STEP_LAYOUTS)

# IteratorAnnotation in Ansor's loop_state.h, by integer code.
ANNOTATION_NAMES: tuple[str, ...] = (
    "none", "unroll", "vectorize", "parallel", "vthread",
    "blockIdx.x", "threadIdx.x", "blockIdx.y", "threadIdx.y",
    "blockIdx.z", "threadIdx.z", "tensorize",
)

# MeasureErrorNo in Ansor's measure.py, for a readable error_msg.
ANSOR_ERRORS: dict[int, str] = {
    1: "INSTANTIATION_ERROR", 2: "COMPILE_HOST", 3: "COMPILE_DEVICE",
    4: "RUNTIME_DEVICE", 5: "WRONG_ANSWER", 6: "BUILD_TIMEOUT",
    7: "RUN_TIMEOUT", 8: "UNKNOWN_ERROR",
}

# Ansor writes this cost (MAX_FLOAT) for programs that failed.
FAILURE_COST = 1e10
# The last second `datetime` can hold (9999-12-31T23:59:59Z): a later timestamp is damage.
MAX_TIMESTAMP = 253_402_300_799


class RecordError(ValueError):
    """A line that cannot become a record. `reason` is short and stable; `detail` is specific."""

    def __init__(self, reason: str, detail: str = ""):
        super().__init__(reason + (f": {detail}" if detail else ""))
        self.reason = reason
        self.detail = detail


def _is_int(x: Any) -> bool:
    return type(x) is int  # JSON gives exact ints; bool (a subclass) is not an int here


_INT_OR_NONE = frozenset({int, type(None)})


def encode_step(step: Any, index: int = 0) -> dict[str, Any]:
    """One Ansor step `[code, args...]` -> `{"kind", "nums", "strs"}`, checking its layout.

    Written for speed (Tenset has ~10^9 steps): exact type checks, no per-arg calls.
    """
    if type(step) is not list or not step or type(step[0]) is not str:
        raise RecordError("malformed step", f"step {index}: {show(step)}")
    kind = step[0]
    layout = STEP_LAYOUTS.get(kind)
    if layout is None:
        raise RecordError(f"unknown step kind '{kind}'", f"step {index}")
    if len(step) != len(layout) + 1:
        raise RecordError(f"bad {kind} step",
                          f"step {index}: expected {len(layout)} args, got {len(step) - 1}")
    nums: list[float] = []
    strs: list[str] = []
    try:
        for pos, code in enumerate(layout, start=1):
            arg = step[pos]
            t = type(arg)
            if code == "i" and t is int:
                nums.append(float(arg))
            elif code == "I" and t is list and set(map(type, arg)) <= _INT_OR_NONE:
                nums.extend(map(float, arg if None not in arg else filter(_not_none, arg)))
            elif code == "s" and t is str:
                if kind == "PR":
                    _encode_pragma(arg, nums, strs)
                else:
                    strs.append(arg)
            elif code == "b" and (t is bool or (t is int and (arg == 0 or arg == 1))):
                nums.append(float(arg))
            else:
                raise RecordError(f"bad {kind} step", f"step {index}: arg {pos} is {show(arg)}")
    except OverflowError:  # float() of an integer beyond 1.8e308
        raise RecordError(f"bad {kind} step", f"step {index}: arg {pos} is out of float range") from None
    if kind == "AN":
        ann = step[3]
        if not 0 <= ann < len(ANNOTATION_NAMES):
            raise RecordError("bad AN step", f"step {index}: unknown annotation {ann}")
        strs.append(ANNOTATION_NAMES[ann])
    return {"kind": kind, "nums": nums, "strs": strs}


def _not_none(x: Any) -> bool:
    return x is not None


def _encode_pragma(pragma: str, nums: list[float], strs: list[str]) -> None:
    name, sep, value = pragma.partition("$")
    strs.append(name)
    if not sep:
        return
    try:
        number = float(value)
    except ValueError:
        strs.append(value)
        return
    if math.isfinite(number):
        nums.append(number)
    else:
        strs.append(value)


def _parse_workload_key(workload_key: str) -> tuple[str, list[Any]]:
    try:
        parsed = parse_json(workload_key)
    except json.JSONDecodeError as e:
        raise RecordError("bad workload key", f"{e.msg}: {show(workload_key)}") from None
    except ValueError as e:
        raise RecordError("bad workload key", f"{e}: {show(workload_key)}") from None
    if not (isinstance(parsed, list) and parsed):
        raise RecordError("bad workload key", f"not a non-empty list: {show(workload_key)}")
    return json.dumps(parsed), parsed


def canonical_workload_key(workload_key: str) -> str:
    """The workload key re-serialized, so spacing differences do not split one task in two."""
    return _parse_workload_key(workload_key)[0]


def task_key_of(workload_key: str) -> str:
    """Stable task identity: sha1 of the canonical workload key."""
    return hashlib.sha1(canonical_workload_key(workload_key).encode()).hexdigest()


def _field(obj: Any, index: int, what: str) -> Any:
    if not isinstance(obj, list):
        raise RecordError(f"bad field '{what}'", f"its parent is a {type(obj).__name__}, not a list")
    if len(obj) <= index:
        raise RecordError(f"missing field '{what}'")
    return obj[index]


def _costs(raw_costs: Any) -> list[float]:
    if not isinstance(raw_costs, list):
        raise RecordError("bad costs", f"expected a list, got {show(raw_costs)}")
    if not raw_costs:
        raise RecordError("no costs")
    out = []
    for c in raw_costs:
        if isinstance(c, bool) or not isinstance(c, (int, float)):
            raise RecordError("non-numeric cost", show(c))
        try:
            c = float(c)
        except OverflowError:  # an integer beyond float range: as good as infinite
            c = math.inf if c > 0 else -math.inf
        if math.isnan(c):
            raise RecordError("NaN cost")
        if c < 0:
            raise RecordError("negative cost", repr(c))
        if math.isinf(c) or c >= FAILURE_COST:
            raise RecordError("failure cost with error_no 0", repr(c))
        out.append(c)
    return out


def schedule_text(target: str, raw_steps: list[Any]) -> str:
    """What a line says about its program, without its measurement (costs, timestamp)."""
    return json.dumps([target, raw_steps], separators=(",", ":"))


def parse_ansor_line(line: str) -> dict[str, Any]:
    """One log line -> a record dict without the platform/network fields.

    Returns the RECORD_SCHEMA fields that the line alone determines (source,
    task_key, program_id, task_name, target, steps, program, run_secs, mean_sec, median_sec,
    error_code, error_msg, collected_at) plus `workload_key` (the canonical key,
    not a schema column) for weight and op-type lookups. Raises RecordError.
    """
    program = line.rstrip("\r\n")
    try:
        obj = parse_json(program)
    except json.JSONDecodeError as e:
        raise RecordError("bad JSON", e.msg + f" at column {e.colno}") from None
    except ValueError as e:
        raise RecordError("bad JSON", str(e)[:200]) from None
    if not isinstance(obj, dict):
        raise RecordError("bad JSON", f"expected an object, got {type(obj).__name__}")
    for name in ("i", "r"):
        if name not in obj:
            raise RecordError(f"missing field '{name}'")
    inp, res = obj["i"], obj["r"]

    task = _field(inp, 0, "i.task")
    workload_key = _field(task, 0, "i.task.workload_key")
    target = _field(task, 1, "i.task.target")
    if not isinstance(workload_key, str):
        raise RecordError("bad workload key", f"not a string: {show(workload_key)}")
    if not isinstance(target, str):
        raise RecordError("bad target", f"not a string: {show(target)}")
    workload_key, parsed_key = _parse_workload_key(workload_key)
    func_name = parsed_key[0]

    state = _field(inp, 1, "i.state")
    raw_steps = _field(state, 1, "i.state.steps")
    if not isinstance(raw_steps, list):
        raise RecordError("missing field 'i.state.steps'")
    steps = [encode_step(s, k) for k, s in enumerate(raw_steps)]

    raw_costs = _field(res, 0, "r.costs")
    error_no = _field(res, 1, "r.error_no")
    if not _is_int(error_no) or error_no < 0:
        raise RecordError("bad error_no", show(error_no))
    timestamp = res[3] if isinstance(res, list) and len(res) > 3 else None
    collected_at = None
    if timestamp is not None:
        if isinstance(timestamp, bool) or not isinstance(timestamp, (int, float)) \
                or not 0 <= timestamp <= MAX_TIMESTAMP:  # NaN fails the comparison too
            raise RecordError("bad timestamp", show(timestamp))
        collected_at = datetime.fromtimestamp(timestamp, tz=timezone.utc)

    if error_no == 0:
        run_secs = _costs(raw_costs)
        error_code, error_msg = "", ""
    else:  # a failed build/run: a record without times (its costs are the 1e10 sentinel)
        run_secs = []
        error_code = f"ansor_error_{error_no}"
        error_msg = ANSOR_ERRORS.get(error_no, "unknown Ansor error number")
    mean, median = summarize_times(run_secs)
    task_key = hashlib.sha1(workload_key.encode()).hexdigest()
    return {
        "source": SOURCE,
        "task_key": task_key,
        "program_id": make_program_id(task_key, schedule_text(target, raw_steps)),
        "task_name": func_name if isinstance(func_name, str) else "",
        "target": target,
        "steps": steps,
        "program": program,
        "run_secs": run_secs,
        "mean_sec": mean,
        "median_sec": median,
        "error_code": error_code,
        "error_msg": error_msg,
        "collected_at": collected_at,
        "workload_key": workload_key,
    }


def _canonical_weights(task_weights: dict[str, int], source: str) -> dict[str, int]:
    out: dict[str, int] = {}
    for key, weight in task_weights.items():
        try:
            canon = canonical_workload_key(key)
        except RecordError as e:
            raise ValueError(f"task_weights for {source}: {e} (key {key!r:.80})") from None
        out[canon] = out.get(canon, 0) + int(weight)
    return out


def read_ansor_log(path: str | Path, *, platform: str, network: str = "",
                   task_weights: dict[str, int] | None = None,
                   op_type_of: Callable[[str], str] | None = None,
                   quarantine: Quarantine, chunk_size: int = 50_000) -> Iterator[pa.Table]:
    """Stream an Ansor log as RECORD_SCHEMA tables of at most `chunk_size` rows.

    `task_weights` maps workload key -> occurrences in `network` (Tenset's
    task.pkl, see tcl.data.tenset_tasks); without it every task weighs 1, and a
    task missing from a given mapping weighs 0 (logged once per task).
    `op_type_of(workload_key)` names the operator type; it is called once per task.
    Bad lines go to `quarantine` as `<file>:<line>: <reason>` and reading goes on.
    """
    path = Path(path)
    weights = None if task_weights is None else _canonical_weights(task_weights, str(path))
    op_types: dict[str, str] = {}
    unweighted: set[str] = set()

    def rows() -> Iterator[dict[str, Any]]:
        with open(path, "rb") as fh:
            for lineno, raw_bytes in enumerate(fh, start=1):
                try:
                    raw = raw_bytes.decode("utf-8")
                except UnicodeDecodeError as e:  # keep the bytes recoverable via surrogateescape
                    raw = raw_bytes.decode("utf-8", errors="surrogateescape")
                    quarantine.add(path, lineno, "invalid UTF-8", raw.rstrip("\r\n"), str(e))
                    continue
                text = raw.strip()
                if not text or text.startswith("#"):
                    continue
                try:
                    rec = parse_ansor_line(text)
                except RecordError as e:
                    quarantine.add(path, lineno, e.reason, raw.rstrip("\r\n"), e.detail)
                    continue
                wk = rec.pop("workload_key")
                if weights is None:
                    weight = 1
                else:
                    weight = weights.get(wk, 0)
                    if wk not in weights and wk not in unweighted:
                        unweighted.add(wk)
                        log.warning("%s:%d: task %s not in the task weights of network %r; weight 0",
                                    path, lineno, rec["task_name"], network)
                if op_type_of is None:
                    op_type = ""
                else:
                    if wk not in op_types:
                        op_types[wk] = op_type_of(wk) or ""
                    op_type = op_types[wk]
                rec.update(record_id=make_record_id(platform, rec["task_key"], rec["program"]),
                           platform=platform, network=network, task_weight=weight, op_type=op_type)
                yield rec

    yield from tables_in_chunks(rows(), chunk_size)
