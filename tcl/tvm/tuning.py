"""Tune a network with MetaSchedule's gradient task scheduler and a chosen cost model.

The network goes PyTorch -> Relax -> fused tasks (the same fusion `compile_relax`
applies, so the database's keys are the ones compilation looks up). Every batch
of measurements adds a point to the tuning curve; the cost model is timed.
"""

from __future__ import annotations

import dataclasses
import logging
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tqdm.auto import tqdm

from ..config import check_keys, settings_from
from .names import BUILTIN_COST_MODELS, parse_cost_model

log = logging.getLogger(__name__)


@dataclass
class TuningResult:
    network: str
    platform: str
    cost_model: str
    trials: int        # measured (the scheduler may overshoot the budget by a batch)
    trial_budget: int  # asked for
    tasks: int
    wall_seconds: float
    cost_model_seconds: float
    draft_seconds: float | None = None  # +draft: PSA's part of cost_model_seconds
    scored_candidates: int = 0          # candidates the search asked the cost model to score
    draft_analysed: int | None = None   # +draft: programs PSA analysed (the rest were looked up)
    curve: list = field(default_factory=list)  # CurvePoint per measured batch
    feature_cache_hit_rate: float | None = None  # share of scored candidates whose features were cached
    stopped_tasks: list = field(default_factory=list)  # names of tasks the Moses controller ended, in order
    fallback_tasks: list = field(default_factory=list)  # +guard: tasks TVM's XGB scored when the run ended
    guard_switches: list = field(default_factory=list)  # +guard: (task, measured batch, "fallback" | "inner" | ...)
    task_results: list = field(default_factory=list)  # per task: name, weight, best latency (us), trials
    settings: dict = field(default_factory=dict)  # the search's settings in force (+ draft_verify, controller when on)
    database: Any = None
    work_dir: str = ""

    @property
    def cost_model_share(self) -> float:
        return self.cost_model_seconds / self.wall_seconds if self.wall_seconds else 0.0

    @property
    def draft_share(self) -> float | None:
        """+draft: PSA's share of the wall time (the rest of cost_model_share is the verifying model)."""
        if self.draft_seconds is None or not self.wall_seconds:
            return None
        return self.draft_seconds / self.wall_seconds

    @property
    def final_estimate(self) -> float:
        return self.curve[-1].estimated_latency if self.curve else float("nan")


def make_builtin_cost_model(name: str, seed: int, num_tuning_cores: int):
    """TVM's own cost models by short name (the baselines; search modifiers such as +draft are tune_network's)."""
    from tvm.s_tir import meta_schedule as ms

    name = parse_cost_model(name).base if name.split("+")[0] in BUILTIN_COST_MODELS else name

    if name == "xgb":
        return ms.cost_model.XGBModel(extractor=ms.feature_extractor.PerStoreFeature(),
                                      adaptive_training=True, num_tuning_cores=num_tuning_cores)
    if name == "random":
        return ms.cost_model.RandomModel(seed=seed)
    raise ValueError(f"unknown built-in cost model '{name}'; choose from {BUILTIN_COST_MODELS} "
                     "or pass a loaded model")


@dataclass(frozen=True)
class SearchSettings:
    """`tune.search` of params.yaml: MetaSchedule's evolutionary search (its defaults here)."""

    population: int = 512            # candidates kept per generation
    genetic_iters: int = 4           # generations per batch
    eps_greedy: float = 0.05         # share of each batch picked at random instead of by the model
    init_measured_ratio: float = 0.2  # share of the first population taken from measured programs
    mutate_prob: float = 0.85
    max_sketch_share: float = 1.0    # most of a batch one sketch may take while others were scored (tcl.tvm.spread)
    wide_batches: int = 0            # tune.learned_search only: a task's first batches search with `wide`
    first_batch: int = 0             # measure only this many of a task's first batch (tcl.tvm.firstbatch); 0: all
    wide: "SearchSettings | None" = None  # (tune.search's settings; tcl.tvm.widestart)

    def __post_init__(self):
        if self.wide_batches and self.wide is None:
            raise ValueError("wide_batches is a tune.learned_search key: the learned models' first batches "
                             "search with tune.search's settings")

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "SearchSettings":
        return settings_from(cls, (params.get("tune") or {}).get("search"), "tune.search")

    @classmethod
    def for_cost_model(cls, params: dict[str, Any], name: str) -> "SearchSettings":
        """`tune.search` for `name`, with `tune.learned_search`'s keys in place for a learned model: a model
        that already ranks programs may find a task's good ones with a smaller search (less time a round),
        after `wide_batches` batches of tune.search's own while it has no measurement of the task."""
        tune = params.get("tune") or {}
        base = dict(tune.get("search") or {})
        learned = dict(tune.get("learned_search") or {})
        if not learned or parse_cost_model(name, known_base=False).builtin:
            return settings_from(cls, base, "tune.search")
        check_keys(learned, [f.name for f in dataclasses.fields(cls) if f.name != "wide"], "tune.learned_search")
        wide = settings_from(cls, base, "tune.search") if learned.get("wide_batches") else None
        return settings_from(cls, {**base, **learned, "wide": wide}, "tune.learned_search")

    def strategy(self, controller=None, ledger=None):
        """A MetaSchedule EvolutionarySearch (after `wide_batches` batches of the `wide` one); each TuneContext
        gets a clone of it. With `controller` (tcl.tvm.controller.ControllerSettings) a task stops once it
        settles; the clones share `ledger` (tcl.tvm.controller.TaskLedger), which names the tasks ended."""
        from tvm.s_tir import meta_schedule as ms

        search = ms.search_strategy.EvolutionarySearch(
            population_size=self.population, init_measured_ratio=self.init_measured_ratio,
            genetic_num_iters=self.genetic_iters, genetic_mutate_prob=self.mutate_prob,
            eps_greedy=self.eps_greedy)
        if self.wide_batches:
            from .widestart import WideStartSearch

            search = WideStartSearch(self.wide.strategy(), search, self.wide_batches)
        if self.max_sketch_share < 1:
            from .spread import SketchSpreadSearch

            search = SketchSpreadSearch(search, self.max_sketch_share, self.eps_greedy)
        if self.first_batch:
            from .firstbatch import FirstBatchSearch

            search = FirstBatchSearch(search, self.first_batch)
        if controller is None:
            return search
        if ledger is None:  # the controller reads each task's history from the ledger's CurveRecorder
            raise ValueError("a search with the controller (tune.controller) needs the run's TaskLedger")
        from .controller import SettlingSearch

        return SettlingSearch(search, controller, ledger)


def recorded_settings(search: SearchSettings, draft=None, psa: dict | None = None, controller=None,
                      online: dict | None = None, guard=None) -> dict[str, Any]:
    """The settings a tuning run records beside its result, from the ones it tunes with: the search in force
    (a drafting run searches as the draft says: its population, its spread over sketches), with `draft`'s
    verify count and PSA's rates `psa`, the `controller`'s settings and the online adapter's `online` record
    where each is on, and a guarded drafting run's `guard.draft_fallback` where it is off (with its
    `cold_draft_batches`). One place, so that benchmarks/bench_tune.py, which tells runs apart by these, expects
    what a run records."""
    if draft is not None:
        search = draft.search(search)
    settings = dataclasses.asdict(search)
    if draft is not None:
        settings.update(draft_verify=draft.verify, psa=psa)
        if guard is not None and not guard.draft_fallback:
            settings["draft_fallback"] = False
            if guard.cold_draft_batches:
                settings["cold_draft_batches"] = guard.cold_draft_batches
    if controller is not None:
        settings["controller"] = dataclasses.asdict(controller)
    return settings | (online or {})


def tune_contexts(relax_mod, platform, work_dir: str | Path, seed: int, search: SearchSettings | None = None,
                  network: str = "network", controller=None, ledger=None) -> tuple[list, list[float]]:
    """One TuneContext per task of `relax_mod` on the platform's target (with `search`'s strategy) and the
    tasks' weights (the tasks' order is written into the controller's `ledger`)."""
    from tvm.s_tir import meta_schedule as ms

    # MetaSchedule's per-task logger set-up formats the name of every handler on its logger and crashes on
    # an unnamed one (seen under pytest after a few tuning runs); its dictConfig would drop it anyway.
    ms_logger = logging.getLogger("tvm.s_tir.meta_schedule")
    for handler in [h for h in ms_logger.handlers if h.get_name() is None]:
        ms_logger.removeHandler(handler)
    extracted = ms.relax_integration.extract_tasks(relax_mod, platform.tvm_target())
    if not extracted:
        raise RuntimeError(f"{network}: no tunable tasks on {platform.name}")
    contexts, weights = ms.relax_integration.extracted_tasks_to_tune_contexts(
        extracted, str(work_dir), strategy=(search or SearchSettings()).strategy(controller, ledger), seed=seed,
        num_threads=platform.threads)
    if ledger is not None:  # by the contexts: MetaSchedule skips a task that is scheduled already
        ledger.order = {str(ctx.task_name): i for i, ctx in enumerate(contexts)}
    return contexts, weights


def tune_network(relax_mod, platform, *, network: str, cost_model, cost_model_name: str, trials: int,
                 work_dir: str | Path, seed: int = 0, num_trials_per_iter: int = 16,
                 runner_cfg: dict | None = None, progress: bool = True, resume: bool = False,
                 measurer=None, search: SearchSettings | None = None, controller=None, draft=None,
                 guard=None, params: dict | None = None) -> TuningResult:
    """Tune every task of `relax_mod` (a fused Relax module) for `trials` measurements in total.

    A run starts from an empty `work_dir` (its database included) unless `resume`: a database
    left by an earlier run would warm-start the search, and the curve would not be this run's.
    Trials are timed by `measurer`, or by the one `make_measurer` gives for `runner_cfg`
    (here, or on the platform's board over RPC). `controller` (tcl.tvm.controller.ControllerSettings)
    stops measuring tasks whose best latency has settled, leaving their trials to the others; `draft`
    (tcl.tvm.draft.DraftSettings) has PSA draft and `cost_model` verify; `guard` (tcl.tvm.guard.GuardSettings)
    lets TVM's XGB score the tasks it ranks better than a learned `cost_model` (with +handoff: every task after
    its first batches). Each is on when its settings say `enabled` or `cost_model_name` carries its modifier
    (+moses, +draft, +guard, +handoff: tcl.tvm.names); `params`
    gives PSA's knobs (params.yaml tune.psa).
    """

    from .controller import ControllerSettings, TaskLedger
    from .draft import DraftSettings, DraftThenVerify
    from .guard import GuardedCostModel, GuardSettings
    from .psa import make_analyzer

    from tvm.s_tir import meta_schedule as ms

    from ..collect.intrinsics import load_tensor_intrinsics
    from ..collect.measure import make_measurer
    from .curve import CurveRecorder
    from .timed import TimedCostModel

    load_tensor_intrinsics()  # the space generator imports them: seconds this way, minutes under Prefect+MLflow

    # MetaSchedule prints a task table per batch; it stays in <work_dir>/logs, the bar shows progress.
    logging.getLogger("tvm.s_tir.meta_schedule").setLevel(logging.WARNING)
    work_dir = Path(work_dir)
    if not resume:
        shutil.rmtree(work_dir, ignore_errors=True)
    work_dir.mkdir(parents=True, exist_ok=True)
    spec = parse_cost_model(cost_model_name, known_base=False)  # the factory's own name; params were checked
    controller = (controller or ControllerSettings()).for_run(spec.moses)
    guard = (guard or GuardSettings()).for_run(spec)
    adapter = getattr(cost_model, "adapter", None)  # a learned model's online adaptation (read before the wrappers)
    guarded = None
    if guard is not None:
        fallback = make_builtin_cost_model("xgb", seed, platform.threads)
        op_types = getattr(getattr(cost_model, "bundle", None), "op_types", None)
        if op_types is None:
            log.warning("%s: the bundle does not say which operator types it was trained on; the guard does not "
                        "keep unfamiliar ones from it (retrain, or see tcl.tvm.pinned.add_op_types)", cost_model_name)
        cost_model = guarded = GuardedCostModel(cost_model, fallback, guard, op_types, handoff=spec.handoff)
    draft, drafted = (draft or DraftSettings()).for_run(spec.draft), None
    if draft is not None:
        search = draft.search(search or SearchSettings())
        cost_model = drafted = DraftThenVerify(cost_model, make_analyzer(platform, params), draft.verify)
    settings = recorded_settings(search or SearchSettings(), draft, dataclasses.asdict(cost_model.analyzer.knobs)
                                 if draft is not None else None, controller,
                                 adapter.settings.recorded(adapter.name) if adapter is not None else None, guard)
    ledger = TaskLedger()
    contexts, weights = tune_contexts(relax_mod, platform, work_dir, seed, search, network, controller, ledger)
    first_batch = min((search and search.first_batch) or num_trials_per_iter, num_trials_per_iter)
    first_round = len(contexts) * first_batch
    if trials < first_round:
        log.warning("%s: %d trials are fewer than the first round (%d tasks x %d trials per task): some tasks "
                    "get no measurement and the network's latency estimate stays NaN; give --trials >= %d",
                    network, trials, len(contexts), first_batch, first_round)
    runner_cfg = dict(runner_cfg or {})
    measurer = measurer or make_measurer(platform, {"timeout_sec": 60}, runner_cfg)
    timed = TimedCostModel(cost_model)
    bar = tqdm(total=trials, unit="trial", disable=not progress, desc=f"tune {network} [{cost_model_name}]")

    def on_batch(n: int, estimate: float) -> None:
        bar.update(n)
        bar.set_postfix_str(f"est {estimate * 1e3:.3f} ms")

    curve = ledger.curve = CurveRecorder(weights, on_batch)
    start = time.perf_counter()
    database = ms.tune.tune_tasks(
        tasks=contexts, task_weights=weights, work_dir=str(work_dir), max_trials_global=trials,
        num_trials_per_iter=num_trials_per_iter, builder=measurer.builder, runner=measurer.runner,
        database=ms.database.JSONDatabase(work_dir=str(work_dir)), cost_model=timed,
        measure_callbacks=[*measurer.tuning_callbacks(), *ms.measure_callback.MeasureCallback.create("default"),
                           curve],
        task_scheduler="gradient")
    wall = time.perf_counter() - start
    bar.close()
    if guarded is not None and guarded.unfamiliar:
        log.info("%s: scored by TVM's XGB throughout, operator types the model never trained on: %s", network,
                 ", ".join(f"{t} ({op})" for t, op in sorted(guarded.unfamiliar.items())))
    return TuningResult(network=network, platform=platform.name, cost_model=cost_model_name,
                        trials=curve.trials, trial_budget=trials, tasks=len(contexts), wall_seconds=wall,
                        cost_model_seconds=timed.seconds, curve=curve.points, database=database,
                        draft_seconds=drafted.draft_seconds if drafted is not None else None,
                        scored_candidates=timed.predicted,
                        draft_analysed=drafted.psa_scores.misses if drafted is not None else None,
                        stopped_tasks=list(ledger.stopped), settings=settings,
                        fallback_tasks=sorted(guarded.on_fallback) if guarded is not None else [],
                        guard_switches=list(guarded.switches) if guarded is not None else [],
                        task_results=curve.per_task([str(ctx.task_name) for ctx in contexts]),
                        work_dir=str(work_dir), feature_cache_hit_rate=_feature_cache_hit_rate(cost_model))


def _feature_cache_hit_rate(cost_model) -> float | None:
    """The learned model's feature-cache hit rate, under the wrappers (+draft, +guard) around it."""
    while not hasattr(cost_model, "features") and hasattr(cost_model, "inner"):
        cost_model = cost_model.inner
    return getattr(getattr(cost_model, "features", None), "hit_rate", None)
