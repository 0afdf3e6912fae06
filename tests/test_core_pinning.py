"""Where measurements run: a program started on some cores (taskset) never times programs on others.

Real processes, real affinities: a child started on one core (as `taskset -c 0` starts it) is asked by
params to time on another, and a runner worker started while its parent is pinned to the search core
must still reach the runner's core.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tcl.collect.measure import ALLOWED_CPUS_ENV, pinned_to

CORES = sorted(os.sched_getaffinity(0))
pytestmark = pytest.mark.skipif(len(CORES) < 2, reason="needs two cores to pin between")
REPORT = ("import os; from tcl.collect.measure import pin_to_cpus; pin_to_cpus(({core},)); "
          "print(','.join(map(str, sorted(os.sched_getaffinity(0)))))")


def affinity_after_pinning(core: int, started_on: set[int] | None = None) -> tuple[set[int], str]:
    """The cores a fresh Python process is left on after `pin_to_cpus((core,))`, and what it warned."""
    env = {k: v for k, v in os.environ.items() if k != ALLOWED_CPUS_ENV} if started_on else dict(os.environ)
    start = (lambda: os.sched_setaffinity(0, started_on)) if started_on else None
    out = subprocess.run([sys.executable, "-c", REPORT.format(core=core)], env=env, preexec_fn=start,
                         capture_output=True, text=True, check=True)
    return {int(c) for c in out.stdout.strip().split(",")}, out.stderr


def test_a_program_started_on_one_core_keeps_its_measurements_there():
    cores, warned = affinity_after_pinning(CORES[1], started_on={CORES[0]})
    assert cores == {CORES[0]}
    assert "outside the cores this program may use" in warned


def test_a_runner_started_while_its_parent_is_on_the_search_core_still_reaches_its_own_core(monkeypatch):
    monkeypatch.delenv(ALLOWED_CPUS_ENV, raising=False)  # this process's cores are recorded afresh
    with pinned_to((CORES[0],)):  # the collector's search core, as collector.py pins it
        cores, _ = affinity_after_pinning(CORES[1])  # the runner worker of params' collect.runner.cpus
    assert cores == {CORES[1]}
