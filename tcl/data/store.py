"""Append-only Parquet record store, partitioned by platform.

Layout: `<root>/platform=<name>/part-<task_key>-<batch>.parquet`, plus the task
workloads under `_workloads/` (IRModule JSON) and `_tasks.jsonl` (task metadata).
A part is written to a temporary name, fsynced and renamed into place, so a
killed writer leaves either a whole part or none: committed records are never
lost or half-written, and a rerun sees exactly what was committed.

A finished task's parts are compacted into one file (`compact`): fewer, larger files
for DVC and Parquet. The compacted file names the batches it holds, so a crash
between writing it and deleting the small parts loses and duplicates nothing.

One process writes a store at a time (`exclusive_writer`): two collections started at
once would measure the same programs twice and file both copies.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from .schema import RECORD_SCHEMA

# part-<task>-<batch>.parquet is one committed batch; part-<task>-<first>-<last>.parquet is the
# compacted form of batches first..last (small parts it covers are leftovers, never read).
_PART = re.compile(r"^part-(?P<task>[0-9a-zA-Z_x]+)-(?P<batch>\d+)(?:-(?P<last>\d+))?\.parquet$")


def atomic_write_bytes(path: Path, data: bytes) -> None:
    """The project's one atomic writer: readers see the old file or the new one, never a torn one."""
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def atomic_write_parquet(path: Path, table: pa.Table, **options: Any) -> None:
    """A zstd Parquet file through the atomic writer (a part of a store, whole or not at all)."""
    sink = pa.BufferOutputStream()
    pq.write_table(table, sink, compression="zstd", **options)
    atomic_write_bytes(path, sink.getvalue().to_pybytes())


def atomic_write_npz(path: Path, **arrays: Any) -> None:
    """A compressed .npz written through the atomic writer (features, samples, caches)."""
    import io

    import numpy as np

    buf = io.BytesIO()
    np.savez_compressed(buf, **arrays)
    atomic_write_bytes(path, buf.getvalue())


class StoreBusy(RuntimeError):
    """Another process is writing this store."""


class RecordStore:
    """All measured records under one root directory (tracked by DVC)."""

    LOCK_NAME = ".writer.lock"  # in .dvcignore: not data

    def __init__(self, root: str | Path):
        self.root = Path(root)

    @contextmanager
    def exclusive_writer(self, who: str):
        """Hold the store's writer lock, or fail at once naming the process that holds it.

        An flock: the kernel frees it when its holder exits, SIGKILL included, so a killed
        collection never leaves a stale lock behind.
        """
        self.root.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.root / self.LOCK_NAME, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                holder = os.pread(fd, 300, 0).decode(errors="replace").strip() or "another process"
                raise StoreBusy(f"{self.root} is being written by {holder}: wait for it to finish or stop "
                                "it, then run again (what it committed is kept)") from None
            os.ftruncate(fd, 0)
            os.pwrite(fd, f"{who} (pid {os.getpid()}, since "
                          f"{datetime.now(timezone.utc):%Y-%m-%d %H:%M:%S} UTC)".encode(), 0)
            yield self
        finally:
            os.close(fd)

    def platform_dir(self, platform: str) -> Path:
        return self.root / f"platform={platform}"

    # ---- writing -------------------------------------------------------------------------
    def next_batch_index(self, platform: str, task_key: str) -> int:
        spans = [self._span(p) for p in self.parts(platform, task_key)]
        return max((last for _, last in spans), default=-1) + 1

    def compact(self, platform: str, task_key: str) -> Path | None:
        """Merge a task's committed parts into one file; returns it (None if nothing to merge)."""
        parts = self.parts(platform, task_key)
        self._remove_covered(platform, task_key)
        if len(parts) < 2:
            return None
        spans = [self._span(p) for p in parts]
        first, last = min(s for s, _ in spans), max(e for _, e in spans)
        table = pa.concat_tables(pq.read_table(p, schema=RECORD_SCHEMA) for p in parts)
        path = self.platform_dir(platform) / f"part-{task_key}-{first:05d}-{last:05d}.parquet"
        atomic_write_parquet(path, table, compression_level=9)
        self._remove_covered(platform, task_key)
        return path

    @staticmethod
    def _span(path: Path) -> tuple[int, int]:
        m = _PART.match(path.name)
        return int(m["batch"]), int(m["last"] or m["batch"])

    def _all_parts(self, platform: str, task_key: str | None) -> list[Path]:
        pdir = self.platform_dir(platform)
        if not pdir.is_dir():
            return []
        return [p for p in sorted(pdir.iterdir())
                if (m := _PART.match(p.name)) and (task_key is None or m["task"] == task_key)]

    def _covered(self, platform: str, task_key: str | None) -> list[Path]:
        """Files whose batches a compacted file of the same task already holds."""
        parts = self._all_parts(platform, task_key)
        spans: dict[str, list[tuple[Path, int, int]]] = {}
        for p in parts:
            spans.setdefault(_PART.match(p.name)["task"], []).append((p, *self._span(p)))
        covered = []
        for items in spans.values():
            for p, s, e in items:
                if any(q != p and qs <= s and e <= qe and (qs, qe) != (s, e) for q, qs, qe in items):
                    covered.append(p)
        return covered

    def _remove_covered(self, platform: str, task_key: str) -> None:
        for p in self._covered(platform, task_key):
            p.unlink(missing_ok=True)

    def append(self, platform: str, task_key: str, table: pa.Table) -> Path | None:
        """Commit one batch of records for one task as a new part file; empty batches write nothing."""
        if table.num_rows == 0:
            return None
        if table.schema != RECORD_SCHEMA:
            table = table.cast(RECORD_SCHEMA)
        bad = set(table.column("platform").to_pylist()) - {platform}
        if bad:
            raise ValueError(f"records for platform(s) {sorted(bad)} appended to partition '{platform}'")
        pdir = self.platform_dir(platform)
        pdir.mkdir(parents=True, exist_ok=True)
        path = pdir / f"part-{task_key}-{self.next_batch_index(platform, task_key):05d}.parquet"
        atomic_write_parquet(path, table)
        return path

    def save_pool(self, task_key: str, programs: list[str]) -> None:
        """A task's program pool (shared by every platform), saved before any of it is measured:
        one Parquet column of trace JSON, in the order drawn (zstd: traces repeat a lot)."""
        pdir = self.root / "_pools"
        pdir.mkdir(parents=True, exist_ok=True)
        atomic_write_parquet(pdir / f"{task_key}.parquet", pa.table({"program": pa.array(programs, pa.string())}),
                             compression_level=9)

    def pool(self, task_key: str) -> list[str] | None:
        path = self.root / "_pools" / f"{task_key}.parquet"
        return pq.read_table(path).column("program").to_pylist() if path.exists() else None

    def save_workload(self, platform: str, task_key: str, mod_json: str) -> None:
        wdir = self.platform_dir(platform) / "_workloads"
        wdir.mkdir(parents=True, exist_ok=True)
        path = wdir / f"{task_key}.json"
        if not path.exists():
            atomic_write_bytes(path, mod_json.encode())

    def save_tasks(self, platform: str, tasks: Iterable[dict[str, Any]]) -> None:
        """Rewrite the task metadata table (network, task key, weight, op type, FLOPs)."""
        pdir = self.platform_dir(platform)
        pdir.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(t, sort_keys=True) + "\n" for t in tasks)
        atomic_write_bytes(pdir / "_tasks.jsonl", text.encode())

    # ---- reading -------------------------------------------------------------------------
    def parts(self, platform: str, task_key: str | None = None) -> list[Path]:
        """The files to read: every committed part, less those a compacted file holds."""
        covered = set(self._covered(platform, task_key))
        return [p for p in self._all_parts(platform, task_key) if p not in covered]

    def platforms(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name.split("=", 1)[1] for p in self.root.iterdir()
                      if p.is_dir() and p.name.startswith("platform="))

    def read(self, platform: str | None = None, task_key: str | None = None,
             columns: list[str] | None = None) -> pa.Table:
        platforms = [platform] if platform else self.platforms()
        parts = [p for name in platforms for p in self.parts(name, task_key)]
        schema = RECORD_SCHEMA if columns is None else pa.schema([RECORD_SCHEMA.field(c) for c in columns])
        if not parts:
            return schema.empty_table()
        return pa.concat_tables(pq.read_table(p, columns=columns, schema=schema) for p in parts)

    def record_ids(self, platform: str, task_key: str | None = None) -> set[str]:
        return set(self.read(platform, task_key, columns=["record_id"]).column("record_id").to_pylist())

    def count(self, platform: str) -> int:
        return sum(pq.ParquetFile(p).metadata.num_rows for p in self.parts(platform))

    def count_by_task(self, platform: str) -> dict[str, int]:
        """Records per task key, from the Parquet footers (no data read)."""
        counts: dict[str, int] = {}
        for p in self.parts(platform):
            key = _PART.match(p.name)["task"]
            counts[key] = counts.get(key, 0) + pq.ParquetFile(p).metadata.num_rows
        return counts

    def copy_catalog(self, source: str, platform: str) -> None:
        """Give `platform` the task table and workloads of `source` (pools replayed from it)."""
        src, dst = self.platform_dir(source), self.platform_dir(platform)
        (dst / "_workloads").mkdir(parents=True, exist_ok=True)
        for w in (src / "_workloads").glob("*.json"):
            if not (dst / "_workloads" / w.name).exists():
                atomic_write_bytes(dst / "_workloads" / w.name, w.read_bytes())
        atomic_write_bytes(dst / "_tasks.jsonl", (src / "_tasks.jsonl").read_bytes())

    def tasks(self, platform: str) -> list[dict[str, Any]]:
        path = self.platform_dir(platform) / "_tasks.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
