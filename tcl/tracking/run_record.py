"""A run record and a registration: what one MLflow run logged, as plain data."""

from __future__ import annotations

import hashlib
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any


@dataclass
class Registration:
    """A model version the run registered: `name` version `version`, from the bundle at `bundle_dir`."""

    name: str
    version: str
    bundle_dir: str                                  # relative to the repository root
    tags: dict[str, str]
    aliases: list[str] = field(default_factory=list)


@dataclass
class RunRecord:
    """One MLflow run. `key` names it and what it was rebuilt from (changes when the product does)."""

    key: str
    name: str
    tags: dict[str, str] = field(default_factory=dict)
    params: dict[str, Any] = field(default_factory=dict)
    metrics: dict[str, list[tuple[int, float]]] = field(default_factory=dict)   # key -> [(step, value)]
    artifacts: list[tuple[str, str | None]] = field(default_factory=list)       # (path, artifact dir)
    registrations: list[Registration] = field(default_factory=list)
    children: list[RunRecord] = field(default_factory=list)

    def add_metrics(self, values: dict[str, Any], step: int = 0) -> None:
        """Every finite number of `values` as a metric at `step` (booleans and text are skipped)."""
        for k, v in values.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v):
                self.metrics.setdefault(k, []).append((step, float(v)))

    def walk(self):
        yield self
        for child in self.children:
            yield from child.walk()


def record_key(name: str, *sources: Path) -> str:
    """`name@<sha1 of the source files' bytes, 12 hex>`: the same products give the same key."""
    h = hashlib.sha1()
    for path in sources:
        h.update(Path(path).read_bytes())
    return f"{name}@{h.hexdigest()[:12]}"
