"""The tuning stage: tune the configured network with each cost model, track it, report it.

One parent MLflow run per (network, platform) with a nested run per cost model:
the per-batch curve (estimated latency by trial), the end-to-end figures, the
tuning database and the curve PNG. The comparison table is also written as JSON
for `dvc metrics show`, and every curve point as `<platform>/curves.csv`
(cost_model, trial, seconds, estimated_ms) for plots across runs and seeds.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any, Callable

from .. import tracking
from ..config import REPO_ROOT, check_keys
from ..platforms import Platform, load_platforms, require_device
from .compare import ModelRun, comparison_table, tune_side_by_side
from .online import OnlineSettings
from .plot import plot_curves
from .names import parse_cost_model
from .tuning import SearchSettings, make_builtin_cost_model


# The `tune:` section's keys: this module reads the first eight, the settings classes the sub-blocks
# (SearchSettings, OnlineSettings, DraftSettings, ControllerSettings, GuardSettings; psa: tcl.tvm.psa).
TUNE_KEYS = ("platforms", "network", "cost_models", "baseline", "trials", "num_trials_per_iter",
             "learned_trials_per_iter", "bundles", "search", "learned_search", "online", "draft", "controller",
             "guard", "psa")


def check_tune_params(params: dict[str, Any]) -> None:
    """Unknown `tune:` keys and cost model names that are not TVM's or registered ones fail here, naming
    the valid ones (flows/_params.py calls it when any flow loads params.yaml)."""
    cfg = params.get("tune") or {}
    check_keys(cfg, TUNE_KEYS, "tune")
    for name in cfg.get("cost_models") or []:
        parse_cost_model(name)


def registered_choice(name: str, platform: Platform, params: dict[str, Any], log: Callable[[str], None],
                      root: str | Path | None = None):
    """(bundle, pin) of the registered model `name` the platform tunes with: its own champion or the
    nearest platform's, pinned to the version the alias points at now. A store that lacks what the
    pipeline committed at `root` (default: this repository) is rebuilt first: a fresh clone tunes."""
    from .cost_model import load_bundle
    from .select import select_model

    tracking.require_enabled(params, f"tune.cost_models '{name}' (a registered model)")
    prefix = params["registry"]["prefix"]
    try:
        choice = select_model(platform, load_platforms(params), prefix, name)
    except LookupError:
        from ..tracking.hints import committed_names
        from ..records import rebuild_registry

        root = REPO_ROOT if root is None else root
        if not any(n.startswith(f"{prefix}-{name}-") for n in committed_names(root)):
            raise
        log(f"{name}: the MLflow store lacks the {prefix}-{name}-<platform> models the committed pipeline "
            f"registered (a fresh clone); rebuilding it first, as `python -m flows.register` does (no training, "
            f"no measuring)")
        rebuild_registry(params, root, log)
        choice = select_model(platform, load_platforms(params), prefix, name)
    log(f"{name}: using {choice.uri} ({choice.reason})")
    return load_bundle(choice.uri), {"uri": choice.uri, "registered_model": choice.name, "version": choice.version,
                                     "trained_for": choice.platform, "data_version": choice.data_version,
                                     "why": choice.reason}


def cost_model_factories(names: list[str], platform: Platform, params: dict[str, Any],
                         log: Callable[[str], None]) -> tuple[dict[str, Callable[[], Any]], dict[str, dict]]:
    """A fresh cost model per tuning run (TVM's built-ins by name; learned ones from a saved bundle
    named in `tune.bundles` under their base name, else from the registry, adapting as their name
    says, an ensemble from its members': tcl.tvm.names), and for each learned one what it is pinned to."""
    from .cost_model import LearnedCostModel
    from .ensemble import EnsemblePrior
    from .names import REGISTERED_AS
    from .online import OnlineSettings
    from .pinned import ensemble_pin, load_pinned

    saved = params["tune"].get("bundles") or {}
    settings = OnlineSettings.from_params(params)
    factories, pins = {}, {}

    def chosen(name: str, base: str):
        if base in saved:
            bundle, pin = load_pinned(saved[base])
            log(f"{name}: using the saved bundle {saved[base]} ({pin.get('uri')})")
            return bundle, pin
        return registered_choice(REGISTERED_AS.get(base, base), platform, params, log)

    for spec in map(parse_cost_model, names):
        name = spec.name
        if spec.builtin:
            factories[name] = (lambda n=name: make_builtin_cost_model(n, int(params.get("seed", 0)),
                                                                        platform.threads))
            continue
        members = [chosen(name, base) for base in spec.members]
        bundles = [bundle for bundle, _ in members]
        pins[name] = ensemble_pin([pin for _, pin in members], spec.members) if len(members) > 1 else members[0][1]

        def build(bs=bundles, names=spec.members, a=spec.adaptation) -> LearnedCostModel:
            own = [copy.deepcopy(b) for b in bs]
            prior = EnsemblePrior(own, list(names)) if len(own) > 1 else None
            return LearnedCostModel(own[0], spec_vector=platform.spec_vector, adaptation=a, settings=settings,
                                    prior=prior)

        build()  # fails now, not mid-tuning
        factories[name] = build
    return factories, pins


def trials_per_iter(cfg: dict[str, Any], factories: dict[str, Any], learned: dict[str, Any]) -> dict[str, int]:
    """Trials per task per scheduler round for each cost model: `tune.learned_trials_per_iter` for the
    learned ones (a model that already ranks programs needs fewer first-round trials), when set."""
    default = int(cfg["num_trials_per_iter"])
    smaller = cfg.get("learned_trials_per_iter")
    return {name: int(smaller) if smaller and name in learned else default for name in factories}


def run_tuning_stage(platform: Platform, params: dict[str, Any], out_dir: str | Path,
                     log: Callable[[str], None] = print) -> list[dict[str, Any]]:
    require_device(platform)
    cfg = params["tune"]
    network = Path(cfg["network"]).stem if str(cfg["network"]).endswith((".pt2", ".onnx")) else cfg["network"]
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    factories, pins = cost_model_factories(list(cfg["cost_models"]), platform, params, log)
    per_iter = trials_per_iter(cfg, factories, pins)
    with tracking.run(params, f"tune-{network}-{platform.name}",
                      {"stage": "tune", "platform": platform.name, "network": network}):
        tracking.log_params({"network": network, "platform": platform.name, "trials": cfg["trials"],
                             "num_trials_per_iter": cfg["num_trials_per_iter"], "seed": params.get("seed", 0),
                             "cost_models": ",".join(factories),
                             **{f"search.{k}": v for k, v in vars(SearchSettings.from_params(params)).items()
                                if k not in ("wide", "wide_batches")},  # learned_search's keys
                             **{f"online.{k}": v for k, v in vars(OnlineSettings.from_params(params)).items()}})

        def track(run: ModelRun) -> None:
            with tracking.run(params, f"{run.name}",
                              {"stage": "tune", "cost_model": run.name, "platform": platform.name}, nested=True):
                if run.name in pins:
                    tracking.log_params({f"model_{k}": v for k, v in pins[run.name].items()})
                for p in run.result.curve:
                    if p.estimated_latency == p.estimated_latency:
                        tracking.log_metric("estimated_latency_ms", p.estimated_latency * 1e3, step=p.trial)
                tracking.log_metrics({"tuned_latency_ms": run.e2e.tvm_latency_ms,
                                      "reference_latency_ms": run.e2e.reference_latency_ms,
                                      "max_abs_diff": run.e2e.max_abs_diff,
                                      "wall_seconds": run.result.wall_seconds,
                                      "cost_model_share": run.result.cost_model_share})
                tracking.log_artifacts(run.result.work_dir, artifact_path="tuned")  # database + compiled library
            log(f"{run.name}: tuned {run.e2e.tvm_latency_ms:.3f} ms vs {run.e2e.reference} "
                f"{run.e2e.reference_latency_ms:.3f} ms, "
                f"max |diff| {run.e2e.max_abs_diff:.2e}, {run.result.wall_seconds:.0f} s")

        runs = tune_side_by_side(str(cfg["network"]), platform, factories, trials=int(cfg["trials"]),
                                 work_root=out / platform.name,
                                 seed=int(params.get("seed", 0)),
                                 num_trials_per_iter=per_iter,
                                 runner_cfg=params["collect"].get("runner"), on_run=track,
                                 params=params)
        baseline = cfg.get("baseline", "xgb") if cfg.get("baseline", "xgb") in factories else runs[0].name
        table = comparison_table(runs, baseline)
        png = plot_curves(runs, out / f"{platform.name}.png",
                          f"{network} on {platform.name}: {cfg['trials']} trials, seed {params.get('seed', 0)}")
        for row in table:
            row["model"] = pins.get(row["cost_model"], {"uri": "tvm built-in"})
            row["num_trials_per_iter"] = per_iter[row["cost_model"]]
        (out / f"{platform.name}.json").write_text(json.dumps({r["cost_model"]: r for r in table}, indent=2))
        write_curves(runs, out / platform.name / "curves.csv")
        tracking.log_artifact(str(png))
        tracking.log_dict({"table": table}, "comparison.json")
    return table


def write_curves(runs: list[ModelRun], path: Path) -> Path:
    """Every curve point of every run, one CSV row each (NaN before every task has a measurement); a name
    with a comma (an ensemble's, tcl.tvm.names) is quoted."""
    import csv
    import io

    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(["cost_model", "trial", "seconds", "estimated_ms"])
    writer.writerows([run.name, p.trial, f"{p.seconds:.3f}", f"{p.estimated_latency * 1e3:.6g}"]
                     for run in runs for p in run.result.curve)
    path.write_text(buffer.getvalue())
    return path
