"""The dask runner of tcl.compute: a Prefect subflow on prefect_dask.DaskTaskRunner, one task per unit.

Kept apart from tcl.compute so that Prefect is imported only when this runner is used.
The flow and the task are module-level: Prefect sends the running flow (and its
parameters) with every task, and Dask pickles module-level functions by name, so
nothing of the stage's body travels to the workers but each unit's own job.
"""

from __future__ import annotations

import uuid
from collections import deque
from contextlib import contextmanager
from typing import Any, Callable, Iterable, Iterator, TypeVar

from prefect import flow, task
from prefect.cache_policies import NO_CACHE
from prefect.settings import PREFECT_API_URL, temporary_settings

from tcl.compute import ComputeSettings, Units

R = TypeVar("R")
_BODIES: dict[str, Callable[[Units], Any]] = {}  # stage bodies by key: never a flow parameter


class Job:
    """A unit's keyword arguments, opaque to the walks Prefect and Dask make over task
    parameters (looking for futures): the jobs can be big, and neither needs to look inside.
    (Prefect's `quote` is a tuple, which Dask's walk turns into a plain one.)"""

    __slots__ = ("kwargs",)

    def __init__(self, kwargs: dict[str, Any]):
        self.kwargs = kwargs


@task(name="unit", cache_policy=NO_CACHE, persist_result=False)
def run_unit(fn: Callable[..., Any], job: Job) -> Any:
    """One unit of work on a worker; its result goes straight back (nothing cached or stored)."""
    return fn(**job.kwargs)


@flow(name="units-on-dask", persist_result=False, validate_parameters=False)
def units_on_dask(key: str, max_in_flight: int) -> Any:
    return _BODIES[key](lambda fn, jobs: submit_in_order(fn, jobs, max_in_flight))


def run_on_dask(settings: ComputeSettings, stage: str, body: Callable[[Units], R]) -> R:
    key = uuid.uuid4().hex
    _BODIES[key] = body
    try:
        with _workers_use_this_api():
            subflow = units_on_dask.with_options(name=f"{stage}-on-dask", task_runner=settings.task_runner())
            return subflow(key, settings.max_in_flight)
    finally:
        _BODIES.pop(key, None)


def submit_in_order(fn: Callable[..., R], jobs: Iterable[dict[str, Any]], window: int) -> Iterator[R]:
    """Submit jobs as Prefect tasks, at most `window` ahead; yield their results in job order."""
    unit = run_unit.with_options(name=fn.__name__)
    pending: deque = deque()
    for job in jobs:
        pending.append(unit.submit(fn, Job(job)))
        if len(pending) >= window:
            yield pending.popleft().result()
    while pending:
        yield pending.popleft().result()


@contextmanager
def _workers_use_this_api():
    """Dask worker processes report their task runs to the Prefect API this process uses.

    With Prefect's default ephemeral API (no PREFECT_API_URL) each worker would otherwise
    start a temporary server of its own (seconds each); the workers get the address of
    this process's server in the settings Prefect sends with every task.
    """
    if PREFECT_API_URL.value():
        yield
        return
    from prefect.server.api.server import SubprocessASGIServer

    server = SubprocessASGIServer()  # this process's ephemeral server (one per process)
    server.start()                   # a no-op when it already runs
    with temporary_settings(updates={PREFECT_API_URL: server.api_url}):
        yield
