"""Train flow: the configured cost models on one platform, one MLflow run and registered model each."""

from __future__ import annotations

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from flows._cli import run_platform_flow
from prefect import flow, get_run_logger

from tcl.config import load_params
from tcl.platforms import get_platform
from tcl.train.pipeline import train_platform


@flow(name="train", log_prints=True)
def train_flow(platform: str, params_path: str = "params.yaml") -> dict:
    """Train on the sampled programs, evaluate on held-out networks, log to MLflow and register each model."""
    params = load_params(params_path)
    results = train_platform(get_platform(params, platform), params, features_dir=f"data/features/{platform}",
                             out_dir=f"models/{platform}", metrics_path=f"reports/train/{platform}.json",
                             sample_path=f"data/samples/{platform}.npz")
    log = get_run_logger()
    floor = results.pop("random")
    log.info("random scorer on %s (mean of 20 draws): test top-1 %.3f, top-5 %.3f; %d validation, %d test tasks",
             platform, floor.get("test_top1_ratio_of_sums", float("nan")),
             floor.get("test_top5_ratio_of_sums", float("nan")), floor["validation_tasks"], floor["test_tasks"])
    for name, m in results.items():
        log.info("%s on %s: test top-1 %.3f, top-5 %.3f (ratio of sums); %s v%s%s", name, platform,
                 m.get("test_top1_ratio_of_sums", float("nan")), m.get("test_top5_ratio_of_sums", float("nan")),
                 m["registered_model"], m["version"], " (champion)" if m["champion"] else "")
    return results


if __name__ == "__main__":
    run_platform_flow(train_flow)
