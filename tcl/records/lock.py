"""dvc.lock as the pipeline's own record: the params each stage ran with, its outputs' md5s, and
the commit that first recorded an output."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import yaml

DATA_OUT = "data/records"   # the dataset a model's `data_version` tag names (the collect stage's output)


class Lock:
    def __init__(self, root: str | Path = "."):
        self.root = Path(root)
        self.path = self.root / "dvc.lock"
        if not self.path.exists():
            raise FileNotFoundError(f"{self.path}: no dvc.lock, so nothing the pipeline produced is recorded "
                                    "(run `dvc repro` first, or `dvc pull` in a clone)")
        locked = (yaml.safe_load(self.path.read_text()) or {}).get("stages") or {}
        defined = defined_stages(self.root)
        # dvc.lock keeps entries of stages no longer defined (a platform dropped from a foreach list)
        self.stages: dict[str, Any] = {k: v for k, v in locked.items() if defined is None or k in defined}

    def stage(self, name: str) -> dict[str, Any]:
        if name not in self.stages:
            raise KeyError(f"{self.path} has no stage {name!r} (stages: {', '.join(sorted(self.stages))})")
        return self.stages[name]

    def has(self, name: str) -> bool:
        return name in self.stages

    def instances(self, stage: str) -> list[str]:
        """The items of a foreach stage that ran (`train@zen4-avx2-1c` -> `zen4-avx2-1c`), sorted."""
        return sorted(s.split("@", 1)[1] for s in self.stages if s.startswith(f"{stage}@"))

    def params(self, *stages: str) -> dict[str, Any]:
        """The params.yaml values these stages ran with, merged (a whole section wins over a dotted key)."""
        merged: dict[str, Any] = {}
        dotted: dict[str, Any] = {}
        for name in stages:
            for key, value in ((self.stage(name).get("params") or {}).get("params.yaml") or {}).items():
                (dotted if "." in key else merged)[key] = value
        for key, value in dotted.items():
            head, *rest = key.split(".")
            if head in merged and not isinstance(merged[head], dict):
                continue
            node = merged.setdefault(head, {})
            for part in rest[:-1]:
                node = node.setdefault(part, {})
            node.setdefault(rest[-1], value)
        return merged

    def out_md5(self, stage: str, path: str) -> str:
        for out in self.stage(stage).get("outs") or []:
            if out.get("path") == path:
                return str(out.get("md5"))
        raise KeyError(f"{self.path}: stage {stage!r} has no output {path!r}")

    def data_version(self) -> str:
        """The md5 of the collect stage's output (what `data_version` tags name), or a note."""
        try:
            return self.out_md5("collect", DATA_OUT)
        except KeyError:
            return "not locked yet"

    def recording_commit(self, stage: str, path: str) -> str:
        """The first commit whose dvc.lock holds this output's md5: the commit that recorded it
        ("unknown" when git has no such commit: not committed yet, a shallow clone, no git)."""
        md5 = self.out_md5(stage, path)
        try:
            done = subprocess.run(["git", "log", "--format=%H", "--reverse", "-S", md5, "--", "dvc.lock"],
                                  cwd=self.root, capture_output=True, text=True, timeout=60)
        except (OSError, subprocess.SubprocessError):
            return "unknown"
        lines = done.stdout.split()
        return lines[0] if done.returncode == 0 and lines else "unknown"


def defined_stages(root: Path) -> set[str] | None:
    """Names of the stages dvc.yaml defines now, foreach items resolved from params.yaml
    (`train@zen4-avx2-1c`); None when there is no dvc.yaml to read."""
    dvc_yaml, params_yaml = root / "dvc.yaml", root / "params.yaml"
    if not dvc_yaml.exists():
        return None
    stages = (yaml.safe_load(dvc_yaml.read_text()) or {}).get("stages") or {}
    params = (yaml.safe_load(params_yaml.read_text()) or {}) if params_yaml.exists() else {}
    names: set[str] = set()
    for name, body in stages.items():
        items = (body or {}).get("foreach")
        if items is None:
            names.add(name)
            continue
        if isinstance(items, str) and items.startswith("${") and items.endswith("}"):
            value: Any = params
            for key in items[2:-1].split("."):
                value = (value or {}).get(key) if isinstance(value, dict) else None
            items = value
        names.update(f"{name}@{item}" for item in (items or []))
    return names
