"""Held-out top-1/top-5 against sampling rate for RDU, random, ALT and BALTO (TCL Fig. 7, Table 4).

For every (strategy, rate, seed): the strategy picks `rate` of the platform's
training split (offline mode, `sampling.*` settings: rounds, first batch, model f),
then the evaluation model (`--model`, the same for every strategy, with the train
stage's settings) is trained on the picks only and scored on the held-out test
networks. Rate 1.0 trains on everything (the same for every strategy). Prints a
table of mean +- std over seeds, writes eval.{json,png} under tmp/bench/sampling, or with
--update-report under the committed reports/sampling (the PNG is a DVC plot in dvc.yaml; the JSON
names the data version and this command), and logs both to MLflow when it is installed.

    python benchmarks/eval_sampling.py --platform host-avx2-1c [--seeds 5] [--workers 2] [--update-report]

Jobs are independent, so `--workers` processes run them side by side (one thread each).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks._out import add_out_args, mean_std, out_path, provenance  # noqa: E402
from tcl.config import load_params  # noqa: E402
from tcl.data.store import atomic_write_bytes  # noqa: E402
from tcl.features.dataset import load_split  # noqa: E402
from tcl.models import build_model  # noqa: E402
from tcl.sampling.offline import sample_offline  # noqa: E402
from tcl.sampling.scorer import relabel_within  # noqa: E402
from tcl.sampling.settings import SamplingSettings  # noqa: E402
from tcl.train.evaluate import ranking_metrics  # noqa: E402
from tcl.train.loop import TrainConfig, fit, model_hparams  # noqa: E402
from tcl.models.base import predict  # noqa: E402

METRICS = ("top1_ratio_of_sums", "top5_ratio_of_sums", "top1_mean_per_network", "top5_mean_per_network")
_DATA: dict = {}


def _load(features_dir: str) -> None:
    if not _DATA:
        _DATA.update({s: load_split(features_dir, s) for s in ("train", "test")})


def run_job(job: dict) -> dict:
    """One (strategy, rate, seed): pick, train the evaluation model on the picks, score the test split."""
    import torch

    torch.set_num_threads(1)
    _load(job["features_dir"])
    train, test, params = _DATA["train"], _DATA["test"], job["params"]
    start = time.perf_counter()
    if job["rate"] >= 1.0:
        rows = np.arange(len(train["x"]))
    else:
        settings = SamplingSettings.from_params(params, strategy=job["strategy"], rate=job["rate"],
                                                device=job["device"])
        rows = sample_offline(train, params, settings, job["seed"]).picks
    sample_seconds = time.perf_counter() - start
    cfg = TrainConfig.from_params(params, job["model"], seed=job["seed"], device=job["device"], threads=1)
    model = build_model(job["model"], feat_dim=train["x"].shape[2], seq_len=train["x"].shape[1],
                        **model_hparams(params, job["model"]))
    fit(model, train["x"][rows], relabel_within(train["label"], train["group"], rows), train["group"][rows], cfg)
    metrics = ranking_metrics(test, predict(model, test["x"]))
    return {**{k: job[k] for k in ("strategy", "rate", "seed")}, "labelled": int(len(rows)),
            "sample_seconds": sample_seconds, **{k: metrics[k] for k in METRICS}}


def summarize(results: list[dict]) -> list[dict]:
    """Mean and std over seeds per (strategy, rate)."""
    out = []
    for (strategy, rate), group in itertools.groupby(sorted(results, key=lambda r: (r["strategy"], r["rate"])),
                                                     key=lambda r: (r["strategy"], r["rate"])):
        group = list(group)
        row = {"strategy": strategy, "rate": rate, "seeds": len(group),
               "labelled": int(np.mean([g["labelled"] for g in group]))}
        for k in METRICS:
            row[k], row[f"{k}_std"] = mean_std([g[k] for g in group])
        out.append(row)
    return out


def plot(summary: list[dict], path: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(2, 2, figsize=(10, 7.5))
    for ax, k in zip(axes.flat, METRICS):
        for strategy in sorted({r["strategy"] for r in summary}):
            rows = sorted((r for r in summary if r["strategy"] == strategy), key=lambda r: r["rate"])
            ax.errorbar([100 * r["rate"] for r in rows], [r[k] for r in rows], yerr=[r[f"{k}_std"] for r in rows],
                        marker="o", capsize=3, label=strategy)
        ax.set_xscale("log")
        ax.set_xlabel("programs labelled (% of the training pool)")
        convention = "TCL eq. 12" if k.endswith("ratio_of_sums") else "mean per network"
        ax.set_ylabel(f"held-out {k.split('_')[0]} ({convention})")
        ax.grid(alpha=0.3)
    axes[0, 0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def log_to_mlflow(params: dict, summary: list[dict], out_dir: Path, tags: dict) -> None:
    from tcl import tracking

    try:
        tracking.configure(params)
    except ImportError:
        print("mlflow is not installed here: results not logged (run with --log-only on a machine that has it)")
        return
    with tracking.run(params, f"eval-sampling-{tags['platform']}", {"stage": "eval-sampling", **tags}):
        for r in summary:
            tracking.log_metrics({f"{r['strategy']}.{int(round(100 * r['rate']))}pct.{k}": r[k]
                                  for k in METRICS + tuple(f"{m}_std" for m in METRICS)})
        tracking.log_artifact(str(out_dir / "eval.json"))
        tracking.log_artifact(str(out_dir / "eval.png"))


def print_table(summary: list[dict]) -> None:
    print(f"{'strategy':<8} {'rate':>5} {'labelled':>8}  {'top-1 (eq.12)':>15}  {'top-5 (eq.12)':>15}  "
          f"{'top-1 (mean/net)':>17}  {'top-5 (mean/net)':>17}")
    for r in sorted(summary, key=lambda r: (r["rate"], r["strategy"])):
        cells = [f"{r[k]:.3f} +- {r[f'{k}_std']:.3f}" for k in METRICS]
        print(f"{r['strategy']:<8} {100 * r['rate']:>4.0f}% {r['labelled']:>8}  {cells[0]:>15}  {cells[1]:>15}  "
              f"{cells[2]:>17}  {cells[3]:>17}")


def goal_lines(summary: list[dict], rate: float = 0.1) -> list[str]:
    """The paper's claim (TCL Fig. 7) in this run's numbers: RDU at `rate` against all the data and
    against random, per convention; the gap to random is set against the larger of the two seed stds."""
    row = {(r["strategy"], r["rate"]): r for r in summary}
    if not {("rdu", rate), ("random", rate), ("rdu", 1.0)} <= set(row):
        return []
    rdu, rnd, full = row["rdu", rate], row["random", rate], row["rdu", 1.0]
    lines = []
    for k in ("top1_ratio_of_sums", "top1_mean_per_network"):
        gap, std = rdu[k] - rnd[k], max(rdu[f"{k}_std"], rnd[f"{k}_std"])
        lines.append(f"{k}: rdu {100 * rate:.0f}% - all data = {rdu[k] - full[k]:+.3f} (goal >= -0.02); "
                     f"rdu - random = {gap:+.3f} against seed std {std:.3f} "
                     f"({'above' if gap > std else 'not above'} it)")
    return lines


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--platform", default=None, help="default: the first of sampling.platforms")
    ap.add_argument("--features", default="data/features")
    ap.add_argument("--strategies", default="rdu,random,alt,balto")
    ap.add_argument("--rates", default="0.05,0.1,0.2,1.0")
    ap.add_argument("--seeds", type=int, default=5)
    ap.add_argument("--model", default=None, help="evaluation model (default: sampling.model)")
    ap.add_argument("--f-model", default=None, help="the strategies' model f (default: sampling.model)")
    ap.add_argument("--epochs", type=int, default=None, help="override train.epochs and sampling.epochs")
    ap.add_argument("--workers", type=int, default=max(1, (os.cpu_count() or 1)))
    ap.add_argument("--device", default="cpu")
    add_out_args(ap, "reports/sampling")
    ap.add_argument("--log-only", action="store_true", help="log an existing <out>/eval.json to MLflow")
    args = ap.parse_args()
    params = load_params(args.params)
    platform = args.platform or params["sampling"]["platforms"][0]
    out = out_path(args, "reports/sampling")
    if args.log_only:
        report = json.loads((out / "eval.json").read_text())
        log_to_mlflow(params, report["summary"], out, {"platform": report["platform"]})
        return
    prov = provenance(__file__)  # the data as locked when the run starts
    if args.epochs:
        params["train"]["epochs"] = params["sampling"]["epochs"] = args.epochs
    if args.f_model:
        params["sampling"]["model"] = args.f_model
    model = args.model or params["sampling"]["model"]
    rates = [float(r) for r in args.rates.split(",")]
    strategies = args.strategies.split(",")
    features_dir = str(Path(args.features) / platform)
    jobs = [{"strategy": s if r < 1.0 else "all", "rate": r, "seed": seed, "params": params, "model": model,
             "device": args.device, "features_dir": features_dir}
            for r in rates for s in (strategies if r < 1.0 else ["all"]) for seed in range(args.seeds)]
    _load(features_dir)
    n_train, n_test = len(_DATA["train"]["x"]), len(_DATA["test"]["x"])
    print(f"{platform}: {n_train} training programs ({len(set(_DATA['train']['task_key']))} tasks), "
          f"{n_test} held-out ({len(set(_DATA['test']['task_key']))} tasks); model {model}, "
          f"f {params['sampling']['model']}; {len(jobs)} jobs")
    start = time.perf_counter()
    with ProcessPoolExecutor(max_workers=args.workers) as pool:
        results = []
        for i, r in enumerate(pool.map(run_job, jobs), 1):
            results.append(r)
            print(f"[{i}/{len(jobs)}] {r['strategy']} {r['rate']:.2f} seed {r['seed']}: "
                  f"top-1 {r['top1_ratio_of_sums']:.3f} ({r['labelled']} labelled)", flush=True)
    summary = summarize(results)
    # rate 1.0 is one row, shown under every strategy's curve
    full = [r for r in summary if r["strategy"] == "all"]
    summary = [r for r in summary if r["strategy"] != "all"] + [dict(f, strategy=s) for f in full for s in strategies]
    print_table(summary)
    for line in goal_lines(summary):
        print(line)
    out.mkdir(parents=True, exist_ok=True)
    report = {**prov, "platform": platform, "model": model, "train_programs": n_train, "test_programs": n_test,
              "seeds": args.seeds, "seconds": time.perf_counter() - start, "summary": summary, "runs": results,
              "sampling": {k: v for k, v in params["sampling"].items() if k != "platforms"}}
    atomic_write_bytes(out / "eval.json", json.dumps(report, indent=2).encode())
    plot(summary, out / "eval.png", f"{platform}: held-out top-k vs. labelled share ({args.seeds} seeds, {model})")
    print(f"wrote {out}/eval.json and eval.png in {report['seconds']:.0f} s")
    log_to_mlflow(params, summary, out, {"platform": platform})


if __name__ == "__main__":
    main()
