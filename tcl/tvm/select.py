"""Pick the registered model to tune a platform with.

The platform's own champion if one is registered; otherwise the champion of the
nearest platform of the same kind, preferring platforms measured on this very CPU
(their `host` matches it), then by hardware spec (Euclidean distance of the
log-scaled Table-1 vectors); the caller is told which was used and why. The
alias is resolved to its version number, so a run records (and loads) exactly the
model it used even if the alias moves meanwhile.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .. import tracking
from ..platforms import Platform, host_mismatch
from ..tracking import CHAMPION, registered_name


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

    def champion(p: Platform, reason: str) -> Selection | None:
        name = registered_name(prefix, p.name, model_name)
        found = tracking.registry.champion(name)
        if found is None:
            return None
        return Selection(f"models:/{name}/{found.version}", p.name, reason, name, str(found.version),
                         found.tags.get("data_version", "unknown"))

    own = champion(target, f"champion registered for {target.name}")
    if own:
        return own
    # A platform measured on this very CPU first (its labels are this machine's), then by spec distance.
    candidates = sorted((host_mismatch(p) is not None or not p.host, spec_distance(target, p), p.name)
                        for p in platforms.values() if p.kind == target.kind and p.name != target.name)
    for elsewhere, dist, name in candidates:
        where = "measured on another CPU" if elsewhere else "measured on this CPU"
        near = champion(platforms[name], f"no {model_name} model for {target.name}; nearest platform by "
                                         f"hardware spec {where} is {name} (distance {dist:.3f})")
        if near:
            return near
    raise LookupError(f"no registered '{model_name}' champion for {target.name} or any {target.kind} platform "
                      f"(looked for {prefix}-{model_name}-<platform>@{CHAMPION}); run the train stage first")
