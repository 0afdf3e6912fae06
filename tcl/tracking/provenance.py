"""What every registered model version is tagged with, so a version says where it came from.

- `data_version`: the DVC md5 of the data it was trained on (tcl.data.card.dvc_data_version);
- `git_commit`: the commit of the code (`git rev-parse HEAD`; "unknown" outside a git checkout);
- `params_hash`: sha256 of the canonical JSON of the params sections the model depends on
  (`registry.params_sections`), with `params_sections` naming them;
- `score.<name>`: its held-out scores (e.g. `score.val_top1`, `score.test_top1`).
"""

from __future__ import annotations

import hashlib
import json
import math
import subprocess
from pathlib import Path
from typing import Any, Iterable, Mapping

REQUIRED_TAGS = ("data_version", "git_commit", "params_hash")
SCORE_PREFIX = "score."
# What a trained model depends on when params.yaml has no registry.params_sections.
DEFAULT_SECTIONS = ("seed", "platforms", "split", "features", "sampling", "train")
_PACKAGE_ROOT = Path(__file__).resolve().parents[2]


def git_commit(cwd: str | Path | None = None) -> str:
    """HEAD of the git checkout holding the code (or `cwd`); "unknown" when there is none."""
    try:
        done = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd or _PACKAGE_ROOT, capture_output=True,
                              text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    commit = done.stdout.strip()
    return commit if done.returncode == 0 and commit else "unknown"


def _section(params: Mapping[str, Any], dotted: str) -> Any:
    value: Any = params
    for key in dotted.split("."):
        value = value.get(key) if isinstance(value, Mapping) else None
    return value


def params_sections(params: Mapping[str, Any], extra: Iterable[str] = ()) -> list[str]:
    """`registry.params_sections` (or the default) plus `extra`, without repeats."""
    base = ((params.get("registry") or {}).get("params_sections")) or DEFAULT_SECTIONS
    return list(dict.fromkeys([*base, *extra]))


def params_hash(params: Mapping[str, Any], sections: Iterable[str]) -> str:
    """sha256 of the sections' canonical JSON (sorted keys, no spaces); a missing section counts as null."""
    chosen = {s: _section(params, s) for s in sections}
    text = json.dumps(chosen, sort_keys=True, separators=(",", ":"), ensure_ascii=True, default=str)
    return hashlib.sha256(text.encode()).hexdigest()


def format_score(value: float) -> str:
    return f"{value:.6f}" if math.isfinite(value) else str(value)


def version_tags(params: Mapping[str, Any], data_version: str, scores: Mapping[str, float],
                 extra_sections: Iterable[str] = ()) -> dict[str, str]:
    """The provenance tags of a new model version (see the module docstring)."""
    if not scores:
        raise ValueError("a registered version needs at least one held-out score (scores={})")
    sections = params_sections(params, extra_sections)
    return {"data_version": str(data_version), "git_commit": git_commit(),
            "params_hash": params_hash(params, sections), "params_sections": ",".join(sections),
            **{f"{SCORE_PREFIX}{k}": format_score(float(v)) for k, v in scores.items()}}


def missing_tags(tags: Mapping[str, str]) -> list[str]:
    """The provenance tags `tags` lacks (a score counts as present if any `score.*` tag is)."""
    missing = [t for t in REQUIRED_TAGS if not tags.get(t)]
    if not any(k.startswith(SCORE_PREFIX) for k in tags):
        missing.append(f"{SCORE_PREFIX}<held-out metric>")
    return missing
