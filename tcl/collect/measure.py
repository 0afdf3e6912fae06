"""Build and run candidate schedules for real (LocalBuilder / LocalRunner, or an RPC board).

Every candidate gets an outcome: run times, or the error that stopped it. Failed
builds and runs are data too (they teach a cost model what not to propose).
`make_measurer` is the one place that decides where a platform's programs are timed:
here (`collect.runner.mode: local`) or on a board behind TVM's RPC tracker (`rpc`,
see remote.py); the collector, active sampling and tuning all get their measurer there.
"""

from __future__ import annotations

import contextlib
import functools
import os
import warnings
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Outcome:
    run_secs: list[float]
    error_code: str  # "" when it ran
    error_msg: str


ALLOWED_CPUS_ENV = "TCL_ALLOWED_CPUS"


def allowed_cpus() -> set[int]:
    """The cores this program was started on (`taskset -c 0 ...`, a container's cpuset), kept in the
    environment on first use: worker processes started while their parent is pinned narrower (the
    collector's search core) still see the whole set."""
    value = os.environ.get(ALLOWED_CPUS_ENV)
    if value is None:
        cores = os.sched_getaffinity(0)
        os.environ[ALLOWED_CPUS_ENV] = ",".join(map(str, sorted(cores)))
        return set(cores)
    return {int(c) for c in value.split(",") if c}


def pin_to_cpus(cpus: tuple[int, ...] | None) -> None:
    """Restrict this process (and what it starts later) to `cpus`, never outside the cores the program
    was started on: under `taskset -c 0`, params' runner core 1 would time programs on the core another
    job runs on. None leaves it as it is; when none of `cpus` is allowed, the allowed cores, with a warning."""
    if not cpus:
        return
    allowed = allowed_cpus()
    usable = set(cpus) & allowed
    if not usable:
        warnings.warn(f"cores {list(cpus)} are outside the cores this program may use ({sorted(allowed)}: "
                      f"taskset, a cpuset, or fewer cores than params name); using those")
        usable = allowed
    os.sched_setaffinity(0, usable)


@contextlib.contextmanager
def pinned_to(cpus: tuple[int, ...] | None):
    """`pin_to_cpus` for a block: the caller gets its cores back afterwards, so a test run or a
    notebook that collects in-process is not left on the search core for everything it does next."""
    before = os.sched_getaffinity(0)
    pin_to_cpus(cpus)
    try:
        yield
    finally:
        os.sched_setaffinity(0, before)


def builder_worker_init(cpus: tuple[int, ...] | None = None) -> None:
    """Builder worker start-up: pin it, then import the tensor intrinsics. Building a candidate
    that uses one imports them; at start-up that has no timeout, inside a build it would."""
    from .intrinsics import load_tensor_intrinsics

    pin_to_cpus(cpus)
    load_tensor_intrinsics()


def runner_worker_init(cpus: tuple[int, ...] | None = None, threads: int = 1) -> None:
    """Runner worker start-up: only measurement runs on `cpus`, with `threads` TVM threads."""
    pin_to_cpus(cpus)
    os.environ["TVM_NUM_THREADS"] = str(threads)


def pooled_local_builder(timeout_sec: float, max_workers: int | None = None, process_uses: int = 256,
                         cpus: tuple[int, ...] | None = None):
    """A LocalBuilder whose worker processes live across build calls.

    TVM's LocalBuilder starts a fresh process pool on every `build` call, and each
    worker imports TVM first (~3 s here, more under load) while compiling one
    candidate takes ~0.1 s: for batches of 8-64 the import dominates. Reusing the
    pool, with workers recycled every `process_uses` builds (the reason TVM restarts
    them is a slow leak), keeps the same build function and error handling.
    """
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.builder import BuilderResult, PyBuilder
    from tvm.s_tir.meta_schedule.builder import local_builder as lb
    from tvm.support.popen_pool import PopenPoolExecutor, StatusKind

    @derived_object
    class PooledLocalBuilder(PyBuilder):
        def __init__(self):
            super().__init__()
            workers = max_workers or (len(cpus) if cpus else os.cpu_count()) or 1
            self.pool = PopenPoolExecutor(max_workers=workers, timeout=timeout_sec,
                                          maximum_process_uses=process_uses,
                                          initializer=functools.partial(builder_worker_init, cpus))
            # Start the workers (imports and initializer) now, not inside the first timed builds.
            list(self.pool.map_with_error_catching(abs, range(workers)))

        def build(self, build_inputs):
            jobs = [(None, None, b.mod, b.target, lb._serialize_params(b.params)) for b in build_inputs]
            results = []
            for res in self.pool.map_with_error_catching(lambda job: lb._worker_func(*job), jobs):
                if res.status == StatusKind.COMPLETE:
                    results.append(BuilderResult(res.value, None))
                elif res.status == StatusKind.TIMEOUT:
                    results.append(BuilderResult(None, f"LocalBuilder: Timeout, killed after {timeout_sec} seconds"))
                else:
                    results.append(BuilderResult(None, "LocalBuilder: An exception occurred\n" + str(res.value)))
            return results

    return PooledLocalBuilder()


def _runner_error_code(msg: str) -> str:
    return "timeout" if "timeout" in msg.lower() or "timed out" in msg.lower() else "run_error"


def _cpus(value) -> tuple[int, ...] | None:
    return tuple(int(c) for c in value) if value else None


def alloc_arguments(device, args_info, alloc_repeat: int) -> list:
    """LocalRunner's argument allocation: floating-point tensors random as MetaSchedule fills them, integer
    tensors zero. Random integers index out of bounds: every embedding lookup (`take` of BERT's token ids) then
    fails to run, so a network with one never gets a full latency estimate. Index 0 is valid for any gather."""
    import numpy as np
    from tvm.s_tir.meta_schedule.runner.utils import alloc_argument_common
    from tvm.s_tir.meta_schedule.utils import get_global_func_with_default_on_worker

    random_fill = get_global_func_with_default_on_worker("tvm.contrib.random.random_fill_for_measure", None)

    def fill(tensor) -> None:
        if np.issubdtype(np.dtype(str(tensor.dtype)), np.integer):
            tensor.copyfrom(np.zeros(tensor.shape, dtype=str(tensor.dtype)))
        else:
            random_fill(tensor)

    return alloc_argument_common(fill, device, args_info, alloc_repeat)


def evaluator_config(runner_cfg: dict[str, Any]):
    """How each program is timed (`collect.runner`: number, repeat, min_repeat_ms), here or on a board."""
    from tvm.s_tir import meta_schedule as ms

    return ms.runner.EvaluatorConfig(
        number=int(runner_cfg.get("number", 3)),
        repeat=int(runner_cfg.get("repeat", 1)),
        min_repeat_ms=int(runner_cfg.get("min_repeat_ms", 0)),
        enable_cpu_cache_flush=bool(runner_cfg.get("cpu_cache_flush", False)),
    )


class LocalMeasurer:
    """Measure on this machine with the platform's thread count.

    On a small shared machine, `runner.cpus` gives measurement its own cores. Builds
    (`builder.cpus`, one worker per core) may use them too, but then a batch is built
    first and timed after, never both at once; with disjoint cores (`can_overlap`),
    the next batch is built while this one is timed.
    """

    def __init__(self, target, threads: int, builder_cfg: dict[str, Any], runner_cfg: dict[str, Any]):
        from tvm.s_tir import meta_schedule as ms

        self._ms = ms
        self.target = target
        self.device_type = "cuda" if target.kind.name == "cuda" else "cpu"
        build_cpus = _cpus(builder_cfg.get("cpus"))
        # The runner first: a set-up that cannot measure fails before any builder process starts.
        self.runner = self._make_runner(threads, runner_cfg)
        self.can_overlap = self._may_overlap(build_cpus)
        self.builder = pooled_local_builder(float(builder_cfg.get("timeout_sec", 30)), cpus=build_cpus)

    def _make_runner(self, threads: int, runner_cfg: dict[str, Any]):
        self._run_cpus = _cpus(runner_cfg.get("cpus"))
        if self._run_cpus and threads > len(self._run_cpus):
            raise ValueError(f"collect.runner.cpus {list(self._run_cpus)} has fewer cores than the platform's "
                             f"{threads} threads")
        return self._ms.runner.LocalRunner(
            timeout_sec=float(runner_cfg.get("timeout_sec", 10)),
            initializer=functools.partial(runner_worker_init, self._run_cpus, threads),
            evaluator_config=evaluator_config(runner_cfg),
            f_alloc_argument=alloc_arguments,
        )

    def _may_overlap(self, build_cpus: tuple[int, ...] | None) -> bool:
        # Builds may overlap runs only when they cannot land on a measurement core.
        return bool(self._run_cpus and build_cpus and not set(self._run_cpus) & set(build_cpus))

    @property
    def runner_info(self) -> dict[str, Any]:
        """Where the programs are timed, as the store's runner log keeps it (see runner_log.py)."""
        return {"runner": "local", "cpus": list(self._run_cpus or [])}

    def machine_load(self) -> float | None:
        """The measuring machine's 1-minute load average, kept with each batch (`load_avg`)."""
        return os.getloadavg()[0]

    def tuning_callbacks(self) -> list:
        """MetaSchedule measure callbacks a tuning with this measurer's runner needs first (remote: one)."""
        return []

    def submit(self, candidates) -> "Pending":
        """Build `candidates` (here, now) and start running them (in the runner's process).

        The runs go on while the caller builds the next batch: with builds and runs on
        different cores, `submit` of batch k+1 overlaps the timing of batch k.
        """
        ms = self._ms
        built = self.builder.build([ms.builder.BuilderInput(c.sch.mod, self.target) for c in candidates])
        to_run = [(i, ms.runner.RunnerInput(b.artifact_path, self.device_type, c.args_info))
                  for i, (c, b) in enumerate(zip(candidates, built)) if b.error_msg is None]
        futures = self.runner.run([inp for _, inp in to_run]) if to_run else []
        return Pending(candidates, built, [i for i, _ in to_run], futures)

    def collect(self, pending: "Pending") -> tuple[list[Outcome], list]:
        """Wait for a submitted batch: one Outcome per candidate, and the RunnerResults the
        search strategy must be told."""
        ms = self._ms
        n = len(pending.candidates)
        outcomes: list[Outcome | None] = [None] * n
        runner_results: list = [None] * n
        for i, b in enumerate(pending.built):
            if b.error_msg is not None:
                outcomes[i] = Outcome([], "build_error", str(b.error_msg))
                runner_results[i] = ms.runner.RunnerResult(run_secs=None, error_msg=str(b.error_msg))
        for i, fut in zip(pending.run_index, pending.futures):
            res = fut.result()
            runner_results[i] = res
            if res.error_msg is not None:
                msg = str(res.error_msg)
                outcomes[i] = Outcome([], _runner_error_code(msg), msg)
            else:
                outcomes[i] = Outcome([float(x) for x in res.run_secs], "", "")
        for b in pending.built:
            if b.artifact_path is not None:
                ms.utils.remove_build_dir(b.artifact_path)
        return outcomes, runner_results

    def measure(self, candidates) -> tuple[list[Outcome], list]:
        """Build and run one batch, waiting for it."""
        return self.collect(self.submit(candidates))


@dataclass
class Pending:
    """A batch whose builds are done and whose runs may still be going."""

    candidates: list
    built: list
    run_index: list[int]
    futures: list


def make_measurer(platform, builder_cfg: dict[str, Any], runner_cfg: dict[str, Any]) -> LocalMeasurer:
    """The measurer for `platform` under `collect.runner`: local, or its board over RPC (`mode: rpc`,
    the platform's `rpc.key`); a remote set-up that cannot measure fails here, naming key and tracker."""
    from .remote import RemoteMeasurer, remote_board

    board = remote_board(platform, runner_cfg)
    if board is None:
        return LocalMeasurer(platform.tvm_target(), platform.threads, builder_cfg, runner_cfg)
    return RemoteMeasurer(platform.tvm_target(), platform.threads, builder_cfg, runner_cfg, board)
