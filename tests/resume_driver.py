"""Run one pipeline stage in a process of its own, for the SIGKILL/resume tests (tests/test_resume.py).

    resume_driver.py ingest                    (run in a work directory holding params.yaml)
    resume_driver.py validate PLATFORM
    resume_driver.py featurize
    resume_driver.py sample PLATFORM
    resume_driver.py active PLATFORM            (active sampling: measures the picks into data/active)
    resume_driver.py train PLATFORM

Each calls what its flow (flows/<stage>.py) calls, with the flow's relative paths, minus
Prefect: a flow process starts a Prefect server (~15 s) that a SIGKILL would leave
orphaned. `sample` prints "round N" after each round; every stage prints "done" last.
Training reads the whole training split (no sample file). `active` takes every task of the
source platform's catalog in data/records (the flow takes those of the source's training
split) and the tokenizer data/features/tokenizer.json; it prints "measured N" after each
committed batch, "round N measured [program ids in data/active]" after each round, then
"picks [program ids in pick order]" and "rounds [picks per round]".
"""

import json
import sys
from pathlib import Path

from tcl.config import load_params
from tcl.platforms import get_platform


def ingest(params: dict) -> None:
    from tcl.data.ingest import ingest_ansor_dir

    cfg = params["ingest"]
    summary = ingest_ansor_dir(cfg["tenset_dir"], platform=cfg["platform"], store_root=cfg["store"],
                               quarantine_dir=cfg["quarantine_dir"], chunk_size=int(cfg["chunk_size"]),
                               progress=False)
    print("summary", json.dumps(vars(summary)), flush=True)


def validate(params: dict, platform: str) -> None:
    from tcl.data.validation.platform import validate_platform

    cfg = params["validate"]
    validate_platform(platform, params, stores=cfg["stores"], validated_root=cfg["validated_root"],
                      quarantine_dir=cfg["quarantine_dir"], report_dir=cfg["report_dir"], track=False)


def featurize(params: dict) -> None:
    from tcl.features.dataset import featurize_platforms

    platforms = [get_platform(params, name) for name in params["train"]["platforms"]]
    featurize_platforms(platforms, params, validated_root="data/validated", records_root="data/records",
                        out_root="data/features")


def sample(params: dict, platform: str) -> None:
    from tcl.features.dataset import load_split
    from tcl.sampling.offline import sample_offline, save_sample
    from tcl.sampling.settings import SamplingSettings

    settings = SamplingSettings.from_params(params)
    split = load_split(Path("data/features") / platform, "train")
    run = sample_offline(split, params, settings, int(params["seed"]),
                         on_round=lambda r: print("round", r.round, flush=True))
    save_sample(Path("data/samples") / f"{platform}.npz", split["program_id"][run.picks], run,
                {"mode": "offline", "strategy": settings.strategy, "rate": settings.rate})


def active(params: dict, platform: str) -> None:
    from tcl.collect.catalog import load_tasks_by_key
    from tcl.collect.collector import LazyMeasurers
    from tcl.data.store import RecordStore
    from tcl.features.dataset import load_tokenizer
    from tcl.sampling.active import sample_active
    from tcl.sampling.offline import save_sample
    from tcl.sampling.settings import SamplingSettings

    settings, target = SamplingSettings.from_params(params), get_platform(params, platform)
    source = params["collect"]["source"]
    records, store = RecordStore("data/records"), RecordStore("data/active")
    tasks = sorted(load_tasks_by_key(records, source))

    def on_round(r) -> None:
        ids = sorted(store.read(platform, columns=["program_id"]).column("program_id").to_pylist())
        print(f"round {r.round} measured", json.dumps(ids), flush=True)

    run, pool, _ = sample_active(target, params, settings, int(params["seed"]), records, store, tasks,
                                 load_tokenizer(Path("data/features") / source),
                                 LazyMeasurers(params["collect"]).get(target),
                                 lambda n: print("measured", n, flush=True), on_round)
    print("picks", json.dumps(pool.program_id[run.picks].tolist()), flush=True)
    print("rounds", json.dumps([r.picked for r in run.rounds]), flush=True)
    save_sample(Path("data/samples") / f"{platform}.npz", pool.program_id[run.picks], run,
                {"mode": "active", "strategy": settings.strategy, "rate": settings.rate})


def train(params: dict, platform: str) -> None:
    from tcl.train.pipeline import train_platform

    train_platform(get_platform(params, platform), params, features_dir=f"data/features/{platform}",
                   out_dir=f"models/{platform}", metrics_path=f"reports/train/{platform}.json")


if __name__ == "__main__":
    stage, args = sys.argv[1], sys.argv[2:]
    {"ingest": ingest, "validate": validate, "featurize": featurize, "sample": sample, "active": active,
     "train": train}[stage](load_params("params.yaml"), *args)
    print("done", flush=True)
