"""The tuning benchmark's report (benchmarks/bench_tune.py): per network, each model's figures over the seeds,
every run on its own line, the notes that say where a run won or lost, the curves as PNG, and the draft issue's
test (each drafted run against the same model's verify-only seed spread).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from benchmarks._out import mean_std
from benchmarks._tune_runs import LEGACY_PER_ITER, controller_statistic, curve_final

FIGURES = ("final_est_ms", "tuned_ms", "speedup_vs_reference", "cost_model_share", "wall_s")


def _mean_std(values: list[float]) -> dict[str, float | None]:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    if not vals:
        return {"mean": None, "std": None, "n": 0}
    mean, std = mean_std(vals)
    return {"mean": mean, "std": std, "n": len(vals)}


def summarize(tables: dict[int, list[dict[str, Any]]], baseline: str) -> list[dict[str, Any]]:
    """Per cost model, each figure's mean/std over the seeds that tuned it; reach-the-baseline figures over
    the seeds that reached it."""
    models = list(dict.fromkeys(row["cost_model"] for table in tables.values() for row in table))
    out = []
    for model in models:
        rows = [r for table in tables.values() for r in table if r["cost_model"] == model]
        entry: dict[str, Any] = {"cost_model": model, "seeds": len(rows)}
        for key in FIGURES:
            entry[key] = _mean_std([r[key] for r in rows])
        for key in (f"trials_to_{baseline}_final", f"seconds_to_{baseline}_final",
                    f"{baseline}_trials_to_match", f"{baseline}_seconds_to_match",
                    f"trial_factor_vs_{baseline}", f"time_factor_vs_{baseline}",
                    f"worst_ratio_to_{baseline}", f"share_behind_{baseline}"):
            entry[key] = _mean_std([r.get(key) for r in rows])  # rows of older reports lack the factors
        entry[f"{baseline}_matched"] = sum(r[f"{baseline}_trials_to_match"] is not None for r in rows)
        entry[f"reached_{baseline}_final"] = sum(r[f"trials_to_{baseline}_final"] is not None for r in rows)
        entry["trials"] = rows[0]["trials"]
        entry["num_trials_per_iter"] = int(rows[0].get("num_trials_per_iter", LEGACY_PER_ITER))
        entry["reference_ms"] = _mean_std([r["reference_ms"] for r in rows])
        out.append(entry)
    return out


def seed_table(done: dict[str, tuple[dict[str, Any], list]], models: list[str], baseline: str) -> list[dict]:
    """The seed's rows in `models` order, with each model's reach-the-baseline figures measured against
    this seed's baseline curve (a model tuned on its own was its own baseline), and the baseline's
    trials and seconds to reach the model's final estimate (None: not within the baseline's budget)."""
    from tcl.tvm.compare import behind, first_reaching
    from tcl.tvm.curve import CurvePoint

    base_curve = [CurvePoint(t, sec, ms) for t, sec, ms in done[baseline][1]]
    target = curve_final(base_curve)
    base_reach = first_reaching(base_curve, target)  # when the baseline itself got there
    rows = []
    for model in models:
        row, points = done[model]
        curve = [CurvePoint(t, sec, ms) for t, sec, ms in points]
        reach = first_reaching(curve, target)
        # the other way round: how long the baseline took to reach this model's final estimate
        match = first_reaching(base_curve, curve_final(curve))
        trailing = behind(curve, base_curve)  # the unseen-operator goal: never worse than the baseline
        rows.append({**row, f"trials_to_{baseline}_final": reach.trial if reach else None,
                     f"seconds_to_{baseline}_final": round(reach.seconds, 1) if reach else None,
                     f"{baseline}_trials_to_match": match.trial if match else None,
                     f"{baseline}_seconds_to_match": round(match.seconds, 1) if match else None,
                     # the goal's factors: how many times fewer trials / less time than the baseline took
                     f"trial_factor_vs_{baseline}": base_reach.trial / reach.trial if reach else None,
                     f"time_factor_vs_{baseline}": base_reach.seconds / reach.seconds if reach else None,
                     f"worst_ratio_to_{baseline}": trailing[0] if trailing else None,
                     f"share_behind_{baseline}": trailing[1] if trailing else None})
    return rows


def plot_network(curves: dict[int, dict[str, list]], path: Path, title: str) -> Path:
    """Best estimate vs trials and vs seconds: one line per (model, seed), a dot where the run ended.

    A model whose budget ends when the network's first estimate appears (tasks x per-iter trials)
    has a single point; a curve is never drawn past its own last trial."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    models = list(dict.fromkeys(m for runs in curves.values() for m in runs))
    legend_inches = 0.22 * math.ceil(len(models) / 2)  # one two-column legend under both plots: labels are long
    height = 4.2 + legend_inches
    fig, axes = plt.subplots(1, 2, figsize=(12, height))
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    colors = colors if len(models) <= len(colors) else list(plt.get_cmap("tab20").colors)
    for axis, ax, label in ((0, axes[0], "measured trials"), (1, axes[1], "tuning wall time (s)")):
        for i, model in enumerate(models):
            color = colors[i % len(colors)]
            for k, runs in enumerate(curves.values()):
                points = [(p[axis], p[2]) for p in runs.get(model, []) if math.isfinite(p[2])]
                if not points:
                    continue
                xs, ys = zip(*points)
                ax.step(xs, ys, where="post", color=color, alpha=0.8, label=None if k else model)
                ax.plot(xs[-1], ys[-1], "o", color=color, alpha=0.8)
        ax.set_xlabel(label)
        ax.set_ylabel("estimated network latency (ms)")
        ax.grid(alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="lower center", ncol=2, fontsize="small", frameon=False)
    fig.suptitle(f"{title}\none line per seed, a dot where the run ended")
    fig.tight_layout(rect=(0, (legend_inches + 0.1) / height, 1, 1))
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


_NONE = {"mean": None}


def _fmt(stat: dict[str, Any], digits: int = 3) -> str:
    if stat["mean"] is None:
        return "-"
    return f"{stat['mean']:.{digits}g} +- {stat['std']:.2g}"


def search_notes(seed_tables: dict[str, dict[int, list[dict[str, Any]]]]) -> list[str]:
    """Per model, the search settings its runs recorded (population, PSA's verify count, the controller),
    so rows tuned with other settings than params.yaml's say so; runs from before stop 39 recorded none."""
    seen: dict[str, set[str]] = {}
    for tables in seed_tables.values():
        for rows in tables.values():
            for row in rows:
                found = row.get("search")
                if not found:
                    continue
                text = f"population {found['population']}, {found['genetic_iters']} generations"
                if "draft_verify" in found:
                    text += f", PSA drafts and the model verifies {found['draft_verify']}"
                if found.get("max_sketch_share", 1.0) < 1.0:
                    text += f", a sketch at most {found['max_sketch_share']:g} of a batch"
                if "controller" in found:
                    c = found["controller"]
                    text += (f", controller window {c['window']} cv < {c['cv_threshold']} of the "
                             f"{controller_statistic(found).replace('_', ' ')}")
                    if c.get("scale_window"):
                        text += " (window scaled by the task's share of the estimate)"
                seen.setdefault(row["cost_model"], set()).add(text)
    if not seen:
        return []
    return ["search settings recorded by the runs: " + "; ".join(f"{m}: {' / '.join(sorted(t))}"
                                                                  for m, t in seen.items()) + "."]


def draft_notes(seed_tables: dict[str, dict[int, list[dict[str, Any]]]]) -> list[str]:
    """PSA's part of each drafted run's cost-model share (runs from stop 54 on time it apart)."""
    parts = [f"{row['cost_model']} seed {seed} {row['draft_share']:.3f} of {row['cost_model_share']:.3f}"
             for tables in seed_tables.values() for seed, rows in tables.items() for row in rows
             if row.get("draft_share") is not None]
    return ["PSA's share of the wall time, of the cost model's: " + "; ".join(parts) + "."] if parts else []


def modifier_notes(curves: dict[str, dict[int, dict[str, list]]]) -> list[str]:
    """Per network and seed, each run with a search modifier (+draft, +moses, +guard, +handoff) against the
    same model without it: both finals, and the trial at which the modified run reached the plain run's final
    -- the controller's claim is the same estimate in fewer trials, the draft's the same curve for less time."""
    from tcl.tvm.compare import first_reaching
    from tcl.tvm.curve import CurvePoint
    from tcl.tvm.names import MODIFIERS

    notes = []
    for network, seeds in curves.items():
        for seed, runs in sorted(seeds.items()):
            for name, points in runs.items():
                parts = name.split("+")
                unmodified = ("+".join(p for p in parts if p != m) for m in MODIFIERS if m in parts[1:])
                plain = next((other for other in unmodified if other in runs), None)
                if plain is None:
                    continue
                mine = [CurvePoint(*p) for p in points]
                theirs = [CurvePoint(*p) for p in runs[plain]]
                target = curve_final(theirs)
                reach, own = first_reaching(mine, target), first_reaching(theirs, target)
                when = (f"reached its final at trial {reach.trial} ({own.trial / reach.trial:.2f}x fewer trials, "
                        f"{own.seconds / reach.seconds:.2f}x less time)" if reach else "never reached its final")
                notes.append(f"{network} seed {seed}, {name}: {curve_final(mine):.3f} ms against {plain}'s "
                             f"{target:.3f}; {when}")
    return ["each run with a search modifier against the same model without it (same seed): "
            + "; ".join(notes) + "."] if notes else []


def draft_range_table(seed_tables: dict[str, dict[int, list[dict[str, Any]]]], curves: dict[str, dict[int, dict]],
                      budget: int) -> str:
    """The draft issue's test, run by run: a drafted run's best estimate after a third, half, two thirds and five
    sixths of the budget and at its end, against the same model's verify-only runs over their seeds. A drafted
    estimate at or below verify-only's worst seed at that trial count is within its seed spread; above it, the
    table says by how much. '' where no drafted run has verify-only runs of two seeds beside it."""
    from tcl.tvm.curve import CurvePoint

    marks = [budget * k // 6 + 1 for k in (2, 3, 4, 5)]

    def estimates(points: list) -> list[float]:
        return [estimate_at(points, m) for m in marks] + [curve_final([CurvePoint(*p) for p in points])]

    head = ["network", "run", "seed", *(f"at {m}" for m in marks), "final", "within verify-only's spread",
            "cost-model share (PSA)"]
    lines = []
    for network, seeds in curves.items():
        drafted: dict[str, list[str]] = {}  # the verify-only model -> its drafted runs' names
        for name in dict.fromkeys(name for runs in seeds.values() for name in runs):
            parts = name.partition(" [")[0].split("+")
            if "draft" in parts[1:]:
                drafted.setdefault("+".join(p for p in parts if p != "draft"), []).append(name)
        for plain, names in drafted.items():
            verify_only = {seed: estimates(runs[plain]) for seed, runs in sorted(seeds.items()) if plain in runs}
            if len(verify_only) < 2:
                continue
            columns = [[v for v in c if math.isfinite(v)] for c in zip(*verify_only.values())]
            worst = [max(c, default=math.nan) for c in columns]
            best = [min(c, default=math.nan) for c in columns]
            lines.append("| " + " | ".join([network, f"{plain}, verify-only (range over seeds "
                                            f"{', '.join(map(str, verify_only))})", "-",
                                            *(f"{lo:.4g} - {hi:.4g}" for lo, hi in zip(best, worst)), "-", "-"]) + " |")
            for name in names:
                for seed, runs in sorted(seeds.items()):
                    if name not in runs:
                        continue
                    mine = estimates(runs[name])
                    cells = [f"{v:.4g}" + ("" if v <= hi or not math.isfinite(v * hi) else f" (+{v / hi - 1:.1%})")
                             for v, hi in zip(mine, worst)]
                    inside = sum(v <= hi for v, hi in zip(mine, worst))
                    row = next((r for r in seed_tables[network][seed] if r["cost_model"] == name), {})
                    lines.append("| " + " | ".join([network, name, str(seed), *cells,
                                                    f"{inside} of {len(mine)} trial counts", share_cell(row)]) + " |")
    if not lines:
        return ""
    return "\n".join(["| " + " | ".join(head) + " |", "|" + "---|" * len(head), *lines]) + "\n"


def controller_notes(seed_tables: dict[str, dict[int, list[dict[str, Any]]]]) -> list[str]:
    """The tasks Moses's controller ended in each run that recorded them (stop 55 on), with their trials and
    their share of the run's final estimate: a heavy task ended early is where a controller loses."""
    from tcl.tvm.compare import weighted_estimate

    notes = []
    for network, tables in seed_tables.items():
        for seed, rows in sorted(tables.items()):
            for row in rows:
                if "stopped_tasks" not in row or not (row.get("search") or {}).get("controller"):
                    continue
                tasks = {t["task"]: t for t in row.get("tasks") or []}
                estimate = weighted_estimate(tasks.values())
                ended = [tasks[name] for name in row["stopped_tasks"] if name in tasks]
                share = weighted_estimate(ended) / estimate if estimate else math.nan
                named = ", ".join(f"{t['task']} at {t['trials']} trials" for t in ended) or "none"
                notes.append(f"{network} seed {seed}, {row['cost_model']}: {len(row['stopped_tasks'])} of "
                             f"{len(tasks)} tasks ({named}; {share:.0%} of its final estimate)")
    return ["tasks the controller ended: " + "; ".join(notes) + "."] if notes else []


def task_notes(seed_tables: dict[str, dict[int, list[dict[str, Any]]]], baseline: str) -> list[str]:
    """Per network, seed and model, the task that cost it the most against the baseline's run (the runs
    that recorded their tasks: stop 44 on), so a row that trails says where."""
    from tcl.tvm.compare import costliest_tasks

    notes = []
    for network, tables in seed_tables.items():
        for seed, rows in sorted(tables.items()):
            base = next((r for r in rows if r["cost_model"] == baseline), None)
            for row in rows:
                if row is base or not (base and base.get("tasks") and row.get("tasks")):
                    continue
                costliest = costliest_tasks(row["tasks"], base["tasks"], top=1)
                if costliest:
                    (t,) = costliest
                    notes.append(f"{network} seed {seed}, {row['cost_model']}: behind {baseline} most on "
                                 f"{t['task']}, {t['best_us']:.1f} against {t['base_us']:.1f} us ({t['ratio']:.2f}x, "
                                 f"{t['trials']} against {t['base_trials']} trials; +{t['share_of_base']:.0%} of "
                                 f"{baseline}'s estimate)")
    return ["the task costing each run the most against " + baseline + " (runs that recorded their tasks): "
            + "; ".join(notes) + "."] if notes else []


def fixed_program_notes(seed_tables: dict[str, dict[int, list[dict[str, Any]]]]) -> list[str]:
    """Per network and seed, the part of each run's final estimate that comes from tasks of one program (measured
    once in every run): BERT's GELU is one program whose 12 copies measured 4.6-6.9 ms in different runs, more
    than every tuned task's gap between the models."""
    from tcl.tvm.compare import fixed_program_share

    notes = []
    for network, tables in seed_tables.items():
        for seed, rows in sorted(tables.items()):
            rows = [r for r in rows if r.get("tasks")]
            fixed, shares = fixed_program_share([r["tasks"] for r in rows])
            if len(rows) > 1 and fixed:
                parts = ", ".join(f"{r['cost_model']} {ms:.2f} of {r['final_est_ms']:.2f}" for r, ms in zip(rows, shares))
                notes.append(f"{network} seed {seed} ({len(fixed)} tasks): {parts}")
    return ["ms of the final estimate from tasks of one program, the same in every run but for measurement noise "
            "(a gap there is not the cost model's): " + "; ".join(notes) + "."] if notes else []



def run_notes(seed_tables: dict[str, dict[int, list[dict[str, Any]]]], curves: dict[str, dict[int, dict]],
              baseline: str) -> list[str]:
    """Every note under the main table, in the report's order."""
    return (search_notes(seed_tables) + draft_notes(seed_tables) + modifier_notes(curves)
            + controller_notes(seed_tables) + task_notes(seed_tables, baseline) + fixed_program_notes(seed_tables))

def share_cell(row: dict[str, Any]) -> str:
    """A run's cost-model share of the wall time, with PSA's part of it for a drafted run."""
    if row.get("cost_model_share") is None:
        return "-"
    return f"{row['cost_model_share']:.3f}" + (f" ({row['draft_share']:.3f})" if row.get("draft_share") is not None else "")


def estimate_at(points: list, trial: int) -> float:
    """A curve's best network estimate within the first `trial` trials (NaN before its first estimate)."""
    found = [ms for t, _, ms in points if t <= trial and math.isfinite(ms)]
    return min(found) if found else math.nan


def per_seed_table(seed_tables: dict[str, dict[int, list[dict[str, Any]]]], curves: dict[str, dict[int, dict]],
                   baseline: str, budget: int) -> str:
    """Every run on its own line: its first estimate, its estimates at a third and two thirds of the baseline's
    budget (the goal: the baseline's final within a third of its trials), its final, and when it reached the
    baseline's final; the means of the table above hide which seed did what."""
    from tcl.tvm.curve import CurvePoint

    marks = (budget // 3, 2 * budget // 3)
    head = ["network", "seed", "cost model", "first est. ms (trial)", f"est. at {marks[0]} / {marks[1]} trials",
            "final est. ms", f"reaches {baseline}'s final: trial, s (x fewer trials, x less time)",
            f"{baseline} reaches its final at", "cost-model share (PSA)"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for network, tables in seed_tables.items():
        for seed, rows in sorted(tables.items()):
            for row in rows:
                model = row["cost_model"]
                points = curves[network][seed][model]
                first = next(((t, ms) for t, _, ms in points if math.isfinite(ms)), None)
                reach = row.get(f"trials_to_{baseline}_final")
                reached = (f"{reach}, {row[f'seconds_to_{baseline}_final']:.0f} "
                           f"({row[f'trial_factor_vs_{baseline}']:.2f}x, {row[f'time_factor_vs_{baseline}']:.2f}x)"
                           if reach else "never")
                match = row.get(f"{baseline}_trials_to_match")
                lines.append("| " + " | ".join([
                    network, str(seed), model, f"{first[1]:.4g} ({first[0]})" if first else "-",
                    " / ".join(f"{estimate_at(points, m):.4g}" for m in marks), f"{curve_final([CurvePoint(*p) for p in points]):.4g}",
                    reached, "-" if model == baseline else (str(match) if match else "never"), share_cell(row)]) + " |")
    return "\n".join(lines) + "\n"


def render(summary: dict[str, list[dict[str, Any]]], baseline: str, seeds: dict[str, list[int]],
           budgets: dict[str, int], retimed: bool = False, settings: list[str] = ()) -> str:
    """The table; `seeds` per network: those whose baseline is tuned (each model's figures over its own)."""
    head = ["network", "cost model", "trials", "trials per task per round", f"trials to {baseline} final", f"seconds to {baseline} final",
            f"seeds reaching {baseline}", f"x fewer trials than {baseline}", f"x less time than {baseline}",
            f"{baseline} trials to match", f"{baseline} seconds to match",
            f"worst est. / {baseline}'s", f"share of trials behind {baseline}",
            "final est. ms", "tuned ms", "x reference", "cost-model share"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for network, rows in summary.items():
        for r in rows:
            matched = f"{r[f'{baseline}_matched']}/{r['seeds']}"
            lines.append("| " + " | ".join([
                network, r["cost_model"], str(r["trials"]), str(r.get("num_trials_per_iter", LEGACY_PER_ITER)),
                _fmt(r[f"trials_to_{baseline}_final"]),
                _fmt(r[f"seconds_to_{baseline}_final"]), f"{r[f'reached_{baseline}_final']}/{r['seeds']}",
                _fmt(r.get(f"trial_factor_vs_{baseline}", _NONE)), _fmt(r.get(f"time_factor_vs_{baseline}", _NONE)),
                f"{_fmt(r[f'{baseline}_trials_to_match'])} ({matched})",
                f"{_fmt(r[f'{baseline}_seconds_to_match'])} ({matched})",
                _fmt(r.get(f"worst_ratio_to_{baseline}", _NONE)), _fmt(r.get(f"share_behind_{baseline}", _NONE), 2),
                _fmt(r["final_est_ms"]), _fmt(r["tuned_ms"]), _fmt(r["speedup_vs_reference"]),
                _fmt(r["cost_model_share"], 2)]) + " |")
    budget_text = ", ".join(f"{m} {n}" for m, n in budgets.items())
    seed_text = ", ".join(f"{network} {network_seeds}" for network, network_seeds in seeds.items())
    notes = [f"trial budgets: {budget_text}; seeds: {seed_text}; mean +- sample std over the seeds each model "
             "was tuned in (the column 'seeds reaching' counts them).",
             f"'to {baseline} final': this model's trials/seconds to reach {baseline}'s final estimate of the same "
             f"seed, over the seeds that reached it; '{baseline} to match': {baseline}'s trials/seconds to reach this "
             f"model's final estimate, over the seeds where it did (in brackets). 'x fewer trials' / 'x less "
             f"time': {baseline}'s trials / seconds to its own final estimate over this model's, over the seeds "
             "that reached it (the goal is >= 3; the long-term goal 10).",
             f"'worst est. / {baseline}'s': the largest ratio of this model's best network estimate to {baseline}'s "
             f"at the same trial count, once both have one (after the first round); 'share of trials behind': of those "
             f"trial counts, where it was above {baseline}'s (<= 1 and 0: never worse than {baseline}).",
             "A network's estimate exists once every task has a measurement: the scheduler's first round gives "
             "each task one batch, so no curve starts before tasks x per-iter trials."]
    notes.extend(settings)
    if retimed:
        notes.append("tuned ms and x reference: every compiled library and the reference timed again at the end, "
                     "back to back and interleaved (the tuning runs' own figures are in summary.json, *_while_tuning).")
    return "\n".join(lines) + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"
