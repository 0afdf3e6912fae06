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
    check_platform_lists(params, path)
    return params


# The lists dvc.yaml's `foreach` stages iterate over, and how each must relate to collect.platforms
# (the platforms data is measured on): every collected platform is validated; train and tune pick from them
# (tune.platforms from any declared platform: `local-1c` is whatever machine runs it).
FOREACH_LISTS = {"validate.platforms": "equal", "train.platforms": "subset"}


def _platform_list(params: dict[str, Any], dotted: str, path: Path | str) -> list[str] | None:
    section, key = dotted.split(".")
    value = params.get(section)
    value = value.get(key) if isinstance(value, dict) else None
    if value is None:
        return None
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ValueError(f"{path}: {dotted} must be a list of platform names, got {value!r:.80}")
    return value


def check_platform_lists(params: dict[str, Any], path: Path | str = "params.yaml") -> None:
    """Fail at load time, naming the list and the platforms, when a DVC `foreach` list disagrees with
    collect.platforms or names an undeclared platform: otherwise a platform added to collect would be
    measured but never validated (or trained on data that is never collected), silently."""
    declared = set(params["platforms"]) if isinstance(params.get("platforms"), dict) else set()
    lists = {name: _platform_list(params, name, path)
             for name in ("collect.platforms", *FOREACH_LISTS, "tune.platforms")}
    collected = lists["collect.platforms"]
    for name, names in lists.items():
        unknown = [p for p in names or [] if declared and p not in declared]
        if unknown:
            raise ValueError(f"{path}: {name} names {unknown}, not declared under `platforms:`")
    if collected is None:
        return
    for name, relation in FOREACH_LISTS.items():
        names = lists[name]
        if names is None:
            continue
        missing = [p for p in collected if p not in names] if relation == "equal" else []
        extra = [p for p in names if p not in collected]
        if missing or extra:
            what = "; ".join(filter(None, [f"missing {missing}" if missing else "",
                                           f"not in collect.platforms: {extra}" if extra else ""]))
            rule = "list every collect.platforms entry" if relation == "equal" else "pick from collect.platforms"
            raise ValueError(f"{path}: {name} must {rule} (it is a DVC foreach list): {what}")


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
