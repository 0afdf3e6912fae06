"""A platform no model has trained on: how well each other platform's registered champion ranks
the programs measured there, and whether the tune stage's choice among them is the right one.

For a platform with measurements but no model of its own (a new CPU after a first `make collect`),
every champion of every other platform of the same kind is scored zero-shot on its validated
programs (beside the platform's own champion where it has one): the tasks of the held-out networks
(`test`, which no model trained on, on any platform) and the other tasks (`select`). Beside them, a
random scorer, and the source platform's own best program of each task run here (pick-on-source
top-1, tcl/data/agreement.py: how alike the two platforms rank). Two ways to choose a source are
then scored on `test`: tcl/tvm/select.py's rule (the source model's lift on its own held-out split,
weighed by evidence), and the source whose model ranks the target's `select` tasks best (a few
measured tasks of other networks).

    python benchmarks/bench_new_platform.py --platform zen3-avx2-1c [--models tenset_mlp xgb tcl_stores]
        [--fit emr-avx2-1c zen4-avx2-1c,emr-avx2-1c zen3-avx2-1c ...] [--seeds 0 1] [--save-fit DIR] [--update-report]

`--fit` answers what a wider knowledge base would give the target: for each comma-separated set of
platforms, a pretrained XGB (train.hparams.xgb) is fitted on their training splits, whether a model
of theirs is registered or not (emr-avx2-1c is validated, not trained), and scored beside the
champions over `--seeds`. The target itself may be in a set: it then lends its `select` programs
(never `test`'s), and that row's `select` figures are training figures. `--save-fit DIR` keeps each
set's seed-0 model as a bundle a tuning run can pin (tune.bundles: {pretrained_xgb: DIR/<set>}).

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


def source_train_split(params: dict, source, work: Path) -> dict[str, np.ndarray]:
    """A source platform's training split with its PerStoreFeature rows (featurized in `work`)."""
    from tcl.features.dataset import featurize_platforms, load_split

    featurize_platforms([source], params, "data/validated", "data/records", work / source.name)
    train = {"train": load_split(work / source.name / source.name, "train")}
    return store_inputs(params, source.name, train, work / source.name)["train"]


def fit_xgb(params: dict, target, sources: list[str], programs: dict[str, dict], splits: dict, seeds: list[int],
            save_dir: str | None) -> dict:
    """A pretrained XGB fitted on `sources`' training programs (`programs[p]`; the target's `select` for the
    target), scored on the target's splits for each seed: {programs, tasks, seeds: {seed: {split: metrics}}}."""
    from tcl.models import build_model
    from tcl.models.base import predict
    from tcl.train.evaluate import ranking_metrics
    from tcl.train.joint import union, widen
    from tcl.train.loop import model_hparams

    width = max(programs[p]["x"].shape[1] for p in sources)
    train = union({p: {**programs[p], "x": widen(programs[p]["x"], width)} for p in sources}, sources)
    out = {"programs": int(len(train["label"])), "tasks": int(len(np.unique(train["group"]))), "seeds": {}}
    for seed in seeds:
        model = build_model("xgb", feat_dim=train["x"].shape[2], seq_len=None, **model_hparams(params, "xgb"))
        model.fit_ranker(train["x"], train["label"], train["group"], seed=seed, threads=1)
        out["seeds"][seed] = {s: ranking_metrics(a, predict(model, a["x"])) for s, a in splits.items()}
        print(f"xgb fitted on {','.join(sources)} seed {seed}: top-1 mean/task select "
              f"{out['seeds'][seed]['select']['top1_mean_per_task']:.3f}, test "
              f"{out['seeds'][seed]['test']['top1_mean_per_task']:.3f}", flush=True)
        if save_dir and seed == seeds[0]:
            save_fitted(model, train, target, sources, Path(save_dir) / "+".join(sources))
    return out


def save_fitted(model, train: dict, target, sources: list[str], directory: Path) -> None:
    """The fitted model as a bundle for the target platform (what `tune.bundles` pins)."""
    from tcl.features.per_store import PerStoreFeaturizer
    from tcl.models.bundle import ModelBundle

    ModelBundle.fitted("xgb", model, PerStoreFeaturizer(train["x"].shape[1]), target, train, fitted_on=sources,
                       command="python " + " ".join(sys.argv)).save(directory)
    print(f"saved {directory}", flush=True)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--platform", default="zen3-avx2-1c")
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=MODELS)
    ap.add_argument("--fit", nargs="*", default=[], metavar="P1,P2",
                    help="platform sets to fit a pretrained XGB on (their training splits), scored beside the champions")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0], help="XGB seeds of each --fit set (its trees are "
                    "deterministic under a seed; they sample no rows or columns)")
    ap.add_argument("--save-fit", default=None, help="keep each --fit set's seed-0 model as a bundle under this dir")
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
    champions = {model: {p.name: found.version for p in platforms.values()
                         if p.kind == target.kind
                         and (found := tracking.registry.champion(tracking.registered_name(prefix, p.name, model)))}
                 for model in args.models}
    missing = [model for model, found in champions.items() if not found]
    if missing:  # checked before the featurizing and fitting, which take minutes
        raise SystemExit(f"no registered champion of {missing} for any other {target.kind} platform in the MLflow "
                         "registry (MLFLOW_TRACKING_URI, else params.yaml tracking.mlflow_uri; python -m "
                         "flows.register fills it)")
    fit_sets = [f.split(",") for f in args.fit]
    unknown = sorted({p for f in fit_sets for p in f if p not in platforms or platforms[p].kind != target.kind})
    if unknown:
        raise SystemExit(f"--fit: {unknown} are not {target.kind} platforms of params.yaml platforms")
    with tempfile.TemporaryDirectory() as tmp:
        splits = store_inputs(params, target.name, target_splits(params, target, Path(tmp)), Path(tmp))
        # each platform featurized once, however many sets name it
        programs = {p: splits["select"] if p == target.name else source_train_split(params, platforms[p], Path(tmp))
                    for p in dict.fromkeys(p for f in fit_sets for p in f)}
        fitted = {",".join(f): fit_xgb(params, target, f, programs, splits, args.seeds, args.save_fit)
                  for f in fit_sets}
    result = {"platform": target.name, **provenance(__file__), "agreement": agreement,
              "tasks": {s: int(len(np.unique(a["group"]))) for s, a in splits.items()},
              "programs": {s: int(len(a["label"])) for s, a in splits.items()},
              "random": {s: random_scorer_metrics(a) for s, a in splits.items()}, "fitted": fitted, "models": {}}
    for model in args.models:
        rows = {}
        for source, version in champions[model].items():
            bundle = load_bundle(f"models:/{tracking.registered_name(prefix, source, model)}/{version}")
            rows[source] = {"version": str(version),
                            **{s: ranking_metrics(a, predict(bundle.model, a["x"])) for s, a in splits.items()}}
            print(f"{model} of {source}: top-1 mean/task select {rows[source]['select']['top1_mean_per_task']:.3f}"
                  f", test {rows[source]['test']['top1_mean_per_task']:.3f}", flush=True)
        # the target's own model is no candidate: its select figures are training figures
        others = [q for q in rows if q != target.name] or list(rows)
        best_here = max(others, key=lambda q: rows[q]["select"]["top1_mean_per_task"])
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
    own = any(t in m["sources"] for m in r["models"].values())
    lines = [f"# Models of other platforms on {t}, zero-shot", "",
             (f"{t} has a model of its own (its row: trained on its `select` programs, so its `select` figures "
              "are training figures). " if own else f"{t} has no model of its own. ")
             + f"Every other platform's champion ranks {t}'s measured programs: "
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
    if r.get("fitted"):
        lines += render_fitted(r)
    lines.append(provenance_line(r))
    return "\n".join(lines) + "\n"


def render_fitted(r: dict) -> list[str]:
    """The --fit rows: a pretrained XGB per platform set, mean +- std over its seeds."""
    t = r["platform"]
    lines = ["## xgb fitted on other knowledge bases", "",
             f"A pretrained XGB (train.hparams.xgb) fitted on each set's training programs; {t} in a set lends its "
             "`select` programs (so its `select` figures are training figures), never `test`'s. Mean +- std over "
             "the seeds.", "", "| fitted on | programs | tasks | seeds | "
             + " | ".join(f"{label} {s}" for s in SPLITS for _, label in FIGURES) + " |", "|---" * (4 + 2 * len(FIGURES)) + "|"]
    for sources, f in r["fitted"].items():
        runs = list(f["seeds"].values())

        def cell(split: str, key: str) -> str:
            v = np.asarray([run[split].get(key, np.nan) for run in runs], dtype=float)
            return f"{v.mean():.3f}" + (f" +- {v.std(ddof=1):.3f}" if len(v) > 1 else "")

        lines.append(f"| {sources} | {f['programs']} | {f['tasks']} | {len(runs)} | "
                     + " | ".join(cell(s, k) for s in SPLITS for k, _ in FIGURES) + " |")
    return lines + [""]


if __name__ == "__main__":
    main()
