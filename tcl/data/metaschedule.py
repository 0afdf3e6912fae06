"""MetaSchedule traces -> the structured primitive sequence of the record schema.

A MetaSchedule trace is `[instructions, decisions]`, each instruction
`[kind, inputs, attrs, outputs]`. Inputs mix random-variable names (`b0`, `l3`,
`v7`: block, loop and expression handles) with literals: numbers, `"None"`, and
JSON-quoted strings. One instruction becomes one primitive:

* kind  = the instruction kind (`SamplePerfectTile`, `Split`, `Annotate`, ...);
* nums  = numeric literal inputs, then numeric attrs, then the sampling decision,
          all flattened in that order (booleans count as 0/1);
* strs  = string literal inputs, then string attrs (block names, annotation keys).

Random-variable names are dropped: they are renumbered freely between traces and
say nothing about the program. The decision carries what was sampled (tile sizes,
unroll factors), which is what tells two programs of one design space apart.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any

from tcl.data.schema import parse_json, show

_RV_NAME = re.compile(r"^[blv]\d+$")


def _number(value: int | float) -> float:
    try:
        x = float(value)
    except OverflowError:
        raise ValueError(f"number out of float range in trace JSON: {str(value)[:40]}...") from None
    if not math.isfinite(x):
        raise ValueError(f"non-finite number in trace JSON: {value!r}")
    return x


def _flatten(value: Any, nums: list[float], strs: list[str], literal_strings: bool) -> None:
    if isinstance(value, bool):
        nums.append(float(value))
    elif isinstance(value, (int, float)):
        nums.append(_number(value))
    elif isinstance(value, str):
        if not literal_strings:  # an instruction input: RV name, "None", or a quoted literal
            if _RV_NAME.match(value) or value == "None":
                return
            if value.startswith('"'):
                value = parse_json(value)
        strs.append(value)
    elif isinstance(value, (list, tuple)):
        for item in value:
            _flatten(item, nums, strs, literal_strings)
    elif isinstance(value, dict):
        for key in sorted(value):
            strs.append(str(key))
            _flatten(value[key], nums, strs, literal_strings)
    elif value is None:
        return
    else:
        raise TypeError(f"unexpected value in trace JSON: {value!r} ({type(value).__name__})")


def trace_to_steps(trace_json: Any) -> list[dict[str, Any]]:
    """Convert a trace JSON (`[insts, decisions]`) into schema steps."""
    if isinstance(trace_json, str):
        trace_json = json.loads(trace_json)
    if not (isinstance(trace_json, list) and len(trace_json) == 2):
        raise ValueError("trace JSON must be [instructions, decisions]")
    insts, decisions = trace_json
    decision_of = dict(_decision(d) for d in decisions)
    steps = []
    for i, inst in enumerate(insts):
        if not (isinstance(inst, list) and len(inst) == 4 and isinstance(inst[0], str)):
            raise ValueError(f"instruction {i}: expected [kind, inputs, attrs, outputs], got {show(inst)}")
        kind, inputs, attrs, _outputs = inst
        nums: list[float] = []
        strs: list[str] = []
        _flatten(inputs, nums, strs, literal_strings=False)
        _flatten(attrs, nums, strs, literal_strings=True)
        if i in decision_of:
            _flatten(decision_of[i], nums, strs, literal_strings=True)
        steps.append({"kind": kind, "nums": nums, "strs": strs})
    return steps


def _decision(entry: Any) -> tuple[int, Any]:
    if not (isinstance(entry, (list, tuple)) and len(entry) == 2 and type(entry[0]) is int):
        raise ValueError(f"a decision must be [instruction index, value], got a {type(entry).__name__}")
    return entry[0], entry[1]


def to_plain_json(obj: Any) -> Any:
    """TVM containers/immediates (Array, Map, IntImm, ...) -> plain Python JSON values."""
    if obj is None or isinstance(obj, (bool, int, float, str)):
        return obj
    value = getattr(obj, "value", None)
    if value is not None and isinstance(value, (int, float)):  # IntImm / FloatImm
        return value
    if hasattr(obj, "items"):
        return {str(to_plain_json(k)): to_plain_json(v) for k, v in obj.items()}
    if hasattr(obj, "__iter__"):
        return [to_plain_json(v) for v in obj]
    raise TypeError(f"cannot convert {type(obj).__name__} to JSON")
