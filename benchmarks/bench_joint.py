"""Joint training across platforms: one model on every platform's data against a model per platform.

TCL's premise is one cost model for many platforms, the hardware row of its input telling
them apart. Three ways of training, each scored on a platform's held-out test split (held-out
networks; the split is by task and the same on every platform, so no test task is trained on):

- per_platform: a model trained on platform P's training split only, scored on P;
- joint: one model trained on the union of every platform's training split, scored on each;
- lopo (leave one platform out): a joint model trained on every platform but P, scored on P
  (zero-shot: none of P's measurements is seen).

In the union a task keeps one group per platform (its programs are ranked against each other
only within one platform's measurements). Tenset-MLP's input (TVM's PerStoreFeature) has no
hardware row: the report says how many programs measured on two platforms get the same input.

`tcl_stores_hw` is `tcl_stores` with the hardware row (the tokenizer's normalized specs, as TCL's
tokens carry it) put before each program's stores: the Mamba scan reads it first, so unlike
Tenset-MLP's sum over stores the model can condition every store's score on the platform.

Each (model, setting, platform, seed) cell trains one model from scratch and writes its test scores
to `<cells>/<model>-<setting>-<platform>-s<seed>.json` (the joint cell's platform is `all`); a cell
already there is skipped, so a killed run resumes. Figures: tcl.train.evaluate (eq. 12 and mean per
task, bootstrap CIs over tasks of the seed mean, seed spread), and a random scorer per platform.
A cell trained with another recipe than params.yaml's (tcl.train.loop) is trained again, and left out of
the report for a model of this run; `--lopo P ...` trains the leave-one-out cells of those platforms only.

    python benchmarks/bench_joint.py --models tcl tenset_mlp --seeds 0 1 --epochs 8 --epochs-for tcl=2

Writes tmp/bench/joint/joint.{json,md,png}, or with --update-report the committed
reports/joint/joint.{json,md,png} (naming the data version and this command), and one MLflow run.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from benchmarks._out import composition_text, provenance_line  # noqa: E402
from benchmarks.bench_learning_curve import LABELS, _ci, cell_recipe, is_current, train_cell  # noqa: E402
from tcl import tracking  # noqa: E402
from tcl.config import load_params  # noqa: E402
from tcl.data.store import atomic_write_bytes  # noqa: E402
from tcl.features.dataset import load_split  # noqa: E402
from tcl.train.evaluate import EvalSettings, composition, random_scorer_metrics, ranking_metrics  # noqa: E402
from tcl.train.joint import platform_inputs, union  # noqa: E402

SETTINGS = ("per_platform", "joint", "lopo")
SETTING_LABELS = {"per_platform": "per-platform", "joint": "joint", "lopo": "leave-one-out"}
ALL = "all"              # the joint cell's platform field
REPORT = "reports/joint"
MODELS = ("tcl", "tenset_mlp")
BASE_MODEL = {"tcl_stores_hw": "tcl_stores"}   # benchmark variants: the registered model it trains, on other input
JOINT_LABELS = {**LABELS, "tcl_stores_hw": "TCL on stores + hardware row"}
Splits = dict[str, dict[str, np.ndarray]]


def cells_of(platforms: list[str], lopo: list[str] | None = None) -> list[tuple[str, str]]:
    """(setting, platform) of every model trained per seed: one per platform, one joint, one left out per platform
    (or per platform of `lopo` only: each costs nearly a joint model's training)."""
    return ([("per_platform", p) for p in platforms] + [("joint", ALL)]
            + [("lopo", p) for p in platforms if lopo is None or p in lopo])


def training_platforms(setting: str, platform: str, platforms: list[str]) -> list[str]:
    if setting == "per_platform":
        return [platform]
    if setting == "joint":
        return list(platforms)
    if setting == "lopo":
        return [p for p in platforms if p != platform]
    raise ValueError(f"unknown setting {setting!r}; choose from {SETTINGS}")


def scored_platforms(setting: str, platform: str, platforms: list[str]) -> list[str]:
    return list(platforms) if setting == "joint" else [platform]


def check_held_out(train: dict[str, np.ndarray], tests: Splits, setting: str, platform: str) -> None:
    """Fail if a scored platform's test task is in the training set, or a left-out platform's rows are."""
    if setting == "lopo" and platform in set(train["platform"]):
        raise ValueError(f"leave-one-out of {platform}: its training rows are in the training set")
    for p, test in tests.items():
        leaked = np.intersect1d(test["task_key"], train["task_key"])
        if len(leaked):
            raise ValueError(f"data/features/{p}/test.npz: {len(leaked)} test task(s) are in the training set "
                             f"of {setting}/{platform} (e.g. {leaked[0]}); the features' split is broken")


def with_hardware_row(inputs: Splits, params: dict[str, Any], hardware) -> Splits:
    """Each platform's inputs with one row first: its spec vector as `hardware` (the tokenizer's
    HardwareNormalizer) normalizes it for TCL's tokens (TCL §5.1)."""
    from tcl.platforms import get_platform

    out = {}
    for p, splits in inputs.items():
        width = next(iter(splits.values()))["x"].shape[2]
        row = hardware.transform(get_platform(params, p).spec_vector, cols=width)[0]
        out[p] = {name: {**s, "x": np.concatenate([np.broadcast_to(row, (len(s["x"]), 1, width)), s["x"]], axis=1)}
                  for name, s in splits.items()}
    return out


def platform_visibility(inputs: Splits) -> dict[str, Any]:
    """Of the training programs measured on two platforms (same program id), how many get different
    inputs: 1.0 means the model can tell every such pair apart, 0.0 that it sees one program twice
    with two labels."""
    names = list(inputs)
    pairs, differ = 0, 0
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            ta, tb = inputs[a]["train"], inputs[b]["train"]
            shared, ia, ib = np.intersect1d(ta["program_id"], tb["program_id"], return_indices=True)
            pairs += len(shared)
            differ += int(np.any((ta["x"][ia] != tb["x"][ib]).reshape(len(shared), -1), axis=1).sum())
    return {"shared_programs": pairs, "different_inputs": differ, "share": differ / pairs if pairs else math.nan}


def cell_path(cells_dir: Path, model: str, setting: str, platform: str, seed: int) -> Path:
    return cells_dir / f"{model}-{setting}-{platform}-s{seed}.json"


def run_cells(model_name: str, inputs: Splits, params: dict[str, Any], seeds: list[int], epochs: int,
              cells_dir: Path, log=print, lopo: list[str] | None = None) -> None:
    """Train every cell of `model_name` not yet in `cells_dir` with its recipe (one JSON each)."""
    platforms = list(inputs)
    recipe = cell_recipe(params, BASE_MODEL.get(model_name, model_name), epochs)
    cells_dir.mkdir(parents=True, exist_ok=True)
    trains = {p: inputs[p]["train"] for p in platforms}
    for seed in seeds:
        for setting, platform in cells_of(platforms, lopo):
            path = cell_path(cells_dir, model_name, setting, platform, seed)
            if is_current(path, recipe):
                continue
            train = union(trains, training_platforms(setting, platform, platforms))
            scored = scored_platforms(setting, platform, platforms)
            check_held_out(train, {p: inputs[p]["test"] for p in scored}, setting, platform)
            x_test = np.concatenate([inputs[p]["test"]["x"] for p in scored])
            scores, seconds = train_cell(BASE_MODEL.get(model_name, model_name), train["x"], train,
                                         np.arange(len(train["label"])), x_test, train["x"].shape[1:], params,
                                         epochs, seed)
            ends = np.cumsum([len(inputs[p]["test"]["label"]) for p in scored])
            by_platform = dict(zip(scored, np.split(scores, ends[:-1])))
            cell = {"model": model_name, "setting": setting, "platform": platform, "seed": seed, "epochs": epochs,
                    "recipe": recipe,
                    "train_platforms": sorted(set(train["platform"])), "train_programs": int(len(train["label"])),
                    "train_tasks": int(len(np.unique(train["task_key"]))), "train_seconds": seconds,
                    "scores": {p: [float(v) for v in s] for p, s in by_platform.items()}}
            atomic_write_bytes(path, json.dumps(cell).encode())
            tops = ", ".join(f"{p} {ranking_metrics(inputs[p]['test'], s, ks=(1,), settings=EvalSettings(bootstrap=0))['top1_mean_per_task']:.3f}"
                             for p, s in by_platform.items())
            log(f"{model_name} {setting} {platform} seed {seed}: {len(train['label'])} programs, {seconds:.1f} s; "
                f"top-1 mean/task {tops}")


def aggregate(tests: Splits, cells_dir: Path, settings: EvalSettings, recipes: dict[str, dict] | None = None,
              log=print) -> list[dict[str, Any]]:
    """One point per (model, setting, scored platform): the seeds' figures over every cell found, except the
    cells of a model in `recipes` trained with another recipe (one point never mixes two recipes)."""
    by_point: dict[tuple[str, str, str], list[tuple[dict, np.ndarray]]] = {}
    for path in sorted(cells_dir.glob("*-s*.json")):
        cell = json.loads(path.read_text())
        if recipes and cell["model"] in recipes and cell.get("recipe") != recipes[cell["model"]]:
            log(f"{path.name}: trained with another recipe than params.yaml's for {cell['model']}; left out")
            continue
        for p, scores in cell["scores"].items():
            if p not in tests:
                continue
            if len(scores) != len(tests[p]["label"]):
                raise ValueError(f"{path}: {len(scores)} scores for {len(tests[p]['label'])} test programs of {p}: "
                                 "the features changed since it was trained; delete the cells directory")
            by_point.setdefault((cell["model"], cell["setting"], p), []).append((cell, np.array(scores)))
    points = []
    for (model, setting, p), runs in by_point.items():
        runs.sort(key=lambda r: r[0]["seed"])
        cells = [c for c, _ in runs]
        figures = ranking_metrics(tests[p], [s for _, s in runs], ks=(1, 5), settings=settings)
        points.append({"model": model, "setting": setting, "platform": p, "seeds": [c["seed"] for c in cells],
                       "epochs": cells[0]["epochs"], "train_platforms": cells[0]["train_platforms"],
                       "train_programs": cells[0]["train_programs"], "train_tasks": cells[0]["train_tasks"],
                       "train_seconds": float(np.mean([c["train_seconds"] for c in cells])), **figures})
    order = {s: i for i, s in enumerate(SETTINGS)}
    points.sort(key=lambda q: (list(tests).index(q["platform"]), q["model"], order[q["setting"]]))
    return points


def render(report: dict[str, Any]) -> str:
    """The markdown table (also what is printed)."""
    head = ["platform", "model", "trained", "on", "programs", "tasks", "seeds", "epochs", "top-1 eq.12 [CI] ±seed sd",
            "top-1 mean/task [CI]", "top-5 eq.12 [CI]", "top-5 mean/task [CI]", "train s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for platform in report["platforms"]:
        for p in (q for q in report["points"] if q["platform"] == platform):
            on = "all" if p["setting"] == "joint" else ("all but this" if p["setting"] == "lopo" else "this")
            lines.append("| " + " | ".join([platform, JOINT_LABELS.get(p["model"], p["model"]),
                                            SETTING_LABELS[p["setting"]],
                                            on, str(p["train_programs"]), str(p["train_tasks"]), str(len(p["seeds"])),
                                            str(p["epochs"]), _ci(p, "top1_ratio_of_sums"),
                                            _ci(p, "top1_mean_per_task"), _ci(p, "top5_ratio_of_sums"),
                                            _ci(p, "top5_mean_per_task"), f"{p['train_seconds']:.1f}"]) + " |")
        floor = report["random"][platform]
        lines.append(f"| {platform} | random scorer | - | - | - | - | 20 | - | {_ci(floor, 'top1_ratio_of_sums')} | "
                     f"{_ci(floor, 'top1_mean_per_task')} | {_ci(floor, 'top5_ratio_of_sums')} | "
                     f"{_ci(floor, 'top5_mean_per_task')} | - |")
    lines += ["", "Top-1 mean per task against the per-platform model (point figures; the CIs above are per figure, "
              "not of the difference):", "", "| platform | model | joint - per-platform | leave-one-out - per-platform |",
              "|---|---|---|---|"]
    for d in report["deltas"]:
        lines.append(f"| {d['platform']} | {JOINT_LABELS.get(d['model'], d['model'])} | {d['joint']:+.3f} | "
                     f"{d['lopo']:+.3f} |")
    lines += [""]
    for platform in report["platforms"]:
        comp = report["test_composition"][platform]
        lines.append(f"- {platform} held-out test split: {composition_text(comp)}.")
    for model, v in report["platform_visibility"].items():
        lines.append(f"- {JOINT_LABELS.get(model, model)}: of {v['shared_programs']} (program, platform pair) "
                     f"training programs measured on two platforms, {v['different_inputs']} ({v['share']:.0%}) get different "
                     "inputs" + ("" if v["share"] > 0 else ": the joint model cannot tell the platforms apart"))
    lines += [f"- CIs: {report['eval']['ci']:.0%} percentile bootstrap, "
              f"{report['eval']['bootstrap']} draws over held-out tasks, of the mean over seeds; ± is the seed "
              "standard deviation. Every setting trains the same epochs, so a joint model takes more steps.",
              f"- {provenance_line(report)}"]
    if report.get("notes"):
        lines += [f"- {n}" for n in report["notes"]]
    return "\n".join(lines) + "\n"


def deltas(points: list[dict[str, Any]], metric: str = "top1_mean_per_task") -> list[dict[str, Any]]:
    """Joint and leave-one-out minus per-platform, per (platform, model) where all three were trained."""
    at = {(p["platform"], p["model"], p["setting"]): p[metric] for p in points}
    out = []
    for platform, model in dict.fromkeys((p["platform"], p["model"]) for p in points):
        if all((platform, model, s) in at for s in SETTINGS):
            base = at[(platform, model, "per_platform")]
            out.append({"platform": platform, "model": model, "joint": at[(platform, model, "joint")] - base,
                        "lopo": at[(platform, model, "lopo")] - base})
    return out


def plot(report: dict[str, Any], path: Path) -> None:
    """Grouped bars per platform (per-platform, joint, leave-one-out, random) with CI whiskers, a panel per
    (figure, model)."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(p["model"] for p in report["points"]))
    metrics = [("top1_ratio_of_sums", "top-1 eq. 12"), ("top1_mean_per_task", "top-1 mean per task")]
    fig, grid = plt.subplots(len(metrics), len(models), figsize=(6.5 * len(models), 8), squeeze=False)
    platforms = report["platforms"]
    bars = [*SETTINGS, "random"]
    width = 0.8 / len(bars)
    for col, model in enumerate(models):
        for row, (m, title) in enumerate(metrics):
            ax = grid[row][col]
            for i, bar in enumerate(bars):
                found = [report["random"][pl] if bar == "random" else
                         next((p for p in report["points"] if (p["model"], p["setting"], p["platform"]) ==
                               (model, bar, pl)), None) for pl in platforms]
                y = np.array([f[m] if f else np.nan for f in found])
                err = np.array([[f[m] - f.get(f"{m}_ci_low", f[m]) if f else 0 for f in found],
                                [f.get(f"{m}_ci_high", f[m]) - f[m] if f else 0 for f in found]])
                ax.bar(np.arange(len(platforms)) + (i - (len(bars) - 1) / 2) * width, y, width, yerr=err, capsize=2,
                       label=SETTING_LABELS.get(bar, "random scorer"), color="grey" if bar == "random" else f"C{i}")
            ax.set_xticks(np.arange(len(platforms)), platforms, fontsize=8)
            ax.set_ylabel(f"held-out {title}")
            ax.set_title(JOINT_LABELS.get(model, model))
            ax.set_ylim(0, 1)
            ax.grid(axis="y", alpha=0.3)
            ax.legend(fontsize=7)
    fig.suptitle(f"One model for every platform vs one per platform ({report['eval']['ci']:.0%} bootstrap CI over "
                 "tasks, mean of seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report_of(tests: Splits, params: dict[str, Any], cells_dir: Path, visibility: dict[str, Any],
              prov: dict[str, Any], notes: list[str], recipes: dict[str, dict] | None = None) -> dict[str, Any]:
    settings = EvalSettings.from_params(params)
    points = aggregate(tests, cells_dir, settings, recipes)
    return {"platforms": list(tests), **prov,
            "eval": {"bootstrap": settings.bootstrap, "ci": settings.ci, "seed": settings.seed},
            "test_composition": {p: composition(t) for p, t in tests.items()},
            "random": {p: random_scorer_metrics(t, settings=settings) for p, t in tests.items()},
            "platform_visibility": visibility, "points": points, "deltas": deltas(points), "notes": notes}


def main(argv: list[str] | None = None) -> None:
    from benchmarks._out import add_epochs_args, add_out_args, epochs_by_model, out_path, provenance, write_report

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--platforms", nargs="+", default=None, help="default: params.yaml train.platforms")
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=sorted(JOINT_LABELS))
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1])
    ap.add_argument("--lopo", nargs="+", default=None,
                    help="train leave-one-out cells for these platforms only (default: every platform)")
    add_epochs_args(ap, "tcl=2")
    ap.add_argument("--cells", type=Path, default=REPO / "tmp" / "joint", help="per-cell JSONs")
    add_out_args(ap, REPORT)
    ap.add_argument("--note", action="append", default=[], help="a line for the report (e.g. why epochs are lower)")
    ap.add_argument("--params", default=str(REPO / "params.yaml"))
    args = ap.parse_args(argv)
    params = load_params(args.params)
    platforms = args.platforms or list(params["train"]["platforms"])
    epochs_of = epochs_by_model(args, params, JOINT_LABELS)
    prov = provenance(__file__, argv)  # the data as locked when the run starts
    features_root, records_root = REPO / "data" / "features", REPO / "data" / "records"
    import torch
    torch.set_num_threads(1)
    with tracking.run(params, "joint-platforms", {"stage": "joint"}):
        tracking.log_params({"platforms": ",".join(platforms), "models": ",".join(args.models),
                             "seeds": ",".join(map(str, args.seeds)), **{f"epochs.{m}": e for m, e in epochs_of.items()},
                             "data_version": prov["data_version"]})
        visibility = {}
        for model_name in args.models:
            inputs, _ = platform_inputs(BASE_MODEL.get(model_name, model_name), platforms, params, features_root,
                                        records_root=records_root)
            if model_name in BASE_MODEL:
                from tcl.features.tokenizer import Tokenizer
                inputs = with_hardware_row(inputs, params, Tokenizer.load(features_root / "tokenizer.json").hardware)
            visibility[model_name] = platform_visibility(inputs)
            run_cells(model_name, inputs, params, args.seeds, epochs_of[model_name], args.cells, lopo=args.lopo)
        tests = {p: load_split(features_root / p, "test") for p in platforms}
        recipes = {m: cell_recipe(params, BASE_MODEL.get(m, m), epochs_of[m]) for m in args.models}
        report = report_of(tests, params, args.cells, visibility, prov, args.note, recipes)
        for p in report["points"]:
            tracking.log_metrics({f"{p['model']}.{p['setting']}.{p['platform']}.{k}": v for k, v in p.items()
                                  if k.startswith(("top1_", "top5_")) and math.isfinite(v)})
        out = out_path(args, REPORT)
        out.mkdir(parents=True, exist_ok=True)
        base = out / "joint"
        md = render(report)
        write_report(base, report, "Joint training across platforms", md, plot, tracking)
    print(md)


if __name__ == "__main__":
    main()
