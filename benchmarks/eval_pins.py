"""Pinned benchmark models against the registry's models of today, on today's held-out test split.

A tuning benchmark pins its learned models once (`bench_tune.py --pin-dir`) so every seed tunes
with the same weights; the knowledge base grows meanwhile. Whether a re-pin is worth new tuning
runs is an offline question first: this scores each pinned bundle and the train stage's bundle of
the same model (`models/<platform>/<model>`) on the same test programs (TCL eq. 12 and the mean
per task, with their bootstrap intervals, tcl.train.evaluate). Only PerStoreFeature models
(pretrained XGB, Tenset-MLP): their input does not depend on a fitted tokenizer.

`--ensemble DIR DIR ...` adds one row for those bundles as one ensemble cost model (tcl.tvm.ensemble:
members that read the same PerStoreFeature rows, each standardized per task, summed), each task's
programs scored as the ensemble scores a task's first population. The split it is chosen on is the
validation split (`--split validation`); the test split reports.

    taskset -c 0 python benchmarks/eval_pins.py --platform zen4-avx512-1c \
        --pin-dirs reports/bench_tune/models reports/bench_tune_kb2/models --update-report
    taskset -c 0 python benchmarks/eval_pins.py --platform zen4-avx512-1c --split validation \
        --pin-dirs reports/bench_tune/models reports/bench_tune_kb2/models \
        --ensemble reports/bench_tune/models/tenset_mlp reports/bench_tune_kb2/models/pretrained_xgb
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path


REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._out import add_out_args, out_path, provenance, provenance_line  # noqa: E402

REPORT = "reports/bench_tune_kb2/pins.md"
PINNED = ("pretrained_xgb", "tenset_mlp")  # tuning names (tcl.tvm.names): the pin directories' names
FIGURES = ("top1_ratio_of_sums", "top1_mean_per_task", "top5_ratio_of_sums", "pairwise_accuracy")


def score_bundle(bundle_dir: Path, test: dict, settings, data_version: str) -> dict:
    """`bundle_dir`'s figures on `test`; `data_version` is the bundle's unless its pin names one. Any store
    count fits: both models sum over stores and the padding rows are zeros (tcl.features.per_store)."""
    from tcl.models.base import predict
    from tcl.models.bundle import ModelBundle
    from tcl.train.evaluate import ranking_metrics

    bundle = ModelBundle.load(bundle_dir)
    m = ranking_metrics(test, predict(bundle.model, test["x"]), ks=(1, 5), settings=settings)
    pin = bundle_dir / "pin.json"
    return {"bundle": str(bundle_dir), "train_rows": bundle.meta.get("train_rows"),
            "data_version": json.loads(pin.read_text()).get("data_version") if pin.exists() else data_version,
            **{k: m[k] for k in m if k.startswith(FIGURES)}}


def ensemble_row(bundle_dirs: list[Path], test: dict, settings) -> dict:
    """The figures of `bundle_dirs` as one ensemble (tcl.tvm.ensemble) on `test`: each task's programs scored as
    the ensemble scores a task's first population (each member standardized on them, then summed)."""
    import numpy as np

    from tcl.models.bundle import ModelBundle
    from tcl.train.evaluate import ranking_metrics
    from tcl.tvm.ensemble import EnsemblePrior

    ensemble = EnsemblePrior([ModelBundle.load(d) for d in bundle_dirs], [d.name for d in bundle_dirs])
    scores = np.zeros(len(test["x"]))
    for group in np.unique(test["group"]):
        rows = np.flatnonzero(test["group"] == group)
        scores[rows] = ensemble(str(group), test["x"][rows])
    m = ranking_metrics(test, scores, ks=(1, 5), settings=settings)
    return {"model": "ensemble", "source": " + ".join(map(str, bundle_dirs)), "train_rows": None,
            "data_version": None, **{k: m[k] for k in m if k.startswith(FIGURES)}}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--platform", default="zen4-avx512-1c")
    ap.add_argument("--pin-dirs", nargs="+", required=True)
    ap.add_argument("--features-dir", default=None, help="default data/features/<platform>")
    ap.add_argument("--split", default="test", choices=["validation", "test"])
    ap.add_argument("--ensemble", nargs="*", default=[], help="bundle directories whose scaled scores are summed")
    add_out_args(ap, REPORT)
    args = ap.parse_args()

    from tcl.config import load_params
    from tcl.features.dataset import load_split
    from tcl.train.evaluate import EvalSettings
    from tcl.train.inputs import model_inputs
    from tcl.tvm.names import REGISTERED_AS

    params = load_params()
    settings = EvalSettings.from_params(params)
    prov = provenance(__file__)
    features = Path(args.features_dir or f"data/features/{args.platform}")
    raw = load_split(features, args.split)
    rows, inputs = [], {}
    for pin_name in PINNED:
        trained = REGISTERED_AS.get(pin_name, pin_name)  # the train stage's name of the model
        test = inputs[trained] = model_inputs(trained, args.platform, params, features,
                                              {args.split: raw})[0][args.split]
        candidates = [("today", REPO / "models" / args.platform / trained)]
        candidates += [(d, Path(d) / pin_name) for d in args.pin_dirs]
        for label, bundle_dir in candidates:
            if (bundle_dir / "bundle.json").exists():
                rows.append({"model": pin_name, "source": label, **score_bundle(bundle_dir, test, settings, prov["data_version"])})
                print(rows[-1], flush=True)

    if args.ensemble:  # its members read PerStoreFeature rows, as Tenset-MLP does
        rows.append(ensemble_row([Path(d) for d in args.ensemble], inputs["tenset_mlp"], settings))
        print(rows[-1], flush=True)

    def cell(r, k):
        return f"{r[k]:.3f} [{r[k + '_ci_low']:.3f}, {r[k + '_ci_high']:.3f}]" if k + "_ci_low" in r else f"{r[k]:.3f}"

    split_name = "held-out test" if args.split == "test" else "validation"
    lines = [f"# Pinned models against today's, {args.platform} {split_name} split "
             f"({len(set(raw['task_key'].tolist()))} tasks, {len(raw['task_key'])} programs)", "",
             "| model | bundle | training programs | data version | " + " | ".join(FIGURES) + " |",
             "|---|---|---|---|" + "---|" * len(FIGURES)]
    lines += [f"| {r['model']} | {r['source']} | {r['train_rows'] or '-'} | {r['data_version'] or '-'} | "
              + " | ".join(cell(r, k) for k in FIGURES) + " |" for r in rows]
    lines += ["", provenance_line(prov)]
    out = out_path(args, REPORT if args.split == "test" else REPORT.replace("pins.md", "pins-validation.md"))
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n")
    out.with_suffix(".json").write_text(json.dumps({**prov, "rows": rows}, indent=2))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
