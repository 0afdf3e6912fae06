"""Tenset network -> task weights, read without old TVM and without trusting pickles.

Tenset stores, per network and target, a `*.task.pkl` file: a pickle of
`(tasks, task_weights)`, a list of `tvm.auto_scheduler.SearchTask` and the number
of times each task (subgraph) occurs in the network. TVM 0.27 has no
`auto_scheduler`, and unpickling untrusted files can run arbitrary code, so we
load them with a restricted unpickler: every `tvm.*` global becomes an inert
placeholder that only records its constructor args and state; plain builtin
containers are allowed; anything else (`os.system`, `builtins.eval`, numpy, ...)
is refused.

The layout is INFERRED (no real task.pkl was available when this was written),
from how TVM ~0.8 pickled objects: `tvm.runtime.object.Object.__reduce__` returns
`(tvm.runtime.object._new_object, (cls,), cls.__getstate__())`, and
`SearchTask.__getstate__` is a dict with `compute_dag`, `workload_key`, `target`,
`target_host`, `hardware_params`, `layout_rewrite_option`, `task_input_names`.
We only need `workload_key` (the same string as in the Ansor log lines) and the
weights; a task built by positional constructor args is also understood
(`SearchTask(func, args, compute_dag, workload_key, ...)`). File names are assumed
to follow Tenset's `clean_name(((network, shapes), target_kind))`, e.g.
`((resnet_50,[(1,3,224,224)]),llvm).task.pkl`.

A plain mapping `{network: {workload_key: weight}}` (JSON, or CSV with columns
network,workload_key,weight) is read by `read_task_weights_mapping`.
"""

from __future__ import annotations

import builtins
import csv
import io
import json
import pickle
import pickletools
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tcl.data.ansor import canonical_workload_key
from tcl.data.schema import parse_json

_SAFE_BUILTINS = frozenset({
    "list", "dict", "tuple", "set", "frozenset", "int", "float", "complex", "str",
    "bytes", "bytearray", "bool", "slice", "range", "object",
})
# How TVM's Object.__reduce__ names its "allocate an empty object of class cls" helper.
_NEW_OBJECT_HELPERS = frozenset({("tvm.runtime.object", "_new_object"),
                                 ("tvm._ffi.object", "_new_object")})
_SEARCH_TASK_ARG_WORKLOAD_KEY = 3  # SearchTask(func, args, compute_dag, workload_key, ...)
MAX_WEIGHT = 2 ** 31 - 1  # a record's task_weight is an int32


class TaskPickleError(ValueError):
    """A task.pkl that is unsafe or not in the expected layout."""


class TvmPlaceholder:
    """Inert stand-in for a pickled `tvm.*` object: records what the pickle gave it."""

    tvm_name = "tvm.?"

    def __new__(cls, *args: Any, **kwargs: Any) -> "TvmPlaceholder":
        obj = super().__new__(cls)
        obj.args = args
        obj.state = None
        return obj

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        self.args = args

    def __setstate__(self, state: Any) -> None:
        self.state = state

    def __repr__(self) -> str:
        return f"<{self.tvm_name} placeholder args={len(self.args)} state={type(self.state).__name__}>"


_placeholder_classes: dict[str, type[TvmPlaceholder]] = {}


def _placeholder(full_name: str) -> type[TvmPlaceholder]:
    cls = _placeholder_classes.get(full_name)
    if cls is None:
        short = full_name.rsplit(".", 1)[-1]
        cls = type(short, (TvmPlaceholder,), {"tvm_name": full_name})
        _placeholder_classes[full_name] = cls
    return cls


def _new_object(cls: Any) -> TvmPlaceholder:
    if not (isinstance(cls, type) and issubclass(cls, TvmPlaceholder)):
        raise pickle.UnpicklingError(f"_new_object called with non-TVM class {cls!r}")
    return cls.__new__(cls)


def _reconstructor(cls: Any, base: Any, state: Any) -> Any:
    # copyreg._reconstructor (protocol 0/1 objects): only ever builds placeholders.
    if not (isinstance(cls, type) and issubclass(cls, TvmPlaceholder)):
        raise pickle.UnpicklingError(f"copyreg._reconstructor of non-TVM class {cls!r}")
    return cls.__new__(cls)


class RestrictedUnpickler(pickle.Unpickler):
    """Unpickler that resolves `tvm.*` to placeholders and refuses all but plain builtins."""

    def find_class(self, module: str, name: str) -> Any:
        if (module, name) in _NEW_OBJECT_HELPERS:
            return _new_object
        if module == "tvm" or module.startswith("tvm."):
            return _placeholder(f"{module}.{name}")
        if module == "builtins" and name in _SAFE_BUILTINS:
            return getattr(builtins, name)
        if (module, name) == ("copyreg", "_reconstructor"):
            return _reconstructor
        raise pickle.UnpicklingError(f"refusing to load global {module}.{name}")


# Opcodes whose argument sizes a buffer before anything is read: a frame length, a memo index.
_SIZING_OPCODES = frozenset({"FRAME", "PUT", "BINPUT", "LONG_BINPUT"})


def restricted_load(data: bytes) -> Any:
    """Unpickle bytes with RestrictedUnpickler (raises pickle.UnpicklingError when refused)."""
    _refuse_oversized(data)
    return RestrictedUnpickler(io.BytesIO(data)).load()


def _refuse_oversized(data: bytes) -> None:
    """Refuse a pickle whose opcodes ask for more than it holds, before the C unpickler allocates.

    One flipped byte can turn a memo index into 2**31, and the C unpickler then allocates
    and zero-fills a 32 GB memo table (and a declared length can do the same): memory,
    not a clear error, is what runs out.
    """
    try:
        for op, arg, _pos in pickletools.genops(data):  # also checks declared lengths against the data
            if op.name in _SIZING_OPCODES and int(arg) > len(data):
                raise pickle.UnpicklingError(f"{op.name} {arg} exceeds the {len(data)}-byte pickle")
    except ValueError as e:  # truncated, or an unknown opcode
        raise pickle.UnpicklingError(str(e)) from None


@dataclass(frozen=True)
class TensetTask:
    workload_key: str
    weight: int


def _workload_key_of(task: Any, where: str) -> str:
    if not isinstance(task, TvmPlaceholder):
        raise TaskPickleError(f"{where}: expected a pickled SearchTask, got {type(task).__name__}")
    state = task.state
    if isinstance(state, tuple) and len(state) == 2:  # (dict state, slot state)
        state = state[0] or state[1]
    if isinstance(state, dict) and isinstance(state.get("workload_key"), str):
        return state["workload_key"]
    if len(task.args) > _SEARCH_TASK_ARG_WORKLOAD_KEY and \
            isinstance(task.args[_SEARCH_TASK_ARG_WORKLOAD_KEY], str):
        return task.args[_SEARCH_TASK_ARG_WORKLOAD_KEY]
    raise TaskPickleError(f"{where}: {task.tvm_name} has no workload_key "
                          f"(state keys: {sorted(map(str, state)) if isinstance(state, dict) else None})")


def load_task_pkl(path: str | Path) -> list[TensetTask]:
    """Read a Tenset `*.task.pkl` into (workload_key, weight) pairs, in file order."""
    path = Path(path)
    try:
        obj = restricted_load(path.read_bytes())
    except (pickle.UnpicklingError, EOFError, ValueError, TypeError, AttributeError) as e:
        raise TaskPickleError(f"{path}: cannot load task pickle: {e}") from None
    if not (isinstance(obj, (tuple, list)) and len(obj) == 2):
        raise TaskPickleError(f"{path}: expected (tasks, task_weights), got {type(obj).__name__}")
    tasks, weights = obj
    if not isinstance(tasks, (list, tuple)) or not isinstance(weights, (list, tuple)):
        raise TaskPickleError(f"{path}: tasks and task_weights must be lists")
    if len(tasks) != len(weights):
        raise TaskPickleError(f"{path}: {len(tasks)} tasks but {len(weights)} weights")
    out = []
    for i, (task, weight) in enumerate(zip(tasks, weights)):
        if isinstance(weight, bool) or not isinstance(weight, int) or not 0 <= weight <= MAX_WEIGHT:
            raise TaskPickleError(f"{path}: task {i}: weight {weight!r:.40} is not a count")
        workload_key = _workload_key_of(task, f"{path}: task {i}")
        try:
            canonical_workload_key(workload_key)
        except ValueError as e:
            raise TaskPickleError(f"{path}: task {i}: {e}") from None
        out.append(TensetTask(workload_key, weight))
    return out


def task_weights_from_pkl(path: str | Path) -> dict[str, int]:
    """`{workload_key: weight}` of one task.pkl (a task listed twice adds up)."""
    weights: dict[str, int] = {}
    for t in load_task_pkl(path):
        weights[t.workload_key] = weights.get(t.workload_key, 0) + t.weight
    return weights


def network_of_task_pkl(path: str | Path) -> str:
    """Network name from a Tenset file name `((name,shapes),target).task.pkl`; else the stem."""
    name = Path(path).name
    stem = name[: -len(".task.pkl")] if name.endswith(".task.pkl") else Path(path).stem
    core = stem.lstrip("(")
    head = core.split(",", 1)[0].strip("'\" ")
    return head if head and head != core else stem


def read_task_weights_mapping(path: str | Path) -> dict[str, dict[str, int]]:
    """Read `{network: {workload_key: weight}}` from JSON, or CSV (network,workload_key,weight)."""
    path = Path(path)
    text = _read_text(path)
    if path.suffix.lower() == ".csv":
        return _read_mapping_csv(path, text)
    try:
        data = parse_json(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{path}:{e.lineno}: bad JSON: {e.msg}") from None
    except ValueError as e:
        raise ValueError(f"{path}: bad JSON: {e}") from None
    if not isinstance(data, dict):
        raise ValueError(f"{path}: expected {{network: {{workload_key: weight}}}}")
    out: dict[str, dict[str, int]] = {}
    for network, tasks in data.items():
        if not isinstance(tasks, dict):
            raise ValueError(f"{path}: network {network!r}: expected {{workload_key: weight}}")
        out[network] = {_workload_key(k, f"{path}: network {network!r}"):
                        _weight(w, f"{path}: network {network!r}, key {k!r:.60}") for k, w in tasks.items()}
    return out


def _read_text(path: Path) -> str:
    try:
        return path.read_bytes().decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None


def _read_mapping_csv(path: Path, text: str) -> dict[str, dict[str, int]]:
    out: dict[str, dict[str, int]] = {}
    reader = csv.DictReader(io.StringIO(text, newline=""))
    try:
        need = {"network", "workload_key", "weight"}
        if not need <= set(reader.fieldnames or ()):
            raise ValueError(f"{path}:1: CSV header must have columns {sorted(need)}, "
                             f"got {reader.fieldnames}")
        for row in reader:
            where = f"{path}:{reader.line_num}"
            weight = _weight(row["weight"], where)
            key = _workload_key(row["workload_key"], where)
            tasks = out.setdefault(row["network"], {})
            tasks[key] = _weight(tasks.get(key, 0) + weight, f"{where} (the sum of its rows)")
    except csv.Error as e:
        raise ValueError(f"{path}: bad CSV after line {reader.line_num}: {e}") from None
    return out


def _workload_key(key: str, where: str) -> str:
    try:
        canonical_workload_key(key)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None
    return key


def _weight(value: Any, where: str) -> int:
    if isinstance(value, str):
        try:
            value = int(value.strip())
        except ValueError:
            raise ValueError(f"{where}: weight {value!r} is not an integer") from None
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_WEIGHT:
        raise ValueError(f"{where}: weight {value!r:.40} is not a count (an integer in 0..{MAX_WEIGHT})")
    return value
