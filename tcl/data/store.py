"""Append-only Parquet record store, partitioned by platform.

Layout: `<root>/platform=<name>/part-<task_key>-<batch>.parquet`, plus the task
workloads under `_workloads/` (IRModule JSON) and `_tasks.jsonl` (task metadata).
A part is written to a temporary name, fsynced and renamed into place, so a
killed writer leaves either a whole part or none: committed records are never
lost or half-written, and a rerun sees exactly what was committed.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Iterable

import pyarrow as pa
import pyarrow.parquet as pq

from .schema import RECORD_SCHEMA

_PART = re.compile(r"^part-(?P<task>[0-9a-zA-Z_x]+)-(?P<batch>\d+)\.parquet$")


def _atomic_write_bytes(path: Path, data: bytes) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


class RecordStore:
    """All measured records under one root directory (tracked by DVC)."""

    def __init__(self, root: str | Path):
        self.root = Path(root)

    def platform_dir(self, platform: str) -> Path:
        return self.root / f"platform={platform}"

    # ---- writing -------------------------------------------------------------------------
    def next_batch_index(self, platform: str, task_key: str) -> int:
        return len(self._parts(platform, task_key))

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
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink, compression="zstd")
        _atomic_write_bytes(path, sink.getvalue().to_pybytes())
        return path

    def save_workload(self, platform: str, task_key: str, mod_json: str) -> None:
        wdir = self.platform_dir(platform) / "_workloads"
        wdir.mkdir(parents=True, exist_ok=True)
        path = wdir / f"{task_key}.json"
        if not path.exists():
            _atomic_write_bytes(path, mod_json.encode())

    def save_tasks(self, platform: str, tasks: Iterable[dict[str, Any]]) -> None:
        """Rewrite the task metadata table (network, task key, weight, op type, FLOPs)."""
        pdir = self.platform_dir(platform)
        pdir.mkdir(parents=True, exist_ok=True)
        text = "".join(json.dumps(t, sort_keys=True) + "\n" for t in tasks)
        _atomic_write_bytes(pdir / "_tasks.jsonl", text.encode())

    # ---- reading -------------------------------------------------------------------------
    def _parts(self, platform: str, task_key: str | None = None) -> list[Path]:
        pdir = self.platform_dir(platform)
        if not pdir.is_dir():
            return []
        parts = []
        for p in sorted(pdir.iterdir()):
            m = _PART.match(p.name)
            if m and (task_key is None or m["task"] == task_key):
                parts.append(p)
        return parts

    def platforms(self) -> list[str]:
        if not self.root.is_dir():
            return []
        return sorted(p.name.split("=", 1)[1] for p in self.root.iterdir()
                      if p.is_dir() and p.name.startswith("platform="))

    def read(self, platform: str | None = None, task_key: str | None = None,
             columns: list[str] | None = None) -> pa.Table:
        platforms = [platform] if platform else self.platforms()
        parts = [p for name in platforms for p in self._parts(name, task_key)]
        schema = RECORD_SCHEMA if columns is None else pa.schema([RECORD_SCHEMA.field(c) for c in columns])
        if not parts:
            return schema.empty_table()
        return pa.concat_tables(pq.read_table(p, columns=columns, schema=schema) for p in parts)

    def record_ids(self, platform: str, task_key: str | None = None) -> set[str]:
        return set(self.read(platform, task_key, columns=["record_id"]).column("record_id").to_pylist())

    def count(self, platform: str) -> int:
        return sum(pq.ParquetFile(p).metadata.num_rows for p in self._parts(platform))

    def tasks(self, platform: str) -> list[dict[str, Any]]:
        path = self.platform_dir(platform) / "_tasks.jsonl"
        if not path.exists():
            return []
        return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
