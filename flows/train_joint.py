"""Train-joint flow: one model of each `train.joint_models` on every platform's programs, registered per platform."""

from __future__ import annotations

import argparse

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows._params import load_checked_params
from flows._tasks import retry_options
from tcl.train.joint import train_joint

METRICS = "reports/train/joint.json"


@task(name="train-joint", cache_policy=NO_CACHE)
def train_joint_models(params: dict) -> dict:
    """A retry resumes an unfinished training after its last checkpointed epoch (deploy.retries.train)."""
    return train_joint(params, features_root="data/features", out_dir="models/joint", metrics_path=METRICS,
                       samples_dir="data/samples")


@flow(name="train-joint", log_prints=True)
def train_joint_flow(params_path: str = "params.yaml") -> dict:
    """Train on the union of train.platforms' training programs, evaluate and register on each platform."""
    params = load_checked_params(params_path)
    results = train_joint_models.with_options(**retry_options(params, "train"))(params)
    log = get_run_logger()
    for name, by_platform in results.items():
        for platform, m in by_platform.items():
            log.info("%s on %s: test top-1 %.3f (mean per task %.3f); %s v%s%s", name, platform,
                     m.get("test_top1_ratio_of_sums", float("nan")), m.get("test_top1_mean_per_task", float("nan")),
                     m["registered_model"], m["version"], " (champion)" if m["champion"] else "")
    return results


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    train_joint_flow(ap.parse_args().params)
