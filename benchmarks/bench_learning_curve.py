"""Learning curves: held-out top-1/top-5 against the amount of training data, per cost model.

Says whether data or the model limits each model, and what a doubling of the data buys.
Two axes, the held-out test split (held-out networks) fixed throughout:

- programs: every training task keeps that share of its programs (at least 2, so a task
  still ranks something), drawn with the cell's seed;
- tasks: that share of the training tasks, whole, drawn with the cell's seed.

Each (model, axis, fraction, seed) cell trains one model from scratch and writes its test
scores and recipe to `<cells>/<model>-<axis>-<fraction>-s<seed>.json`; a cell already there
with the same recipe is skipped, so a killed run resumes (one trained with another recipe,
e.g. before params.yaml changed, is trained again). The figures (tcl.train.evaluate: eq. 12,
mean per network, mean per task, bootstrap CIs over tasks, seed mean and spread) aggregate the
seeds of each point.

    python benchmarks/bench_learning_curve.py --platform zen4-avx512-1c --models tenset_mlp mlp xgb \
        --axes programs --fractions 5 10 20 50 100 --seeds 0 1 2 --epochs 8 --epochs-for tcl=3

Writes tmp/bench/learning_curve/<platform>.{json,md,png}, or with --update-report the committed
reports/learning_curve/<platform>.{json,md,png} (naming the data version and this command), and
one MLflow run through tcl.tracking.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tcl import tracking  # noqa: E402
from tcl.config import load_params  # noqa: E402
from benchmarks._out import composition_text, provenance_line  # noqa: E402
from tcl.data.store import atomic_write_bytes  # noqa: E402
from tcl.features.dataset import load_split  # noqa: E402
from tcl.train.evaluate import EvalSettings, composition, random_scorer_metrics, ranking_metrics  # noqa: E402

LABELS = {"tcl": "TCL", "tlp": "TLP", "mlp": "MLP", "tenset_mlp": "Tenset-MLP", "xgb": "XGB (pretrained)",
          "pacm": "PaCM", "tcl_stores": "TCL on stores"}
AXES = ("programs", "tasks")
REPORT = "reports/learning_curve"   # the committed report's directory (--update-report)


def subsample(train: dict[str, np.ndarray], axis: str, fraction: float, seed: int) -> np.ndarray:
    """Row indices of `train` kept at `fraction` on `axis` (see the module docstring)."""
    rng = np.random.default_rng(seed)
    groups = np.unique(train["group"])
    if axis == "tasks":
        keep = rng.choice(groups, size=max(1, round(fraction * len(groups))), replace=False)
        return np.flatnonzero(np.isin(train["group"], keep))
    if axis != "programs":
        raise ValueError(f"unknown axis {axis!r}; choose from {AXES}")
    rows = []
    for g in groups:
        members = np.flatnonzero(train["group"] == g)
        n = min(len(members), max(2, round(fraction * len(members))))
        rows.append(np.sort(rng.choice(members, size=n, replace=False)))
    return np.concatenate(rows)


def cell_recipe(params: dict[str, Any], model_name: str, epochs: int) -> dict[str, Any]:
    """What a cell's scores depend on besides its data and seed: the model's optimizer settings and
    hyperparameters from params.yaml (a cell trained with other ones is stale), as a cell's JSON reads back."""
    from dataclasses import asdict

    from tcl.train.loop import TrainConfig, model_hparams

    optimizer = asdict(TrainConfig.from_params(params, model_name, epochs=epochs))
    recipe = {**{k: v for k, v in optimizer.items() if k not in ("seed", "threads", "device")},
              "hparams": model_hparams(params, model_name)}
    return json.loads(json.dumps(recipe))


def is_current(path: Path, recipe: dict[str, Any]) -> bool:
    """Whether the cell at `path` exists and was trained with `recipe`."""
    return path.exists() and json.loads(path.read_text()).get("recipe") == recipe


def train_cell(model_name: str, x_train: np.ndarray, train: dict[str, np.ndarray], rows: np.ndarray,
               x_test: np.ndarray, feature_shape: tuple[int, int], params: dict[str, Any], epochs: int,
               seed: int) -> tuple[np.ndarray, float]:
    """(test scores, training seconds) of one model trained on `rows` of the training split."""
    from tcl.models import build_model
    from tcl.train.loop import TrainConfig, fit, model_hparams
    from tcl.models.base import predict

    hparams = model_hparams(params, model_name)
    tcfg = TrainConfig.from_params(params, model_name, epochs=epochs, seed=seed, threads=1)
    seq_len, feat_dim = feature_shape
    model = build_model(model_name, feat_dim=feat_dim, seq_len=seq_len, seed=seed, **hparams)
    x, label, group = x_train[rows], train["label"][rows], train["group"][rows]
    start = time.perf_counter()
    if getattr(model, "trains_by_gradient", True):
        fit(model, x, label, group, tcfg)
    else:
        model.fit_ranker(x, label, group, seed=seed, threads=1)
    return predict(model, x_test), time.perf_counter() - start


def run_cells(platform: str, params: dict[str, Any], models: list[str], axes: list[str], fractions: list[float],
              seeds: list[int], epochs_of: dict[str, int], cells_dir: Path, log=print) -> None:
    """Train every cell not yet in `cells_dir` (one JSON each)."""
    from tcl.train.inputs import model_inputs

    features_dir = REPO / "data" / "features" / platform
    base = {s: load_split(features_dir, s) for s in ("train", "test")}
    cells_dir.mkdir(parents=True, exist_ok=True)
    for model_name in models:
        recipe = cell_recipe(params, model_name, epochs_of[model_name])
        todo = [(a, f, s) for a in axes for f in fractions for s in seeds
                if not is_current(cell_path(cells_dir, model_name, a, f, s), recipe)]
        if not todo:
            continue
        splits, featurizer = model_inputs(model_name, platform, params, features_dir, dict(base),
                                          records_root=REPO / "data" / "records", log=log)
        for axis, fraction, seed in todo:
            rows = subsample(base["train"], axis, fraction, seed)
            scores, seconds = train_cell(model_name, splits["train"]["x"], base["train"], rows, splits["test"]["x"],
                                         featurizer.feature_shape, params, epochs_of[model_name], seed)
            cell = {"model": model_name, "axis": axis, "fraction": fraction, "seed": seed,
                    "epochs": epochs_of[model_name], "recipe": recipe, "train_programs": int(len(rows)),
                    "train_tasks": int(len(np.unique(base["train"]["group"][rows]))), "train_seconds": seconds,
                    "scores": [float(s) for s in scores]}
            atomic_write_bytes(cell_path(cells_dir, model_name, axis, fraction, seed), json.dumps(cell).encode())
            top1 = ranking_metrics(base["test"], scores, ks=(1,), settings=EvalSettings(bootstrap=0))
            log(f"{model_name} {axis} {fraction:.0%} seed {seed}: {len(rows)} programs, {seconds:.1f} s, "
                f"top-1 eq.12 {top1['top1_ratio_of_sums']:.3f}, mean/task {top1['top1_mean_per_task']:.3f}")


def cell_path(cells_dir: Path, model: str, axis: str, fraction: float, seed: int) -> Path:
    return cells_dir / f"{model}-{axis}-{round(fraction * 100):03d}-s{seed}.json"


def aggregate(test: dict[str, np.ndarray], cells_dir: Path, settings: EvalSettings) -> list[dict[str, Any]]:
    """One point per (model, axis, fraction): the seeds' figures (tcl.train.evaluate) over every cell found."""
    by_point: dict[tuple[str, str, float], list[dict]] = {}
    for path in sorted(cells_dir.glob("*.json")):
        cell = json.loads(path.read_text())
        if len(cell["scores"]) != len(test["label"]):
            raise ValueError(f"{path}: {len(cell['scores'])} scores for {len(test['label'])} test programs: "
                             "the features changed since it was trained; delete the cells directory")
        by_point.setdefault((cell["model"], cell["axis"], cell["fraction"]), []).append(cell)
    points = []
    for (model, axis, fraction), cells in sorted(by_point.items()):
        cells.sort(key=lambda c: c["seed"])
        figures = ranking_metrics(test, [np.array(c["scores"]) for c in cells], ks=(1, 5), settings=settings)
        points.append({"model": model, "axis": axis, "fraction": fraction, "seeds": [c["seed"] for c in cells],
                       "epochs": cells[0]["epochs"],
                       "train_programs": float(np.mean([c["train_programs"] for c in cells])),
                       "train_tasks": float(np.mean([c["train_tasks"] for c in cells])),
                       "train_seconds": float(np.mean([c["train_seconds"] for c in cells])), **figures})
    return points


def doubling(points: list[dict[str, Any]], metric: str) -> dict[tuple[str, str], dict[str, float]]:
    """Per (model, axis): the least-squares gain of `metric` per doubling of the data over all fractions,
    the gain per doubling between the two largest fractions (50% -> 100% on the default grid; a curve of
    38% and 100% has no 50% point) and the seed spread at 100%."""
    out = {}
    for key in sorted({(p["model"], p["axis"]) for p in points}):
        pts = sorted((p for p in points if (p["model"], p["axis"]) == key), key=lambda p: p["fraction"])
        if len(pts) < 2:
            continue
        x = np.log2([p["fraction"] for p in pts])
        y = np.array([p[metric] for p in pts])
        last = float((y[-1] - y[-2]) / (x[-1] - x[-2]))
        full = pts[-1]
        out[key] = {"slope": float(np.polyfit(x, y, 1)[0]), "last": last,
                    "seed_std": float(full.get(f"{metric}_seed_std", math.nan)),
                    "ci_half": float((full[f"{metric}_ci_high"] - full[f"{metric}_ci_low"]) / 2)
                    if f"{metric}_ci_high" in full else math.nan}
    return out


MIN_GAIN = 0.02  # top-1 per doubling of the data below which a curve counts as flat


def verdict(d: dict[str, float]) -> str:
    """Data-limited while the last doubling still gains more than twice the seed spread and more than
    MIN_GAIN (a deterministic model has no seed spread); otherwise the model (its capacity, features or
    training budget) is what limits it."""
    noise = 2 * d["seed_std"] if math.isfinite(d["seed_std"]) else 0.0
    if math.isfinite(d["last"]) and d["last"] > max(noise, MIN_GAIN):
        return "data (still rising)"
    return "model (flat within seed noise)"


def _ci(p: dict[str, Any], m: str) -> str:
    s = f"{p[m]:.3f}"
    if f"{m}_ci_low" in p:
        s += f" [{p[f'{m}_ci_low']:.3f}, {p[f'{m}_ci_high']:.3f}]"
    if f"{m}_seed_std" in p:
        s += f" ±{p[f'{m}_seed_std']:.3f}"
    return s


def render(report: dict[str, Any]) -> str:
    """The markdown table (also what is printed)."""
    head = ["model", "axis", "data", "programs", "tasks", "seeds", "epochs", "top-1 eq.12 [CI] ±seed sd",
            "top-1 mean/task [CI]", "top-5 eq.12 [CI]", "top-5 mean/task [CI]", "train s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for p in report["points"]:
        lines.append("| " + " | ".join([LABELS.get(p["model"], p["model"]), p["axis"], f"{p['fraction']:.0%}",
                                        f"{p['train_programs']:.0f}", f"{p['train_tasks']:.0f}", str(len(p["seeds"])),
                                        str(p["epochs"]), _ci(p, "top1_ratio_of_sums"), _ci(p, "top1_mean_per_task"),
                                        _ci(p, "top5_ratio_of_sums"), _ci(p, "top5_mean_per_task"),
                                        f"{p['train_seconds']:.1f}"]) + " |")
    floor = report["random"]
    lines.append(f"| random scorer | - | - | - | - | 20 | - | {_ci(floor, 'top1_ratio_of_sums')} | "
                 f"{_ci(floor, 'top1_mean_per_task')} | {_ci(floor, 'top5_ratio_of_sums')} | "
                 f"{_ci(floor, 'top5_mean_per_task')} | - |")
    lines += ["", "What a doubling of the training data buys (top-1; slope = least squares over all fractions, "
              "last = per doubling between the two largest fractions):", "",
              "| model | axis | eq.12 slope | eq.12 last | mean/task slope | mean/task last | seed sd at 100% "
              "(mean/task) | limited by |", "|---|---|---|---|---|---|---|---|"]
    eq12, per_task = report["doubling"]["top1_ratio_of_sums"], report["doubling"]["top1_mean_per_task"]
    for key, d in per_task.items():
        e = eq12[key]
        lines.append(f"| {LABELS.get(d['model'], d['model'])} | {d['axis']} | {e['slope']:+.3f} | {e['last']:+.3f} | "
                     f"{d['slope']:+.3f} | {d['last']:+.3f} | {d['seed_std']:.3f} | {d['verdict']} |")
    comp = report["test_composition"]
    lines += ["", f"- platform {report['platform']}; held-out test split: {composition_text(comp)} "
              f"({', '.join(comp['networks'])}).",
              f"- CIs: {report['eval']['ci']:.0%} percentile bootstrap, {report['eval']['bootstrap']} draws "
              "(eq. 12 and "
              "mean/task resample tasks, mean/network resamples networks), of the mean over seeds; ± is the seed "
              "standard deviation.",
              f"- {provenance_line(report)}"]
    if report.get("notes"):
        lines += [f"- {n}" for n in report["notes"]]
    return "\n".join(lines) + "\n"


def plot(report: dict[str, Any], path: Path) -> None:
    """Top-1 and top-5 (eq. 12, with CI error bars) against the share of training data, per axis."""
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    axes_present = [a for a in AXES if any(p["axis"] == a for p in report["points"])]
    fig, grid = plt.subplots(2, len(axes_present), figsize=(6 * len(axes_present), 8), squeeze=False)
    for col, axis in enumerate(axes_present):
        for row, k in enumerate((1, 5)):
            ax, m = grid[row][col], f"top{k}_ratio_of_sums"
            for model in dict.fromkeys(p["model"] for p in report["points"]):
                pts = sorted((p for p in report["points"] if p["model"] == model and p["axis"] == axis),
                             key=lambda p: p["fraction"])
                if not pts:
                    continue
                x = [p["train_programs"] if axis == "programs" else p["train_tasks"] for p in pts]
                y = np.array([p[m] for p in pts])
                err = np.array([[p[m] - p.get(f"{m}_ci_low", p[m]) for p in pts],
                                [p.get(f"{m}_ci_high", p[m]) - p[m] for p in pts]])
                ax.errorbar(x, y, yerr=err, marker="o", capsize=3, label=LABELS.get(model, model),
                            color=f"C{list(LABELS).index(model)}")   # one colour per model in every panel
            ax.axhline(report["random"][m], color="grey", linestyle=":", label="random scorer")
            ax.set_xscale("log")
            ax.set_xlabel(f"training {axis}")
            ax.set_ylabel(f"held-out top-{k} (eq. 12)")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.suptitle(f"Learning curves on {report['platform']} ({report['eval']['ci']:.0%} bootstrap CI over tasks, "
                 f"mean of seeds)")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def report_of(platform: str, params: dict[str, Any], cells_dir: Path, prov: dict[str, Any], notes: list[str]
              ) -> dict[str, Any]:
    settings = EvalSettings.from_params(params)
    test = load_split(REPO / "data" / "features" / platform, "test")
    points = aggregate(test, cells_dir, settings)
    report = {"platform": platform, **prov,
              "eval": {"bootstrap": settings.bootstrap, "ci": settings.ci, "seed": settings.seed},
              "test_composition": composition(test), "random": random_scorer_metrics(test, settings=settings),
              "points": points, "notes": notes, "doubling": {}}
    for metric in ("top1_ratio_of_sums", "top1_mean_per_task"):
        report["doubling"][metric] = {}
        for (model, axis), d in doubling(points, metric).items():
            report["doubling"][metric][f"{model}/{axis}"] = {"model": model, "axis": axis, **d, "verdict": verdict(d)}
    return report


def main(argv: list[str] | None = None) -> None:
    from benchmarks._out import add_epochs_args, add_out_args, epochs_by_model, out_path, provenance, write_report

    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--platform", default="zen4-avx512-1c")
    ap.add_argument("--models", nargs="+", default=["tenset_mlp", "mlp", "xgb"], choices=sorted(LABELS))
    ap.add_argument("--axes", nargs="+", default=list(AXES), choices=AXES)
    ap.add_argument("--fractions", nargs="+", type=float, default=[5, 10, 20, 50, 100], help="percent of the data")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0, 1, 2])
    add_epochs_args(ap, "tcl=3")
    ap.add_argument("--cells", type=Path, default=None, help="per-cell JSONs (default tmp/learning_curve/<platform>)")
    add_out_args(ap, REPORT)
    ap.add_argument("--note", action="append", default=[], help="a line for the report (e.g. why epochs are lower)")
    ap.add_argument("--params", default=str(REPO / "params.yaml"))
    args = ap.parse_args(argv)
    params = load_params(args.params)
    if any(not 0 < f <= 100 for f in args.fractions):
        raise SystemExit(f"--fractions are percentages in (0, 100], got {args.fractions}")
    fractions = [f / 100 for f in args.fractions]
    epochs_of = epochs_by_model(args, params, LABELS)
    cells_dir = args.cells or REPO / "tmp" / "learning_curve" / args.platform
    prov = provenance(__file__, argv)  # the data as locked when the run starts
    import torch
    torch.set_num_threads(1)
    with tracking.run(params, f"learning-curve-{args.platform}", {"stage": "learning_curve"}):
        tracking.log_params({"platform": args.platform, "models": ",".join(args.models), "axes": ",".join(args.axes),
                             "fractions": ",".join(map(str, args.fractions)), "seeds": ",".join(map(str, args.seeds)),
                             **{f"epochs.{m}": e for m, e in epochs_of.items()},
                             "data_version": prov["data_version"]})
        run_cells(args.platform, params, args.models, args.axes, fractions, args.seeds, epochs_of, cells_dir)
        report = report_of(args.platform, params, cells_dir, prov, args.note)
        for p in report["points"]:
            step = round(p["fraction"] * 100)
            tracking.log_metrics({f"{p['model']}.{p['axis']}.{k}": v for k, v in p.items()
                                  if k.startswith(("top1_", "top5_")) and math.isfinite(v)}, step=step)
        out = out_path(args, REPORT)
        out.mkdir(parents=True, exist_ok=True)
        base = out / args.platform
        md = render(report)
        write_report(base, report, f"Learning curves: {args.platform}", md, plot, tracking)
    print(md)


if __name__ == "__main__":
    main()
