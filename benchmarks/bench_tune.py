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
tuned: stop it at any time and run it again, or add a model to an earlier run (which runs are kept, and what
a run's directory is called: benchmarks/_tune_runs.py; the report's tables, notes and curves:
benchmarks/_tune_report.py).
"""

from __future__ import annotations

import argparse
import copy
import json
import sys
from dataclasses import asdict
from pathlib import Path
from typing import Any

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flows import _tvm_first  # noqa: E402,F401  (before MLflow: see flows/_tvm_first.py)
from benchmarks._out import provenance, provenance_line  # noqa: E402
from benchmarks._tune_report import (draft_range_table, per_seed_table, plot_network, render,  # noqa: E402
                                     run_notes, seed_table, summarize)
from benchmarks._tune_runs import row_search_tag, run_label, tuned_models  # noqa: E402
from tcl.config import apply_overrides, load_params  # noqa: E402
from tcl.platforms import get_platform  # noqa: E402
from tcl.tvm.pinned import weight_digests  # noqa: E402
from tcl.tvm.stage import run_tuning_stage  # noqa: E402
from tcl.workloads.settings import WorkloadSettings  # noqa: E402


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
    from tcl.tvm.guard import GuardSettings
    from tcl.tvm.online import OnlineSettings
    from tcl.tvm.psa import make_analyzer
    from tcl.tvm.tuning import SearchSettings, recorded_settings

    draft = DraftSettings.from_params(params)
    psa_rates = asdict(make_analyzer(platform, params).knobs)
    controllers = {m: ControllerSettings.from_params(params).for_run(parse_cost_model(m).moses) for m in models}
    online = OnlineSettings.from_params(params)
    drafts = {m: draft.for_run(parse_cost_model(m).draft) for m in models}
    guards = {m: GuardSettings.from_params(params).for_run(parse_cost_model(m)) for m in models}
    # the tag each run will record, read as a finished run's row is read (row_search_tag)
    tags = {m: row_search_tag({"search": recorded_settings(
        SearchSettings.for_cost_model(params, m), drafts[m], psa_rates, controllers[m],
        online.recorded(parse_cost_model(m).adaptation), guards[m])}) for m in models}
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
    notes = run_notes(seed_tables, network_curves, baseline)
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
