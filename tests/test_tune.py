"""Tuning a user's own network: a torch.export or ONNX file in, a loadable compiled library out."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tcl.workloads import load_network
from tcl.workloads.settings import WorkloadSettings

from conftest import TINY_SEARCH
from tiny_net import TinyNet


def _export_onnx(path, input_shape=(1, 3, 8, 8), dynamic_batch=False):
    torch.manual_seed(0)
    torch.onnx.export(TinyNet().eval(), (torch.randn(*input_shape),), str(path), dynamo=False,
                      input_names=["image"], dynamic_axes={"image": {0: "batch"}} if dynamic_batch else None)
    return path


@pytest.fixture(scope="module")
def onnx_network(tmp_path_factory):
    return _export_onnx(tmp_path_factory.mktemp("onnx") / "tiny_onnx_net.onnx")


@pytest.fixture(scope="module")
def user_network(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("net") / "tiny_user_net.pt2"
    torch.export.save(torch.export.export(TinyNet().eval(), (torch.randn(1, 3, 8, 8),)), str(path))
    return path


def test_a_user_network_file_is_loaded_with_its_example_inputs(user_network):
    net = load_network(str(user_network))
    assert net.name == "tiny_user_net" and net.inputs[0].shape == (1, 3, 8, 8)
    assert net.reference(*net.inputs).shape == (1, 5)
    assert "main" in [gv.name_hint for gv in net.relax_mod.functions]


def test_an_onnx_file_is_imported_and_checked_against_onnx_runtime(onnx_network):
    net = load_network(str(onnx_network))
    assert net.name == "tiny_onnx_net" and net.reference_kind == "ONNX Runtime"
    assert net.inputs[0].shape == (1, 3, 8, 8) and net.inputs[0].dtype == torch.float32
    (out,) = net.reference(*net.inputs)
    torch.manual_seed(0)
    np.testing.assert_allclose(out.numpy(), TinyNet().eval()(net.inputs[0]).detach().numpy(), atol=1e-5)
    assert "main" in [gv.name_hint for gv in net.relax_mod.functions]


def test_an_onnx_file_with_a_dynamic_shape_is_refused_by_input_name(tmp_path):
    path = _export_onnx(tmp_path / "dyn.onnx", dynamic_batch=True)
    with pytest.raises(ValueError, match=r"dyn.onnx: input 'image' has shape \['batch', 3, 8, 8\]"):
        load_network(str(path))


@pytest.mark.parametrize("name, content, message", [
    ("net.tflite", b"", "not a built-in network"),
    ("empty.onnx", b"", "cannot be read as an ONNX model"),
    ("garbage.onnx", b"\x08\x07garbage\xff", "cannot be read as an ONNX model"),
    ("missing.pt2", None, "does not exist"),
    ("broken.pt2", b"PK\x03\x04 not really a zip", "cannot be read as a torch.export program"),
])
def test_unusable_network_files_get_one_clear_error(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises((ValueError, FileNotFoundError), match=message) as err:
        load_network(str(path))
    assert name.split(".")[0] in str(err.value)


@pytest.mark.slow
def test_user_network_is_tuned_from_scratch_and_its_library_runs(user_network, tmp_path, host_platform):
    """Real tuning (TVM's random model, 4 trials) twice in the same work dir, then the saved library."""
    import tvm
    from tvm import relax
    from tvm.s_tir import meta_schedule as ms

    from tcl.tvm.compare import tune_side_by_side

    def tune():
        return tune_side_by_side(str(user_network), host_platform, {"random": lambda: ms.cost_model.RandomModel(seed=0)},
                                 trials=4, work_root=tmp_path, seed=0, num_trials_per_iter=2,
                                 runner_cfg={"number": 1, "repeat": 1}, params={"tune": {"search": TINY_SEARCH}})

    (first,) = tune()
    (run,) = tune()
    records = (tmp_path / "random" / "database_tuning_record.json").read_text().splitlines()
    # the scheduler may overshoot the budget by a round (every task gets one); the first run's records are gone
    assert 4 <= run.result.trials == len(records) < first.result.trials + run.result.trials
    assert run.e2e.max_abs_diff < 1e-4

    library = tmp_path / "random" / "tiny_user_net.so"
    assert run.e2e.library == str(library)
    vm = relax.VirtualMachine(tvm.runtime.load_module(str(library)), tvm.cpu(0))
    x = torch.randn(1, 3, 8, 8)
    out = vm["main"](tvm.runtime.tensor(x.numpy(), tvm.cpu(0)))
    while not hasattr(out, "numpy"):
        out = out[0]
    expected = torch.export.load(str(user_network)).module()(x).detach().numpy()
    np.testing.assert_allclose(out.numpy(), expected, atol=1e-4)
    assert json.loads(records[0])  # the records are MetaSchedule's own JSON lines

    # the tuning benchmark times every saved library again, interleaved with the reference
    from benchmarks import bench_tune

    tuned, reference_ms = bench_tune.retime(str(user_network), WorkloadSettings(), host_platform,
                                            {(0, "random"): library, (1, "random"): library}, rounds=2)
    assert set(tuned) == {(0, "random"), (1, "random")}
    assert all(0 < ms < 1e3 for ms in tuned.values()) and 0 < reference_ms < 1e3


def test_handoff_reaches_the_search_and_hands_every_task_to_xgb_after_its_first_batch(user_network, tmp_path,
                                                                                       host_platform):
    """`<model>+handoff` in tune_network: the model named so scores each task's first batch, TVM's XGB
    (a real XGBModel beside it) every later one; the run lists each task's hand-off."""
    from tvm.s_tir import meta_schedule as ms

    from tcl.tvm.compare import tune_side_by_side

    (run,) = tune_side_by_side(str(user_network), host_platform,
                               {"mine+handoff": lambda: ms.cost_model.RandomModel(seed=0)}, trials=8,
                               work_root=tmp_path, seed=0, num_trials_per_iter=2, runner_cfg={"number": 1, "repeat": 1},
                               params={"tune": {"search": TINY_SEARCH}})
    tasks = {t["task"] for t in run.result.task_results if t["trials"]}  # the tasks that got a batch
    assert len(tasks) >= 2
    assert sorted(run.result.guard_switches) == sorted((t, 1, "handoff") for t in tasks)
    assert set(run.result.fallback_tasks) == tasks


@pytest.mark.slow
def test_learned_models_get_their_own_trials_per_round(user_network, tmp_path, host_platform):
    """tune.learned_trials_per_iter reaches the scheduler: a model with 1 trial per task per round has
    the network's first estimate after one trial per task, one with 2 after up to two per task (a task
    with a single candidate gives one)."""
    from tvm.s_tir import meta_schedule as ms

    from tcl.tvm.compare import tune_side_by_side
    from tcl.tvm.stage import trials_per_iter

    cfg = {"num_trials_per_iter": 3, "learned_trials_per_iter": 1}
    per_iter = trials_per_iter(cfg, ["xgb", "tcl+moa", "random"], learned={"tcl+moa": {}})
    assert per_iter == {"xgb": 3, "tcl+moa": 1, "random": 3}
    assert set(trials_per_iter({**cfg, "learned_trials_per_iter": None}, ["tcl"], ["tcl"]).values()) == {3}

    factories = {name: (lambda: ms.cost_model.RandomModel(seed=0)) for name in ("one", "two")}
    runs = tune_side_by_side(str(user_network), host_platform, factories, trials=6, work_root=tmp_path, seed=0,
                             num_trials_per_iter={"one": 1, "two": 2},
                             runner_cfg={"number": 1, "repeat": 1}, params={"tune": {"search": TINY_SEARCH}})
    first = {run.name: next(p.trial for p in run.result.curve if p.estimated_latency == p.estimated_latency)
             for run in runs}
    tasks = first["one"]
    assert tasks >= 2 and tasks < first["two"] <= 2 * tasks, first


@pytest.mark.slow
def test_an_onnx_network_is_tuned_and_matches_onnx_runtime(onnx_network, tmp_path, host_platform):
    from tvm.s_tir import meta_schedule as ms

    from tcl.tvm.compare import comparison_table, tune_side_by_side

    (run,) = tune_side_by_side(str(onnx_network), host_platform, {"random": lambda: ms.cost_model.RandomModel(seed=0)},
                               trials=4, work_root=tmp_path, seed=0, num_trials_per_iter=2,
                               runner_cfg={"number": 1, "repeat": 1}, params={"tune": {"search": TINY_SEARCH}})
    assert run.e2e.max_abs_diff < 1e-4 and (tmp_path / "random" / "tiny_onnx_net.so").exists()
    (row,) = comparison_table([run], "random")
    assert row["reference"] == "ONNX Runtime" and row["reference_ms"] > 0
    # each task's end state, named: it adds up to the run's trials and its network estimate
    assert all(t["task"] for t in row["tasks"]) and sum(t["trials"] for t in row["tasks"]) == run.result.trials
    assert sum(t["weight"] * t["best_us"] for t in row["tasks"]) == pytest.approx(run.result.final_estimate * 1e6)


def test_tensor_intrinsics_load_with_the_light_stack_and_inspect_is_restored():
    """The fast intrinsics import sees the same frames, lines and locals as `inspect.stack()`."""
    import inspect

    from tcl.collect.intrinsics import _light_stack, load_tensor_intrinsics

    marker = "local seen through the stack"  # noqa: F841
    light, full = _light_stack(), inspect.stack()
    assert len(light) == len(full) > 1
    for ours, theirs in zip(light, full):
        assert (ours.filename, ours.lineno, ours.function) == (theirs.filename, theirs.lineno, theirs.function)
        assert ours.frame is theirs.frame
    assert light[0].frame.f_locals["marker"] == "local seen through the stack"
    assert light[0].code_context[0].strip().startswith("light, full = _light_stack()")

    load_tensor_intrinsics()
    from tvm.s_tir._tensor_intrin import TensorIntrin

    assert inspect.stack is not _light_stack
    assert TensorIntrin.get("dot_16x4_vnni", allow_missing=True) is not None
