"""Train flow: the configured cost models on one platform, one MLflow run and registered model each."""

from __future__ import annotations

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from flows._cli import run_platform_flow
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows._tasks import retry_options
from flows._params import load_checked_params
from tcl.tracking.headline import write_headline
from tcl.platforms import get_platform
from tcl.train.pipeline import train_platform


@task(name="train", cache_policy=NO_CACHE, task_run_name="train {platform.name}")
def train_models(platform, params: dict) -> dict:
    """Every model of train.models on the platform, each registered. A retry resumes an unfinished model
    after its last checkpointed epoch, but trains an already registered one again (deploy.retries.train)."""
    name = platform.name
    return train_platform(platform, params, features_dir=f"data/features/{name}", out_dir=f"models/{name}",
                          metrics_path=f"reports/train/{name}.json", sample_path=f"data/samples/{name}.npz")


@flow(name="train", log_prints=True)
def train_flow(platform: str, params_path: str = "params.yaml") -> dict:
    """Train on the sampled programs, evaluate on held-out networks, log to MLflow and register each model."""
    params = load_checked_params(params_path)
    results = train_models.with_options(**retry_options(params, "train"))(get_platform(params, platform), params)
    write_headline("train", f"reports/train/{platform}.json", f"reports/metrics/train-{platform}.json")
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
