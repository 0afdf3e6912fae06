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


def log_and_register(bundle: ModelBundle, bundle_dir: str | Path, name: str, score: float,
                     example: np.ndarray, tags: dict[str, str]) -> tuple[str, bool]:
    """Log the bundle in the active run, register a new version; returns (version, became champion)."""
    from mlflow.models import infer_signature

    info = mlflow.pyfunc.log_model(
        name="model", python_model=BundlePyfunc(), artifacts={"bundle": str(bundle_dir)},
        signature=infer_signature(example, np.zeros(len(example))), pip_requirements=REQUIREMENTS,
        registered_model_name=name)
    client = mlflow.MlflowClient()
    version = str(info.registered_model_version)
    for key, value in {**tags, "val_score": f"{score:.6f}"}.items():
        client.set_model_version_tag(name, version, key, value)
    try:
        current = client.get_model_version_by_alias(name, CHAMPION)
        best = float(current.tags.get("val_score", "-inf"))
    except mlflow.exceptions.MlflowException:
        best = float("-inf")
    promoted = score >= best
    if promoted:
        client.set_registered_model_alias(name, CHAMPION, version)
    return version, promoted


def load_registered(uri: str) -> ModelBundle:
    """`models:/name@alias`, `models:/name/3` or `runs:/<id>/model` -> the bundle."""
    return mlflow.pyfunc.load_model(uri).unwrap_python_model().bundle
