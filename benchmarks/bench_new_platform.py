"""A platform no model has trained on: how well each other platform's registered champion ranks
the programs measured there, and whether the tune stage's choice among them is the right one.

For a platform with measurements but no model of its own (a new CPU after a first `make collect`),
every champion of every other platform of the same kind is scored zero-shot on its validated
programs: the tasks of the held-out networks (`test`, which no model trained on, on any platform)
and the other tasks (`select`). Beside them, a random scorer, and the source platform's own best
program of each task run here (pick-on-source top-1, tcl/data/agreement.py: how alike the two
platforms rank). Two ways to choose a source are then scored on `test`: tcl/tvm/select.py's rule
(the source model's lift on its own held-out split, weighed by evidence), and the source whose
model ranks the target's `select` tasks best (a few measured tasks of other networks).

    python benchmarks/bench_new_platform.py --platform zen3-avx2-1c [--models tenset_mlp xgb tcl_stores]
        [--update-report]

Needs the target's validated records (`dvc repro validate@<platform>`) and the registry
(`python -m flows.register`). Only models on TVM's PerStoreFeature are scored: token models read a
tokenizer fitted on the training platforms, which the target's records were not featurized with.
Writes tmp/bench/new_platform/<platform>.{json,md}, or with --update-report reports/new_platform/.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._out import add_out_args, out_path, provenance, provenance_line  # noqa: E402

MODELS = ("tenset_mlp", "xgb", "tcl_stores")
FIGURES = (("top1_mean_per_task", "top-1 mean/task"), ("top1_ratio_of_sums", "top-1 eq. 12"),
           ("top5_mean_per_task", "top-5 mean/task"))


SPLITS = ("select", "test")


def target_splits(params: dict, target, work: Path) -> dict[str, dict[str, np.ndarray]]:
    """The target's programs as the featurize stage would split them: `test` (the held-out networks'
    tasks) and `select` (train and validation stacked: tasks of the other networks)."""
    from tcl.features.dataset import featurize_platforms, load_split

    featurize_platforms([target], params, "data/validated", "data/records", work)
    train, val = (load_split(work / target.name, s) for s in ("train", "validation"))
    # each split numbers its groups from 0: validation's go past train's before stacking
    offset = int(train["group"].max()) + 1 if len(train["group"]) else 0
    select = {k: np.concatenate([train[k], val[k] + offset if k == "group" else val[k]]) for k in train}
    return {"select": select, "test": load_split(work / target.name, "test")}


def store_inputs(params: dict, target: str, splits: dict, work: Path) -> dict[str, dict[str, np.ndarray]]:
    from tcl.features import per_store
    from tcl.train.inputs import workload_stores

    stores, _ = per_store.split_features(target, Path("data/validated") / f"platform={target}.parquet",
                                         workload_stores(params), splits, work / "per_store_cache.parquet")
    return {name: {**arrays, "x": per_store.pad_stores(stores[name])} for name, arrays in splits.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--platform", default="zen3-avx2-1c")
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    ap.add_argument("--params", default=str(REPO / "params.yaml"))
    add_out_args(ap, "reports/new_platform")
    args = ap.parse_args()

    import yaml

    from tcl import tracking
    from tcl.data.agreement import agreement_into
    from tcl.models.base import predict
    from tcl.platforms import load_platforms
    from tcl.train.evaluate import random_scorer_metrics, ranking_metrics
    from tcl.tvm.cost_model import load_bundle
    from tcl.tvm.select import select_model

    params = yaml.safe_load(Path(args.params).read_text())
    platforms = load_platforms(params)
    target = platforms[args.platform]
    prefix = params["registry"]["prefix"]
    agreement = agreement_into("data/records", target.name)
    with tempfile.TemporaryDirectory() as tmp:
        splits = store_inputs(params, target.name, target_splits(params, target, Path(tmp)), Path(tmp))
    result = {"platform": target.name, **provenance(__file__), "agreement": agreement,
              "tasks": {s: int(len(np.unique(a["group"]))) for s, a in splits.items()},
              "programs": {s: int(len(a["label"])) for s, a in splits.items()},
              "random": {s: random_scorer_metrics(a) for s, a in splits.items()}, "models": {}}
    for model in args.models:
        rows = {}
        for p in platforms.values():
            if p.kind != target.kind or p.name == target.name:
                continue
            found = tracking.registry.champion(tracking.registered_name(prefix, p.name, model))
            if found is None:
                continue
            bundle = load_bundle(f"models:/{tracking.registered_name(prefix, p.name, model)}/{found.version}")
            rows[p.name] = {"version": str(found.version),
                            **{s: ranking_metrics(a, predict(bundle.model, a["x"])) for s, a in splits.items()}}
            print(f"{model} of {p.name}: top-1 mean/task select {rows[p.name]['select']['top1_mean_per_task']:.3f}"
                  f", test {rows[p.name]['test']['top1_mean_per_task']:.3f}", flush=True)
        best_here = max(rows, key=lambda q: rows[q]["select"]["top1_mean_per_task"])
        picks = {"tcl/tvm/select.py (the source's own held-out lift)": select_model(target, platforms, prefix,
                                                                                     model).platform,
                 f"best on {target.name}'s select tasks": best_here}
        result["models"][model] = {"sources": rows, "picks": picks}
    from tcl.data.store import atomic_write_bytes

    base = out_path(args, "reports/new_platform") / target.name
    base.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(base.with_suffix(".json"), json.dumps(result, indent=1, default=float).encode())
    atomic_write_bytes(base.with_suffix(".md"), render(result).encode())
    print(f"wrote {base}.md")


def render(r: dict) -> str:
    t = r["platform"]
    lines = [f"# Models of other platforms on {t}, zero-shot", "",
             f"{t} has no model of its own. Every other platform's champion ranks {t}'s measured programs: "
             f"`test` = the held-out networks' tasks ({r['tasks']['test']} tasks, {r['programs']['test']} programs; "
             f"no model trained on them, on any platform), `select` = the other tasks measured there "
             f"({r['tasks']['select']} tasks, {r['programs']['select']} programs). `source's picks`: the source "
             "platform's own best program of each task, run here (best latency here / its latency here, mean "
             "over the tasks both measured, their number in brackets).", ""]
    for model, m in r["models"].items():
        lines += [f"## {model}", "", "| source platform | version | source's picks (tasks) | "
                  + " | ".join(f"{label} {s}" for s in SPLITS for _, label in FIGURES) + " |",
                  "|---" * (3 + 2 * len(FIGURES)) + "|"]
        rand = r["random"]
        lines.append("| random scorer | | | " + " | ".join(f"{rand[s].get(k, float('nan')):.3f}" for s in SPLITS
                                                         for k, _ in FIGURES) + " |")
        for p, row in sorted(m["sources"].items(), key=lambda kv: -kv[1]["select"]["top1_mean_per_task"]):
            a = r["agreement"].get(p)
            ceiling = f"{a['pick_top1']:.3f} ({a['tasks']})" if a else "-"
            lines.append(f"| {p} | {row['version']} | {ceiling} | " + " | ".join(
                f"{row[s].get(k, float('nan')):.3f}" for s in SPLITS for k, _ in FIGURES) + " |")
        best_test = max(m["sources"], key=lambda q: m["sources"][q]["test"]["top1_mean_per_task"])
        lines += ["", "Chosen, and its top-1 mean/task on `test`: " + "; ".join(
            f"{how}: **{p}** {m['sources'][p]['test']['top1_mean_per_task']:.3f}" for how, p in m["picks"].items())
            + f" (best source on `test`: {best_test} "
              f"{m['sources'][best_test]['test']['top1_mean_per_task']:.3f}).", ""]
    lines.append(provenance_line(r))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    main()
