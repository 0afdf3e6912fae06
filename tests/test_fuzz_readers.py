"""Readers of outside input, fuzzed with Hypothesis from damaged copies of the real fixtures.

What a new user with a damaged file would feed them: lines cut at random points,
flipped bytes, invalid UTF-8, fields of the wrong JSON type, NaN/inf/negative and
huge numbers, deeply nested values, unknown step kinds, empty files. The properties:

* every data line ends up as a record or in the quarantine (reason, file:line, raw
  bytes), never both and never neither: records + quarantined == data lines read;
* a file that cannot be used at all is one ValueError naming it; nothing else
  escapes (no KeyError/TypeError/UnicodeDecodeError/RecursionError traceback);
* a broken params.yaml platform value is a ValueError naming the field.

Examples are derandomized (the same on every run, so CI is deterministic); how many
each property ran is printed at the end of the module.
"""

from __future__ import annotations

import csv
import io
import json
import math
import pickle
import shutil
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tcl.config import load_params
from tcl.data.ansor import STEP_KINDS, RecordError, parse_ansor_line, read_ansor_log, task_key_of
from tcl.data.ingest import MANIFEST, ingest_ansor_dir
from tcl.data.ms_database import (RECORD_FILE, WORKLOAD_FILE, parse_tuning_record, read_ms_database,
                                  read_workloads, task_key_of_shash)
from tcl.data.quarantine import Quarantine, read_quarantine
from tcl.data.schema import RECORD_SCHEMA, parse_json
from tcl.data.store import RecordStore
from tcl.data.tenset_tasks import TaskPickleError, load_task_pkl, read_task_weights_mapping
from tcl.platforms import SPEC_FIELDS, load_platforms

from conftest import print_past_capture

REPO = Path(__file__).resolve().parent.parent
FIXTURES = REPO / "tests" / "fixtures"

FUZZ = settings(max_examples=200, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
FEW = settings(FUZZ, max_examples=40)  # properties that write Parquet stores (~50 ms an example)

EXAMPLES: Counter[str] = Counter()  # examples run per property, printed after the module
LINES: Counter[str] = Counter()  # data lines of the log/database properties: read, stored, quarantined


@pytest.fixture(scope="module", autouse=True)
def _print_example_counts(request):
    yield
    if EXAMPLES:
        print_past_capture(request, "hypothesis examples run: " + ", ".join(f"{k}={n}" for k, n in sorted(EXAMPLES.items())),
                           "data lines over those examples: " + ", ".join(f"{k}={n}" for k, n in sorted(LINES.items())))


def _data_lines_of(path: Path) -> list[str]:
    return [ln for ln in path.read_text().splitlines() if ln.strip() and not ln.startswith("#")]


ANSOR_FILES = sorted((FIXTURES / "ansor").glob("*.json"))
ANSOR_LINES = [ln for p in ANSOR_FILES for ln in _data_lines_of(p)]
ANSOR_COMMENTS = [ln for p in ANSOR_FILES for ln in p.read_text().splitlines() if ln.startswith("#")]
MS_DB = FIXTURES / "ms_database"
MS_LINES = {name: _data_lines_of(MS_DB / name) for name in (WORKLOAD_FILE, RECORD_FILE)}
PARAMS_TEXT = (REPO / "params.yaml").read_text()
PARAMS = yaml.safe_load(PARAMS_TEXT)
BAD_ERRORS = (UnicodeError, json.JSONDecodeError, yaml.YAMLError)  # raw errors, even where ValueError


# ================================================================ damage, as generators

def _deep(depth: int, inner: str = "0") -> str:
    return "[" * depth + inner + "]" * depth


# Raw JSON texts that replace one field: wrong types, non-finite/negative/huge numbers, bad
# strings, huge and deeply nested values, unknown or malformed steps.
NASTY_JSON = [
    "null", "true", "false", "0", "1", "-1", "2", "0.5", '""', '"x"', "[]", "{}", "[1, 2]",
    '{"a": 1}', '[null]', '[[]]', '["SP"]',
    "NaN", "Infinity", "-Infinity", "-1e-05", "-0.0", "1e10", "1e308", "1e400", "-1e400",
    "9223372036854775808", "18446744073709551616", "1" + "0" * 400, "1" + "0" * 5000,
    '"\\ud800"', '"ok \\udfff"', '"\\u0000"', '"' + "a" * 100_000 + '"', '"\u00e9\u20ac\U0001d11e"',
    '"auto_unroll_max_step$1e400"', '"x$nan"', '"$"',
    _deep(50), _deep(1_000), _deep(100_000), '{"a":' * 3_000 + "0" + "}" * 3_000,
    "[" + ",".join(["1"] * 20_000) + "]", _deep(3_000, '"ZZ"'),
    '["ZZ", 1]', '["sp", 1, 1, 8, [2], 1]', '["AN", 1, 0, 99]', '["AN", 1, 0, -1]', '["AN", 1, 0, 1e400]',
    '["PR", 1, 0, "x$1e400"]', '["CHR", 1, "\\ud800", [1]]', '["CHW", 1, "' + "\\udc80" + '"]',
    '["SP", 1, 1, 18446744073709551616, [2], 1]', '["FU", 1, [' + "1" + "0" * 400 + "]]",
    '["SP", 1, 1, 8, [' + _deep(2_000) + "], 1]",
]
# A workload key is JSON inside a JSON string: its own damage, quoted.
NASTY_KEYS = [json.dumps(s) for s in (
    "", "[]", "{}", "[1", '["f", NaN]', '["f", Infinity]', "[" + "9" * 5000 + "]", _deep(3_000),
    '["\\ud800", 1]', '[["nested"], 1]', "null", '"just a string"',
)]
# In a number's place: extreme, non-finite, negative, beyond float range, beyond int parsing.
NASTY_NUMBERS = st.one_of(
    st.sampled_from(["NaN", "Infinity", "-Infinity", "-1", "-0.0", "1e10", "1e308", "1e400", "253402300800",
                     "18446744073709551616", "1" + "0" * 400, "-1" + "0" * 400, "1" + "0" * 5000]),
    st.integers(-10 ** 400, 10 ** 400).map(str), st.floats().map(json.dumps))
# In a string's place: lone surrogates, control characters, huge, odd pragmas, any text.
NASTY_STRINGS = st.one_of(
    st.sampled_from(['"\\ud800"', '"ok \\udfff"', '"\\udc80\\udc80"', '"\\ude00\\ud83d"']),  # lone surrogates
    st.sampled_from(['"\\u0000"', '"' + "a" * 100_000 + '"', '"x$1e400"', '"x$nan"', '"$"',
                     '"\u00e9\u20ac\U0001d11e"', '"\\ud83d\\ude00"']),
    st.text(max_size=8).map(json.dumps))
WEIRD_BYTES = [b"\xff", b"\xfe\xff", b"\xc3", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\x80", b"\x00",
               b"\r", b"\x1f", b"\xe2\x80\xa8", b'"', b"]", b"{", b"\\"]

SENTINEL = "\u2603fuzz\u2603"


def _paths(node: Any, prefix: tuple = ()) -> list[tuple]:
    """Every path to a node of a parsed JSON value (the root included)."""
    out = [prefix]
    if isinstance(node, list):
        for i, child in enumerate(node):
            out += _paths(child, prefix + (i,))
    elif isinstance(node, dict):
        for key in sorted(node):
            out += _paths(node[key], prefix + (key,))
    return out


def _replace(obj: Any, edits: dict[tuple, str]) -> str:
    """`obj` as JSON text with the node at each path replaced by a raw JSON fragment."""
    if () in edits:
        return edits[()]
    marks = {}
    for i, path in enumerate(sorted(edits, key=len, reverse=True)):  # inner nodes first
        node = obj
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = marks[path] = f"{SENTINEL}{i}"
    text = json.dumps(obj)
    for path, mark in marks.items():
        text = text.replace(json.dumps(mark), edits[path], 1)
    return text


def _fields(obj: Any) -> dict[str, list[tuple]]:
    """Paths to what a reader interprets in an Ansor or MetaSchedule line, by field name.

    Damage is drawn field by field, so the timestamp or the target gets hit as often as
    the hundreds of step arguments; "anywhere" is any node at all.
    """
    fields = {"anywhere": _paths(obj)}
    if isinstance(obj, dict) and "i" in obj:  # Ansor: {"i": [[key, target, ...], [stages, steps]], "r": [...]}
        steps = obj["i"][1][1]
        fields.update(
            workload_key=[("i", 0, 0)], target=[("i", 0, 1)], steps=[("i", 1, 1)],
            step=[("i", 1, 1, k) for k in range(len(steps))],
            step_kind=[("i", 1, 1, k, 0) for k in range(len(steps))],
            step_arg=[("i", 1, 1, k, j) for k, step in enumerate(steps) for j in range(1, len(step))],
            costs=[("r", 0)], cost=[("r", 0, j) for j in range(len(obj["r"][0]))],
            error_no=[("r", 1)], timestamp=[("r", 3)])
    elif isinstance(obj, list) and len(obj) == 2 and isinstance(obj[0], int):  # MS [index, [trace, secs, target, args]]
        (insts, decisions), secs = obj[1][0], obj[1][1]
        fields.update(
            workload_index=[(0,)], trace=[(1, 0)], run_secs=[(1, 1)], target=[(1, 2)],
            run_sec=[(1, 1, j) for j in range(len(secs or []))],
            instruction=[(1, 0, 0, k) for k in range(len(insts))],
            instruction_field=[(1, 0, 0, k, f) for k in range(len(insts)) for f in range(4)],
            instruction_literal=[(1, 0, 0, k, f, j) for k, inst in enumerate(insts) for f in (1, 2)
                                 for j in range(len(inst[f]))],
            decision_value=[(1, 0, 1, k, 1) for k in range(len(decisions))],
            decision=[(1, 0, 1, k) for k in range(len(decisions))],
            decision_index=[(1, 0, 1, k, 0) for k in range(len(decisions))])
    elif isinstance(obj, list) and len(obj) == 2:  # MS workload [shash, module]
        fields.update(shash=[(0,)], module=[(1,)])
    return {name: paths for name, paths in fields.items() if paths}


def _nasty_for(node: Any, keys: list[str]) -> st.SearchStrategy[str]:
    """Raw JSON to put where `node` was: as often of its own type (a worse number, a worse
    string, a nasty workload key) as of any other (wrong types, nesting, unknown steps)."""
    if isinstance(node, str) and node.startswith("["):
        own = st.sampled_from(keys)
    elif isinstance(node, str):
        own = NASTY_STRINGS
    elif isinstance(node, (int, float)) and not isinstance(node, bool):
        own = NASTY_NUMBERS
    else:
        own = st.nothing()
    return own | st.sampled_from(NASTY_JSON)


@st.composite
def json_edit(draw, line: str, keys: list[str] = NASTY_KEYS) -> str:
    """One or two fields of a JSON line replaced by nasty values (a workload key by a nasty key)."""
    obj = json.loads(line)
    fields = _fields(obj)
    edits = {}
    for _ in range(draw(st.integers(1, 2))):
        path = draw(st.sampled_from(fields[draw(st.sampled_from(sorted(fields)))]))
        node = obj
        for key in path:
            node = node[key]
        edits[path] = draw(_nasty_for(node, keys))
    return _replace(obj, edits)


@st.composite
def byte_damage(draw, data: str | bytes) -> bytes:
    """Data cut at a random point, with bytes flipped, or with odd bytes put in."""
    data = data.encode() if isinstance(data, str) else data
    how = draw(st.sampled_from(["cut", "flip", "insert"] if data else ["insert"]))
    if how == "cut":
        return data[: draw(st.integers(0, len(data)))]
    if how == "flip":
        data = bytearray(data)
        for _ in range(draw(st.integers(1, 4))):
            at = draw(st.integers(0, len(data) - 1))
            data[at] ^= draw(st.integers(1, 255))
        return bytes(data)
    at = draw(st.integers(0, len(data)))
    odd = draw(st.sampled_from(WEIRD_BYTES) | st.binary(min_size=1, max_size=6))
    return data[:at] + odd + data[at:]


def damaged_line(lines: list[str], edit=json_edit) -> st.SearchStrategy[bytes]:
    """A line of a file: intact, field-edited, byte-damaged, a comment, blank, or random bytes."""
    real = st.sampled_from(lines)
    return st.one_of(
        real.map(str.encode),
        real.flatmap(edit).map(str.encode),
        real.flatmap(byte_damage),
        real.flatmap(edit).flatmap(byte_damage),
        st.sampled_from(ANSOR_COMMENTS + ["", "   ", "\t", "// comment"]).map(str.encode),
        st.binary(max_size=40),
    )


@st.composite
def damaged_file(draw, lines: list[str], max_lines: int = 6, edit=json_edit) -> bytes:
    """A file of damaged lines: LF or CRLF, with or without a last newline; possibly empty."""
    body = draw(st.lists(damaged_line(lines, edit), max_size=max_lines))
    newline = draw(st.sampled_from([b"\n", b"\r\n"]))
    blob = newline.join(body)
    return blob + newline if body and draw(st.booleans()) else blob


def data_lines(blob: bytes, comments: tuple[str, ...] = ("#",)) -> dict[int, bytes]:
    """Line number -> bytes of every line a reader must account for (not blank, not a comment).

    Lines split on b"\\n" only, as a binary file iterates. A line that is not UTF-8 counts
    even when it looks like a comment: the reader cannot know what it was.
    """
    pieces = blob.split(b"\n")
    if pieces[-1] == b"":
        pieces.pop()
    out = {}
    for n, piece in enumerate(pieces, start=1):
        try:
            text = piece.decode("utf-8").strip()
        except UnicodeDecodeError:
            out[n] = piece
            continue
        if text and not text.startswith(comments):
            out[n] = piece
    return out


# ================================================================ oracles

def _read_tables(tables) -> pa.Table:
    tables = list(tables)
    return pa.concat_tables(tables) if tables else RECORD_SCHEMA.empty_table()


def _check_quarantine(entries: list[dict], path: Path, lines: dict[int, bytes]) -> set[int]:
    """Each entry names its file and one data line, has a reason, and keeps the line's bytes."""
    seen = set()
    for e in entries:
        assert e["source_file"] == str(path)
        assert e["line"] in lines and e["line"] not in seen, (e["line"], sorted(lines))
        assert isinstance(e["reason"], str) and e["reason"]
        assert e["raw"].encode("utf-8", "surrogateescape").strip() == lines[e["line"]].strip()
        seen.add(e["line"])
    return seen


def _check_records(table: pa.Table, source: str) -> None:
    """What a reader emits is usable: known kinds, finite numbers, times or an error code."""
    assert table.schema == RECORD_SCHEMA
    for row in table.to_pylist():
        assert row["source"] == source
        for step in row["steps"]:
            assert all(math.isfinite(x) for x in step["nums"]), step
            if source == "ansor":
                assert step["kind"] in STEP_KINDS
        if row["error_code"] == "":
            assert row["run_secs"] and all(math.isfinite(x) and x >= 0 for x in row["run_secs"])
            assert math.isfinite(row["mean_sec"]) and math.isfinite(row["median_sec"])
        else:
            assert row["run_secs"] == [] and row["mean_sec"] is None


def _assert_clear_file_error(error: BaseException, path: Path) -> None:
    assert isinstance(error, ValueError) and not isinstance(error, BAD_ERRORS), repr(error)
    assert str(path) in str(error), str(error)


# ================================================================ Ansor logs

@FUZZ
@given(damaged_file(ANSOR_LINES))
def test_damaged_ansor_log_loses_no_line(blob):
    """Every data line of a damaged log is a record (in order) or quarantined with file:line."""
    EXAMPLES["ansor_log"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "task.json"
        path.write_bytes(blob)
        with Quarantine(tmp, "q") as q:
            table = _read_tables(read_ansor_log(path, platform="fuzz", quarantine=q, chunk_size=2))
        lines = data_lines(blob)
        quarantined = _check_quarantine(read_quarantine(q.path), path, lines)
    assert table.num_rows + len(quarantined) == len(lines)
    LINES.update(read=len(lines), stored=table.num_rows, quarantined=len(quarantined))
    kept = [lines[n].decode().strip() for n in sorted(lines) if n not in quarantined]
    assert table.column("program").to_pylist() == kept
    _check_records(table, "ansor")


@FUZZ
@given(st.sampled_from(ANSOR_LINES).flatmap(json_edit))
def test_edited_ansor_line_is_a_record_or_a_reason(line):
    """A line with a field of the wrong type/value parses to a usable record or a RecordError."""
    EXAMPLES["ansor_line"] += 1
    try:
        rec = parse_ansor_line(line)
    except RecordError as e:
        assert e.reason
        return
    rec.pop("workload_key")
    rec.update(record_id="r", platform="p", network="", task_weight=1, op_type="")
    _check_records(pa.Table.from_pylist([rec], schema=RECORD_SCHEMA), "ansor")


@FEW
@given(st.lists(damaged_file(ANSOR_LINES, max_lines=4), min_size=1, max_size=2))
def test_ingest_flow_quarantines_instead_of_crashing(blobs):
    """The ingest flow over damaged logs: stored records + quarantined lines == data lines, twice."""
    EXAMPLES["ingest"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        logs = Path(tmp) / "logs"
        logs.mkdir()
        for i, blob in enumerate(blobs):
            (logs / f"task{i}.json").write_bytes(blob)

        def ingest():
            return ingest_ansor_dir(logs, platform="fuzz", store_root=Path(tmp) / "store",
                                    quarantine_dir=Path(tmp) / "q", chunk_size=2, progress=False)

        first = ingest()
        lines = {logs / f"task{i}.json": data_lines(blob) for i, blob in enumerate(blobs)}
        entries = read_quarantine(Path(tmp) / "q" / "ingest-fuzz.jsonl")
        quarantined = sum(len(_check_quarantine([e for e in entries if e["source_file"] == str(p)], p, ls))
                          for p, ls in lines.items())
        assert quarantined == len(entries) == first.quarantined_now
        assert first.records_now + quarantined == sum(map(len, lines.values()))
        LINES.update(read=sum(map(len, lines.values())), stored=first.records_now, quarantined=quarantined)
        assert RecordStore(Path(tmp) / "store").count("fuzz") == first.records_now == first.total_records
        again = ingest()
        assert (again.skipped, again.total_records) == (len(blobs), first.total_records)


@pytest.fixture(scope="module")
def ingested(tmp_path_factory) -> tuple[Path, Path, int]:
    """A finished ingest of two fixture logs, one with a broken line: (its directory, a copy
    to restore it from, records). It stays at one path: quarantine entries name their files."""
    root = tmp_path_factory.mktemp("ingest") / "run"
    (root / "logs").mkdir(parents=True)
    shutil.copy(FIXTURES / "ansor" / "matmul.json", root / "logs")
    shutil.copy(FIXTURES / "ansor" / "conv2d.json", root / "logs")
    with (root / "logs" / "matmul.json").open("a") as f:
        f.write('{"i": [broken\n')
    summary = _ingest(root)
    assert (summary.records_now, summary.quarantined_now) == (2, 1)
    shutil.copytree(root, root.with_name("snapshot"))
    return root, root.with_name("snapshot"), summary.records_now


def _ingest(root: Path):
    return ingest_ansor_dir(root / "logs", platform="fuzz", store_root=root / "store", quarantine_dir=root / "q",
                            chunk_size=2, progress=False)


def _entry_source(line: bytes) -> str | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry.get("source_file") if isinstance(entry, dict) else None


@FEW
@given(st.sampled_from(["manifest", "quarantine"]), st.data())
def test_damaged_ingest_state_is_redone_not_crashed(ingested, which, data):
    """A damaged manifest or quarantine file of an earlier ingest: the rerun redoes what it must
    (no record lost or doubled) or stops with one error naming the manifest, and keeps every
    quarantine line that is not an entry of a re-read file."""
    EXAMPLES["ingest_state"] += 1
    root, snapshot, records = ingested
    shutil.rmtree(root)
    shutil.copytree(snapshot, root)
    matmul = str(root / "logs" / "matmul.json")
    if which == "manifest":
        path = root / "store" / "platform=fuzz" / MANIFEST
        damage = byte_damage(path.read_text()) | json_edit(path.read_text(), NASTY_JSON).map(str.encode)
    else:
        path = root / "q" / "ingest-fuzz.jsonl"
        damage = byte_damage(path.read_text())
        with open(matmul, "a") as f:
            f.write("\n")  # a changed file: re-read, its old quarantine entries replaced
    blob = data.draw(damage)
    path.write_bytes(blob)
    try:
        summary = _ingest(root)
    except ValueError as e:
        assert which == "manifest", repr(e)
        _assert_clear_file_error(e, path)
        return
    ids = RecordStore(root / "store").read("fuzz", columns=["record_id"]).column("record_id").to_pylist()
    now = (root / "q" / "ingest-fuzz.jsonl").read_bytes().splitlines()
    assert len(ids) == len(set(ids)) == records == summary.total_records
    assert [json.loads(ln)["line"] for ln in now if _entry_source(ln) == matmul] == [3]
    if which == "quarantine":
        kept = [ln for ln in blob.splitlines() if ln.strip() and _entry_source(ln) != matmul]
        assert all(ln in now for ln in kept)


# ================================================================ program identity

def _measured_again(line: str, costs: list[float], error_no: int, timestamp: float, all_cost: float) -> str:
    obj = json.loads(line)
    obj["r"] = [costs, error_no, all_cost, timestamp]
    return json.dumps(obj)


@FUZZ
@given(st.sampled_from(ANSOR_LINES),
       st.lists(st.floats(1e-7, 10.0), min_size=1, max_size=5), st.sampled_from([0, 0, 1, 4, 7]),
       st.integers(1_500_000_000, 1_900_000_000), st.floats(0.0, 100.0))
def test_program_id_is_the_schedule_not_the_measurement(line, costs, error_no, timestamp, all_cost):
    """The same schedule measured again is another record of the same program."""
    EXAMPLES["program_id"] += 1
    first = parse_ansor_line(line)
    again = parse_ansor_line(_measured_again(line, costs, error_no, timestamp, all_cost))
    assert again["program_id"] == first["program_id"]
    assert again["program"] != first["program"]


def test_same_schedule_measured_twice_is_two_records_of_one_program(tmp_path):
    line = ANSOR_LINES[0]
    later = _measured_again(line, [2e-5, 3e-5], 0, 1_700_000_000, 0.5)
    other = json.loads(line)
    split = next(step for step in other["i"][1][1] if step[0] == "SP")
    split[4] = [f + 1 for f in split[4]]  # other split factors: another program
    (tmp_path / "log.json").write_text("\n".join([line, later, json.dumps(other)]) + "\n")
    with Quarantine(tmp_path, "q") as q:
        rows = _read_tables(read_ansor_log(tmp_path / "log.json", platform="p", quarantine=q)).to_pylist()
    assert len(q) == 0 and len(rows) == 3
    assert len({r["record_id"] for r in rows}) == 3          # three measurements
    assert rows[0]["program_id"] == rows[1]["program_id"]    # of two programs
    assert rows[2]["program_id"] != rows[0]["program_id"]
    moved = json.loads(line)
    moved["i"][0][1] += " -mcpu=skylake-avx512"  # the same steps for another target
    assert parse_ansor_line(json.dumps(moved))["program_id"] != rows[0]["program_id"]


# ================================================================ MetaSchedule JSONDatabase

@FUZZ
@given(st.just((MS_DB / WORKLOAD_FILE).read_bytes()) | damaged_file(MS_LINES[WORKLOAD_FILE], max_lines=3),
       damaged_file(MS_LINES[RECORD_FILE]))
def test_damaged_ms_database_loses_no_line(workloads, records):
    """Workload and record lines: each one read, quarantined with file:line, or a record."""
    EXAMPLES["ms_database"] += 1
    comments = ("#", "//")
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "db"
        db.mkdir()
        (db / WORKLOAD_FILE).write_bytes(workloads)
        (db / RECORD_FILE).write_bytes(records)
        with Quarantine(tmp, "keys") as q:
            keys = read_workloads(db, q)
        w_lines = data_lines(workloads, comments)
        w_quarantined = _check_quarantine(read_quarantine(q.path), db / WORKLOAD_FILE, w_lines)
        assert len(keys) == len(w_lines) and keys.count(None) == len(w_quarantined)

        with Quarantine(tmp, "q") as q:
            table = _read_tables(read_ms_database(db, platform="fuzz", quarantine=q, chunk_size=2))
        entries = read_quarantine(q.path)
        r_lines = data_lines(records, comments)
        r_quarantined = _check_quarantine([e for e in entries if e["source_file"] == str(db / RECORD_FILE)],
                                          db / RECORD_FILE, r_lines)
    assert table.num_rows + len(r_quarantined) == len(r_lines)
    LINES.update(read=len(r_lines), stored=table.num_rows, quarantined=len(r_quarantined))  # tuning records
    assert len(entries) == len(w_quarantined) + len(r_quarantined)
    _check_records(table, "metaschedule")


MS_KEYS = [task_key_of_shash(json.loads(line)[0]) for line in MS_LINES[WORKLOAD_FILE]]


@FUZZ
@given(st.sampled_from(MS_LINES[RECORD_FILE]).flatmap(json_edit))
def test_edited_ms_record_is_a_record_or_a_reason(line):
    """A tuning record with a field of the wrong type/value: a usable record or a RecordError."""
    EXAMPLES["ms_record"] += 1
    try:
        obj = parse_json(line)
    except ValueError:
        return  # the line as a whole is not JSON: the reader quarantines it ("bad JSON")
    try:
        rec = parse_tuning_record(obj, MS_KEYS)
    except RecordError as e:
        assert e.reason
        return
    rec.update(record_id="r", platform="p", network="", task_name="", task_weight=1, op_type="")
    _check_records(pa.Table.from_pylist([rec], schema=RECORD_SCHEMA), "metaschedule")


# ================================================================ task weights: mappings and pickles

WORKLOAD_KEYS = sorted({json.loads(ln)["i"][0][0] for ln in ANSOR_LINES})
MAPPING_JSON = json.dumps({"resnet_50": {k: 1 + i % 3 for i, k in enumerate(WORKLOAD_KEYS[:8])},
                           "bert_tiny": {WORKLOAD_KEYS[0]: 4}})


def _mapping_csv() -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(["network", "workload_key", "weight"])
    writer.writerows([["resnet_50", k, 1 + i % 3] for i, k in enumerate(WORKLOAD_KEYS[:8])])
    return out.getvalue()


MAPPING_CSV = _mapping_csv()


def _check_mapping(read: Any, path: Path) -> None:
    """A usable {network: {workload_key: weight}}, or one clear error naming the file."""
    try:
        mapping = read(path)
    except Exception as e:  # noqa: BLE001  (the property is about which exceptions escape)
        _assert_clear_file_error(e, path)
        return
    for network, tasks in mapping.items():
        assert isinstance(network, str)
        for key, weight in tasks.items():
            assert type(weight) is int and 0 <= weight < 2 ** 31  # RECORD_SCHEMA's task_weight is an int32
            task_key_of(key)  # every key is a usable workload key


@FUZZ
@given(st.one_of(json_edit(MAPPING_JSON, NASTY_JSON).map(str.encode), byte_damage(MAPPING_JSON),
                 st.just(b"")))
def test_damaged_task_weights_json(blob):
    EXAMPLES["weights_json"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "weights.json"
        path.write_bytes(blob)
        _check_mapping(read_task_weights_mapping, path)


NASTY_CELLS = ["", " ", "-1", "1.5", "nan", "inf", "1e400", "1" + "0" * 5000, "2147483648", "true", "[]", "[1",
               "\ufeffnetwork", '["f", NaN]', _deep(3_000)]


@st.composite
def csv_edit(draw, row: str) -> str:
    """A CSV row with a cell replaced by a nasty or a huge one, or cells dropped or added."""
    cells = next(csv.reader([row]))
    how = draw(st.sampled_from(["cell", "huge", "drop", "add"]))
    if how == "huge":
        cells[draw(st.integers(0, len(cells) - 1))] = "x" * 200_000
    elif how == "cell":
        cells[draw(st.integers(0, len(cells) - 1))] = draw(st.sampled_from(NASTY_CELLS) | st.text(max_size=6))
    elif how == "drop":
        cells = cells[: draw(st.integers(0, len(cells) - 1))]
    else:
        cells.append(draw(st.sampled_from(NASTY_CELLS)))
    out = io.StringIO()
    csv.writer(out, lineterminator="").writerow(cells)
    return out.getvalue()


@FUZZ
@given(st.one_of(damaged_file(MAPPING_CSV.splitlines()[1:], edit=csv_edit).map(
                     lambda body: MAPPING_CSV.splitlines()[0].encode() + b"\n" + body),
                 damaged_file(MAPPING_CSV.splitlines(), edit=csv_edit), byte_damage(MAPPING_CSV)))
def test_damaged_task_weights_csv(blob):
    EXAMPLES["weights_csv"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "weights.csv"
        path.write_bytes(blob)
        _check_mapping(read_task_weights_mapping, path)


@pytest.fixture(scope="module")
def task_pickle() -> bytes:
    """A Tenset task.pkl as TVM ~0.8 pickles one (the stand-ins of test_ansor_reader)."""
    from test_ansor_reader import _fake_tvm

    with pytest.MonkeyPatch.context() as mp:
        make_task = _fake_tvm(mp)
        return pickle.dumps(([make_task(k) for k in WORKLOAD_KEYS[:3]], [1, 2, 3]))


@FUZZ
@given(st.data())
def test_damaged_task_pickle(task_pickle, data):
    """A cut or flipped task.pkl gives its tasks or one TaskPickleError naming the file."""
    EXAMPLES["task_pkl"] += 1
    blob = data.draw(byte_damage(task_pickle) | st.just(b""))
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "x.task.pkl"
        path.write_bytes(blob)
        try:
            tasks = load_task_pkl(path)
        except Exception as e:  # noqa: BLE001
            assert isinstance(e, TaskPickleError), repr(e)
            _assert_clear_file_error(e, path)
            return
    for t in tasks:
        assert type(t.weight) is int and 0 <= t.weight < 2 ** 31
        task_key_of(t.workload_key)


# ================================================================ params.yaml and platforms

NASTY_YAML = [".nan", ".inf", "-.inf", "-1", "-0.5", "1e400", "1" + "0" * 400, "true", "null", "~", "''",
              "'3 GHz'", "[]", "{}", "[1, 2]", "{a: 1}", "!!binary AAAA", "2026-01-01",
              "[" * 3_000 + "]" * 3_000, "{a: " * 2_000 + "1" + "}" * 2_000]


@FUZZ
@given(st.one_of(byte_damage(PARAMS_TEXT),
                 st.tuples(st.integers(0, len(PARAMS_TEXT)), st.sampled_from(NASTY_YAML)).map(
                     lambda t: (PARAMS_TEXT[: t[0]] + t[1] + PARAMS_TEXT[t[0]:]).encode())))
def test_damaged_params_yaml_is_a_clear_error(blob):
    """A damaged params.yaml loads, or is a ValueError naming the file or the field."""
    EXAMPLES["params_yaml"] += 1
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "params.yaml"
        path.write_bytes(blob)
        try:
            platforms = load_platforms(load_params(path))
        except Exception as e:  # noqa: BLE001
            assert isinstance(e, ValueError) and not isinstance(e, BAD_ERRORS), repr(e)
            assert str(path) in str(e) or "platforms" in str(e), str(e)
            return
    for p in platforms.values():
        assert all(math.isfinite(x) and x >= 0 for x in p.spec_vector)
        assert isinstance(p.target["kind"], str)


# A value each field must refuse: wrong type, non-finite, negative, huge, nested.
BROKEN_VALUES = {
    "kind": ["tpu", 3, None, [], {}, ["cpu"]],
    "target": ["llvm -mcpu=znver4", None, [], {"mcpu": "znver4"}, {"kind": 3}, {"kind": None}],
    "specs": [None, [], "cores: 1", 3],
    "description": [3, [], {}],
    "host": ["AuthenticAMD", [], {"cpu": 1}, {"flags": "avx2"}, {"flags": [1]}, {"family": "23"},
             {"vendor": 1}, {"model": 1.5}, {"family": True}],
}
BROKEN_SPEC = [float("nan"), float("inf"), -float("inf"), -1, -0.5, 10 ** 400, "3 GHz", None, True, [], {}]


@st.composite
def broken_platform(draw) -> tuple[dict, str, str]:
    """(platforms mapping, platform name, field path) with one field of one real entry broken."""
    name = draw(st.sampled_from(sorted(PARAMS["platforms"])))
    entry = json.loads(json.dumps(PARAMS["platforms"][name]))
    field = draw(st.sampled_from(sorted(BROKEN_VALUES) + ["specs.*", "entry"]))
    if field == "entry":
        return {name: draw(st.sampled_from([None, [], "cpu", 3, [{"kind": "cpu"}]]))}, name, ""
    if field == "specs.*":
        key = draw(st.sampled_from(SPEC_FIELDS[entry["kind"]]))
        entry["specs"][key] = draw(st.sampled_from(BROKEN_SPEC))
        return {name: entry}, name, key
    entry[field] = draw(st.sampled_from(BROKEN_VALUES[field]))
    return {name: entry}, name, field


@FUZZ
@given(broken_platform())
def test_broken_platform_value_names_the_field(case):
    EXAMPLES["platform_field"] += 1
    platforms, name, field = case
    with pytest.raises(ValueError) as err:
        load_platforms({"platforms": platforms})
    assert not isinstance(err.value, BAD_ERRORS)
    assert f"platforms.{name}" in str(err.value) and field in str(err.value), str(err.value)


@pytest.mark.parametrize("platforms", [[], "local-1c", 3])
def test_platforms_that_are_not_a_mapping_name_the_section(platforms):
    with pytest.raises(ValueError, match="platforms"):
        load_platforms({"platforms": platforms})


@pytest.mark.parametrize("edit, message", [
    (lambda p: p["collect"]["platforms"].append("zen1-avx2-1c-typo"), r"collect.platforms names \['zen1-avx2-1c-typo'\]"),
    (lambda p: p["validate"]["platforms"].pop(), r"validate.platforms .* must list every collect.platforms entry"),
    (lambda p: [p[s]["platforms"].remove(p["train"]["platforms"][0]) for s in ("collect", "validate")],
     r"train.platforms .* must pick from validate.platforms"),
    (lambda p: p["validate"].update(platforms="zen1-avx2-1c"), r"validate.platforms must be a list"),
])
def test_dvc_foreach_lists_disagreeing_with_collect_platforms_fail_at_load(tmp_path, edit, message):
    """A platform added to collect.platforms but not to validate.platforms would be measured and never
    validated: load_params names the list instead."""
    import yaml

    params = yaml.safe_load(PARAMS_TEXT)
    load_params(REPO / "params.yaml")  # the committed lists agree
    edit(params)
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(params))
    with pytest.raises(ValueError, match=message) as err:
        load_params(path)
    assert str(path) in str(err.value)
