"""Build and run candidate schedules for real (LocalBuilder / LocalRunner).

Every candidate gets an outcome: run times, or the error that stopped it. Failed
builds and runs are data too (they teach a cost model what not to propose).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Outcome:
    run_secs: list[float]
    error_code: str  # "" when it ran
    error_msg: str


def import_tensor_intrinsics() -> None:
    """Worker initializer: building a candidate that uses a tensorize intrinsic imports them
    (~25 s); done at worker start-up, which has no timeout, instead of inside a timed build."""
    import tvm.s_tir.tensor_intrin  # noqa: F401


def pooled_local_builder(timeout_sec: float, max_workers: int | None = None, process_uses: int = 256):
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
            workers = max_workers or os.cpu_count() or 1
            self.pool = PopenPoolExecutor(max_workers=workers, timeout=timeout_sec,
                                          maximum_process_uses=process_uses,
                                          initializer=import_tensor_intrinsics)
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


class LocalMeasurer:
    """Measure on this machine with the platform's thread count."""

    def __init__(self, target, threads: int, builder_cfg: dict[str, Any], runner_cfg: dict[str, Any]):
        from tvm.s_tir import meta_schedule as ms

        # The runner's worker processes inherit this: a 1-core platform really runs on one thread.
        os.environ["TVM_NUM_THREADS"] = str(threads)
        self._ms = ms
        self.target = target
        self.device_type = "cuda" if target.kind.name == "cuda" else "cpu"
        self.builder = pooled_local_builder(float(builder_cfg.get("timeout_sec", 30)))
        self.runner = ms.runner.LocalRunner(
            timeout_sec=float(runner_cfg.get("timeout_sec", 10)),
            evaluator_config=ms.runner.EvaluatorConfig(
                number=int(runner_cfg.get("number", 3)),
                repeat=int(runner_cfg.get("repeat", 1)),
                min_repeat_ms=int(runner_cfg.get("min_repeat_ms", 0)),
                enable_cpu_cache_flush=bool(runner_cfg.get("cpu_cache_flush", False)),
            ),
        )

    def measure(self, candidates) -> tuple[list[Outcome], list]:
        """Outcomes (one per candidate) and the RunnerResults the search strategy must be told."""
        ms = self._ms
        built = self.builder.build([ms.builder.BuilderInput(c.sch.mod, self.target) for c in candidates])
        outcomes: list[Outcome | None] = [None] * len(candidates)
        runner_results: list = [None] * len(candidates)
        to_run = []
        for i, (cand, b) in enumerate(zip(candidates, built)):
            if b.error_msg is not None:
                outcomes[i] = Outcome([], "build_error", str(b.error_msg))
                runner_results[i] = ms.runner.RunnerResult(run_secs=None, error_msg=str(b.error_msg))
            else:
                to_run.append((i, ms.runner.RunnerInput(b.artifact_path, self.device_type, cand.args_info)))
        futures = self.runner.run([inp for _, inp in to_run]) if to_run else []
        for (i, _), fut in zip(to_run, futures):
            res = fut.result()
            runner_results[i] = res
            if res.error_msg is not None:
                msg = str(res.error_msg)
                outcomes[i] = Outcome([], _runner_error_code(msg), msg)
            else:
                outcomes[i] = Outcome([float(x) for x in res.run_secs], "", "")
        for b in built:
            if b.artifact_path is not None:
                ms.utils.remove_build_dir(b.artifact_path)
        return outcomes, runner_results
