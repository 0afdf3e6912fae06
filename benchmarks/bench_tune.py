"""End-to-end tuning benchmark: held-out networks, several seeds, TVM's cost models and ours side by side.

For every network and seed, each cost model tunes the same network with the same trial
budget, task scheduler and seed (the tune stage's code: `tcl.tvm.stage.run_tuning_stage`,
one MLflow run each); `--baseline-trials` gives the baseline (XGB) a longer budget, e.g. 3x,
to ask whether a model matches it in a third of its trials. Then, per network and cost
model, over the seeds (mean +- std): trials and wall seconds to reach the baseline's final
latency estimate (and in how many seeds it was reached at all), the baseline's trials and
seconds to reach the model's final estimate, the final estimate, the cost model's share of
tuning time, the tuned network's latency and its speed-up over PyTorch eager on the same
CPU. Curves (mean best latency vs trials and vs seconds, one band per model) are saved as
PNG, logged to MLflow and declared as DVC plots. A drafted run (`+draft`) is also set against
the same model's verify-only runs: its best estimate at five trial counts against their range
over the seeds (Pruner's draft must keep the curve within verify-only's seed spread).

    python benchmarks/bench_tune.py --networks resnet50 mobilenet_v2 --image-size 224 \\
        --trials 256 --baseline-trials 768 --seeds 0 1 2 --models xgb random tcl tlp tenset_mlp

Learned models come from the MLflow registry the first time (run `dvc repro` first; TLP and
Tenset-MLP need `tlp`/`tenset_mlp` in train.models) and are then pinned: their bundles are saved
under <out>/models/<model>/ (with the registered version and a sha256; DVC-tracked) and every
later seed, in this session or another, tunes with those files. Pick networks that are not in the models' training data
(params.yaml `split.holdout_networks`). Writes <out>/summary.{json,md}, <out>/<network>.png
and, per network, seed and model, <out>/<network>/seed<k>/<model>/ (the run's table and curves.csv,
its database and compiled library). A rerun with the same trials keeps every (seed, model) already
tuned: stop it at any time and run it again, or add a model to an earlier run.
"""

from __future__ import annotations

import argparse
import copy
import csv
import hashlib
import json
import math
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flows import _tvm_first  # noqa: E402,F401  (before MLflow: see flows/_tvm_first.py)
from benchmarks._out import mean_std, provenance, provenance_line  # noqa: E402
from tcl.config import apply_overrides, load_params  # noqa: E402
from tcl.platforms import get_platform  # noqa: E402
from tcl.tvm.pinned import weight_digests  # noqa: E402
from tcl.tvm.stage import run_tuning_stage  # noqa: E402
from tcl.workloads.settings import WorkloadSettings  # noqa: E402

# Every run tuned before rows recorded `num_trials_per_iter` used 8 trials per task per round.
LEGACY_PER_ITER = 8
# search settings a run's directory and the keep-check tell apart
SEARCH_KEYS = ("population", "genetic_iters", "eps_greedy", "max_sketch_share", "wide_batches", "first_batch")
# params.yaml tune.psa.cpu until benchmarks/calibrate_psa.py searched them (stop 58)
PSA_RATES_BEFORE_CALIBRATION = {"ops_per_cycle": 2.0, "vector_registers": 16, "l1_loads_per_cycle": 2.0,
                                "l2_bytes_per_cycle": 32.0, "l3_bytes_per_cycle": 16.0, "dram_gbs_per_core": 25.0,
                                "line_bytes": 64, "loop_overhead_cycles": 1.0}
# the candidates every drafted run verified before runs of other `tune.draft.verify` were told apart (stop 77)
LEGACY_DRAFT_VERIFY = 64
# the population every drafted run searched (tune.draft.population) before runs of others were told apart (stop 78)
LEGACY_DRAFT_POPULATION = 512
FIGURES = ("final_est_ms", "tuned_ms", "speedup_vs_reference", "cost_model_share", "wall_s")


def read_curves(path: Path) -> dict[str, list[tuple[int, float, float]]]:
    """cost model -> [(trial, seconds, estimated ms)] from a tuning run's curves.csv."""
    out: dict[str, list[tuple[int, float, float]]] = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            out.setdefault(row["cost_model"], []).append(
                (int(row["trial"]), float(row["seconds"]), float(row["estimated_ms"])))
    return out


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


def psa_tag(rates: dict[str, Any] | None) -> str:
    """'-psa<digest>' for a drafting run whose PSA rates are not the CPU rates every drafted run used before
    benchmarks/calibrate_psa.py (rows recorded none then); '' for those (the GPU's rates never changed)."""
    if not rates or rates == PSA_RATES_BEFORE_CALIBRATION or "ops_per_cycle" not in rates:
        return ""
    return "-psa" + hashlib.sha256(json.dumps(rates, sort_keys=True).encode()).hexdigest()[:6]


def search_tag(search: dict[str, Any] | None, drafted: bool = False) -> str:
    """'-population256-genetic_iters2' for a search of other SEARCH_KEYS than MetaSchedule's defaults, '' for
    the defaults (and for rows from before runs recorded their search). A drafting run's population is the
    draft's (tune.draft.population), told apart from the LEGACY_DRAFT_POPULATION of every drafted run before;
    its PSA rates count (`psa_tag`), and so does the number the model verifies ('-verify128') unless it is
    the 64 of every drafted run before (`draft_verify`)."""
    from tcl.tvm.tuning import SearchSettings

    default = asdict(SearchSettings()) | ({"population": LEGACY_DRAFT_POPULATION} if drafted else {})
    tag = "".join(f"-{k}{search[k]}" for k in SEARCH_KEYS if search and k in search and search[k] != default[k])
    return (tag + (psa_tag((search or {}).get("psa")) + verify_tag(search) if drafted else "")
            + controller_tag(search) + boost_tag(search))


def verify_tag(search: dict[str, Any] | None) -> str:
    """'-verify128' for a drafting run whose model scored other than LEGACY_DRAFT_VERIFY candidates a call."""
    verify = (search or {}).get("draft_verify", LEGACY_DRAFT_VERIFY)
    return "" if verify == LEGACY_DRAFT_VERIFY else f"-verify{verify}"


def boost_tag(search: dict[str, Any] | None) -> str:
    """'-boost_run' for a run whose boosted trees learned from every task of the run (tune.online.boost_scope);
    '' for trees per task, the default (and every run before the scope existed)."""
    scope = (search or {}).get("boost_scope")
    return f"-boost_{scope}" if scope else ""


def controller_statistic(search: dict[str, Any] | None) -> str | None:
    """What a run's Moses controller took the CV over (None: no controller); every controlled run before stop 61
    recorded none and took it over the best so far."""
    controller = (search or {}).get("controller")
    return controller.get("statistic", "best_so_far") if controller else None


def controller_tag(search: dict[str, Any] | None) -> str:
    """'-cv_batch_best' for a run whose Moses controller took the CV over each batch's own best; '' without a
    controller and for the controller over the best so far."""
    statistic = controller_statistic(search)
    return "" if statistic in (None, "best_so_far") else f"-cv_{statistic}"


def row_search_tag(row: dict[str, Any]) -> str:
    """The search tag of a tuned row, from the settings it recorded."""
    search = row.get("search") or {}
    return search_tag(search, drafted="draft_verify" in search)


def run_label(model: str, per_iter: int, tag: str = "") -> str:
    """A run's directory under <network>/seed<k>/: the model's name, its trials per task per round unless
    they are the legacy 8, and its search tag, so runs of one model with other settings sit side by side."""
    return (model if per_iter == LEGACY_PER_ITER else f"{model}-{per_iter}per-iter") + tag


def search_label(model: str, row: dict[str, Any]) -> str:
    """A row's name where runs of one model with other searches are reported side by side
    ('tenset_mlp [search 512x4]'); runs from before stop 39 recorded no search: TVM's defaults."""
    from tcl.tvm.tuning import SearchSettings

    default = asdict(SearchSettings())
    search = {**default, **(row.get("search") or {})}
    wide = f", the first {search['wide_batches']} wide" if search.get("wide_batches") else ""
    eps = f", {search['eps_greedy']:g} at random" if search["eps_greedy"] != default["eps_greedy"] else ""
    spread = (f", a sketch at most {search['max_sketch_share']:g} of a batch"
              if search["max_sketch_share"] != default["max_sketch_share"] else "")
    psa = ""
    if "draft_verify" in search:
        tag = psa_tag(search.get("psa"))
        psa = f", PSA rates {tag[1:]}" if tag else ", uncalibrated PSA"
        if verify_tag(search):
            psa += f", the model verifies {search['draft_verify']}"
    controller = f", CV over {controller_statistic(search).replace('_', ' ')}" if controller_tag(search) else ""
    boost = f", trees over the {search['boost_scope']}'s tasks" if boost_tag(search) else ""
    first = f", {search['first_batch']} in a task's first batch" if search.get("first_batch") else ""
    return (f"{model} [search {search['population']}x{search['genetic_iters']}{eps}{spread}{wide}{first}{psa}"
            f"{controller}{boost}]")


def tuned_models(run_dir: Path, platform: str, budgets: dict[str, int], digests: dict[str, set[str]] | None = None,
                 per_iters: dict[str, int] | None = None, tags: dict[str, str] | None = None,
                 every_search: bool = False) -> dict[str, tuple[dict[str, Any], list]]:
    """cost model -> (table row, curve) for every model an earlier run tuned for this (network, seed)
    with its trial budget in `budgets`, its trials per task per round in `per_iters`, its search tag in
    `tags` (none: the default search) and, for a learned model in `digests`, with a bundle of one of those
    digests (a run with other weights is tuned again). `every_search` keeps the runs of other search tags
    too, each under its `search_label` (the report's own row, next to the model's current search).

    The full benchmark takes hours here, so a seed's models are tuned one at a time, each
    into <run_dir>/<model>/: a rerun keeps what is there and a kill loses at most the model that
    was being tuned.
    """
    done: dict[str, tuple[dict[str, Any], list]] = {}
    for table_path in sorted(run_dir.glob(f"*/{platform}.json")):
        curves_path = table_path.parent / platform / "curves.csv"
        if not (table_path.exists() and curves_path.exists()):
            continue  # killed before its curves were written
        curves = read_curves(curves_path)
        for model, row in json.loads(table_path.read_text()).items():
            pinned = digests.get(model) if digests else None
            if pinned and row.get("model", {}).get("sha256") not in pinned:
                continue
            rounds = int(row.get("num_trials_per_iter", LEGACY_PER_ITER))
            if per_iters and rounds != per_iters.get(model, LEGACY_PER_ITER):
                continue
            key = model
            if row_search_tag(row) != (tags or {}).get(model, ""):
                if not every_search:
                    continue
                key = search_label(model, row)
            if int(row["trial_budget"]) == budgets.get(model) and model in curves:
                done.setdefault(key, ({**row, "cost_model": key}, curves[model]))
    return done


def curve_final(curve: list) -> float:
    """A curve's last estimate, read off the curve rather than the row: curves.csv keeps 6 digits, so a row's
    full-precision final can sit just below the very point that reached it."""
    return next((p.estimated_latency for p in reversed(curve) if math.isfinite(p.estimated_latency)), math.nan)


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


def pin_learned_models(models: list[str], platform, params: dict[str, Any], pin_dir: Path,
                       create: bool = True) -> dict[str, dict]:
    """Save each learned model's bundle under <pin_dir>/<model>/ the first time (the registry's choice
    now) and tune every seed, in this session or a later one, with those files: model -> its pin
    (`bundle_dir`, `sha256`, the registered version it came from). Without `create`, only the
    models pinned already."""
    from tcl.tvm.names import REGISTERED_AS, parse_cost_model
    from tcl.tvm.pinned import PIN_FILE, pin_bundle
    from tcl.tvm.stage import registered_choice

    pins = {}
    # `tcl`, `tcl+moa` and `tcl+ft` tune with the same pinned weights; an ensemble with its members'
    for model in dict.fromkeys(m for spec in map(parse_cost_model, models) if not spec.builtin for m in spec.members):
        if model in pins or not (create or (pin_dir / model / PIN_FILE).exists()):
            continue
        registered = REGISTERED_AS.get(model, model)
        pin = pins[model] = pin_bundle(pin_dir / model,
                                       lambda r=registered: registered_choice(r, platform, params, print))
        print(f"{model}: pinned to {pin['bundle_dir']} ({pin.get('registered_model')} v{pin.get('version')}, "
              f"data {pin.get('data_version')}, sha256 {pin['sha256'][:12]})")
    return pins


def run_digests(members: tuple[str, ...], pins: dict[str, dict]) -> set[str]:
    """The digests a run's row records when it tuned with these pinned weights: a model's own (tcl.tvm.pinned
    weight_digests), or for an ensemble the digest over its members' (tcl.tvm.pinned.ensemble_pin)."""
    from tcl.tvm.pinned import ensemble_pin

    if len(members) == 1:
        return weight_digests(pins[members[0]])
    return {ensemble_pin([pins[m] for m in members], members)["sha256"]}


def library_path(run_dir: Path, platform: str, model: str, network: str, per_iter: int, tag: str = "") -> Path | None:
    """The compiled library a (seed, model) run left, if it is still there (libraries are not committed)."""
    path = run_dir / run_label(model, per_iter, tag) / platform / model / f"{network}.so"
    return path if path.exists() else None


def retime(network: str, shapes: WorkloadSettings, platform, libraries: dict[Any, Path],
           rounds: int) -> tuple[dict[Any, float], float]:
    """Each compiled library of `network` and its reference timed again, interleaved over `rounds`.

    The tuning runs timed their libraries hours apart, each under whatever else ran then
    (one seed's 'random' build read 37 ms there and 18-22 ms when timed again); timed back to
    back, the latencies share one machine state. Median over rounds; returns (library key -> ms,
    reference ms)."""
    from tcl.tvm.e2e import CompiledNetwork, reference_latency_ms
    from tcl.workloads import load_network

    net = load_network(network, shapes)
    timers = {key: CompiledNetwork.load(str(path), platform, net.inputs) for key, path in libraries.items()}
    times: dict[Any, list[float]] = {key: [] for key in timers}
    reference = []
    for _ in range(rounds):
        reference.append(reference_latency_ms(net.reference, net.inputs, platform.threads, repeats=10))
        for key, timer in timers.items():
            times[key].append(timer.latency_ms(repeats=10))
    return {key: float(np.median(v)) for key, v in times.items()}, float(np.median(reference))


def apply_retimed(tables: dict[int, list[dict[str, Any]]], tuned_ms: dict[tuple[int, str], float],
                  reference_ms: float) -> None:
    """Put the back-to-back latencies into the seeds' rows (the tuning run's own stay as `*_while_tuning`)."""
    for seed, rows in tables.items():
        for row in rows:
            row["tuned_ms_while_tuning"], row["reference_ms_while_tuning"] = row["tuned_ms"], row["reference_ms"]
            row["tuned_ms"] = tuned_ms[seed, row["cost_model"]]
            row["reference_ms"] = reference_ms
            row["speedup_vs_reference"] = reference_ms / row["tuned_ms"]


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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                    help="override one params key for this benchmark, e.g. --set tune.draft.verify=128 (repeatable; "
                         "recorded in summary.json)")
    ap.add_argument("--platform", default="local-1c")
    ap.add_argument("--networks", nargs="+", help="default: tune.network")
    ap.add_argument("--image-size", type=int, help="image networks' input size (default workloads.image_size)")
    ap.add_argument("--seq-len", type=int, help="token networks' sequence length (default workloads.seq_len)")
    ap.add_argument("--trials", type=int)
    ap.add_argument("--baseline-trials", type=int,
                    help="the baseline's (XGB's) budget, e.g. 3x --trials: does a model at 1/3 of its trials match it?")
    ap.add_argument("--per-iter", type=int, help="trials per task per scheduler round (default tune.num_trials_per_iter)")
    ap.add_argument("--learned-per-iter", type=int,
                    help="the same for the learned models only (default tune.learned_trials_per_iter)")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--models", nargs="+")
    ap.add_argument("--report-only", action="store_true",
                    help="tune nothing: report the seeds whose every model an earlier run tuned")
    ap.add_argument("--every-search", action="store_true",
                    help="with --report-only and --retime-rounds 0: also report each model's runs with other search "
                         "settings than params.yaml's, as rows of their own ('tenset_mlp [search 512x4]')")
    ap.add_argument("--retime-rounds", type=int, default=3,
                    help="time every compiled library and the reference again, back to back (0: keep the runs' own)")
    ap.add_argument("--out", default="reports/bench_tune")
    ap.add_argument("--report-name", default="summary",
                    help="the report's files: <out>/<name>.md/.json and one <network>[-<name>].png each, so a report "
                         "of other settings (--learned-per-iter 4) sits beside the main one")
    ap.add_argument("--pin-dir", help="where the learned models' bundles are pinned (default <out>/models)")
    ap.add_argument("--cpu", type=int,
                    help="run on this one core: search, builds and measurements (one process per core, each "
                         "with its own seeds, splits a long benchmark without two runs timing on one core)")
    args = ap.parse_args()
    if args.every_search and not (args.report_only and args.retime_rounds == 0):
        ap.error("--every-search reports finished runs: it needs --report-only and --retime-rounds 0")
    params = apply_overrides(load_params(args.params), args.set)
    if args.cpu is not None:
        from tcl.collect.measure import pin_to_cpus

        params["collect"]["runner"]["cpus"] = [args.cpu]  # the runner's workers pin themselves to these
        pin_to_cpus((args.cpu,))  # this process and the builder pool it starts
    tune, workloads = params["tune"], params.setdefault("workloads", {})
    for key, value in (("trials", args.trials), ("num_trials_per_iter", args.per_iter),
                       ("learned_trials_per_iter", args.learned_per_iter), ("cost_models", args.models)):
        if value is not None:
            tune[key] = value
    for key, value in (("image_size", args.image_size), ("seq_len", args.seq_len)):
        if value is not None:
            workloads[key] = value
    platform = get_platform(params, args.platform)
    out = Path(args.out)
    models = list(tune["cost_models"])
    baseline = tune.get("baseline", "xgb") if tune.get("baseline", "xgb") in models else models[0]
    budgets = {m: int(tune["trials"]) for m in models}
    budgets[baseline] = args.baseline_trials or budgets[baseline]
    pins = pin_learned_models(models, platform, params, Path(args.pin_dir or out / "models"),
                              create=not args.report_only)
    from tcl.tvm.names import parse_cost_model
    from tcl.tvm.stage import trials_per_iter

    per_iters = trials_per_iter(tune, models, [m for m in models if not parse_cost_model(m).builtin])
    from tcl.tvm.controller import ControllerSettings
    from tcl.tvm.draft import DraftSettings
    from tcl.tvm.online import OnlineSettings
    from tcl.tvm.psa import make_analyzer
    from tcl.tvm.tuning import SearchSettings, recorded_settings

    draft = DraftSettings.from_params(params)
    psa_rates = asdict(make_analyzer(platform, params).knobs)
    controllers = {m: ControllerSettings.from_params(params).for_run(parse_cost_model(m).moses) for m in models}
    online = OnlineSettings.from_params(params)
    drafts = {m: draft.for_run(parse_cost_model(m).draft) for m in models}
    # the tag each run will record, read as a finished run's row is read (row_search_tag)
    tags = {m: row_search_tag({"search": recorded_settings(
        SearchSettings.for_cost_model(params, m), drafts[m], psa_rates, controllers[m],
        online.recorded(parse_cost_model(m).adaptation))}) for m in models}
    bundles = {base: p["bundle_dir"] for base, p in pins.items()}
    digests = {m: run_digests(parse_cost_model(m).members, pins) for m in models
               if all(b in pins for b in parse_cost_model(m).members)}
    summary, seed_tables, network_curves, pngs = {}, {}, {}, []
    retimed = bool(args.retime_rounds)  # every network's libraries timed again
    for network in args.networks or [tune["network"]]:
        tables, curves = {}, {}
        for seed in args.seeds:
            run_dir = out / Path(network).stem / f"seed{seed}"
            done = tuned_models(run_dir, platform.name, budgets, digests, per_iters, tags, args.every_search)
            kept = [m for m in models if m in done]
            if kept:
                print(f"{network} seed {seed}: {', '.join(kept)} tuned by an earlier run ({run_dir}), kept")
            missing = [m for m in models if m not in done and not any(k.startswith(f"{m} [") for k in done)]
            if args.report_only and baseline not in done:
                print(f"{network} seed {seed}: {baseline} not tuned yet, seed left out of the report")
                continue
            if args.report_only and missing:  # each model's figures are over the seeds that tuned it
                print(f"{network} seed {seed}: {', '.join(missing)} not tuned yet, reported without them")
                missing = []
            for model in missing:
                run_params = copy.deepcopy(params)
                run_params["seed"] = seed
                run_params["tune"].update(network=network, cost_models=[model], trials=budgets[model],
                                          bundles=bundles)
                run_tuning_stage(platform, run_params, run_dir / run_label(model, per_iters[model], tags[model]))
                done = tuned_models(run_dir, platform.name, budgets, digests, per_iters, tags)
            tuned = [m for m in models if m in done] + sorted(k for k in done if k not in models)
            tables[seed] = seed_table(done, tuned, baseline)
            curves[seed] = {m: done[m][1] for m in tuned}
        name = Path(network).stem
        if not tables:
            continue
        libraries = {(seed, m): library_path(out / name / f"seed{seed}", platform.name, m, name, per_iters[m],
                                                   tags[m])
                     for seed in tables for m in curves[seed]} if args.retime_rounds else {}
        if args.retime_rounds and all(libraries.values()):
            print(f"{name}: timing {len(libraries)} compiled libraries and the reference again, "
                  f"interleaved, {args.retime_rounds} rounds")
            apply_retimed(tables, *retime(network, WorkloadSettings.from_params(params), platform, libraries, args.retime_rounds))
        elif args.retime_rounds:
            retimed = False
            print(f"{name}: some compiled libraries are missing; tuned latencies are the tuning runs' own")
        summary[name], seed_tables[name], network_curves[name] = summarize(tables, baseline), tables, curves
        png = f"{name}.png" if args.report_name == "summary" else f"{name}-{args.report_name}.png"
        pngs.append(plot_network(curves, out / png,
                                 f"{name} on {platform.name}: {tune['trials']} trials ({baseline}: "
                                 f"{budgets[baseline]}), seeds {sorted(tables)}"))
    if not summary:
        raise SystemExit("nothing to report: no seed has every model tuned yet")
    seeds = {name: sorted(tables) for name, tables in seed_tables.items()}
    prov = provenance(__file__)  # the learned models' own data versions are in their pins (per_seed rows)
    notes = (search_notes(seed_tables) + draft_notes(seed_tables) + modifier_notes(network_curves)
             + controller_notes(seed_tables) + task_notes(seed_tables, baseline) + fixed_program_notes(seed_tables))
    text = (render(summary, baseline, seeds, budgets, retimed=retimed, settings=notes) + f"- {provenance_line(prov)}\n"
            + "\n## Each run\n\n" + per_seed_table(seed_tables, network_curves, baseline, budgets[baseline]))
    drafted = draft_range_table(seed_tables, network_curves, int(tune["trials"]))
    if drafted:
        text += "\n## Drafted runs against verify-only's seed spread\n\n" + drafted
    print(text)
    report_md, report_json = out / f"{args.report_name}.md", out / f"{args.report_name}.json"
    report_md.write_text(text)
    report_json.write_text(json.dumps({**prov, "platform": platform.name, "seeds": seeds,
                                      "trials": budgets, "trials_per_iter": per_iters,
                                      "overrides": args.set,
                                      "search": {k: tune.get(k) for k in ("search", "learned_search", "draft",
                                                                           "controller", "guard", "online")},
                                      "workloads": workloads,
                                      "networks": summary, "per_seed": seed_tables}, indent=2))
    from tcl import tracking

    with tracking.run(params, f"bench-tune-{platform.name}", {"stage": "bench_tune"}):
        tracking.log_params({"networks": ",".join(summary),
                             "seeds": ";".join(f"{n}:{','.join(map(str, s))}" for n, s in seeds.items()),
                             "trials": json.dumps(budgets), "cost_models": ",".join(tune["cost_models"])})
        for path in (*pngs, report_md, report_json):
            tracking.log_artifact(str(path))
    print("curves: " + ", ".join(str(p) for p in pngs))


if __name__ == "__main__":
    main()
