"""MLflow model registry: log a bundle as a pyfunc model, register it, move aliases.

The registered model is a pyfunc whose artifact is the bundle directory, so the
registry UI shows it with a signature, and TVM loads it back by `models:/name@alias`.
Versions are never overwritten; `champion` moves to a new version only when that
version's validation score is at least the current champion's.
"""

from __future__ import annotations

from pathlib import Path

import mlflow
import numpy as np

from .bundle import ModelBundle

CHAMPION = "champion"
REQUIREMENTS = ["torch==2.13.0", "numpy", "mlflow"]


class BundlePyfunc(mlflow.pyfunc.PythonModel):
    """pyfunc face of a bundle: input features (N, rows, cols) float32 -> scores (N,)."""

    def load_context(self, context) -> None:
        self.bundle = ModelBundle.load(context.artifacts["bundle"])

    def predict(self, context, model_input, params=None):
        from .loop import predict

        return predict(self.bundle.model, np.asarray(model_input, dtype=np.float32))


def registered_name(prefix: str, platform: str, model_name: str) -> str:
    return f"{prefix}-{model_name}-{platform}"


def log_version(bundle: ModelBundle, bundle_dir: str | Path, name: str, example: np.ndarray,
                tags: dict[str, str]) -> str:
    """Log the bundle in the active run as a new version of `name`, tagged; no alias moves. Returns the version."""
    from mlflow.models import infer_signature

    info = mlflow.pyfunc.log_model(
        name="model", python_model=BundlePyfunc(), artifacts={"bundle": str(bundle_dir)},
        signature=infer_signature(example, np.zeros(len(example))), pip_requirements=REQUIREMENTS,
        registered_model_name=name)
    version = str(info.registered_model_version)
    client = mlflow.MlflowClient()
    for key, value in tags.items():
        client.set_model_version_tag(name, version, key, value)
    return version


def champion(name: str):
    """The model version `name@champion`, or None when no version holds the alias yet."""
    try:
        return mlflow.MlflowClient().get_model_version_by_alias(name, CHAMPION)
    except mlflow.exceptions.MlflowException:
        return None


def set_champion(name: str, version: str) -> None:
    mlflow.MlflowClient().set_registered_model_alias(name, CHAMPION, version)


def log_and_register(bundle: ModelBundle, bundle_dir: str | Path, name: str, score: float,
                     example: np.ndarray, tags: dict[str, str]) -> tuple[str, bool]:
    """Log the bundle in the active run, register a new version; returns (version, became champion)."""
    version = log_version(bundle, bundle_dir, name, example, {**tags, "val_score": f"{score:.6f}"})
    current = champion(name)
    promoted = score >= (float(current.tags.get("val_score", "-inf")) if current is not None else float("-inf"))
    if promoted:
        set_champion(name, version)
    return version, promoted


def load_registered(uri: str) -> ModelBundle:
    """`models:/name@alias`, `models:/name/3` or `runs:/<id>/model` -> the bundle."""
    return mlflow.pyfunc.load_model(uri).unwrap_python_model().bundle
