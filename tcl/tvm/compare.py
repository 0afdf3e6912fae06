"""Tune one network with several cost models side by side and compare the curves.

Same network, platform, trial budget and seed for every model. The comparison
answers what a user asks: how many trials and seconds does each model need to
reach the baseline's final latency, what latency does each reach with equal
trials, how much of the tuning time is the cost model, and how fast is the tuned
network against its reference (PyTorch eager, or ONNX Runtime) on the same CPU.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Iterable

from .curve import CurvePoint


@dataclass
class ModelRun:
    name: str
    result: Any  # TuningResult
    e2e: Any  # EndToEnd


def first_reaching(curve: list[CurvePoint], latency: float) -> CurvePoint | None:
    """The first curve point whose estimate is at or below `latency`."""
    for point in curve:
        if math.isfinite(point.estimated_latency) and point.estimated_latency <= latency * (1 + 1e-9):
            return point
    return None


def behind(curve: list[CurvePoint], base: list[CurvePoint]) -> tuple[float, float] | None:
    """How far `curve` trails `base` once both have a network estimate (after the first round): (the largest
    ratio of its best estimate to the baseline's at the same trial count, the share of those trial counts where
    it is above the baseline's). (<= 1, 0): never worse than the baseline. None when they never overlap."""
    def at(points: list[CurvePoint]) -> dict[int, float]:
        return {p.trial: p.estimated_latency for p in points if math.isfinite(p.estimated_latency)}

    mine, theirs = at(curve), at(base)
    if not mine or not theirs:
        return None
    end = min(max(mine), max(theirs))  # neither curve is read past its own last trial
    ratios, current, other = [], math.nan, math.nan  # NaN until that curve's first estimate
    for trial in sorted(t for t in set(mine) | set(theirs) if t <= end):
        current, other = mine.get(trial, current), theirs.get(trial, other)
        if not (math.isnan(current) or math.isnan(other)):
            ratios.append(current / other)
    if not ratios:
        return None
    return max(ratios), sum(r > 1 + 1e-9 for r in ratios) / len(ratios)


def weighted_estimate(tasks: Iterable[dict]) -> float:
    """A network's latency estimate from its tasks' records: each measured task's best latency times its weight
    (how often the network calls it); tasks without a measurement add nothing."""
    return sum(t["weight"] * t["best_us"] for t in tasks if t.get("best_us") is not None)


def costliest_tasks(tasks: list[dict], base_tasks: list[dict], top: int = 2) -> list[dict]:
    """The tasks that cost this run the most against the baseline's run of the same network: by the
    weighted gap of their best latencies, as a share of the baseline's network estimate. Tasks match by
    name (the same network, so the same extraction); only those worse than the baseline's are listed."""
    base = {t["task"]: t for t in base_tasks if t.get("best_us") is not None}
    estimate = weighted_estimate(base.values())
    gaps = []
    for t in tasks:
        theirs = base.get(t["task"])
        if theirs is None or t.get("best_us") is None or t["best_us"] <= theirs["best_us"]:
            continue
        gap = t["weight"] * (t["best_us"] - theirs["best_us"])
        gaps.append({"task": t["task"], "best_us": t["best_us"], "base_us": theirs["best_us"],
                     "ratio": t["best_us"] / theirs["best_us"], "share_of_base": gap / estimate if estimate else None,
                     "trials": t.get("trials"), "base_trials": theirs.get("trials")})
    return sorted(gaps, key=lambda g: -(g["share_of_base"] or 0))[:top]


def fixed_program_share(runs_tasks: list[list[dict]]) -> tuple[set[str], list[float]]:
    """The tasks every run measured once only (a design space of one program: no cost model chooses there) and
    each run's estimate in ms over them. Their latencies differ between runs by measurement alone, so a gap
    between two runs' estimates that lies there says nothing about the cost models."""
    fixed = set.intersection(*({t["task"] for t in tasks if t.get("best_us") is not None and t.get("trials", 0) <= 1}
                               for tasks in runs_tasks)) if runs_tasks else set()
    return fixed, [weighted_estimate(t for t in tasks if t["task"] in fixed) / 1e3 for tasks in runs_tasks]


def comparison_table(runs: list[ModelRun], baseline: str) -> list[dict[str, Any]]:
    """One row per model: reach-the-baseline trials/seconds, final estimate, cost-model share, e2e figures."""
    base = next(r for r in runs if r.name == baseline)
    target = base.result.final_estimate
    rows = []
    for run in runs:
        reach = first_reaching(run.result.curve, target)
        rows.append({
            "cost_model": run.name,
            "trials": run.result.trials,
            "trial_budget": run.result.trial_budget,
            "wall_s": round(run.result.wall_seconds, 1),
            "final_est_ms": run.result.final_estimate * 1e3,
            f"trials_to_{baseline}_final": reach.trial if reach else None,
            f"seconds_to_{baseline}_final": round(reach.seconds, 1) if reach else None,
            "cost_model_share": round(run.result.cost_model_share, 4),
            "draft_share": round(run.result.draft_share, 4) if run.result.draft_share is not None else None,
            "feature_cache_hit_rate": run.result.feature_cache_hit_rate,
            "scored_candidates": run.result.scored_candidates,  # what the search asked the cost model to score
            "draft_analysed": run.result.draft_analysed,  # +draft: of those, programs PSA analysed (not looked up)
            "fallback_tasks": len(run.result.fallback_tasks),  # +guard: tasks TVM's XGB scored at the end
            "guard_switches": [list(switch) for switch in run.result.guard_switches],
            "stopped_tasks": list(run.result.stopped_tasks),  # +moses: the tasks the controller ended, in order
            "tasks": run.result.task_results,  # per task: weight, best latency, trials (tcl.tvm.curve)
            "search": run.result.settings,  # population; PSA's verify count, the controller where on
            "tuned_ms": run.e2e.tvm_latency_ms,
            "reference": run.e2e.reference,
            "reference_ms": run.e2e.reference_latency_ms,
            "speedup_vs_reference": run.e2e.reference_latency_ms / run.e2e.tvm_latency_ms,
            "max_abs_diff": run.e2e.max_abs_diff,
        })
    return rows


def tune_side_by_side(network: str, platform, cost_models: dict[str, Callable[[], Any]], *, trials: int,
                      work_root: str | Path, seed: int,
                      num_trials_per_iter: int | dict[str, int], runner_cfg: dict | None = None, resume: bool = False,
                      on_run: Callable[[ModelRun], None] | None = None, params: dict[str, Any] | None = None
                      ) -> list[ModelRun]:
    """Tune `network` (a built-in name, a .pt2 or an .onnx file) once per cost model (each factory builds a fresh
    model); compile and check each. `<work_root>/<model>/` keeps its tuning database and the compiled
    library `<network>.so`. `num_trials_per_iter` is one for all or one per cost model. `params` gives
    the search's settings (tune.search, tune.draft, tune.controller, tune.guard, tune.psa) and a built-in
    network's shapes (workloads); without it MetaSchedule's defaults, no drafting, no controller, no guard."""
    from ..workloads import fuse_for_tuning, load_network
    from ..workloads.settings import WorkloadSettings
    from .e2e import compile_and_check, reference_latency_ms
    from .controller import ControllerSettings
    from .draft import DraftSettings
    from .guard import GuardSettings
    from .tuning import SearchSettings, tune_network

    net = load_network(network, WorkloadSettings.from_params(params or {}))
    fused = fuse_for_tuning(net.relax_mod, platform.tvm_target())
    reference_ms = reference_latency_ms(net.reference, net.inputs, platform.threads)  # the same for every model
    runs = []
    for name, factory in cost_models.items():
        work_dir = Path(work_root) / name
        result = tune_network(fused, platform, network=net.name, cost_model=factory(), cost_model_name=name,
                              trials=trials, work_dir=work_dir, seed=seed,
                              num_trials_per_iter=(num_trials_per_iter if isinstance(num_trials_per_iter, int)
                                                   else num_trials_per_iter[name]), runner_cfg=runner_cfg, resume=resume,
                              search=SearchSettings.for_cost_model(params or {}, name),
                              controller=ControllerSettings.from_params(params or {}),
                              draft=DraftSettings.from_params(params or {}),
                              guard=GuardSettings.from_params(params or {}), params=params)
        run = ModelRun(name, result, compile_and_check(result.database, net.relax_mod, platform, net.reference,
                                                       net.inputs, reference_ms,
                                                       library_path=str(work_dir / f"{net.name}.so"),
                                                       reference=net.reference_kind))
        runs.append(run)
        if on_run is not None:
            on_run(run)
    return runs
