"""Names in the model registry (no MLflow needed to compute them)."""

from __future__ import annotations

CHAMPION = "champion"      # the version the tune stage uses; moved only by the promotion gate
CHALLENGER = "challenger"  # the last version the gate looked at


def registered_name(prefix: str, platform: str, model_name: str) -> str:
    """`<prefix>-<model>-<platform>`: one registered model per model and platform."""
    return f"{prefix}-{model_name}-{platform}"
