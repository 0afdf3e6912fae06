"""Pick the registered model to tune a platform with.

The platform's own champion if one is registered; otherwise the champion of the
nearest platform of the same kind by hardware spec (Euclidean distance of the
log-scaled Table-1 vectors), and the caller is told which was used and why. The
alias is resolved to its version number, so a run records (and loads) exactly the
model it used even if the alias moves meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..platforms import Platform
from ..train.registry import CHAMPION, registered_name


@dataclass(frozen=True)
class Selection:
    uri: str  # models:/<name>/<version>: pinned, not the moving alias
    platform: str  # the platform the model was trained for
    reason: str
    name: str = ""
    version: str = ""
    data_version: str = ""  # the dataset version the model was trained on (its version tag)


def spec_distance(a: Platform, b: Platform) -> float:
    return float(np.linalg.norm(np.log1p(np.asarray(a.spec_vector)) - np.log1p(np.asarray(b.spec_vector))))


def select_model(target: Platform, platforms: dict[str, Platform], prefix: str, model_name: str) -> Selection:
    """The champion for `target`, or the nearest platform's; LookupError if none is registered."""
    import mlflow

    client = mlflow.MlflowClient()

    def champion(p: Platform, reason: str) -> Selection | None:
        name = registered_name(prefix, p.name, model_name)
        try:
            found = client.get_model_version_by_alias(name, CHAMPION)
        except mlflow.exceptions.MlflowException:
            return None
        return Selection(f"models:/{name}/{found.version}", p.name, reason, name, str(found.version),
                         found.tags.get("data_version", "unknown"))

    own = champion(target, f"champion registered for {target.name}")
    if own:
        return own
    candidates = sorted((spec_distance(target, p), p.name) for p in platforms.values()
                        if p.kind == target.kind and p.name != target.name)
    for dist, name in candidates:
        near = champion(platforms[name], f"no {model_name} model for {target.name}; nearest platform by "
                                         f"hardware spec is {name} (distance {dist:.3f})")
        if near:
            return near
    raise LookupError(f"no registered '{model_name}' champion for {target.name} or any {target.kind} platform "
                      f"(looked for {prefix}-{model_name}-<platform>@{CHAMPION}); run the train stage first")
