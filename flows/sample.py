"""Sample flow: which programs a platform's cost model trains on (tcl.sampling.stage; TCL's RDU by default).

Offline picks are a cached Prefect task (the same split, knobs and code give the cached picks); active
mode's measuring is a retried one (it resumes from data/active).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from flows import _tvm_first  # noqa: F401  (must precede Prefect: see its docstring)
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows._params import load_checked_params
from flows._tasks import content_key, retry_options
from tcl.sampling.stage import active_picks, offline_picks, run_sample_stage


@flow(name="sample", log_prints=True)
def sample_flow(platform: str, params_path: str = "params.yaml", mode: str | None = None,
                features_root: str = "data/features", out_root: str = "data/samples",
                report_root: str = "reports/sample") -> dict:
    """Pick `sampling.rate` of the platform's training programs with `sampling.strategy`; one MLflow run."""
    params = load_checked_params(params_path)
    return run_sample_stage(platform, params, mode=mode, features_root=features_root, out_root=out_root,
                            report_root=report_root, pick_offline=pick_offline,
                            pick_active=pick_active.with_options(**retry_options(params, "measure")),
                            log=get_run_logger().info)


def _offline_key(context, parameters) -> str:
    """Offline picks are a pure function of the training split's bytes, the sampling and training knobs,
    the seed and the code that trains f and scores: the same inputs give the cached picks."""
    params = parameters["params"]
    return content_key([Path(parameters["split_dir"]) / "train.npz"], ["sampling", "models", "train", "features"],
                       {"seed": parameters["seed"], "sampling": params.get("sampling"), "train": params.get("train")})


@task(name="pick-offline", cache_key_fn=_offline_key, persist_result=True, task_run_name="pick {platform}")
def pick_offline(platform: str, split_dir: str, params: dict, seed: int, on_round):
    return offline_picks(platform, split_dir, params, seed, on_round)


@task(name="pick-active", cache_policy=NO_CACHE, task_run_name="pick {platform_name} (active)")
def pick_active(platform_name, params, settings, seed, features_root, on_round):
    return active_picks(platform_name, params, settings, seed, features_root, on_round)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=sample_flow.__doc__)
    ap.add_argument("--platform", required=True, help="a platform declared in params.yaml")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--mode", choices=["all", "offline", "active"],
                    help="default: sampling.mode for sampling.platforms, all for the others")
    args = ap.parse_args()
    sample_flow(args.platform, args.params, args.mode)
