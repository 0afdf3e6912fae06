"""Names in the model registry (no MLflow needed to compute them)."""

from __future__ import annotations

CHAMPION = "champion"      # the version the tune stage uses; moved only by the promotion gate
CHALLENGER = "challenger"  # the last version the gate looked at


def registered_name(prefix: str, platform: str, model_name: str) -> str:
    """`<prefix>-<model>-<platform>`: one registered model per model and platform."""
    return f"{prefix}-{model_name}-{platform}"


JOINT_SUFFIX = "_joint"


def joint_name(model_name: str) -> str:
    """`tcl_stores_joint`: the registered (and tuning) name of `model_name` trained once on every platform
    (tcl.train.joint), registered per platform like the others."""
    return model_name + JOINT_SUFFIX


KB_SUFFIX = "_kb"


def kb_name(model_name: str) -> str:
    """`xgb_kb`: the registered name of `model_name` fitted on the knowledge base of a platform's ISA
    (tcl.train.kb_prior), one per platform."""
    return model_name + KB_SUFFIX


def is_kb_name(registered: str) -> bool:
    """Whether `registered` names a knowledge-base prior (`kb_name`'s output): fitted per ISA class."""
    return registered.endswith(KB_SUFFIX)
