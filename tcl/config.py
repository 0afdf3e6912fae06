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



def apply_overrides(params: dict[str, Any], overrides: list[str]) -> dict[str, Any]:
    """`params` with `KEY=VALUE` overrides applied (as `dvc exp run -S`): KEY is a dotted path to an existing
    key (`tune.draft.verify`), VALUE is YAML (`128`, `true`, `[0, 1]`). An unknown key is an error naming it,
    so a typo does not run a benchmark with the defaults."""
    for item in overrides:
        key, sep, text = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--set {item!r}: expected KEY=VALUE, e.g. tune.draft.verify=128")
        *parents, leaf = key.split(".")
        node = params
        for i, part in enumerate(parents):
            node = node.get(part) if isinstance(node, dict) else None
            if not isinstance(node, dict):
                raise ValueError(f"--set {item!r}: params has no section {'.'.join(parents[:i + 1])!r}")
        if leaf not in node:
            raise ValueError(f"--set {item!r}: params has no key {key!r} (known in {'.'.join(parents) or 'the top level'}: "
                             f"{sorted(node)})")
        node[leaf] = yaml.safe_load(text)
    return params

# The lists dvc.yaml's `foreach` stages iterate over. Every collected platform is validated (validate may
# add platforms whose data is only ingested: Tenset, tuning runs); train picks from the validated ones (its
# stage reads data/validated/platform=<name>.parquet); tune.platforms may name any declared platform
# (`local-1c` is whatever machine runs it).
PLATFORM_LISTS = ("collect.platforms", "validate.platforms", "train.platforms", "tune.platforms")


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
    """Fail at load time, naming the list and the platforms, when a platform list names an undeclared
    platform or the DVC `foreach` lists disagree: otherwise a platform added to collect.platforms would be
    measured and never validated, or a trained one would find no validated data, and only a stage would say."""
    declared = set(params["platforms"]) if isinstance(params.get("platforms"), dict) else set()
    lists = {name: _platform_list(params, name, path) for name in PLATFORM_LISTS}
    for name, names in lists.items():
        unknown = [p for p in names or [] if declared and p not in declared]
        if unknown:
            raise ValueError(f"{path}: {name} names {unknown}, not declared under `platforms:`")
    collected, validated, trained = lists["collect.platforms"], lists["validate.platforms"], lists["train.platforms"]
    if collected is not None and validated is not None and (missing := [p for p in collected if p not in validated]):
        raise ValueError(f"{path}: validate.platforms (a DVC foreach list) must list every collect.platforms entry: "
                         f"missing {missing}")
    if validated is not None and trained is not None and (extra := [p for p in trained if p not in validated]):
        raise ValueError(f"{path}: train.platforms (a DVC foreach list) must pick from validate.platforms: {extra} "
                         "are not validated, so there is nothing to train them on")


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


def check_keys(cfg: Any, known: Any, where: str) -> None:
    """An unknown key in one params.yaml section is an error naming `where` (e.g. `tune.search`) and the
    known keys, so a typo fails before any work starts."""
    unknown = sorted(set(cfg or {}) - set(known))
    if unknown:
        raise ValueError(f"params.yaml {where}: unknown key(s) {unknown}; known: {sorted(known)}")


def settings_from(cls, cfg: Any, where: str):
    """A settings dataclass from one params.yaml section, strict about its keys (check_keys)."""
    from dataclasses import fields

    cfg = dict(cfg or {})
    check_keys(cfg, [f.name for f in fields(cls)], where)
    return cls(**cfg)
