"""The MLflow model registry: a bundle logged as a pyfunc model, versions, their tags and aliases.

The registered model is a pyfunc whose artifact is the bundle directory, so the registry
UI shows it with a signature, and TVM loads it back by `models:/name@alias`. Versions are
never overwritten. Every version carries the provenance tags of tcl.tracking.provenance
(`log_version` refuses one without them). Which version is `champion` is decided by the
promotion gate (tcl.train.promotion), which scores the candidate and the champion now, on
the same held-out split; the candidate it looked at holds `challenger`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import mlflow
import numpy as np

from ..models.bundle import ModelBundle
from .names import CHALLENGER, CHAMPION, registered_name  # noqa: F401  (re-exported)
from .provenance import missing_tags

REQUIREMENTS = ["torch==2.13.0", "numpy", "mlflow"]


class BundlePyfunc(mlflow.pyfunc.PythonModel):
    """pyfunc face of a bundle: input features (N, rows, cols) float32 -> scores (N,)."""

    def load_context(self, context) -> None:
        self.bundle = ModelBundle.load(context.artifacts["bundle"])

    def predict(self, context, model_input, params=None):
        from ..models.base import predict

        return predict(self.bundle.model, np.asarray(model_input, dtype=np.float32))


def _client() -> mlflow.MlflowClient:
    return mlflow.MlflowClient()


def log_version(bundle: ModelBundle, bundle_dir: str | Path, name: str, example: np.ndarray,
                tags: dict[str, str]) -> str:
    """Log the bundle in the active run as a new version of `name`, tagged; no alias moves. Returns the version."""
    from mlflow.models import infer_signature

    missing = missing_tags(tags)
    if missing:
        raise ValueError(f"registering a version of {name} without the provenance tags {missing} "
                         "(build them with tcl.tracking.version_tags)")
    info = mlflow.pyfunc.log_model(
        name="model", python_model=BundlePyfunc(), artifacts={"bundle": str(bundle_dir)},
        signature=infer_signature(example, np.zeros(len(example))), pip_requirements=REQUIREMENTS,
        registered_model_name=name)
    version = str(info.registered_model_version)
    set_version_tags(name, version, tags)
    return version


def set_version_tags(name: str, version: str, tags: dict[str, Any]) -> None:
    client = _client()
    for key, value in tags.items():
        client.set_model_version_tag(name, str(version), key, str(value))


def alias(name: str, alias_name: str):
    """The model version `name@alias_name`, or None when no version holds it (or `name` is not registered)."""
    try:
        return _client().get_model_version_by_alias(name, alias_name)
    except mlflow.exceptions.MlflowException:
        return None


def champion(name: str):
    """The model version `name@champion`, or None when no version holds the alias yet."""
    return alias(name, CHAMPION)


def set_alias(name: str, alias_name: str, version: str) -> None:
    _client().set_registered_model_alias(name, alias_name, str(version))


def set_champion(name: str, version: str) -> None:
    set_alias(name, CHAMPION, version)


def get_version(name: str, version: str):
    """The model version `name`/`version`; LookupError naming both when there is none."""
    try:
        return _client().get_model_version(name, str(version))
    except mlflow.exceptions.MlflowException as e:
        raise LookupError(f"no version {version} of registered model {name!r} in "
                          f"{mlflow.get_tracking_uri()} ({e})") from None


def versions(name: str) -> list:
    """Every version of `name` (with its tags), oldest first; [] when it is not registered."""
    return sorted(_client().search_model_versions(f"name='{name}'"), key=lambda v: int(v.version))


def latest_version(name: str) -> str:
    """The highest version number of `name`; LookupError (saying how to get one) when it has none."""
    from .hints import how_to_register

    numbers = [int(v.version) for v in versions(name)]
    if not numbers:
        raise LookupError(f"registered model {name!r} has no versions in {mlflow.get_tracking_uri()}. "
                          + how_to_register(name))
    return str(max(numbers))


def store_uri() -> str:
    """The MLflow store this process reads and writes."""
    return mlflow.get_tracking_uri()


def load_registered(uri: str) -> ModelBundle:
    """`models:/name@alias`, `models:/name/3` or `runs:/<id>/model` -> the bundle."""
    return mlflow.pyfunc.load_model(uri).unwrap_python_model().bundle


def load_version(name: str, version: str) -> ModelBundle:
    get_version(name, version)  # a clear error before MLflow's
    return load_registered(f"models:/{name}/{version}")
