"""MLflow runs, params, metrics and artifacts behind one on/off switch.

Tracking is on unless `tracking.enabled: false` (params.yaml) or `TCL_TRACKING=off`
(the environment wins over params). Off, `run` opens nothing and every `log_*` call is
dropped, so a stage runs the same with or without an MLflow store. A nested run
follows its parent: no parent tracked, no child tracked.
"""

from __future__ import annotations

import fcntl
import os
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

from ..config import check_keys

os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")

ENV = "TCL_TRACKING"
_OFF, _ON = {"off", "0", "false", "no"}, {"on", "1", "true", "yes"}
DEFAULT_URI = "sqlite:///mlflow.db"
DEFAULT_EXPERIMENT = "tcl"

_open: list[bool] = []  # one entry per run opened through this module: was it tracked?


@dataclass
class Run:
    """A run opened by `run`/`start_run`. `run_id` is None when tracking is off; set `status`
    (e.g. "FAILED") before the `with` block ends to close the run with it."""

    run_id: str | None
    tracked: bool
    status: str = "FINISHED"


def enabled(params: dict[str, Any] | None = None) -> bool:
    """Whether tracking is on: TCL_TRACKING if set, else params `tracking.enabled` (default true)."""
    env = os.environ.get(ENV, "").strip().lower()
    if env in _OFF:
        return False
    if env in _ON:
        return True
    if env:
        raise ValueError(f"{ENV}={os.environ[ENV]!r}: use on or off")
    value = ((params or {}).get("tracking") or {}).get("enabled", True)
    if not isinstance(value, bool):
        raise ValueError(f"params.yaml tracking.enabled must be true or false, got {value!r}")
    return value


# The params.yaml sections this package reads, and their keys.
SECTION_KEYS = {"tracking": ("enabled", "mlflow_uri", "experiment"), "registry": ("prefix", "params_sections")}


def check_params(params: dict[str, Any]) -> None:
    """Unknown `tracking:` / `registry:` keys, or a `tracking.enabled` that is not a bool, fail at load."""
    for section, known in SECTION_KEYS.items():
        check_keys(params.get(section), known, section)
    enabled(params)


def _mlflow():
    try:
        import mlflow
    except ImportError as e:
        raise ImportError(f"tracking is on but mlflow cannot be imported ({e}); install it, or turn tracking "
                          f"off with `tracking.enabled: false` in params.yaml or {ENV}=off") from e
    return mlflow


def configure(params: dict[str, Any] | None) -> bool:
    """Point MLflow at the configured store and experiment (MLFLOW_TRACKING_URI wins over
    `tracking.mlflow_uri`); returns whether tracking is on. Off, MLflow is not imported."""
    if not enabled(params):
        return False
    mlflow = _mlflow()
    cfg = (params or {}).get("tracking") or {}
    uri = os.environ.get("MLFLOW_TRACKING_URI") or cfg.get("mlflow_uri", DEFAULT_URI)
    mlflow.set_tracking_uri(uri)
    with _sqlite_store_lock(uri):  # the first open of a store creates its tables
        mlflow.set_experiment(cfg.get("experiment", DEFAULT_EXPERIMENT))
    return True


@contextmanager
def _sqlite_store_lock(uri: str) -> Iterator[None]:
    """Two processes that open a new SQLite store at the same moment both create its tables, and one of
    them fails ("table ... already exists"): two benchmarks started together, one per core. An flock on
    `<db>.lock` beside the store lets one create them while the other waits. No-op for other stores."""
    if not uri.startswith("sqlite:///"):
        yield
        return
    path = Path(uri[len("sqlite:///"):].split("?", 1)[0])
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(f"{path}.lock", "a") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)  # released when the file closes, or when a killed holder exits
        yield


def require_enabled(params: dict[str, Any] | None, what: str) -> None:
    """Configure MLflow for `what`, which cannot work without it; a clear error when tracking is off."""
    if not configure(params):
        raise RuntimeError(f"{what} needs the MLflow store, but tracking is off "
                           f"(tracking.enabled in params.yaml, or {ENV}={os.environ.get(ENV, '')!r})")


def start_run(params: dict[str, Any] | None, name: str, tags: dict[str, Any] | None = None,
              nested: bool = False) -> Run:
    """Open a run (end it with `end_run`); prefer the `run` context manager."""
    tracked = _open[-1] if nested and _open else configure(params)
    run_id = None
    if tracked:
        run_id = _mlflow().start_run(run_name=name, tags=tags, nested=nested).info.run_id
    _open.append(tracked)
    return Run(run_id, tracked)


def end_run(status: str = "FINISHED") -> None:
    """Close the innermost run opened by `start_run` with `status` (FINISHED, FAILED, KILLED)."""
    if _open and _open.pop():
        _mlflow().end_run(status=status)


@contextmanager
def run(params: dict[str, Any] | None, name: str, tags: dict[str, Any] | None = None,
        nested: bool = False) -> Iterator[Run]:
    """A run around the block: FAILED if the block raises (KILLED on Ctrl-C), else `Run.status`."""
    handle = start_run(params, name, tags, nested)
    try:
        yield handle
    except KeyboardInterrupt:
        end_run("KILLED")
        raise
    except BaseException:
        end_run("FAILED")
        raise
    end_run(handle.status)


def live() -> bool:
    """Whether the innermost run opened here is tracked (logging goes somewhere)."""
    return bool(_open) and _open[-1]


def log_param(key: str, value: Any) -> None:
    if live():
        _mlflow().log_param(key, value)


def log_params(params: dict[str, Any]) -> None:
    if live():
        _mlflow().log_params(params)


def log_metric(key: str, value: float, step: int | None = None) -> None:
    if live():
        _mlflow().log_metric(key, value, step=step)


def log_metrics(metrics: dict[str, float], step: int | None = None) -> None:
    if live():
        _mlflow().log_metrics(metrics, step=step)


def log_artifact(path: str, artifact_path: str | None = None) -> None:
    if live():
        _mlflow().log_artifact(str(path), artifact_path=artifact_path)


def log_artifacts(directory: str, artifact_path: str | None = None) -> None:
    if live():
        _mlflow().log_artifacts(str(directory), artifact_path=artifact_path)


def log_dict(dictionary: dict[str, Any], artifact_file: str) -> None:
    if live():
        _mlflow().log_dict(dictionary, artifact_file)
