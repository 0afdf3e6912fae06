"""Target top-1/top-5 of the cost-model transfer methods on held-out networks (TCL §7.4, Table 6).

Sources then the target, per `transfer.order`. The target learns from `transfer.rate`
of its training programs, picked offline by `transfer.sampler` (RDU with the
`sampling.*` rounds; `random` needs no model): one sample per seed, the same for every
method, and every method is scored on the target's held-out test split (the held-out
networks). Methods (tcl/transfer): none (the target's sample alone), finetune, mtl
(MTL-TLP), moses, ckd; each trains `cl_epochs` per platform (CKD adds its KD phases).
Prints mean +- std over seeds with parameter counts and the random scorer's floor;
writes <out>/bench.{json,md} and <out>/forgetting.png (CKD, first seed: top-1 on every
platform seen so far, epoch by epoch, TCL Fig. 8). With --track every CKD sequence is
also a parent MLflow run with nested phase runs and registered KB snapshots and
target model (tcl/transfer/tracked.py; MLFLOW_TRACKING_URI picks the store).

    taskset -c 0 python benchmarks/bench_transfer.py [--seeds 0,1,2] [--cl-epochs 2 --kd-epochs 2] [--track]

<out> is tmp/bench/transfer unless --update-report (the committed reports/transfer) or --out. Both
files name the data version and this command.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._out import add_out_args, mean_std, out_path, provenance, provenance_line  # noqa: E402
from tcl.config import load_params  # noqa: E402
from tcl.data.store import atomic_write_bytes  # noqa: E402
from tcl.features.dataset import load_split, load_tokenizer  # noqa: E402
from tcl.models import param_count  # noqa: E402
from tcl.platforms import load_platforms  # noqa: E402
from tcl.train.evaluate import random_scorer_metrics, ranking_metrics  # noqa: E402
from tcl.models.base import predict  # noqa: E402
from tcl.transfer import Monitor, PlatformData, TransferSettings, make_method  # noqa: E402
from tcl.transfer.forgetting import plot_forgetting  # noqa: E402
from tcl.transfer.stage import target_sample  # noqa: E402
from tcl.transfer.tracked import TrackingContext, run_tracked  # noqa: E402

METRICS = ("top1_ratio_of_sums", "top5_ratio_of_sums", "top1_mean_per_network", "top5_mean_per_network")


def run_one(name: str, seed: int, settings: TransferSettings, hparams: dict, data: PlatformData,
            test: dict, monitor: bool, tracking: TrackingContext | None) -> tuple[dict, list]:
    """One method and seed: the sequence, then the target model's held-out metrics; returns (row, history)."""
    method = make_method(name, settings, hparams, seed)
    start = time.perf_counter()
    if tracking is not None:
        result = run_tracked(method, data, tracking).result
    else:
        result = method.fit_sequence(data, hooks=Monitor(data) if monitor else None)
    seconds = time.perf_counter() - start
    metrics = ranking_metrics(test, predict(result.model, test["x"]))
    row = {"method": name, "seed": seed, "seconds": seconds, "params_deployed": param_count(result.model),
           "params_total": result.params_total, **{k: metrics[k] for k in METRICS}}
    return row, result.history


def summarize(runs: list[dict], methods: list[str]) -> list[dict]:
    """Mean and std over seeds per method, in the order of `methods`."""
    out = []
    for name in methods:
        rows = [r for r in runs if r["method"] == name]
        summary = {"method": name, "seeds": len(rows), "params_deployed": rows[0]["params_deployed"],
                   "params_total": rows[0]["params_total"], "seconds": float(np.mean([r["seconds"] for r in rows]))}
        for k in METRICS:
            summary[k], summary[f"{k}_std"] = mean_std([r[k] for r in rows])
        out.append(summary)
    return out


def table(summary: list[dict], floor: dict) -> str:
    """Markdown table of the summary, with the random scorer's floor as the last row."""
    lines = ["| method | top-1 (eq. 12) | top-5 (eq. 12) | top-1 (mean/net) | params deployed | params total | "
             "seconds |", "|---|---|---|---|---|---|---|"]
    for r in summary:
        cells = [f"{r[k]:.4f} ± {r[f'{k}_std']:.4f}" for k in METRICS[:3]]
        lines.append(f"| {r['method']} | {' | '.join(cells)} | {r['params_deployed']:,} | {r['params_total']:,} | "
                     f"{r['seconds']:.0f} |")
    lines.append(f"| random scorer | {floor['top1_ratio_of_sums']:.4f} | {floor['top5_ratio_of_sums']:.4f} | "
                 f"{floor['top1_mean_per_network']:.4f} | - | - | - |")
    return "\n".join(lines)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--features", default="data/features")
    ap.add_argument("--seeds", default=None, help="comma-separated (default: transfer.seeds)")
    ap.add_argument("--methods", default=None, help="comma-separated (default: transfer.methods)")
    ap.add_argument("--cl-epochs", type=int, default=None)
    ap.add_argument("--kd-epochs", type=int, default=None)
    ap.add_argument("--sampler", default=None, help="override transfer.sampler (e.g. random)")
    ap.add_argument("--sampler-epochs", type=int, default=None)
    ap.add_argument("--track", action="store_true", help="CKD runs as MLflow runs with registered models")
    add_out_args(ap, "reports/transfer")
    args = ap.parse_args()
    params = load_params(args.params)
    settings = TransferSettings.from_params(
        params, cl_epochs=args.cl_epochs, kd_epochs=args.kd_epochs, sampler=args.sampler,
        sampler_epochs=args.sampler_epochs,
        seeds=[int(s) for s in args.seeds.split(",")] if args.seeds else None,
        methods=args.methods.split(",") if args.methods else None)
    features, out = Path(args.features), out_path(args, "reports/transfer")
    hparams = {m: settings.hparams(params, m) for m in {"tcl", "tlp", settings.model}}
    test = load_split(features / settings.target, "test")
    floor = random_scorer_metrics(test)
    prov = provenance(__file__)
    data_version = prov["data_version"]
    tracking = None
    if args.track:
        platforms = load_platforms(params)
        tracking = TrackingContext(params, load_tokenizer(features / settings.target),
                                   {p: platforms[p].spec_vector for p in settings.order}, data_version, out / "tracked")
    print(f"{' -> '.join(settings.order)}: target {settings.target}, {settings.rate:.0%} by {settings.sampler}; "
          f"{len(test['x'])} held-out programs ({len(set(test['task_key']))} tasks); seeds {settings.seeds}; "
          f"CL {settings.cl_epochs} / KD {settings.kd_epochs} epochs", flush=True)
    start = time.perf_counter()
    runs, forgetting = [], None
    for seed in settings.seeds:
        sample = target_sample(params, settings, features, seed)
        print(f"seed {seed}: {len(sample)} target programs sampled", flush=True)
        for name in settings.methods:
            data = PlatformData.from_features(features, samples={settings.target: sample})
            first_ckd = name == "ckd" and forgetting is None
            row, history = run_one(name, seed, settings, hparams, data, test, first_ckd,
                                   tracking if name == "ckd" else None)
            forgetting = history if first_ckd else forgetting
            runs.append({**row, "target_programs": int(len(sample))})
            print(f"  {name:<9} top-1 {row['top1_ratio_of_sums']:.4f}  top-5 {row['top5_ratio_of_sums']:.4f}  "
                  f"({row['seconds']:.0f} s)", flush=True)
    summary = summarize(runs, settings.methods)
    md = table(summary, floor)
    print(md)
    out.mkdir(parents=True, exist_ok=True)
    report = {"order": settings.order, "target": settings.target, **prov,
              "settings": vars(settings), "test_programs": int(len(test["x"])), "random": floor,
              "seconds": time.perf_counter() - start, "summary": summary, "runs": runs}
    atomic_write_bytes(out / "bench.json", json.dumps(report, indent=2).encode())
    atomic_write_bytes(out / "bench.md", (f"Target {settings.target} after {' -> '.join(settings.order[:-1])}; "
                                          f"{settings.rate:.0%} of its programs ({settings.sampler}); "
                                          f"seeds {settings.seeds}\n\n{md}\n\n{provenance_line(prov)}\n").encode())
    if forgetting is not None:
        plot_forgetting(forgetting, out / "forgetting.png", f"CKD, seed {settings.seeds[0]}: "
                                                            f"{' -> '.join(settings.order)}")
    print(f"wrote {out}/bench.json, bench.md{', forgetting.png' if forgetting else ''} "
          f"in {report['seconds']:.0f} s")


if __name__ == "__main__":
    main()
