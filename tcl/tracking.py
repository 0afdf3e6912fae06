"""MLflow set-up shared by every stage: one local store by default, one experiment."""

from __future__ import annotations

import os
from typing import Any

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")


def init_mlflow(params: dict[str, Any]):
    """Point MLflow at the configured store and experiment; returns the mlflow module."""
    import mlflow

    cfg = params.get("tracking", {})
    mlflow.set_tracking_uri(os.environ.get("MLFLOW_TRACKING_URI", cfg.get("mlflow_uri", "sqlite:///mlflow.db")))
    mlflow.set_experiment(cfg.get("experiment", "tcl"))
    return mlflow
