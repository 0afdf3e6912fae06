"""Featurize flow: every training platform's validated records -> split arrays + one shared tokenizer."""

from __future__ import annotations

import argparse

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from prefect import flow, get_run_logger

from tcl.compute import run_units
from flows._params import load_checked_params
from tcl.features.dataset import featurize_platforms
from tcl.platforms import get_platform


@flow(name="featurize", log_prints=True)
def featurize_flow(params_path: str = "params.yaml") -> dict:
    """Fit one tokenizer on all platforms' training splits and write each platform's train/validation/test arrays.
    Chunks of programs are featurized where `compute.runner` says (in this process, or on Dask)."""
    params = load_checked_params(params_path)
    platforms = [get_platform(params, name) for name in params["train"]["platforms"]]
    stats = run_units(params, "featurize", lambda units: featurize_platforms(
        platforms, params, validated_root="data/validated", records_root="data/records",
        out_root="data/features", units=units))
    log = get_run_logger()
    for name, s in stats["platforms"].items():
        log.info("%s: feature shape %s, rows %s, tasks %s, hardware row %s", name, stats["feature_shape"],
                 s["rows"], s["tasks"], s["hardware_row"])
    return stats


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=featurize_flow.__doc__)
    ap.add_argument("--params", default="params.yaml")
    featurize_flow(ap.parse_args().params)
