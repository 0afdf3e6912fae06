"""Where the big-data stages run their units of work: in the stage's process, or on Dask workers.

Ingest, validate and featurize each split their work into independent units (one log
file; one batch of record parts; one chunk of programs) and hand them to a `Units`
function: `units(fn, jobs)` calls `fn(**job)` for every job and yields the results IN
THE ORDER OF `jobs`, lazily. The stage commits each result as it comes (parts,
quarantine lines, manifest entries, rows of the validated file), exactly as its serial
loop did, so the outputs are the same bytes whichever runner ran the units, and a
killed run resumes as before.

`compute:` in params.yaml picks the runner (`ComputeSettings`):

* `serial`: `fn(**job)` in this process, one job after another (no Prefect task, no Dask);
* `dask`: the stage body runs as a Prefect subflow whose task runner is
  `prefect_dask.DaskTaskRunner`, on a `distributed.LocalCluster` of `workers` processes
  (or the scheduler at `address`); each job is one Prefect task run on a worker. At
  most `in_flight` jobs are out at once: results that wait for an earlier one stay
  bounded in memory.

Prefect and Dask are imported only when the dask runner is used (tcl/_dask_units.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Iterable, Iterator, TypeVar

from .config import check_keys

R = TypeVar("R")
Units = Callable[[Callable[..., R], Iterable[dict[str, Any]]], Iterator[R]]
RUNNERS = ("serial", "dask")


def serial_units(fn: Callable[..., R], jobs: Iterable[dict[str, Any]]) -> Iterator[R]:
    """Every job in this process, in order, one at a time (what the stages always did)."""
    for job in jobs:
        yield fn(**job)


@dataclass(frozen=True)
class ComputeSettings:
    runner: str = "serial"
    workers: int = 2
    threads_per_worker: int = 1
    processes: bool = True
    address: str | None = None
    in_flight: int = 0          # 0: 2 x workers x threads_per_worker
    chunk_rows: int = 20_000    # featurize: programs per unit

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "ComputeSettings":
        cfg = params.get("compute") or {}
        check_keys(cfg, cls.__dataclass_fields__, "compute")
        s = cls(**cfg)
        if s.runner not in RUNNERS:
            raise ValueError(f"params.yaml: compute.runner={s.runner!r} is not one of {list(RUNNERS)}")
        for name in ("workers", "threads_per_worker", "chunk_rows"):
            if not isinstance(getattr(s, name), int) or getattr(s, name) < 1:
                raise ValueError(f"params.yaml: compute.{name}={getattr(s, name)!r} must be an integer >= 1")
        if not isinstance(s.in_flight, int) or s.in_flight < 0:
            raise ValueError(f"params.yaml: compute.in_flight={s.in_flight!r} must be an integer >= 0")
        return s

    @property
    def max_in_flight(self) -> int:
        return self.in_flight or 2 * self.workers * self.threads_per_worker

    def task_runner(self):
        """The DaskTaskRunner these settings describe (its cluster starts when the flow does)."""
        from prefect_dask import DaskTaskRunner

        if self.address:
            return DaskTaskRunner(address=self.address)
        # ":0": the scheduler's HTTP server on a free port, not 8787 (clusters may run side by side)
        return DaskTaskRunner(cluster_kwargs={
            "n_workers": self.workers, "threads_per_worker": self.threads_per_worker,
            "processes": self.processes, "dashboard_address": ":0"})


def run_units(params: dict[str, Any] | ComputeSettings, stage: str, body: Callable[[Units], R]) -> R:
    """`body(units)` with the `units` of the configured runner; returns what the body returns.

    With the dask runner the body runs in a Prefect subflow `<stage>-on-dask` (a flow of
    its own when called outside one), whose task runner is Dask: the body itself stays in
    this process, only the units go to the workers.
    """
    settings = params if isinstance(params, ComputeSettings) else ComputeSettings.from_params(params)
    if settings.runner == "serial":
        return body(serial_units)
    from tcl import _dask_units  # Prefect and Dask, only now

    return _dask_units.run_on_dask(settings, stage, body)
