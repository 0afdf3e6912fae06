"""Active mode on a local platform: measure only what the sampler picks, against measuring the whole pool.

Both arms run in one process, one after the other, on the same tasks (the first `--tasks`
training tasks of the source platform's split), the same measurer settings
(`collect.runner` / `collect.builder`) and fresh stores under --work:

- active: `sampling.strategy` picks `sampling.rate` of the pools round by round and only
  the picks are measured (tcl.sampling.active);
- whole pool: every program of the same pools is measured (what the collector does).

Each arm's cost model (`sampling.model`) is then trained on what that arm measured and
scored on the platform's held-out test split. Prints programs measured, wall time and
held-out top-1/top-5 of each arm. Run it while nothing else measures:

    taskset -c 0,1 python benchmarks/bench_active.py --platform zen4-avx2-1c --tasks 8 --seeds 3
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._out import mean_std  # noqa: E402
from tcl.collect.catalog import load_tasks_by_key  # noqa: E402
from tcl.collect.collector import LazyMeasurers, replay_task  # noqa: E402
from tcl.config import load_params  # noqa: E402
from tcl.data.store import RecordStore  # noqa: E402
from tcl.features.dataset import load_split, load_tokenizer  # noqa: E402
from tcl.models import build_model  # noqa: E402
from tcl.platforms import get_platform  # noqa: E402
from tcl.sampling.active import candidate_pool, measured_labels, sample_active  # noqa: E402
from tcl.sampling.scorer import relabel_within  # noqa: E402
from tcl.sampling.settings import SamplingSettings  # noqa: E402
from tcl.train.evaluate import ranking_metrics  # noqa: E402
from tcl.train.loop import TrainConfig, fit, model_hparams  # noqa: E402
from tcl.models.base import predict  # noqa: E402


def held_out(pool, labels, rows, test, params, model_name, seed) -> dict[str, float]:
    """Train the model on `rows` of the pool (their measured labels) and score the test split."""
    cfg = TrainConfig.from_params(params, model_name, seed=seed, threads=1)
    model = build_model(model_name, feat_dim=pool.x.shape[2], seq_len=pool.x.shape[1],
                        **model_hparams(params, model_name))
    fit(model, pool.x[rows], relabel_within(labels, pool.group, rows), pool.group[rows], cfg)
    return ranking_metrics(test, predict(model, test["x"]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--platform", default="zen4-avx2-1c", help="a trained platform measured on this CPU")
    ap.add_argument("--tasks", type=int, default=4)
    ap.add_argument("--records", default="data/records")
    ap.add_argument("--features", default="data/features")
    ap.add_argument("--work", default="tmp/bench_active")
    ap.add_argument("--seeds", type=int, default=1, help="active arm repetitions, from the params' seed on")
    ap.add_argument("--epochs", type=int, help="override train.epochs (both arms' held-out models)")
    args = ap.parse_args()
    params = load_params(args.params)
    if args.epochs:
        params["train"]["epochs"] = args.epochs
    seeds = [int(params.get("seed", 0)) + k for k in range(args.seeds)]
    settings = SamplingSettings.from_params(params)
    platform = get_platform(params, args.platform)
    source = params["collect"]["source"]
    records = RecordStore(args.records)
    # the platform's own training tasks (its split holds the tasks of the source's pools; the source
    # itself may not be featurized when it is not a training platform)
    keys = sorted(set(load_split(Path(args.features) / args.platform, "train")["task_key"].tolist()))[: args.tasks]
    test = load_split(Path(args.features) / args.platform, "test")
    tokenizer = load_tokenizer(Path(args.features) / args.platform)
    work = Path(args.work)
    shutil.rmtree(work, ignore_errors=True)
    measurer = LazyMeasurers(params["collect"]).get(platform)
    tasks = load_tasks_by_key(records, source)
    # warm-up outside both clocks: the builder/runner workers start (and import TVM) on first use
    replay_task(tasks[keys[0]], platform, records.pool(keys[0])[:1], RecordStore(work / "warmup"), measurer, 1,
                lambda n: None)

    active = []   # per seed: (programs measured, seconds, held-out metrics)
    for seed in seeds:
        start = time.perf_counter()
        counter = [0]
        store = RecordStore(work / f"active{seed}")
        run, pool, labels = sample_active(platform, params, settings, seed, records, store, keys, tokenizer,
                                          measurer, lambda n: counter.__setitem__(0, counter[0] + n))
        seconds = time.perf_counter() - start
        active.append((counter[0], seconds, held_out(pool, labels, run.picks, test, params, settings.model, seed)))

    start = time.perf_counter()
    full_store = RecordStore(work / "all")
    full_count = 0
    for key in keys:
        m, _ = replay_task(tasks[key], platform, records.pool(key), full_store, measurer,
                           int(params["collect"]["batch_size"]), lambda n: None)
        full_count += m
    full_seconds = time.perf_counter() - start
    full_pool = candidate_pool(records, {k: tasks[k] for k in keys}, tokenizer, platform.spec_vector)
    full_labels = measured_labels(full_store, platform.name, full_pool)[1]
    whole = [(full_count, full_seconds, held_out(full_pool, full_labels, np.arange(len(full_pool.texts)), test,
                                                 params, settings.model, seed)) for seed in seeds]

    print(f"{args.platform}: {len(keys)} tasks, pool of {len(full_pool.texts)} programs; {settings.strategy} at "
          f"{settings.rate:.0%} in {settings.rounds} rounds; model {settings.model} ({params['train']['epochs']} "
          f"epochs); held-out test: {len(set(test['task_key']))} tasks; seeds {seeds} (the whole pool is "
          f"measured once, its model trained once per seed)")
    print(f"{'arm':<11} {'measured':>14} {'wall s':>14}  {'top-1 (eq. 12)':>15} {'top-1 (mean/net)':>16} "
          f"{'top-5 (eq. 12)':>15}")
    for name, runs in (("active", active), ("whole pool", whole)):
        cells = [_mean_std([r[0] for r in runs], 0), _mean_std([r[1] for r in runs], 1)]
        cells += [_mean_std([r[2][k] for r in runs], 3)
                  for k in ("top1_ratio_of_sums", "top1_mean_per_network", "top5_ratio_of_sums")]
        print(f"{name:<11} {cells[0]:>14} {cells[1]:>14}  {cells[2]:>15} {cells[3]:>16} {cells[4]:>15}")


def _mean_std(values: list[float], digits: int) -> str:
    mean, std = mean_std(values)
    return f"{mean:.{digits}f} +- {std:.{digits}f}"


if __name__ == "__main__":
    main()
