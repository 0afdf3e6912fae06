"""Finished runs of the tuning benchmark (benchmarks/bench_tune.py): what a run's directory and report row are
called, from the search settings it recorded, and which runs a rerun keeps instead of tuning again.

A run's trials per task per round and the search settings it recorded are part of its directory's name
(`run_label`, `search_tag`), so runs of one model with other settings sit side by side under <network>/seed<k>/;
its trial budget and the digest of the weights it tuned with are checked against its row (`tuned_models`), so a
rerun never mistakes one run for another. Settings from before runs recorded them read as the values every run
then used (the LEGACY_* constants).
"""

from __future__ import annotations

import csv
import hashlib
import json
import math
from dataclasses import asdict
from pathlib import Path
from typing import Any

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


def read_curves(path: Path) -> dict[str, list[tuple[int, float, float]]]:
    """cost model -> [(trial, seconds, estimated ms)] from a tuning run's curves.csv."""
    out: dict[str, list[tuple[int, float, float]]] = {}
    with open(path, newline="") as fh:
        for row in csv.DictReader(fh):
            out.setdefault(row["cost_model"], []).append(
                (int(row["trial"]), float(row["seconds"]), float(row["estimated_ms"])))
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
    return (tag + (psa_tag((search or {}).get("psa")) + verify_tag(search) + fallback_tag(search) if drafted else "")
            + controller_tag(search) + boost_tag(search))


def fallback_tag(search: dict[str, Any] | None) -> str:
    """'-xgb_undrafted' for a guarded drafting run whose XGB scored its tasks undrafted (tune.guard.draft_fallback
    off), '-xgb_undrafted_after1' where PSA still drafted their first batch (tune.guard.cold_draft_batches);
    '' for PSA drafting for both, the default (and every guarded run before the key existed)."""
    search = search or {}
    if search.get("draft_fallback") is not False:
        return ""
    cold = search.get("cold_draft_batches", 0)
    return "-xgb_undrafted" + (f"_after{cold}" if cold else "")


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
        if fallback_tag(search):
            cold = search.get("cold_draft_batches", 0)
            after = f" after their first {cold} batch{'es' if cold > 1 else ''}" if cold else ""
            psa += f", XGB's tasks undrafted{after}"
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
