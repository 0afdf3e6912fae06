"""Search control inside MetaSchedule: Moses's adaptive controller (tcl.tvm.controller) and Pruner's
draft-then-verify wrapper (tcl.tvm.draft), on real tuning runs of a tiny network."""

from __future__ import annotations

import math

import pytest

from tcl.tvm.controller import ControllerSettings


def test_controller_stops_a_settled_task_and_keeps_a_falling_one():
    settings = ControllerSettings(window=3, cv_threshold=0.01)
    identical = [2e-3, 2e-3, 2e-3]
    falling = [4e-3, 3e-3, 2e-3]
    assert settings.settled(identical)
    assert not settings.settled(falling)
    assert not settings.settled(identical[:2])                     # fewer batches than the window
    assert not settings.settled([math.inf, 2e-3, 2e-3])            # a batch before any program ran
    assert settings.settled(falling + [1.999e-3, 1.999e-3, 1.998e-3])  # only the last `window` count


def test_controller_settings_are_strict():
    assert ControllerSettings.from_params({"tune": {"controller": {"window": 5}}}).window == 5
    with pytest.raises(ValueError, match=r"tune\.controller"):
        ControllerSettings.from_params({"tune": {"controller": {"cv": 0.1}}})
    with pytest.raises(ValueError, match=r"tune\.controller"):
        ControllerSettings(window=1)


@pytest.fixture(scope="module")
def tiny_cnn(params, host_platform):
    from tcl.workloads import fuse_for_tuning, load_network

    net = load_network("tiny_cnn", params["workloads"])
    return fuse_for_tuning(net.relax_mod, host_platform.tvm_target())


def _tune(tiny_cnn, host_platform, measurer, tmp_path, cost_model, name, trials, **kw):
    from tcl.tvm.tuning import SearchSettings, tune_network

    return tune_network(tiny_cnn, host_platform, network="tiny_cnn", cost_model=cost_model,
                        cost_model_name=name, trials=trials, work_dir=tmp_path / name, num_trials_per_iter=4,
                        progress=False, measurer=measurer, search=SearchSettings(population=32, genetic_iters=1),
                        **kw)


@pytest.mark.slow
def test_controller_ends_settled_tasks_under_the_gradient_scheduler(tiny_cnn, host_platform, measurer, tmp_path):
    from tvm.s_tir import meta_schedule as ms

    # every task counts as settled after two batches (any CV is below 1e9): each is ended in turn
    result = _tune(tiny_cnn, host_platform, measurer, tmp_path, ms.cost_model.RandomModel(seed=0), "random",
                   trials=200, controller=ControllerSettings(window=2, cv_threshold=1e9))
    assert result.tasks >= 2
    assert len(result.stopped_tasks) >= result.tasks - 1, result.stopped_tasks
    assert result.trials < 200  # the budget is not spent on tasks that stopped moving
    assert math.isfinite(result.final_estimate)
