"""Cross-platform transfer: CKD's columns and phases, the baselines, and the tracked sequence.

Tiny synthetic platforms with the real model classes (small widths): the same programs
on every platform (paired by program_id), one feature deciding latency, the hardware
row telling platforms apart.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from tcl.models import build_model
from tcl.models.metrics import pairwise_accuracy
from tcl.models.base import predict
from tcl.transfer import Monitor, PlatformData, TransferSettings, make_method
from tcl.transfer.ckd import ContinualDistillation
from tcl.transfer.distill import batch_confidence, teacher_labels
from tcl.transfer.ewc import EWCPenalty, fisher_diagonal
from tcl.transfer.moses import LotterySplit
from tcl.transfer.phase import PhaseTensors

ROWS, COLS = 6, 6
HPARAMS = {"tcl": {"encoder_dims": (16, 32), "decoder_dims": (16,), "d_state": 4},
           "tlp": {"upsample_dims": (16, 32), "head_dims": (16,), "heads": 2, "res_blocks": 1}}


pytestmark = pytest.mark.usefixtures("one_thread")


def platform_splits(platforms, seed=0, tasks=3, per_task=16, flip=False):
    """{platform: arrays}: programs whose feature (row 1, col 0) sets the speed, the same programs everywhere."""
    rng = np.random.default_rng(seed)
    n = tasks * per_task
    x = (0.1 * rng.normal(size=(n, ROWS, COLS))).astype(np.float32)  # noise; one feature carries the speed
    speed = rng.random(n)
    x[:, 1, 0] = speed
    group = np.repeat(np.arange(tasks), per_task)
    out = {}
    for i, platform in enumerate(platforms):
        xp = x.copy()
        xp[:, 0, :] = 0.1 * i  # the hardware row
        latency = np.exp(-3 * speed * (1 + 0.1 * i)) * (1 + 0.05 * rng.random(n))
        best = np.array([latency[group == g].min() for g in range(tasks)])
        label = (best[group] / latency).astype(np.float32)
        out[platform] = {"x": xp, "label": 1 - label if flip else label, "group": group,
                         "task_key": np.array([f"task{g}" for g in group]),
                         "program_id": np.array([f"prog{j}" for j in range(n)]),
                         "network": np.where(group < 2, "net_a", "net_b"), "op_type": np.full(n, "dense"),
                         "task_weight": np.ones(n), "mean_sec": latency}
    return out


class CountingLoader:
    """Synthetic splits behind PlatformData's load function, counting what is read."""

    def __init__(self, platforms, flip=False):
        self.splits = {"train": platform_splits(platforms, 0, flip=flip),
                       "validation": platform_splits(platforms, 1)}
        self.reads: list[tuple[str, str]] = []

    def __call__(self, platform, split):
        self.reads.append((platform, split))
        return self.splits[split][platform]


def settings(order, **kw):
    return TransferSettings(order=list(order), **{"cl_epochs": 2, "kd_epochs": 2, "batch_size": 32,
                                                  "lateral_dim": 8, **kw})


def ckd_model():
    return build_model("ckd_ac", feat_dim=COLS, seq_len=ROWS, seed=0, lateral_dim=8, **HPARAMS["tcl"])


def state(module):
    return {k: v.detach().clone() for k, v in module.state_dict().items()}


def same(a, b):
    return all(torch.equal(a[k], b[k]) for k in a)


# ---------------------------------------------------------------- columns and laterals

def test_laterals_feed_the_kb_into_the_ac_and_alpha_learns():
    model = ckd_model()
    x = torch.from_numpy(platform_splits(["a"])["a"]["x"][:8])
    before = model(x).detach()
    assert not torch.allclose(before, model.ac(x)), "the AC with laterals is not the AC alone"
    with torch.no_grad():
        for p in model.kb.parameters():
            p.add_(0.1 * torch.randn_like(p))
    assert not torch.allclose(before, model(x).detach()), "changing the KB must change the AC's output"
    alphas = {n: p for n, p in model.named_parameters() if n.endswith("alpha")}
    assert set(alphas) == {f"laterals.{s}.alpha" for s in ("encoder_1", "block_0", "decoder_0",
                                                           "decoder_1")}
    model(x).sum().backward()
    assert all(p.requires_grad and p.grad is not None and p.grad.abs().sum() > 0 for p in alphas.values())


def test_ckd_bundle_rebuilds_by_name(tmp_path):
    from tcl.features.tokenizer import Tokenizer
    from tcl.models.bundle import ModelBundle

    model = ckd_model()
    tokenizer = Tokenizer(rows=ROWS - 1, cols=COLS).fit([[{"kind": "Split", "nums": [1.0], "strs": []}]], [[1.0]])
    loaded = ModelBundle.load(ModelBundle("ckd_ac", model, tokenizer, "a", [1.0], {}).save(tmp_path / "b"))
    x = platform_splits(["a"])["a"]["x"]
    np.testing.assert_allclose(predict(loaded.model, x), predict(model, x), rtol=1e-6)


# ---------------------------------------------------------------- CKD phases

def test_cl_freezes_the_kb_and_kd_freezes_the_ac():
    arrays = platform_splits(["a"])["a"]
    data = PlatformData(lambda p, s: arrays)
    method = ContinualDistillation(settings(["a", "b"]), HPARAMS, seed=0)
    model, tensors = ckd_model(), PhaseTensors(arrays, "cpu")
    kb, active = state(model.kb), {**state(model.ac), **state(model.laterals)}
    from tcl.transfer.base import SequenceHooks

    method.continual_learning(model, ["a"], data, tensors, SequenceHooks())
    assert same(kb, state(model.kb)), "CL changed the frozen KB"
    assert not same(active, {**state(model.ac), **state(model.laterals)}), "CL did not train the AC"
    kb, active = state(model.kb), {**state(model.ac), **state(model.laterals)}
    method.distill(model, ["a"], data, arrays, tensors, SequenceHooks(), None)
    assert same(active, {**state(model.ac), **state(model.laterals)}), "KD changed the frozen AC or its laterals"
    assert not same(kb, state(model.kb)), "KD did not train the KB"


def test_ewc_penalty_is_zero_at_the_previous_kb_and_positive_away_from_it():
    model = build_model("tcl", feat_dim=COLS, seq_len=ROWS, seed=0, **HPARAMS["tcl"])
    fisher = fisher_diagonal(model, PhaseTensors(platform_splits(["a"])["a"], "cpu"))
    assert all((f >= 0).all() for f in fisher.values()) and sum(float(f.sum()) for f in fisher.values()) > 0
    ewc = EWCPenalty(model, fisher, 10000.0)
    assert float(ewc()) == 0.0
    with torch.no_grad():
        for p in model.parameters():
            p.add_(0.01)
    assert float(ewc()) > 0.0


def test_phi_is_within_unit_interval_and_teacher_labels_rank_within_tasks():
    losses = np.random.default_rng(0).random(7) * 5
    phi = batch_confidence(losses)
    assert ((phi >= 0) & (phi <= 1)).all()
    assert phi[np.argmin(losses)] == 1.0 and phi[np.argmax(losses)] == 0.0
    np.testing.assert_array_equal(batch_confidence([2.0, 2.0]), [1.0, 1.0])
    scores, groups = np.array([3.0, -1.0, 1.0, 10.0, 20.0, 5.0]), np.array([0, 0, 0, 1, 1, 2])
    np.testing.assert_allclose(teacher_labels(scores, groups), [1.0, 0.0, 0.5, 0.0, 1.0, 1.0])


def test_each_phase_holds_only_its_own_platforms_data():
    order = ["a", "b", "c"]
    loader = CountingLoader(order)
    sample = np.arange(0, 48, 4)
    data = PlatformData(loader, samples={"c": sample})
    result = make_method("ckd", settings(order, cl_epochs=1, kd_epochs=1), HPARAMS).fit_sequence(data)
    assert [r for r in loader.reads if r[1] == "train"] == [(p, "train") for p in order], "one load per platform"
    assert [(r.phase, r.platform) for r in result.history] == [("cl", "a"), ("kd", "a"), ("cl", "b"), ("kd", "b"),
                                                               ("cl", "c")], "no KD after the target"
    assert all(r.resident == (r.platform,) for r in result.history)
    assert result.history[-1].rows == len(sample), "the target learns from its sample only"
    mtl = make_method("mtl", settings(order, cl_epochs=1), HPARAMS).fit_sequence(PlatformData(CountingLoader(order)))
    assert mtl.history[0].resident == tuple(order), "MTL needs every platform at once"


def test_parameters_stay_constant_for_ckd_and_grow_for_mtl():
    counts = {}
    for n in (2, 3):
        order = ["a", "b", "c"][:n]
        for name in ("ckd", "mtl"):
            result = make_method(name, settings(order, cl_epochs=1, kd_epochs=1), HPARAMS).fit_sequence(
                PlatformData(CountingLoader(order)))
            counts[name, n] = result.params_total
    assert counts["ckd", 2] == counts["ckd", 3]
    assert counts["mtl", 3] > counts["mtl", 2]


def test_moses_variant_weights_get_no_gradient_update_and_decay():
    arrays = platform_splits(["a"])["a"]
    model = build_model("tcl", feat_dim=COLS, seq_len=ROWS, seed=0, **HPARAMS["tcl"])
    tensors = PhaseTensors(arrays, "cpu")
    method = make_method("moses", settings(["a", "b"]), HPARAMS)
    loss = method.ranking_loss(model, tensors)
    rows = tensors.index(np.arange(len(arrays["x"])))
    split = LotterySplit(model, loss, [rows], keep=0.5, decay=10.0)
    split.epoch_start(0)
    before = [p.detach().clone() for p in split.params]
    opt, lr = torch.optim.Adam(split.params, lr=1e-2), 1e-2
    opt.zero_grad()
    loss(rows).backward()
    opt.step()
    split.after_step(lr)
    for p, mask, b in zip(split.params, split.masks, before):
        assert int(mask.sum()) == math.ceil(0.5 * p.numel())
        torch.testing.assert_close(p[~mask], b[~mask] * (1 - lr * 10.0), rtol=0, atol=0)
    moved = sum(int((p[m] != b[m]).sum()) for p, m, b in zip(split.params, split.masks, before))
    assert moved > 0, "the transferable half must learn"


# ---------------------------------------------------------------- ranking sanity

@pytest.mark.parametrize("flip", [False, True])
def test_ckd_target_model_ranks_by_the_feature_that_sets_latency(flip):
    order = ["a", "b"]
    loader = CountingLoader(order, flip=flip)
    result = make_method("ckd", settings(order, cl_epochs=8, kd_epochs=2, lr=3e-3), HPARAMS).fit_sequence(
        PlatformData(loader))
    held_out = loader.splits["validation"]["b"]
    acc = pairwise_accuracy(predict(result.model, held_out["x"]), held_out["label"], held_out["group"])
    if flip:
        assert acc < 0.4, f"trained on reversed labels, yet pairwise accuracy {acc:.2f}"
    else:
        assert acc > 0.7, f"pairwise accuracy {acc:.2f} is no better than random (0.5)"


# ---------------------------------------------------------------- tracking

@pytest.fixture()
def mlflow_store(tmp_path, monkeypatch):
    import mlflow

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    mlflow.set_tracking_uri(uri)
    yield mlflow
    mlflow.set_tracking_uri(None)


def test_tracked_sequence_registers_each_kb_snapshot_and_the_target(mlflow_store, tmp_path):
    from tcl.features.tokenizer import Tokenizer
    from tcl.tracking.registry import load_registered
    from tcl.transfer.tracked import TrackingContext, run_tracked

    order = ["a", "b", "c"]
    tokenizer = Tokenizer(rows=ROWS - 1, cols=COLS).fit([[{"kind": "Split", "nums": [1.0], "strs": []}]], [[1.0]])
    ctx = TrackingContext({"tracking": {"experiment": "transfer-test"}, "registry": {"prefix": "t"}}, tokenizer,
                          {p: [1.0] for p in order}, "md5-test", tmp_path / "out")
    loader = CountingLoader(order)
    method = make_method("ckd", settings(order, cl_epochs=1, kd_epochs=1), HPARAMS)
    outcome = run_tracked(method, PlatformData(loader), ctx)

    client = mlflow_store.MlflowClient()
    kb = sorted(client.search_model_versions("name='t-kb-tcl'"), key=lambda v: int(v.version))
    assert [(v.tags["platforms"], v.tags["data_version"], v.tags["seed"]) for v in kb] == [
        ("a", "md5-test", "0"), ("a,b", "md5-test", "0")]
    assert outcome.kb_versions == ["1", "2"]
    assert (outcome.registered_model, outcome.version, outcome.champion) == ("t-ckd-c", "1", True)
    children = client.search_runs([client.get_experiment_by_name("transfer-test").experiment_id],
                                  f"tags.mlflow.parentRunId = '{outcome.run_id}'")
    assert sorted(r.info.run_name for r in children) == ["cl-a", "cl-b", "cl-c", "kd-a", "kd-b"]
    cl_c = next(r for r in children if r.info.run_name == "cl-c")
    assert {"ac_top1.a", "ac_top1.b", "ac_top1.c", "kb_top1.a"} <= set(cl_c.data.metrics)
    assert (tmp_path / "out" / "forgetting.png").stat().st_size > 0
    x = loader.splits["validation"]["c"]["x"]
    bundle = load_registered("models:/t-ckd-c@champion")
    assert bundle.op_types == {"dense": 3}   # the three tasks every platform of the sequence trained on
    np.testing.assert_allclose(predict(bundle.model, x), predict(outcome.result.model, x), rtol=1e-5)

    again = run_tracked(make_method("ckd", settings(order, cl_epochs=1, kd_epochs=1), HPARAMS),
                        PlatformData(CountingLoader(order)), ctx)
    assert again.held_out_top1 == pytest.approx(again.champion_top1), "same seed, same model, same score"
    assert (again.version, again.champion) == ("2", False), "a tie does not beat the champion"
    assert str(client.get_model_version_by_alias("t-ckd-c", "champion").version) == "1"


def test_monitor_scores_every_platform_seen_so_far():
    order = ["a", "b"]
    data = PlatformData(CountingLoader(order))
    result = make_method("finetune", settings(order, cl_epochs=1), HPARAMS).fit_sequence(data, hooks=Monitor(data))
    assert [sorted(r.metrics[-1]) for r in result.history] == [["model_top1.a"], ["model_top1.a", "model_top1.b"]]


def test_monitor_skips_a_platform_without_held_out_programs():
    """The split by task can leave a small platform no validation task: the sequence goes on, that
    platform gets no curve, the others keep theirs."""
    order = ["a", "b"]
    loader = CountingLoader(order)
    loader.splits["validation"]["a"] = {k: v[:0] for k, v in loader.splits["validation"]["a"].items()}
    data = PlatformData(loader)
    result = make_method("finetune", settings(order, cl_epochs=1), HPARAMS).fit_sequence(data, hooks=Monitor(data))
    assert [sorted(r.metrics[-1]) for r in result.history] == [[], ["model_top1.b"]]
