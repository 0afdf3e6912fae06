"""Sample flow: which programs a platform's cost model trains on (TCL's RDU by default).

Offline mode picks from the platform's measured training split; active mode measures
only the picks, round by round, into data/active (a platform with no data yet).
Either way the picks go to data/samples/<platform>.npz, which the train stage reads.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from flows import _tvm_first  # noqa: F401  (must precede Prefect: see its docstring)
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE
from tqdm.auto import tqdm

from flows._tasks import content_key, retry_options
from tcl.config import load_params
from tcl.data.store import atomic_write_bytes
from tcl.features.dataset import load_split, load_tokenizer
from tcl.tracking.headline import write_headline
from tcl.platforms import get_platform
from tcl.sampling.offline import sample_offline, save_sample
from tcl.sampling.rounds import SampleRun
from tcl.sampling.settings import SamplingSettings
from tcl import tracking


@flow(name="sample", log_prints=True)
def sample_flow(platform: str, params_path: str = "params.yaml", mode: str | None = None,
                features_root: str = "data/features", out_root: str = "data/samples",
                report_root: str = "reports/sample") -> dict:
    """Pick `sampling.rate` of the platform's training programs with `sampling.strategy`; one MLflow run."""
    params = load_params(params_path)
    settings = SamplingSettings.from_params(params)
    cfg = params.get("sampling") or {}
    if mode is None:  # a platform not listed in sampling.platforms trains on its whole pool
        mode = cfg.get("mode", "offline") if platform in (cfg.get("platforms") or []) else "all"
    seed = int(params.get("seed", 0))
    log = get_run_logger()
    start = time.perf_counter()
    with tqdm(desc=f"sample {platform} ({settings.strategy}, {mode})", unit="round",
              total=settings.rounds + 1) as bar:
        def on_round(r) -> None:
            bar.update(1)
            log.info("round %d: %d picked, %d labelled (%.1f s)", r.round, r.picked, r.labelled, r.seconds)

        if mode == "all":
            train_split = load_split(Path(features_root) / platform, "train")
            run = SampleRun(picks=np.arange(len(train_split["x"])))
            program_ids, pool_size, measured = train_split["program_id"], len(train_split["x"]), 0
        elif mode == "offline":
            train_split = load_split(Path(features_root) / platform, "train")
            run = pick_offline(platform, str(Path(features_root) / platform), params, seed, on_round)
            program_ids, pool_size, measured = train_split["program_id"][run.picks], len(train_split["x"]), 0
        elif mode == "active":
            run, pool, measured = _active.with_options(**retry_options(params, "measure"))(
                platform, params, settings, seed, features_root, on_round)
            program_ids, pool_size = pool.program_id[run.picks], len(pool.texts)
        else:
            raise ValueError(f"sampling.mode={mode!r}: choose offline or active (or all: no sampling)")
    seconds = time.perf_counter() - start
    summary = {"platform": platform, "mode": mode, "strategy": settings.strategy, "rate": settings.rate,
               "rounds": settings.rounds, "pool_size": pool_size, "picked": int(len(program_ids)),
               "measured_now": measured, "seconds": seconds, "per_round": [vars(r) for r in run.rounds]}
    save_sample(Path(out_root) / f"{platform}.npz", program_ids, run,
                {"mode": mode, "strategy": settings.strategy, "rate": settings.rate})
    Path(report_root).mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(Path(report_root) / f"{platform}.json", json.dumps(summary, indent=2).encode())
    write_headline("sample", Path(report_root) / f"{platform}.json",
                   Path(report_root).parent / "metrics" / f"sample-{platform}.json")
    with tracking.run(params, f"sample-{platform}", {"stage": "sample", "platform": platform}):
        tracking.log_params({k: summary[k] for k in ("mode", "strategy", "rate", "rounds", "pool_size")})
        tracking.log_metrics({"picked": summary["picked"], "measured_now": measured, "seconds": seconds})
    log.info("%s: %d of %d programs picked by %s (%s mode, %d measured now) in %.1f s", platform,
             summary["picked"], pool_size, settings.strategy, mode, measured, seconds)
    return summary


def _offline_key(context, parameters) -> str:
    """Offline picks are a pure function of the training split's bytes, the sampling and training knobs,
    the seed and the code that trains f and scores: the same inputs give the cached picks."""
    params = parameters["params"]
    return content_key([Path(parameters["split_dir"]) / "train.npz"], ["sampling", "models", "train", "features"],
                       {"seed": parameters["seed"], "sampling": params.get("sampling"), "train": params.get("train")})


@task(name="pick-offline", cache_key_fn=_offline_key, persist_result=True, task_run_name="pick {platform}")
def pick_offline(platform: str, split_dir: str, params: dict, seed: int, on_round) -> SampleRun:
    """The offline picks from the platform's measured training split (rounds logged through `on_round`)."""
    return sample_offline(load_split(split_dir, "train"), params, SamplingSettings.from_params(params), seed,
                          on_round)


@task(name="pick-active", cache_policy=NO_CACHE, task_run_name="pick {platform_name} (active)")
def _active(platform_name, params, settings, seed, features_root, on_round):
    """Active mode over the saved pools of the training tasks (the source platform's split); measures
    into data/active, so the platform needs no records of its own."""
    from tcl.collect.collector import LazyMeasurers
    from tcl.data.store import RecordStore
    from tcl.sampling.active import sample_active

    platform = get_platform(params, platform_name)
    source = params["collect"]["source"]
    tasks = sorted(set(load_split(Path(features_root) / source, "train")["task_key"].tolist()))
    with tqdm(desc=f"measure {platform_name}", unit="program") as bar:
        run, pool, _ = sample_active(platform, params, settings, seed, RecordStore("data/records"),
                                     RecordStore("data/active"), tasks, load_tokenizer(Path(features_root) / source),
                                     LazyMeasurers(params["collect"]).get(platform), bar.update, on_round)
        measured = bar.n
    return run, pool, measured


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=sample_flow.__doc__)
    ap.add_argument("--platform", required=True, help="a platform declared in params.yaml")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--mode", choices=["all", "offline", "active"],
                    help="default: sampling.mode for sampling.platforms, all for the others")
    args = ap.parse_args()
    sample_flow(args.platform, args.params, args.mode)
