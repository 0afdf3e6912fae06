"""The collection-throughput benchmark compares what it says it compares: the params' builder cores with the
runner's core (build, then time) against the search cores without it (build ahead), and its rank check
sees a reversed order."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def bench():
    from benchmarks import bench_collect  # a script, imported as a module (the repo root is on sys.path)

    return bench_collect


def test_the_two_settings_differ_only_in_overlapping_the_runner_core(bench):
    collect = {"search_cpus": [0], "runner": {"cpus": [1]}, "builder": {"timeout_sec": 60, "cpus": [0, 1]}}
    out = bench.settings(collect)
    assert out == {"build, then time": {"timeout_sec": 60, "cpus": [0, 1]},
                   "build ahead": {"timeout_sec": 60, "cpus": [0]}}
    with pytest.raises(SystemExit, match="different cores"):
        bench.settings({**collect, "search_cpus": [1]})


def test_spearman_is_one_for_the_same_order_and_minus_one_reversed(bench):
    a = [0.1, 0.5, 0.2, 0.9]
    assert bench.spearman(a, [x * 3 for x in a]) == pytest.approx(1.0)
    assert bench.spearman(a, [-x for x in a]) == pytest.approx(-1.0)
