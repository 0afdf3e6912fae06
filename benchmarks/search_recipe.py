"""Search a cost model's training recipe on one platform's features, then judge the winner once.

Optuna's TPE sampler proposes `--trials` recipes (learning rate, batch size, weight decay, loss and, for
TCL and tcl_stores, depth / d_state / expand: tcl.recipe.search); each is trained for `--epochs` on the train split and
scored on the validation split (top-1 as the mean per task, the promotion gate's figure). The held-out
test split plays no part in the choice: afterwards the best recipe and params.yaml's own recipe are
trained again for `--final-epochs` and scored on it once, eq. 12 and the mean per task with bootstrap CIs.
One MLflow run (tag stage=recipe_search) holds a nested run per trial.

    python benchmarks/search_recipe.py --platform zen4-avx512-1c --model tcl --trials 12 --epochs 2 \\
        [--final-epochs 8] [--update-report]

Writes tmp/bench/recipe/<platform>-<model>.{json,md}, or with --update-report reports/recipe/.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._out import add_out_args, out_path, provenance, provenance_line  # noqa: E402

REPORT = "reports/recipe"
MODELS = ("tcl", "tcl_stores", "mlp", "tlp", "tenset_mlp")  # trained by gradients, on tokens or PerStoreFeature


def _cell(metrics: dict, key: str) -> str:
    lo, hi, sd = metrics.get(f"{key}_ci_low"), metrics.get(f"{key}_ci_high"), metrics.get(f"{key}_seed_std")
    ci = f" [{lo:.3f}, {hi:.3f}]" if lo is not None else ""
    return f"{metrics[key]:.3f}{ci}" + (f" ±{sd:.3f}" if sd is not None else "")


def render(report: dict) -> str:
    lines = [f"Searched on the validation split ({report['rows']['validation']} programs), {report['trials']} trials "
             f"of {report['epochs']} epochs, seed {report['seed']}; MLflow run `{report['mlflow_run_id']}`.", "",
             "| trial | validation top-1 (mean/task) | s | recipe |", "|---|---|---|---|"]
    for t in sorted(report["trial_table"], key=lambda t: -t["validation_top1"]):
        lines.append(f"| {t['number']} | {t['validation_top1']:.3f} | {t['seconds']:.0f} | "
                     f"{json.dumps(t['recipe'], sort_keys=True)} |")
    seeds = report.get("final_seeds", [report["seed"]])
    lines += ["", f"Held-out test split ({report['rows']['test']} programs), each recipe trained once more for "
              f"{report['final_epochs']} epochs with seed(s) {seeds} (several: seed mean [CI of it] ± seed sd):", "",
              "| recipe | top-1 mean/task [CI] | top-1 eq.12 [CI] | top-5 mean/task [CI] | pairwise acc |",
              "|---|---|---|---|---|"]
    for name, m in report["test"].items():
        lines.append(f"| {name} | {_cell(m, 'top1_mean_per_task')} | {_cell(m, 'top1_ratio_of_sums')} | "
                     f"{_cell(m, 'top5_mean_per_task')} | {m['pairwise_accuracy']:.3f} |")
    lines += ["", f"Best recipe: `{json.dumps(report['best']['recipe'], sort_keys=True)}`.",
              f"- {provenance_line(report)}", ""]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> dict:
    from flows import _tvm_first  # noqa: F401  (before MLflow: see flows/_tvm_first.py)
    from tcl import tracking
    from tcl.config import load_params
    from tcl.data.store import atomic_write_bytes
    from tcl.features.dataset import load_split
    from tcl.models.base import predict
    from tcl.recipe import best_trial, search_recipe, train_recipe
    from tcl.train.inputs import model_inputs
    from tcl.train.evaluate import ranking_metrics

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--platform", default="zen4-avx512-1c")
    ap.add_argument("--model", default="tcl", choices=MODELS)
    ap.add_argument("--trials", type=int, default=12)
    ap.add_argument("--epochs", type=int, default=2, help="epochs of each search trial")
    ap.add_argument("--final-epochs", type=int, default=None, help="epochs of the two test runs (default --epochs)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--final-seeds", type=int, nargs="+", default=None,
                    help="training seeds of the two test runs (default --seed): the before/after with its seed spread")
    ap.add_argument("--threads", type=int, default=1, help="torch threads of every training")
    ap.add_argument("--features", default="data/features")
    ap.add_argument("--params", default="params.yaml")
    add_out_args(ap, REPORT)
    args = ap.parse_args(argv)

    params = load_params(args.params)
    directory = Path(args.features) / args.platform
    if not (directory / "train.npz").exists():
        raise SystemExit(f"{directory}: no features; run `dvc repro featurize` first")
    splits = {s: load_split(directory, s) for s in ("train", "validation", "test")}
    splits, featurizer = model_inputs(args.model, args.platform, params, directory, splits)
    rows, cols = featurizer.feature_shape
    shape = {"feat_dim": cols, "seq_len": rows}
    final_epochs = args.final_epochs or args.epochs
    final_seeds = args.final_seeds or [args.seed]
    with tracking.run(params, f"recipe-search-{args.model}-{args.platform}",
                      {"stage": "recipe_search", "platform": args.platform, "model": args.model}) as run:
        tracking.log_params({"trials": args.trials, "epochs": args.epochs, "final_epochs": final_epochs,
                             "seed": args.seed})
        trials = search_recipe(args.model, params, splits["train"], splits["validation"], trials=args.trials,
                               epochs=args.epochs, seed=args.seed, threads=args.threads, **shape)
        best = best_trial(trials)
        test = {}
        for name, recipe in (("params.yaml", {}), (f"best (trial {best.number})", best.recipe)):
            scores = [predict(train_recipe(args.model, recipe, params, splits["train"], epochs=final_epochs, seed=seed,
                                           threads=args.threads, **shape), splits["test"]["x"]) for seed in final_seeds]
            test[name] = ranking_metrics(splits["test"], scores)
        tracking.log_metrics({f"test_top1_mean_per_task_{'best' if i else 'default'}": m["top1_mean_per_task"]
                              for i, m in enumerate(test.values())})
    report = {**provenance(__file__, argv), "platform": args.platform, "model": args.model, "trials": args.trials,
              "epochs": args.epochs, "final_epochs": final_epochs, "seed": args.seed, "final_seeds": final_seeds,
              "mlflow_run_id": run.run_id, "rows": {s: int(len(a["label"])) for s, a in splits.items()},
              "trial_table": [asdict(t) for t in trials], "best": asdict(best), "test": test}
    md = f"# Recipe search: {args.model} on {args.platform}\n\n{render(report)}"
    print(md)
    out = out_path(args, REPORT) / f"{args.platform}-{args.model}"
    out.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(out.with_suffix(".json"), json.dumps(report, indent=1).encode())
    atomic_write_bytes(out.with_suffix(".md"), md.encode())
    return report


if __name__ == "__main__":
    main()
