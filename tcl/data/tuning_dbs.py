"""Every tuning run feeds the knowledge base: MetaSchedule tuning databases -> records of a platform.

A tuning run (the tune stage, benchmarks/bench_tune.py, a user's own `tune_relax` work dir)
measures hundreds of programs into a JSONDatabase (`database_workload.json` +
`database_tuning_record.json`). `params.yaml: tuning_ingest.sources` lists where such
databases live, each with the platform its programs were measured on and the network it
tuned; every database directory found under a source (recursively) is read with
`ms_database.read_ms_database` (replayed with TVM, so a program's text, and so its
`program_id`, is the collector's) into `<store>/platform=<p>/part-<db id>-<chunk>.parquet`.

* Platform. The source names it and it must be declared in `platforms:`. A platform
  without a `host` (`local-1c`: whatever machine ran it) is refused: its labels could come
  from any CPU. Each record's target must agree with the platform's target on every field the
  platform declares (kind, mcpu, num-cores, ...); one that does not is quarantined.
* Dedup by program id. A record whose `record_id` (platform + program id) is already in the
  collected store, the Tenset store, or another database of this store is skipped and counted:
  tuning runs measure the same programs again and again; the first copy is kept.
* Held-out networks. Records carry the source's `network` (`mobilenet_v2@224`), and the
  store's `_tasks.jsonl` lists it among each task's networks, so the splits put every task
  of a held-out network in test, as for collected records.
* Bad input never disappears: unreadable lines, traces that do not replay, target
  mismatches and records without run times (nothing to learn) go to `<quarantine_dir>/tuning-<platform>.jsonl` with file, line and reason.
* Op types. A record's op type is its task's: the collected catalog's, or classified from the
  workload for a task the catalog does not know.
* Resumable. `_ingest_manifest.json` (ingest.py's) lists each finished database with the size,
  mtime and sha1 of its record file; an unchanged database is skipped, a grown one (a tuning run
  that went on) is read again from scratch after its parts and quarantine lines are removed,
  so nothing is duplicated. A source directory that is gone (work dirs are not in git) keeps
  what was ingested from it.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from ..config import settings_from
from ..platforms import Platform, load_platforms
from .ingest import _is_done, _purge_quarantine, _remove_parts, _write_manifest, file_id, read_manifest, sha1_of
from .ms_database import RECORD_FILE, WORKLOAD_FILE, read_ms_database
from .quarantine import Quarantine
from .store import RecordStore

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TuningSource:
    """Where tuning databases are, what measured them, and what they tuned."""

    path: Path
    platform: Platform
    network: str


@dataclass(frozen=True)
class TuningIngestSettings:
    """`tuning_ingest:` of params.yaml (the sources are parsed by `parse_sources`)."""

    sources: list = field(default_factory=list)  # {path, platform, network} entries
    store: str = "data/tuning"
    known_stores: list = field(default_factory=lambda: ["data/records", "data/tenset"])  # filed there: skipped
    quarantine_dir: str = "data/quarantine"
    chunk_size: int = 10_000

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "TuningIngestSettings":
        return settings_from(cls, params.get("tuning_ingest"), "tuning_ingest")


@dataclass
class TuningIngestSummary:
    platform: str
    databases: int = 0
    skipped: int = 0          # unchanged since they were ingested
    ingested: int = 0
    records_now: int = 0
    duplicates: int = 0       # programs the knowledge base had already (first copy kept)
    quarantined_now: int = 0
    missing_sources: list[str] = field(default_factory=list)
    total_records: int = 0


def parse_sources(params: dict[str, Any]) -> list[TuningSource]:
    """`tuning_ingest.sources` checked against `platforms:`; errors name the entry and the field."""
    entries = TuningIngestSettings.from_params(params).sources or []
    if not isinstance(entries, list):
        raise ValueError("params.yaml: tuning_ingest.sources: expected a list of {path, platform, network}")
    platforms = load_platforms(params)
    out = []
    for i, e in enumerate(entries):
        where = f"params.yaml: tuning_ingest.sources[{i}]"
        if not isinstance(e, dict) or set(e) != {"path", "platform", "network"}:
            raise ValueError(f"{where}: expected exactly the fields path, platform, network, got {e!r:.80}")
        for k in ("path", "platform", "network"):
            if not isinstance(e[k], str) or not e[k].strip():
                raise ValueError(f"{where}.{k}: expected a non-empty string, got {e[k]!r:.40}")
        if e["platform"] not in platforms:
            raise ValueError(f"{where}.platform: '{e['platform']}' is not declared under platforms: "
                             f"({sorted(platforms)})")
        p = platforms[e["platform"]]
        if p.kind == "cpu" and not p.host and not p.rpc_key:
            raise ValueError(f"{where}.platform: '{p.name}' names no host CPU, so its measurements could come "
                             "from any machine and cannot be filed as one platform's labels; name the platform "
                             "of the CPU (and target) that ran the tuning")
        out.append(TuningSource(Path(e["path"]), p, e["network"].strip()))
    return out


def find_databases(root: Path) -> list[Path]:
    """Every directory under `root` (itself included) holding both JSONDatabase files, sorted."""
    if not root.is_dir():
        return []
    dirs = {f.parent for f in root.rglob(RECORD_FILE) if (f.parent / WORKLOAD_FILE).is_file()}
    return sorted(d for d in dirs if not any(part.startswith(".") for part in d.relative_to(root).parts))


def target_mismatch(platform: Platform, target_json: str) -> str | None:
    """Why a record's target is not `platform`'s (a field the platform declares differs), or None."""
    try:
        target = json.loads(target_json)
    except ValueError:
        return f"target is not JSON: {target_json[:80]}"
    if not isinstance(target, dict):
        return f"target is not a JSON object: {target_json[:80]}"
    for k, want in platform.target.items():
        if str(target.get(k)) != str(want):
            return f"{k}={target.get(k)!r} where platform '{platform.name}' has {want!r}"
    return None


def _known_ids(roots: list[Path], platform: str, exclude_prefix: str | None = None) -> set[str]:
    """Record ids of `platform` in the stores (this database's own parts left out)."""
    ids: set[str] = set()
    for root in roots:
        store = RecordStore(root)
        for part in store.parts(platform):
            if exclude_prefix and part.name.startswith(exclude_prefix):
                continue
            ids.update(pq.read_table(part, columns=["record_id"]).column("record_id").to_pylist())
    return ids


def _task_meta(known_roots: list[Path], platform: str) -> dict[str, dict[str, Any]]:
    """Task metadata (name, op type, weight) from the collected store's catalog, by task key."""
    meta: dict[str, dict[str, Any]] = {}
    for root in known_roots:
        for row in RecordStore(root).tasks(platform):
            meta.setdefault(row["task_key"], row)
    return meta


def _classify(module_json: str) -> tuple[str, float]:
    """Op type and FLOPs of a workload the catalog does not know (TVM reads the module)."""
    import tvm

    from ..workloads.tasks import _flops, classify_op_type

    mod = tvm.ir.load_json(module_json)
    return classify_op_type("", mod), _flops(mod)


def ingest_database(db: Path, source: TuningSource, store: RecordStore, quarantine: Quarantine,
                    known: set[str], meta: dict[str, dict[str, Any]], tasks: dict[str, dict[str, Any]],
                    chunk_size: int) -> tuple[int, int, int]:
    """One database directory into its own parts; returns (records, duplicates, quarantined)."""
    platform = source.platform.name
    fid = file_id(f"{source.platform.name}:{db.as_posix()}")
    modules: dict[str, str] = {}

    def on_module(key: str, module_json: str) -> None:
        modules[key] = module_json
        store.save_workload(platform, key, module_json)

    before = len(quarantine)
    records = dups = 0
    for table in read_ms_database(db, platform=platform, quarantine=quarantine, network=source.network,
                                  tasks=meta, chunk_size=chunk_size, replay=True, on_module=on_module):
        keep, codes = [], table.column("error_code").to_pylist()
        for i, (rid, target) in enumerate(zip(table.column("record_id").to_pylist(),
                                              table.column("target").to_pylist())):
            reason = target_mismatch(source.platform, target)
            if reason:
                quarantine.add(db / RECORD_FILE, None, "target mismatch", table.column("program")[i].as_py()[:2000],
                               reason)
            elif codes[i] == "unmeasured":  # committed without run times: no label to learn from
                quarantine.add(db / RECORD_FILE, None, "unmeasured", table.column("program")[i].as_py()[:2000],
                               "a tuning record without run times")
            elif rid in known:
                dups += 1
            else:
                known.add(rid)
                keep.append(i)
        table = table.take(pa.array(keep, pa.int64()))
        # The network of these records is the tuned one, whatever the catalog filed the task under.
        table = table.set_column(table.schema.get_field_index("network"), "network",
                                 pa.array([source.network] * table.num_rows, pa.string()))
        for key in set(pc.unique(table.column("task_key")).to_pylist()):
            row = tasks.setdefault(key, _task_row(key, meta.get(key), modules.get(key)))
            row["networks"].setdefault(source.network, int(row.get("weight", 1)))
        # A task the catalog did not know has the op type classified from its workload: its records carry it too.
        table = _with_task_op_types(table, tasks)
        store.append(platform, fid, table)
        records += table.num_rows
    return records, dups, len(quarantine) - before


def _task_row(key: str, known: dict[str, Any] | None, module_json: str | None) -> dict[str, Any]:
    if known:
        return {"task_key": key, "network": known["network"], "task_name": known.get("task_name", ""),
                "weight": int(known.get("weight", 1)), "op_type": known.get("op_type", ""),
                "flops": float(known.get("flops", 0.0)), "networks": dict(known.get("networks") or {})}
    op_type, flops = _classify(module_json) if module_json else ("", 0.0)
    return {"task_key": key, "network": "", "task_name": "", "weight": 1, "op_type": op_type, "flops": flops,
            "networks": {}}


def _with_task_op_types(table: pa.Table, tasks: dict[str, dict[str, Any]]) -> pa.Table:
    """`table` with each record's empty op type replaced by its task's in `tasks` (the catalog rows)."""
    ops = [op or tasks.get(key, {}).get("op_type", "") for op, key in
           zip(table.column("op_type").to_pylist(), table.column("task_key").to_pylist())]
    return table.set_column(table.schema.get_field_index("op_type"), "op_type", pa.array(ops, pa.string()))


def ingest_tuning_databases(params: dict[str, Any], *, store_root: str | Path, known_roots: list[str | Path],
                            quarantine_dir: str | Path, chunk_size: int = 10_000) -> list[TuningIngestSummary]:
    """Ingest every database of every `tuning_ingest.sources` entry into `store_root`, resumably."""
    sources = parse_sources(params)
    store = RecordStore(store_root)
    store.root.mkdir(parents=True, exist_ok=True)
    summaries: dict[str, TuningIngestSummary] = {}
    with store.exclusive_writer("ingest of tuning databases"):
        for source in sources:
            platform = source.platform.name
            summary = summaries.setdefault(platform, TuningIngestSummary(platform))
            dbs = find_databases(source.path)
            if not dbs:
                log.warning("%s: no tuning database here (yet); what was ingested from it is kept", source.path)
                summary.missing_sources.append(str(source.path))
                continue
            manifest = read_manifest(store, platform)
            done = manifest.setdefault("files", {})
            roots = [Path(r) for r in known_roots]
            meta = _task_meta(roots, platform)
            tasks = {r["task_key"]: r for r in store.tasks(platform)}
            quarantine = Quarantine(quarantine_dir, f"tuning-{platform}")
            with quarantine:
                for db in dbs:
                    summary.databases += 1
                    rec_file, name = db / RECORD_FILE, db.as_posix()
                    if _is_done(done.get(name), rec_file):
                        summary.skipped += 1
                        continue
                    if done.pop(name, None) is not None:  # not done while its parts are replaced
                        _write_manifest(store, platform, manifest)
                    fid = file_id(f"{platform}:{name}")
                    _remove_parts(store, platform, fid)
                    quarantine.close()
                    _purge_quarantine(quarantine.path, {str(db / WORKLOAD_FILE), str(rec_file)})
                    known = _known_ids(roots + [store.root], platform, exclude_prefix=f"part-{fid}-")
                    st, digest = rec_file.stat(), sha1_of(rec_file)
                    n, dups, bad = ingest_database(db, source, store, quarantine, known, meta, tasks, chunk_size)
                    store.save_tasks(platform, [tasks[k] for k in sorted(tasks)])
                    done[name] = {"status": "done", "size": st.st_size, "mtime_ns": st.st_mtime_ns, "sha1": digest,
                                  "records": n, "duplicates": dups, "quarantined": bad, "file_id": fid,
                                  "network": source.network}
                    _write_manifest(store, platform, manifest)  # the commit point of this database
                    summary.ingested += 1
                    summary.records_now += n
                    summary.duplicates += dups
                    summary.quarantined_now += bad
                    log.info("%s: %d records for %s (%d already known, %d quarantined)", db, n, platform, dups, bad)
        for platform, summary in summaries.items():  # also where every source is gone: what earlier runs filed stays
            summary.total_records = store.count(platform)
    return list(summaries.values())
