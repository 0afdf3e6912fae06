"""The sample stage: which programs a platform's cost model trains on (TCL's RDU by default).

Offline mode picks from the platform's measured training split; active mode measures only the picks,
round by round, into data/active (a platform with no data yet); a platform outside
`sampling.platforms` trains on its whole split ("all"). Either way the picks go to
data/samples/<platform>.npz (what the train stage reads), a report, a headline metric file and
one MLflow run. The flow only wires Prefect tasks around `offline_picks` and `active_picks`.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any, Callable

import numpy as np
from tqdm.auto import tqdm

from .. import tracking
from ..data.store import atomic_write_bytes
from ..features.dataset import load_split, load_tokenizer
from ..platforms import get_platform
from ..tracking.headline import write_headline
from .offline import sample_offline, save_sample
from .rounds import RoundLog, SampleRun
from .settings import SamplingSettings


def offline_picks(platform: str, split_dir: str, params: dict[str, Any], seed: int,
                  on_round: Callable[[RoundLog], None] | None = None) -> SampleRun:
    """The offline picks from the platform's measured training split (rounds reported through `on_round`)."""
    return sample_offline(load_split(split_dir, "train"), params, SamplingSettings.from_params(params), seed,
                          on_round)


def active_picks(platform_name: str, params: dict[str, Any], settings: SamplingSettings, seed: int,
                 features_root: str | Path, on_round: Callable[[RoundLog], None] | None = None):
    """(run, pool, programs measured now): active mode over the saved pools of the training tasks (the
    source platform's split); measures into data/active, so the platform needs no records of its own."""
    from ..collect.collector import LazyMeasurers
    from ..data.store import RecordStore
    from .active import sample_active

    platform = get_platform(params, platform_name)
    source = params["collect"]["source"]
    tasks = sorted(set(load_split(Path(features_root) / source, "train")["task_key"].tolist()))
    with tqdm(desc=f"measure {platform_name}", unit="program") as bar:
        run, pool, _ = sample_active(platform, params, settings, seed, RecordStore("data/records"),
                                     RecordStore("data/active"), tasks, load_tokenizer(Path(features_root) / source),
                                     LazyMeasurers(params["collect"]).get(platform), bar.update, on_round)
        measured = bar.n
    return run, pool, measured


def run_sample_stage(platform: str, params: dict[str, Any], *, mode: str | None = None,
                     features_root: str | Path = "data/features", out_root: str | Path = "data/samples",
                     report_root: str | Path = "reports/sample", pick_offline=offline_picks,
                     pick_active=active_picks, log: Callable[[str], None] = print) -> dict[str, Any]:
    """Pick `sampling.rate` of the platform's training programs with `sampling.strategy`; write the
    sample, its report and headline, and one MLflow run. `pick_offline`/`pick_active` default to the
    functions above (the flow passes them as cached / retried Prefect tasks)."""
    settings = SamplingSettings.from_params(params)
    mode = mode or settings.mode_for(platform)
    seed = int(params.get("seed", 0))
    split_dir = Path(features_root) / platform
    start = time.perf_counter()
    with tqdm(desc=f"sample {platform} ({settings.strategy}, {mode})", unit="round",
              total=settings.rounds + 1) as bar:
        def on_round(r: RoundLog) -> None:
            bar.update(1)
            log(f"round {r.round}: {r.picked} picked, {r.labelled} labelled ({r.seconds:.1f} s)")

        if mode == "all":
            train_split = load_split(split_dir, "train")
            run = SampleRun(picks=np.arange(len(train_split["x"])))
            program_ids, pool_size, measured = train_split["program_id"], len(train_split["x"]), 0
        elif mode == "offline":
            train_split = load_split(split_dir, "train")
            run = pick_offline(platform, str(split_dir), params, seed, on_round)
            program_ids, pool_size, measured = train_split["program_id"][run.picks], len(train_split["x"]), 0
        elif mode == "active":
            run, pool, measured = pick_active(platform, params, settings, seed, str(features_root), on_round)
            program_ids, pool_size = pool.program_id[run.picks], len(pool.texts)
        else:
            raise ValueError(f"sampling mode {mode!r}: choose offline or active (or all: no sampling)")
    seconds = time.perf_counter() - start
    summary = {"platform": platform, "mode": mode, "strategy": settings.strategy, "rate": settings.rate,
               "rounds": settings.rounds, "pool_size": pool_size, "picked": int(len(program_ids)),
               "measured_now": measured, "seconds": seconds, "per_round": [vars(r) for r in run.rounds]}
    save_sample(Path(out_root) / f"{platform}.npz", program_ids, run,
                {"mode": mode, "strategy": settings.strategy, "rate": settings.rate})
    report = Path(report_root) / f"{platform}.json"
    report.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(report, json.dumps(summary, indent=2).encode())
    write_headline("sample", report, Path(report_root).parent / "metrics" / f"sample-{platform}.json")
    with tracking.run(params, f"sample-{platform}", {"stage": "sample", "platform": platform}):
        tracking.log_params({k: summary[k] for k in ("mode", "strategy", "rate", "rounds", "pool_size")})
        tracking.log_metrics({"picked": summary["picked"], "measured_now": measured, "seconds": seconds})
    log(f"{platform}: {summary['picked']} of {pool_size} programs picked by {settings.strategy} ({mode} mode, "
        f"{measured} measured now) in {seconds:.1f} s")
    return summary
