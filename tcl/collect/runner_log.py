"""Which runner timed a platform's records: a short history kept beside them.

The record schema has no column for it, and the Parquet schema stays as it is, so each
store partition keeps `_runners.jsonl`: one line each time the runner changes,
`{"since": <UTC ISO time>, "runner": "local", "cpus": [1]}` or
`{"since": ..., "runner": "rpc", "tracker": "host:port", "key": "<tracker key>"}`.
A record was timed by the last line whose `since` is not later than its `collected_at`.
"""

from __future__ import annotations

import json
from datetime import datetime, timezone
from typing import Any

from ..data.store import RecordStore, atomic_write_bytes

FILE = "_runners.jsonl"


def runner_history(store: RecordStore, platform: str) -> list[dict[str, Any]]:
    path = store.platform_dir(platform) / FILE
    if not path.exists():
        return []
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


def note_runner(store: RecordStore, platform: str, info: dict[str, Any]) -> None:
    """Add `info` to the history unless it is already the latest line (called before a batch is timed)."""
    history = runner_history(store, platform)
    if history and {k: v for k, v in history[-1].items() if k != "since"} == info:
        return
    history.append({"since": datetime.now(timezone.utc).isoformat(), **info})
    pdir = store.platform_dir(platform)
    pdir.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(pdir / FILE, "".join(json.dumps(h, sort_keys=True) + "\n" for h in history).encode())


def runner_at(history: list[dict[str, Any]], when: datetime) -> dict[str, Any] | None:
    """The history line in force at `when` (a record's `collected_at`), or None before the first."""
    current = None
    for line in history:
        if datetime.fromisoformat(line["since"]) <= when:
            current = line
    return current
