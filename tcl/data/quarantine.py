"""Quarantine: where rejected inputs go instead of disappearing.

Readers never drop a bad line silently. Each rejected input is appended as one
JSON line `{"source_file", "line", "reason", "detail", "raw"}` to
`<directory>/<name>.jsonl`, so a person can see why it was rejected and replay
the raw text after a fix. `reason` is short and stable (it is what the per-reason
counts group by); `detail` carries the specifics (parser message, step index).
"""

from __future__ import annotations

import json
import logging
from collections import Counter
from pathlib import Path
from typing import IO, Any

log = logging.getLogger(__name__)
_LOUD_REJECTS = 20


class Quarantine:
    """Append-only JSONL writer of rejected inputs, with counts per reason.

    The file is created on open (an empty file means "nothing rejected", which
    keeps it usable as a pipeline output); existing content is appended to.
    """

    def __init__(self, directory: str | Path, name: str):
        if not name or "/" in name or "\\" in name:
            raise ValueError(f"quarantine name must be a plain file stem, got {name!r}")
        self.path = Path(directory) / f"{name}.jsonl"
        self.counts: Counter[str] = Counter()
        self._fh: IO[str] | None = None

    def open(self) -> "Quarantine":
        if self._fh is None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            torn = self._ends_mid_line()
            # ensure_ascii keeps undecodable bytes (surrogate escapes) representable.
            self._fh = open(self.path, "a", encoding="ascii")
            if torn:  # a killed run's half-written entry: the next one starts on a line of its own
                self._fh.write("\n")
        return self

    def _ends_mid_line(self) -> bool:
        if not self.path.exists() or self.path.stat().st_size == 0:
            return False
        with open(self.path, "rb") as fh:
            fh.seek(-1, 2)
            return fh.read(1) != b"\n"

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def __enter__(self) -> "Quarantine":
        return self.open()

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def add(self, source_file: str | Path, line: int | None, reason: str, raw: str,
            detail: str = "") -> str:
        """Record one rejected input; returns the `<file>:<line>: <reason>` message it logged."""
        self.open()
        entry = {"source_file": str(source_file), "line": line, "reason": reason,
                 "detail": detail, "raw": raw}
        assert self._fh is not None
        self._fh.write(json.dumps(entry, ensure_ascii=True) + "\n")
        self._fh.flush()
        self.counts[reason] += 1
        where = f"{source_file}:{line}" if line is not None else str(source_file)
        msg = f"{where}: {reason}" + (f" ({detail})" if detail else "")
        # The file has every reject; the log shows the first few, then stays quiet.
        log.log(logging.WARNING if len(self) <= _LOUD_REJECTS else logging.DEBUG,
                "quarantined %s", msg)
        return msg

    def __len__(self) -> int:
        return sum(self.counts.values())

    def summary(self) -> dict[str, Any]:
        """Where the rejects are and how many per reason (for logs, metrics, MLflow)."""
        return {"path": str(self.path), "total": len(self),
                "by_reason": dict(sorted(self.counts.items()))}


def read_quarantine(path: str | Path) -> list[dict[str, Any]]:
    """Load a quarantine file back (to inspect or replay rejected inputs)."""
    with open(path, encoding="ascii") as fh:
        return [json.loads(line) for line in fh if line.strip()]
