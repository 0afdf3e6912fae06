"""Promote flow: run the promotion gate for a registered version of a platform's model.

`python -m flows.promote --platform P --model M [--version V]` scores version V (default: the
latest) of `<prefix>-M-P` and the current champion on the platform's current validation split
(data/features/P/validation.npz) and moves `champion` to V only if its top-1 is strictly higher
(tcl/train/promotion.py). The train stage runs the same gate after registering each model.
"""

from __future__ import annotations

import argparse

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from prefect import flow, get_run_logger

from tcl import tracking
from flows._params import load_checked_params
from tcl.platforms import get_platform
from tcl.train.promotion import ValidationInputs, promote


@flow(name="promote", log_prints=True)
def promote_flow(platform: str, model: str, version: str | None = None, params_path: str = "params.yaml",
                 features_root: str = "data/features") -> dict:
    """Score a registered version and the champion on the platform's validation split; promote only if better."""
    params = load_checked_params(params_path)
    get_platform(params, platform)  # a clear error for an undeclared platform
    tracking.require_enabled(params, "promotion (the model registry)")
    name = tracking.registered_name(params["registry"]["prefix"], platform, model)
    version = str(version) if version else tracking.registry.latest_version(name)
    log = get_run_logger()
    decision = promote(name, version, ValidationInputs(platform, params, f"{features_root}/{platform}"), log.info)
    return decision.to_dict()


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=promote_flow.__doc__)
    ap.add_argument("--platform", required=True, help="a platform declared in params.yaml")
    ap.add_argument("--model", required=True, help="a model of train.models (tcl, mlp, xgb, pacm; tlp, tenset_mlp)")
    ap.add_argument("--version", default=None, help="the registered version to judge (default: the latest)")
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args()
    promote_flow(args.platform, args.model, args.version, args.params)
