"""Pipeline flow: one platform's scheduled refresh, the stage flows run as subflows in DVC's order.

collect (what the store lacks, on every platform this machine has) -> validate -> featurize
-> sample -> train. prefect.yaml deploys it once per platform of `deploy.pipeline.pools`,
on that platform's work pool (`python -m tcl.deploy`; README, "Scheduled runs with Prefect").

    python -m flows.pipeline --platform zen4-avx2-1c    # the same run, without a deployment
"""

from __future__ import annotations

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from flows.collect import collect_flow  # first: it loads TVM's intrinsics before Prefect (flows/_tvm_first.py)
from flows._cli import run_platform_flow
from flows.featurize import featurize_flow
from flows.sample import sample_flow
from flows.train import train_flow
from flows.validate import validate_flow
from prefect import flow, get_run_logger

from flows._params import load_checked_params


@flow(name="pipeline", log_prints=True)
def pipeline_flow(platform: str, params_path: str = "params.yaml") -> dict:
    """Collect, validate, featurize, sample and train for `platform`; returns train's held-out metrics."""
    params = load_checked_params(params_path)
    trained = (params.get("train") or {}).get("platforms") or []
    if platform not in trained:
        raise ValueError(f"{params_path}: '{platform}' is not in train.platforms {trained}: featurize makes no "
                         "features for it to sample and train on")
    collect_flow(params_path, progress=False)
    validate_flow(platform, params_path)
    featurize_flow(params_path)
    sample_flow(platform, params_path)
    results = train_flow(platform, params_path)
    get_run_logger().info("%s: trained %s", platform, ", ".join(sorted(results)))
    return results


if __name__ == "__main__":
    run_platform_flow(pipeline_flow)
