"""Featurize flow: a platform's validated records -> split feature arrays + fitted tokenizer."""

from __future__ import annotations

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from flows._cli import run_platform_flow
from prefect import flow, get_run_logger

from tcl.config import load_params
from tcl.features.dataset import featurize_platform
from tcl.platforms import get_platform


@flow(name="featurize", log_prints=True)
def featurize_flow(platform: str, params_path: str = "params.yaml") -> dict:
    """Fit the tokenizer on the training split and write train/validation/test arrays."""
    params = load_params(params_path)
    stats = featurize_platform(get_platform(params, platform), params,
                               validated=f"data/validated/platform={platform}.parquet",
                               out_dir=f"data/features/{platform}")
    get_run_logger().info("%s: feature shape %s, rows %s, tasks %s", platform, stats["feature_shape"],
                          stats["rows"], stats["tasks"])
    return stats


if __name__ == "__main__":
    run_platform_flow(featurize_flow)
