"""The sampling evaluation's aggregation and its goal check: what it prints must follow from the runs."""

from __future__ import annotations

import pytest


@pytest.fixture(scope="module")
def evaluation():
    from benchmarks import eval_sampling  # a script, imported as a module (the repo root is on sys.path)

    return eval_sampling


def _runs(strategy, rate, top1s):
    return [{"strategy": strategy, "rate": rate, "seed": seed, "labelled": 10, "top1_ratio_of_sums": v,
             "top5_ratio_of_sums": v, "top1_mean_per_network": v, "top5_mean_per_network": v}
            for seed, v in enumerate(top1s)]


def _summary(evaluation, rdu, random):
    full = [dict(r, strategy="rdu") for r in evaluation.summarize(_runs("all", 1.0, [0.50, 0.52, 0.48]))]
    return evaluation.summarize(_runs("rdu", 0.1, rdu) + _runs("random", 0.1, random)) + full


def test_summary_is_mean_and_sample_std_over_seeds(evaluation):
    (row,) = evaluation.summarize(_runs("rdu", 0.1, [0.2, 0.4, 0.6]))
    assert row["top1_ratio_of_sums"] == pytest.approx(0.4)
    assert row["top1_ratio_of_sums_std"] == pytest.approx(0.2)   # ddof=1
    assert row["seeds"] == 3


def test_goal_check_says_above_only_when_rdu_beats_random_by_more_than_the_seed_std(evaluation):
    ahead = evaluation.goal_lines(_summary(evaluation, rdu=[0.50, 0.49, 0.51], random=[0.30, 0.31, 0.29]))
    assert len(ahead) == 2 and all("(above it)" in line for line in ahead)
    assert "all data = +0.000" in ahead[0] and "rdu - random = +0.200" in ahead[0]
    # the same runs with the strategies swapped: a sign flip must not read as a win
    behind = evaluation.goal_lines(_summary(evaluation, rdu=[0.30, 0.31, 0.29], random=[0.50, 0.49, 0.51]))
    assert all("(not above it)" in line for line in behind)
    assert "rdu - random = -0.200" in behind[0] and "all data = -0.200" in behind[0]
    # a gap inside the spread is not a win either
    noisy = evaluation.goal_lines(_summary(evaluation, rdu=[0.2, 0.6, 0.4], random=[0.3, 0.5, 0.35]))
    assert all("(not above it)" in line for line in noisy)
