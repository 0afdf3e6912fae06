"""Load params.yaml once, so every stage reads the same knobs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parent.parent
DEFAULT_PARAMS = REPO_ROOT / "params.yaml"


def load_params(path: str | Path | None = None) -> dict[str, Any]:
    """Read params.yaml (or another file with the same layout)."""
    path = Path(path) if path else DEFAULT_PARAMS
    if not path.exists():
        raise FileNotFoundError(f"params file not found: {path}")
    params = _parse_yaml(path)
    if not isinstance(params, dict):
        raise ValueError(f"{path}: expected a mapping at the top level, got {type(params).__name__}")
    return params


def _parse_yaml(path: Path) -> Any:
    """The file's YAML, or a ValueError naming the file (and the line, where YAML knows it)."""
    try:
        return yaml.safe_load(path.read_bytes().decode("utf-8"))
    except UnicodeDecodeError as e:
        raise ValueError(f"{path}: not UTF-8 text ({e.reason} at byte {e.start})") from None
    except yaml.MarkedYAMLError as e:
        mark = e.problem_mark or e.context_mark
        line = f":{mark.line + 1}" if mark else ""
        raise ValueError(f"{path}{line}: bad YAML: {e.problem or e.context}") from None
    except yaml.YAMLError as e:
        raise ValueError(f"{path}: bad YAML: {e}") from None
    except RecursionError:  # PyYAML composes nested collections recursively
        raise ValueError(f"{path}: bad YAML: nested too deeply") from None


def settings_from(cls, cfg: Any, where: str):
    """A settings dataclass from one params.yaml section; unknown keys are an error naming `where`
    (e.g. `tune.search`) and the known ones, so a typo fails before any work starts."""
    from dataclasses import fields

    cfg = dict(cfg or {})
    known = {f.name for f in fields(cls)}
    unknown = sorted(set(cfg) - known)
    if unknown:
        raise ValueError(f"params.yaml {where}: unknown key(s) {unknown}; known: {sorted(known)}")
    return cls(**cfg)
