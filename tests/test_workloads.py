"""Workloads: real PyTorch networks exported to Relax and split into MetaSchedule tasks."""

from __future__ import annotations

import collections

import numpy as np
import pytest
import torch

from tcl.workloads import (BERT_VOCAB, NETWORKS, OP_TYPES, Task, build_network, classify_op_type,
                           extract_tasks, fold_conv_bn, fuse_for_tuning, is_image_network, to_relax)
from tcl.workloads.families import FAMILIES

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec:FutureWarning")  # torch.export internals


@pytest.fixture(scope="module")
def target():
    import tvm

    return tvm.target.Target({"kind": "llvm", "num-cores": 2})


@pytest.fixture(scope="module")
def resnet18_tasks(target):
    return extract_tasks("resnet18", target, batch=1, image_size=32)


@pytest.fixture(scope="module")
def bert_tiny_tasks(target):
    return extract_tasks("bert_tiny", target, batch=1, seq_len=8)


def _histogram(tasks: list[Task]) -> dict[str, int]:
    return dict(collections.Counter(t.op_type for t in tasks))


def _check_common(tasks: list[Task], network: str) -> None:
    assert tasks and all(isinstance(t, Task) for t in tasks)
    assert all(t.network == network for t in tasks)
    assert all(t.op_type in OP_TYPES for t in tasks)
    assert all(isinstance(t.weight, int) and t.weight >= 1 for t in tasks)
    assert all(t.flops >= 0 for t in tasks)
    keys = [t.key for t in tasks]
    assert len(set(keys)) == len(keys), "MetaSchedule dedups tasks, so keys must be unique"
    assert all(k.startswith("0x") and int(k, 16) >= 0 for k in keys)
    weighted = [t.weight * t.flops for t in tasks]
    assert weighted == sorted(weighted, reverse=True), "heaviest (weight x FLOPs) first"


# ----------------------------------------------------------------------------- torch side
@pytest.mark.parametrize("name", sorted(set(NETWORKS) - set(FAMILIES)))  # families: test_families.py
def test_every_network_builds_and_runs_forward(name):
    model, inputs = build_network(name, batch=1, image_size=32, seq_len=8)
    assert not model.training
    assert len(inputs) == 1
    if not is_image_network(name):
        assert inputs[0].dtype == torch.int64 and inputs[0].shape == (1, 8)
    else:
        assert inputs[0].dtype == torch.float32 and inputs[0].shape == (1, 3, 32, 32)
    with torch.no_grad():
        out = model(*inputs)
    expected = {"bert_tiny": (1, 128), "bert_base": (1, 768), "tiny_cnn": (1, 10),
                "gpt2": (1, 8, BERT_VOCAB)}.get(name, (1, 1000))
    assert out.shape == expected and torch.isfinite(out).all()


def test_build_network_is_deterministic_and_leaves_global_rng_alone():
    torch.manual_seed(123)
    before = torch.rand(1)
    torch.manual_seed(123)
    m1, x1 = build_network("bert_tiny", batch=2, image_size=32, seq_len=8)
    after = torch.rand(1)
    m2, x2 = build_network("bert_tiny", batch=2, image_size=32, seq_len=8)
    assert torch.equal(before, after)
    assert torch.equal(x1[0], x2[0]) and x1[0].shape == (2, 8)
    for (n1, p1), (n2, p2) in zip(m1.state_dict().items(), m2.state_dict().items()):
        assert n1 == n2 and torch.equal(p1, p2)


def test_unknown_network_lists_known_names():
    with pytest.raises(ValueError, match="unknown network 'alexnet'.*resnet18"):
        build_network("alexnet", batch=1, image_size=32, seq_len=8)


def test_fold_conv_bn_keeps_outputs_and_leaves_the_model_alone():
    model, (x,) = build_network("mobilenet_v2", batch=1, image_size=32, seq_len=8)
    n_bn = sum(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules())
    folded = fold_conv_bn(model)
    assert n_bn == 52
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in folded.modules()) == 0
    assert sum(isinstance(m, torch.nn.BatchNorm2d) for m in model.modules()) == n_bn
    with torch.no_grad():
        torch.testing.assert_close(folded(x), model(x), rtol=1e-4, atol=1e-4)


# ----------------------------------------------------------------------------- Relax side
def test_relax_module_computes_what_torch_computes(target):
    """Import + BN folding are numerically faithful (compiled with TVM's default pipeline)."""
    import tvm
    from tvm import relax

    torch.manual_seed(0)
    conv = torch.nn.Conv2d(3, 8, 3, padding=1, bias=False)
    bn = torch.nn.BatchNorm2d(8)
    bn.running_mean.uniform_(-1, 1)
    bn.running_var.uniform_(0.5, 2)
    model = torch.nn.Sequential(torch.nn.Sequential(conv, bn), torch.nn.ReLU()).eval()
    x = torch.randn(1, 3, 8, 8)
    mod = to_relax(model, (x,))
    vm = relax.VirtualMachine(tvm.compile(mod, target), tvm.cpu())
    out = vm["main"](tvm.runtime.tensor(x.numpy()))
    got = (out[0] if not hasattr(out, "numpy") else out).numpy()
    with torch.no_grad():
        np.testing.assert_allclose(got, model(x).numpy(), rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("groups,cin,expected", [
    (1, 8, "conv2d"), (8, 8, "depthwise_conv2d"), (4, 8, "group_conv2d"),
])
def test_classify_conv_kinds_from_tir(target, groups, cin, expected):
    from tvm.s_tir import meta_schedule as ms

    model = torch.nn.Conv2d(cin, 16, 3, groups=groups)
    mod = fuse_for_tuning(to_relax(model, (torch.randn(1, cin, 8, 8),)), target)
    (task,) = ms.relax_integration.extract_tasks(mod, target)
    assert classify_op_type(task.task_name, task.dispatched[0]) == expected


def test_resnet18_tasks(resnet18_tasks):
    _check_common(resnet18_tasks, "resnet18")
    hist = _histogram(resnet18_tasks)
    assert {"conv2d", "dense", "pool"} <= set(hist)
    assert hist["dense"] == 1 and hist["pool"] == 1 and hist["conv2d"] >= 12
    # 20 convs + fc + max-pool run, but equal shapes share one task: weights say how often.
    convs = [t for t in resnet18_tasks if t.op_type == "conv2d"]
    assert sum(t.weight for t in convs) == 20
    assert any(t.weight > 1 for t in convs)
    # BN is folded: every conv task is conv + bias (+ residual add / ReLU), not a BN task.
    assert not any("batch_norm" in t.name or "divide" in t.name for t in resnet18_tasks)
    assert resnet18_tasks[0].op_type == "conv2d" and resnet18_tasks[0].flops > 1e6
    fc = next(t for t in resnet18_tasks if t.op_type == "dense")
    assert fc.flops == pytest.approx(2 * 512 * 1000, rel=0.01)  # 512 -> 1000 classifier


def test_bert_tiny_tasks(bert_tiny_tasks):
    _check_common(bert_tiny_tasks, "bert_tiny")
    hist = _histogram(bert_tiny_tasks)
    assert "dense" in hist and ({"softmax", "layer_norm"} & set(hist))
    assert "conv2d" not in hist and "pool" not in hist
    dense = [t for t in bert_tiny_tasks if t.op_type == "dense"]
    # 2 layers x (Q, K, V, out, FF1, FF2, QK^T, attn x V) + pooler = 17 dense calls.
    assert sum(t.weight for t in dense) == 17
    qkvo = max(dense, key=lambda t: t.weight)
    assert qkvo.weight == 8 and qkvo.flops == pytest.approx(2 * 8 * 128 * 128, rel=0.05)
    softmax = [t for t in bert_tiny_tasks if t.op_type == "softmax"]
    assert sum(t.weight for t in softmax) == 2  # one per layer


def test_task_modules_are_tunable_tir(resnet18_tasks):
    from tvm.s_tir.meta_schedule.utils import shash2hex
    from tvm.tirx import PrimFunc

    for t in resnet18_tasks:
        assert [type(f) for f in t.mod.functions.values()] == [PrimFunc]
        assert shash2hex(t.mod) == t.key


# ----------------------------------------------------------------------------- big networks
@pytest.mark.slow
def test_resnet50_tasks(target):
    tasks = extract_tasks("resnet50", target, image_size=32)
    _check_common(tasks, "resnet50")
    hist = _histogram(tasks)
    assert {"conv2d", "dense", "pool"} <= set(hist) and "group_conv2d" not in hist
    assert sum(t.weight for t in tasks if t.op_type == "conv2d") == 53  # 49 + 4 projections


@pytest.mark.slow
def test_resnext50_tasks(target):
    tasks = extract_tasks("resnext50", target, image_size=32)
    _check_common(tasks, "resnext50")
    grouped = [t for t in tasks if t.op_type == "group_conv2d"]
    assert sum(t.weight for t in grouped) == 16  # one 32-group 3x3 conv per bottleneck


@pytest.mark.slow
def test_mobilenet_v2_tasks(target):
    tasks = extract_tasks("mobilenet_v2", target, image_size=32)
    _check_common(tasks, "mobilenet_v2")
    depthwise = [t for t in tasks if t.op_type == "depthwise_conv2d"]
    assert sum(t.weight for t in depthwise) == 17  # one per inverted-residual block
    assert "group_conv2d" not in _histogram(tasks)


@pytest.mark.slow
def test_bert_base_tasks(target):
    tasks = extract_tasks("bert_base", target, seq_len=8)
    _check_common(tasks, "bert_base")
    dense = [t for t in tasks if t.op_type == "dense"]
    assert sum(t.weight for t in dense) == 12 * 8 + 1
    assert sum(t.weight for t in tasks if t.op_type == "softmax") == 12
