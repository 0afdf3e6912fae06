"""Tuning a user's own network: a torch.export file in, a loadable compiled library out."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from tcl.workloads import load_network


class TinyNet(torch.nn.Module):
    """Not a built-in network: a conv, a ReLU and a dense layer."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.fc = torch.nn.Linear(4 * 6 * 6, 5)

    def forward(self, x):
        return self.fc(torch.relu(self.conv(x)).flatten(1))


@pytest.fixture(scope="module")
def user_network(tmp_path_factory):
    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("net") / "tiny_user_net.pt2"
    torch.export.save(torch.export.export(TinyNet().eval(), (torch.randn(1, 3, 8, 8),)), str(path))
    return path


def test_a_user_network_file_is_loaded_with_its_example_inputs(user_network):
    net = load_network(str(user_network), {})
    assert net.name == "tiny_user_net" and net.inputs[0].shape == (1, 3, 8, 8)
    assert net.reference(*net.inputs).shape == (1, 5)
    assert "main" in [gv.name_hint for gv in net.relax_mod.functions]


@pytest.mark.parametrize("name, content, message", [
    ("net.onnx", b"", "not a built-in network"),
    ("missing.pt2", None, "does not exist"),
    ("broken.pt2", b"PK\x03\x04 not really a zip", "cannot be read as a torch.export program"),
])
def test_unusable_network_files_get_one_clear_error(tmp_path, name, content, message):
    path = tmp_path / name
    if content is not None:
        path.write_bytes(content)
    with pytest.raises((ValueError, FileNotFoundError), match=message) as err:
        load_network(str(path), {})
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
                                 trials=4, work_root=tmp_path, seed=0, workload_cfg={}, num_trials_per_iter=2,
                                 runner_cfg={"number": 1, "repeat": 1})

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


def test_tensor_intrinsics_load_with_the_light_stack_and_inspect_is_restored():
    """The fast intrinsics import sees the same frames, lines and locals as `inspect.stack()`."""
    import inspect

    from tcl.tvm.intrinsics import _light_stack, load_tensor_intrinsics

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
