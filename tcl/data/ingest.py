"""Ingest a Tenset/TCL directory of Ansor logs into a record store, resumably.

The directory holds one Ansor JSON log per task (`*.json`, searched recursively),
as Tenset's `measure_records/<platform>/` does. Each file is streamed through
`read_ansor_log` in chunks; each chunk becomes one part
`<store_root>/platform=<name>/part-f<file id>-<chunk>.parquet` (RecordStore's
layout and atomic writes), so memory stays bounded by the chunk size. A file is the
unit of work (`ingest_log_file`): `compute.runner: dask` spreads files over Dask workers
(tcl.compute), and the stage commits them in file order either way, with the same bytes.

Resuming: `<store_root>/platform=<name>/_ingest_manifest.json` lists every fully
ingested file with its size, mtime and sha1. A file listed with the same size and
mtime is skipped (same size, new mtime: its sha1 decides). Any other file is
(re)ingested from scratch: its earlier parts (a half-ingested file from a killed
run, or an old version of the file) and its quarantine entries are removed first,
so a rerun never duplicates a record. The manifest is rewritten atomically after
each file, which is the commit point.

Task weights: Tenset's `*.task.pkl` files (one network each; found in the
directory itself when no path is given) or a `{network: {workload_key: weight}}`
JSON/CSV mapping. A record's `network`/`task_weight` are those of the first network
(sorted by name) the task occurs in; all (network, task, weight) triples are kept
in the store's `_tasks.jsonl`, which the splits use to hold out shared tasks.
The same network in several task.pkl files (other batch sizes or targets) takes
the max weight of a task, never the sum.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
from tqdm.auto import tqdm

from tcl.compute import Units, serial_units
from tcl.config import settings_from
from tcl.data.ansor import read_ansor_log, task_key_of
from tcl.data.quarantine import Quarantine
from tcl.data.store import RecordStore, atomic_write_bytes
from tcl.data.tenset_tasks import network_of_task_pkl, read_task_weights_mapping, task_weights_from_pkl

log = logging.getLogger(__name__)

MANIFEST = "_ingest_manifest.json"


@dataclass(frozen=True)
class IngestSettings:
    """`ingest:` of params.yaml: which Tenset directory, measured on which declared platform."""

    tenset_dir: str | None = None       # null: the stage is a clean no-op
    platform: str | None = None         # required with tenset_dir
    task_weights: Any = None            # see params.yaml; None: the *.task.pkl files in tenset_dir
    store: str = "data/tenset"
    quarantine_dir: str | None = None   # None: <store>/_quarantine
    chunk_size: int = 10_000

    def __post_init__(self):
        if self.tenset_dir and not self.platform:
            raise ValueError("params.yaml ingest.platform: required with ingest.tenset_dir (the platforms: entry "
                             "the logs were measured on)")

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "IngestSettings":
        return settings_from(cls, params.get("ingest"), "ingest")


@dataclass
class IngestSummary:
    platform: str
    files: int = 0
    skipped: int = 0
    ingested: int = 0
    records_now: int = 0
    total_records: int = 0
    quarantined_now: int = 0
    quarantine: dict[str, Any] = field(default_factory=dict)


def file_id(relpath: str) -> str:
    """Part-name-safe id of an input file (its path relative to the ingested directory)."""
    return "f" + hashlib.sha1(relpath.encode()).hexdigest()[:16]


def sha1_of(path: Path, block: int = 1 << 20) -> str:
    h = hashlib.sha1()
    with open(path, "rb") as fh:
        while chunk := fh.read(block):
            h.update(chunk)
    return h.hexdigest()


# ---------------------------------------------------------------- task weights

def load_network_weights(directory: Path, task_weights_path: str | Path | None) -> dict[str, dict[str, int]]:
    """{network: {workload_key: weight}} from task.pkl files or a mapping; {} when there are none."""
    if task_weights_path is None:
        pkls = sorted(directory.rglob("*.task.pkl"))
    else:
        path = Path(task_weights_path)
        if not path.exists():
            raise FileNotFoundError(f"task weights not found: {path}")
        if path.is_dir():
            pkls = sorted(path.rglob("*.task.pkl"))
            if not pkls:
                raise FileNotFoundError(f"{path}: no *.task.pkl files")
        elif path.name.endswith(".task.pkl"):
            pkls = [path]
        else:
            return read_task_weights_mapping(path)
    out: dict[str, dict[str, int]] = {}
    for pkl in pkls:
        tasks = out.setdefault(network_of_task_pkl(pkl), {})
        for wk, weight in task_weights_from_pkl(pkl).items():
            tasks[wk] = max(tasks.get(wk, 0), weight)
    return out


def task_table(weights: dict[str, dict[str, int]]) -> dict[str, list[tuple[str, int, str]]]:
    """task_key -> [(network, weight, workload_key)] sorted by network name."""
    out: dict[str, list[tuple[str, int, str]]] = {}
    for network in sorted(weights):
        for wk, weight in weights[network].items():
            try:
                key = task_key_of(wk)
            except ValueError as e:
                raise ValueError(f"task weights of network {network!r}: {e}") from None
            out.setdefault(key, []).append((network, weight, wk))
    return out


def network_lookup(tasks: dict[str, list[tuple[str, int, str]]]) -> dict[str, tuple[str, int]]:
    """task_key -> (network, weight) of the first network by name: what a record gets."""
    return {key: entries[0][:2] for key, entries in tasks.items()}


def _set_networks(table: pa.Table, networks: dict[str, tuple[str, int]],
                  unknown: set[str], where: Path) -> pa.Table:
    if not networks:
        return table
    nets, weights = [], []
    for key in table.column("task_key").to_pylist():
        entry = networks.get(key)
        if entry is None and key not in unknown:
            unknown.add(key)
            log.warning("%s: task %s is in no network's task weights; network '', weight 0", where, key)
        nets.append(entry[0] if entry else "")
        weights.append(entry[1] if entry else 0)
    table = table.set_column(table.schema.get_field_index("network"), "network", pa.array(nets, pa.string()))
    return table.set_column(table.schema.get_field_index("task_weight"), "task_weight",
                            pa.array(weights, pa.int32()))


# ---------------------------------------------------------------- manifest & cleanup

def read_manifest(store: RecordStore, platform: str) -> dict[str, Any]:
    path = store.platform_dir(platform) / MANIFEST
    if not path.exists():
        return {"files": {}}
    try:
        manifest = json.loads(path.read_bytes())
    except ValueError as e:  # not UTF-8, not JSON
        raise ValueError(f"{path}: corrupt ingest manifest ({e}); delete it to re-ingest") from None
    if not (isinstance(manifest, dict) and isinstance(manifest.get("files", {}), dict)):
        raise ValueError(f"{path}: corrupt ingest manifest (expected {{\"files\": {{...}}}}); "
                         "delete it to re-ingest")
    return manifest


def _write_manifest(store: RecordStore, platform: str, manifest: dict[str, Any]) -> None:
    store.platform_dir(platform).mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(store.platform_dir(platform) / MANIFEST,
                        (json.dumps(manifest, indent=1, sort_keys=True) + "\n").encode())


def _is_done(entry: Any, path: Path) -> bool:
    """Whether `path` was ingested as it is now; a damaged entry is not done (the file is redone)."""
    if not isinstance(entry, dict) or entry.get("status") != "done":
        return False
    st = path.stat()
    if entry.get("size") != st.st_size:
        return False
    if entry.get("mtime_ns") == st.st_mtime_ns:
        return True
    if sha1_of(path) == entry.get("sha1"):  # touched, not changed
        entry["mtime_ns"] = st.st_mtime_ns
        return True
    return False


def _remove_parts(store: RecordStore, platform: str, fid: str) -> int:
    pdir = store.platform_dir(platform)
    stale = list(pdir.glob(f"part-{fid}-*.parquet")) + list(pdir.glob(f".part-{fid}-*.tmp"))
    for p in stale:
        p.unlink()
    return len(stale)


def _purge_quarantine(path: Path, source_files: set[str]) -> None:
    """Drop earlier quarantine entries of files about to be re-read (they are re-added).

    A line that is not an entry (the half-written last line of a killed run) is kept.
    """
    if not path.exists() or not source_files:
        return
    lines = path.read_bytes().splitlines(keepends=True)
    kept = [ln for ln in lines if ln.strip() and _source_of(ln) not in source_files]
    if len(kept) != len(lines):
        atomic_write_bytes(path, b"".join(kept))


def _source_of(line: bytes) -> str | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return entry.get("source_file") if isinstance(entry, dict) else None


# ---------------------------------------------------------------- ingest

def find_logs(directory: Path, exclude: set[Path]) -> list[Path]:
    return sorted(p for p in directory.rglob("*.json")
                  if p.is_file() and p.resolve() not in exclude
                  and not any(part.startswith(".") for part in p.relative_to(directory).parts))


class _QuarantineBuffer:
    """Collects one file's rejected lines (a unit may run on another process); the stage
    writes them to the real quarantine in file order, with the file's manifest commit."""

    def __init__(self) -> None:
        self.entries: list[tuple[str, int | None, str, str, str]] = []

    def add(self, source_file: str | Path, line: int | None, reason: str, raw: str, detail: str = "") -> None:
        self.entries.append((str(source_file), line, reason, raw, detail))


@dataclass
class FileIngest:
    """What ingesting one log file committed to the store (its manifest entry and quarantine lines)."""
    entry: dict[str, Any]
    quarantine: list[tuple[str, int | None, str, str, str]]
    removed_parts: int


def ingest_log_file(path: Path, rel: str, *, platform: str, store_root: str | Path,
                    networks: dict[str, tuple[str, int]], chunk_size: int) -> FileIngest:
    """The unit of work: one log file, streamed into parts of its own (`part-<file id>-<chunk>`).

    Its earlier parts are removed first (a half-done or outdated ingest). Runs in the stage's
    process or on a Dask worker; the file is "done" only once the stage writes its manifest entry.
    """
    store, fid = RecordStore(store_root), file_id(rel)
    removed = _remove_parts(store, platform, fid)
    st, digest = path.stat(), sha1_of(path)
    buffer, unknown = _QuarantineBuffer(), set()
    records = parts = 0
    for table in read_ansor_log(path, platform=platform, quarantine=buffer, chunk_size=chunk_size):
        table = _set_networks(table, networks, unknown, path)
        store.append(platform, fid, table)
        records += table.num_rows
        parts += 1
    entry = {"status": "done", "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha1": digest,
             "records": records, "parts": parts, "quarantined": len(buffer.entries), "file_id": fid}
    return FileIngest(entry, buffer.entries, removed)


def ingest_ansor_dir(directory: str | Path, *, platform: str, store_root: str | Path,
                     quarantine_dir: str | Path, task_weights_path: str | Path | None = None,
                     chunk_size: int = 10_000, progress: bool = True,
                     units: Units = serial_units) -> IngestSummary:
    """Stream every Ansor log under `directory` into `store_root` for `platform`, resumably.

    `units` runs the files (`ingest_log_file`): in this process by default, or on Dask
    workers (tcl.compute); files are committed in the same order either way.
    """
    with RecordStore(store_root).exclusive_writer(f"ingest of {platform}"):
        return _ingest_ansor_dir(directory, platform, store_root, quarantine_dir, task_weights_path,
                                 chunk_size, progress, units)


def _ingest_ansor_dir(directory, platform, store_root, quarantine_dir, task_weights_path, chunk_size,
                      progress, units) -> IngestSummary:
    directory = Path(directory)
    if not directory.is_dir():
        raise NotADirectoryError(f"ingest directory not found: {directory}")
    store = RecordStore(store_root)
    weights = load_network_weights(directory, task_weights_path)
    tasks = task_table(weights)
    if tasks:
        store.save_tasks(platform, [{"network": n, "task_key": k, "weight": w, "workload_key": wk}
                                    for k, entries in sorted(tasks.items()) for n, w, wk in entries])
    exclude = {Path(task_weights_path).resolve()} if task_weights_path else set()
    files = find_logs(directory, exclude)
    manifest = read_manifest(store, platform)
    done = manifest.setdefault("files", {})
    todo = [p for p in files if not _is_done(done.get(p.relative_to(directory).as_posix()), p)]
    summary = IngestSummary(platform, files=len(files), skipped=len(files) - len(todo))
    # Not "done" while their parts are replaced (the units remove them, maybe several at once).
    if any([done.pop(p.relative_to(directory).as_posix(), None) is not None for p in todo]):
        _write_manifest(store, platform, manifest)
    quarantine = Quarantine(quarantine_dir, f"ingest-{platform}")
    _purge_quarantine(quarantine.path, {str(p) for p in todo})
    networks = network_lookup(tasks)
    jobs = ({"path": p, "rel": p.relative_to(directory).as_posix(), "platform": platform,
             "store_root": str(store_root), "networks": networks, "chunk_size": chunk_size} for p in todo)
    with quarantine, tqdm(total=sum(p.stat().st_size for p in todo), unit="B", unit_scale=True,
                          disable=not progress, desc=f"ingest {platform}") as bar:
        for path, result in zip(todo, units(ingest_log_file, jobs)):
            if result.removed_parts:
                log.info("%s: removed the parts of an earlier, unfinished or outdated ingest", path)
            for entry in result.quarantine:
                quarantine.add(*entry)
            done[path.relative_to(directory).as_posix()] = result.entry
            _write_manifest(store, platform, manifest)  # the commit point of this file
            summary.ingested += 1
            summary.records_now += result.entry["records"]
            bar.update(result.entry["size"])
            bar.set_postfix(records=summary.records_now)
    _write_manifest(store, platform, manifest)
    summary.quarantined_now = len(quarantine)
    summary.quarantine = quarantine.summary()
    summary.total_records = store.count(platform)
    return summary
