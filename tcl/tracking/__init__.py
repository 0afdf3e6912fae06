"""The one place that talks to MLflow: runs, params, metrics, artifacts, the model registry.

Everything else calls these functions and never imports mlflow, so the core (data,
features, models, sampling, the training loop) runs without a tracking server or MLflow
configured. `tracking.enabled: false` in params.yaml, or `TCL_TRACKING=off` in the
environment, turns the layer into a no-op: runs open nothing, logging drops its input.

    from tcl import tracking
    with tracking.run(params, "train-tcl-local-1c", {"stage": "train"}):
        tracking.log_params({...})
        tracking.log_metric("train_loss", 0.1, step=0)

`tracking.registry` (the model registry, tcl/tracking/registry.py) imports mlflow when it
is first used, so importing this package costs nothing.
"""

from __future__ import annotations

import importlib
from typing import Any

from .names import CHALLENGER, CHAMPION, registered_name
from .provenance import git_commit, params_hash, version_tags
from .runs import (Run, configure, enabled, end_run, live, log_artifact, log_artifacts, log_dict, log_metric,
                   log_metrics, log_param, log_params, require_enabled, run, start_run)

__all__ = ["CHALLENGER", "CHAMPION", "Run", "configure", "enabled", "end_run", "git_commit", "live",
           "log_artifact", "log_artifacts", "log_dict", "log_metric", "log_metrics", "log_param", "log_params",
           "params_hash", "registered_name", "registry", "require_enabled", "run", "start_run", "version_tags"]


def __getattr__(name: str) -> Any:
    """`tracking.registry` on first use (it imports mlflow)."""
    if name == "registry":
        return importlib.import_module(".registry", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
