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
    with path.open() as f:
        params = yaml.safe_load(f)
    if not isinstance(params, dict):
        raise ValueError(f"{path}: expected a mapping at the top level, got {type(params).__name__}")
    return params
