"""The promotion gate and the tracking layer, on a real MLflow store (sqlite in tmp_path).

Real tiny MLP cost models trained on tiny synthetic programs: two real schedule steps
each, tokenized by a real Tokenizer, whose tile size sets the latency. The gate loads the
candidate and the champion back from the registry and scores both on the same
validation split; nothing is mocked.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
import yaml

from conftest import REPO
from tcl import tracking
from tcl.features.tokenizer import Tokenizer
from tcl.models import build_model
from tcl.models.bundle import ModelBundle
from tcl.train.loop import TrainConfig, fit
from tcl.models.base import predict
from tcl.train.promotion import SPLIT_TAG, ValidationInputs, decide, held_out_top1, promote, validation_fingerprint

PLATFORM = "local-1c"
ROWS, COLS = 4, 8                       # tokenizer crop: feature matrices are (ROWS + 1) x COLS
HPARAMS = {"hidden": 32, "encoder_layers": 1, "res_blocks": 1}
SPLITS = {"train": (12, 0), "validation": (8, 1), "test": (4, 2)}   # tasks, seed


pytestmark = pytest.mark.usefixtures("one_thread")


def programs(tasks: int, seed: int, per_task: int = 16) -> tuple[list, dict[str, np.ndarray]]:
    """(steps, arrays without x): the tile size of the first step sets each program's latency."""
    rng = np.random.default_rng(seed)
    n = tasks * per_task
    tile = rng.integers(1, 65, size=n)
    unroll = rng.integers(0, 4, size=n)
    steps = [[{"kind": "SamplePerfectTile", "nums": [float(t), 64.0 / t], "strs": []},
              {"kind": "Annotate", "nums": [float(u)], "strs": ["meta_schedule.unroll_explicit"]}]
             for t, u in zip(tile, unroll)]
    group = np.repeat(np.arange(tasks), per_task)
    latency = np.exp(-0.8 * np.log(tile)) * (1 + 0.05 * rng.random(n)) * (1 + group)
    best = np.array([latency[group == g].min() for g in range(tasks)])
    return steps, {"label": (best[group] / latency).astype(np.float32), "group": group,
                   "task_key": np.array([f"s{seed}-task{g}" for g in group]),
                   "program_id": np.array([f"s{seed}-prog{j}" for j in range(n)]),
                   "network": np.where(group % 2 == 0, "net_a", "net_b"), "op_type": np.full(n, "dense"),
                   "task_weight": np.ones(n), "mean_sec": latency}


class Data:
    """A features root (tokenizer.json, <platform>/{train,validation,test}.npz) and validated records."""

    def __init__(self, root, spec: list[float]):
        self.root, self.spec = root, spec
        self.steps, self.arrays = {}, {}
        for split, (tasks, seed) in SPLITS.items():
            self.steps[split], self.arrays[split] = programs(tasks, seed)
        self.tokenizer = Tokenizer(rows=ROWS, cols=COLS).fit(self.steps["train"], [spec])
        (root / "features" / PLATFORM).mkdir(parents=True)
        self.tokenizer.save(root / "features" / "tokenizer.json")
        for split in SPLITS:
            self.arrays[split]["x"] = self.tokenizer.transform(self.steps[split], spec)
            np.savez(root / "features" / PLATFORM / f"{split}.npz", **self.arrays[split])
        (root / "validated").mkdir()
        pq.write_table(pa.table({"program_id": [p for s in SPLITS for p in self.arrays[s]["program_id"]],
                                 "steps": [st for s in SPLITS for st in self.steps[s]]}),
                       root / "validated" / f"platform={PLATFORM}.parquet")

    @property
    def features_dir(self):
        return self.root / "features" / PLATFORM

    def bundle(self, model: torch.nn.Module, tokenizer: Tokenizer | None = None) -> ModelBundle:
        return ModelBundle("mlp", model, tokenizer or self.tokenizer, PLATFORM, self.spec, {})


def mlp(seed: int = 0) -> torch.nn.Module:
    return build_model("mlp", feat_dim=COLS, seq_len=ROWS + 1, seed=seed, **HPARAMS)


def trained(x: np.ndarray, arrays: dict[str, np.ndarray], seed: int = 0) -> torch.nn.Module:
    model = mlp(seed)
    fit(model, x, arrays["label"], arrays["group"],
        TrainConfig(epochs=40, lr=3e-3, batch_size=64, seed=seed, threads=1))
    return model.eval()


def head_edited(model: torch.nn.Module, edit) -> torch.nn.Module:
    """A copy of `model` whose final linear layer is changed by `edit(weight, bias)`."""
    copy = mlp()
    copy.load_state_dict(model.state_dict())
    with torch.no_grad():
        edit(copy.head.weight, copy.head.bias)
    return copy.eval()


@pytest.fixture(scope="module")
def data(tmp_path_factory, params):
    from tcl.platforms import get_platform

    return Data(tmp_path_factory.mktemp("promotion"), get_platform(params, PLATFORM).spec_vector)


@pytest.fixture(scope="module")
def good(data):
    return trained(data.arrays["train"]["x"], data.arrays["train"])


@pytest.fixture(scope="module")
def store_dir(tmp_path_factory):
    """One sqlite MLflow store for the module (creating one costs seconds); each test registers its own name."""
    return tmp_path_factory.mktemp("mlflow")


@pytest.fixture()
def store(store_dir, monkeypatch, data, params, request):
    """Params pointing at the store, with a registry prefix of this test's own (artifacts under store_dir)."""
    import mlflow

    monkeypatch.chdir(store_dir)
    monkeypatch.delenv("TCL_TRACKING", raising=False)
    uri = f"sqlite:///{store_dir}/mlflow.db"
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    prefix = request.node.name.removeprefix("test_")[:40]
    test_params = {**params, "tracking": {"mlflow_uri": uri, "experiment": "promotion-test"},
                   "registry": {"prefix": prefix, "params_sections": ["seed", "split", "features", "train"]},
                   "validate": {"validated_root": str(data.root / "validated")},
                   "train": {**params["train"], "epochs": 20, "lr": 0.003, "batch_size": 64, "threads": 1,
                             "models": ["mlp"], "checkpoint_dir": str(store_dir / "ckpt" / prefix),
                             "hparams": {"mlp": HPARAMS}}}
    tracking.configure(test_params)
    yield test_params
    mlflow.set_tracking_uri(None)


def name_of(params) -> str:
    return tracking.registered_name(params["registry"]["prefix"], PLATFORM, "mlp")


def register(params, bundle: ModelBundle, label: str, scores: dict[str, float] | None = None,
             extra_tags: dict[str, str] | None = None) -> str:
    """A new version (as the train stage logs one), tagged with `scores` (default: a placeholder)."""
    with tracking.run(params, f"register-{label}", {"stage": "test"}):
        tags = {**tracking.version_tags(params, "md5-test", scores or {"val_top1": 0.0}), **(extra_tags or {})}
        example = np.zeros((2, *bundle.featurizer.feature_shape), np.float32)
        directory = bundle.save(f"bundles/{params['registry']['prefix']}/{label}")
        return tracking.registry.log_version(bundle, directory, name_of(params), example, tags)


def gate(data, params, version, **kw):
    return promote(name_of(params), version, ValidationInputs(PLATFORM, params, data.features_dir), **kw)


def alias_version(params, alias: str) -> str | None:
    found = tracking.registry.alias(name_of(params), alias)
    return None if found is None else str(found.version)


# ---------------------------------------------------------------- the decision rule

def test_decision_rule_is_strictly_higher_and_never_nan():
    assert decide(0.5, None, math.nan) == (True, "there is no champion yet")
    assert decide(0.6, "1", 0.5)[0] and not decide(0.5, "1", 0.5)[0] and not decide(0.4, "1", 0.5)[0]
    assert not decide(math.nan, None, math.nan)[0] and not decide(math.nan, "1", 0.1)[0]
    assert decide(0.1, "1", math.nan)[0], "a champion that scores NaN now is replaced by a finite candidate"
    assert "NaN never promotes" in decide(math.nan, None, math.nan)[1]


# ---------------------------------------------------------------- the gate on a real registry

def constant(model: torch.nn.Module) -> torch.nn.Module:
    """A scorer that knows nothing: every program scores 0, so each task's first program is picked."""
    return head_edited(model, lambda w, b: (w.zero_(), b.zero_()))


def test_a_better_candidate_is_promoted(store, data, good):
    blind = data.bundle(constant(good))
    first = gate(data, store, register(store, blind, "blind"))
    assert (first.version, first.promoted, first.champion_version) == ("1", True, None)
    assert alias_version(store, "champion") == "1"

    better = gate(data, store, register(store, data.bundle(good), "good"))
    val = data.arrays["validation"]
    assert better.promoted and better.champion_version == "1" and alias_version(store, "champion") == "2"
    assert better.candidate_top1 == pytest.approx(held_out_top1(data.bundle(good), val))
    assert better.champion_top1 == pytest.approx(held_out_top1(blind, val))
    assert better.candidate_top1 > better.champion_top1 and better.programs == len(val["x"])
    assert alias_version(store, "challenger") == "2"


def test_a_worse_candidate_is_refused_with_the_reason_printed(store, data, good, capsys):
    assert gate(data, store, register(store, data.bundle(good), "good")).promoted
    capsys.readouterr()
    refused = gate(data, store, register(store, data.bundle(constant(good)), "blind"))
    printed = capsys.readouterr().out
    assert not refused.promoted and refused.champion_version == "1"
    assert refused.candidate_top1 < refused.champion_top1
    assert "is not higher than champion v1's" in refused.reason
    assert refused.reason in printed and "not promoted (champion stays v1)" in printed
    assert f"candidate {refused.candidate_top1:.4f}" in printed and f"v1 {refused.champion_top1:.4f}" in printed
    assert alias_version(store, "champion") == "1" and alias_version(store, "challenger") == "2"
    tags = tracking.registry.get_version(name_of(store), "2").tags
    assert tags["promotion.decision"] == "refused" and tags["promotion.reason"] == refused.reason


def test_a_sign_flipped_candidate_does_not_replace_a_good_champion(store, data, good):
    """Negated scores rank every task backwards. The flipped version is even tagged with the good
    model's registration score: the gate must look at what it predicts now, not at the tag."""
    good_top1 = held_out_top1(data.bundle(good), data.arrays["validation"])
    assert gate(data, store, register(store, data.bundle(good), "good", {"val_top1": good_top1})).promoted
    flipped = head_edited(good, lambda w, b: (w.neg_(), b.neg_()))
    x = data.arrays["validation"]["x"]
    np.testing.assert_allclose(predict(flipped, x), -predict(good, x), rtol=1e-5, atol=1e-6)
    decision = gate(data, store, register(store, data.bundle(flipped), "flipped", {"val_top1": good_top1}))
    assert not decision.promoted and alias_version(store, "champion") == "1"
    assert decision.candidate_top1 < decision.champion_top1 == pytest.approx(good_top1)


def test_a_champion_validated_on_other_tasks_is_not_compared_on_todays_split(store, data, good):
    """A champion trained before the split changed may have trained on today's validation tasks: its
    (inflated) score there must not keep a model trained on today's split out."""
    today = validation_fingerprint(data.arrays["validation"])
    assert today != validation_fingerprint(data.arrays["test"])
    assert gate(data, store, register(store, data.bundle(good), "good", extra_tags={SPLIT_TAG: "0123456789abcdef"})).promoted
    blind = data.bundle(constant(good))
    same_split_worse = register(store, blind, "blind-old", extra_tags={SPLIT_TAG: "0123456789abcdef"})
    assert not gate(data, store, same_split_worse).promoted, "on one split the better model must stay"
    decision = gate(data, store, register(store, blind, "blind-today", extra_tags={SPLIT_TAG: today}))
    assert decision.promoted and alias_version(store, "champion") == "3"
    # the blind model lost on one split (above): here the split decided, and the champion was not scored on it
    assert math.isnan(decision.champion_top1) and math.isfinite(decision.candidate_top1)
    assert "may have trained on today's validation tasks" in decision.reason and today in decision.reason
    broken = data.bundle(head_edited(good, lambda w, b: b.fill_(float("nan"))))
    assert not gate(data, store, register(store, broken, "nan", extra_tags={SPLIT_TAG: "fedcba9876543210"})).promoted


def test_nan_never_promotes(store, data, good):
    broken = data.bundle(head_edited(good, lambda w, b: b.fill_(float("nan"))))
    alone = gate(data, store, register(store, broken, "nan-first"))
    assert not alone.promoted and math.isnan(alone.candidate_top1) and alone.champion_version is None
    assert alias_version(store, "champion") is None and alias_version(store, "challenger") == "1"
    assert gate(data, store, register(store, data.bundle(good), "good")).promoted
    again = gate(data, store, register(store, broken, "nan-second"))
    assert not again.promoted and alias_version(store, "champion") == "2"
    assert tracking.registry.get_version(name_of(store), "3").tags["promotion.top1"] == "nan"


def test_a_champion_with_an_older_tokenizer_is_scored_on_its_own_tokens(store, data):
    """A champion trained before the tokenizer was refit reads other tokens: the gate re-tokenizes the
    same validation programs (from the validated records) with the champion's own tokenizer."""
    extra = [[{"kind": "Vectorize", "nums": [4096.0], "strs": []}]] * 400   # a frequent kind, a wider number range
    old_tokenizer = Tokenizer(rows=ROWS, cols=COLS).fit(data.steps["train"] + extra, [data.spec])
    old_x = {s: old_tokenizer.transform(data.steps[s], data.spec) for s in ("train", "validation")}
    assert not np.allclose(old_x["validation"], data.arrays["validation"]["x"])
    old_good = data.bundle(trained(old_x["train"], data.arrays["train"]), old_tokenizer)
    own_tokens = held_out_top1(old_good, {**data.arrays["validation"], "x": old_x["validation"]})
    wrong_tokens = held_out_top1(old_good, data.arrays["validation"])
    assert own_tokens != pytest.approx(wrong_tokens), "the test needs tokens that change the old model's ranking"

    first = gate(data, store, register(store, old_good, "old-tokenizer"))
    assert first.promoted and first.candidate_top1 == pytest.approx(own_tokens)
    blind = gate(data, store, register(store, data.bundle(constant(old_good.model)), "blind"))
    assert blind.champion_top1 == pytest.approx(own_tokens) and not blind.promoted


def test_train_stage_registers_with_provenance_tags_and_runs_the_gate(store, data, params):
    """Every version the train stage registers carries the DVC data version, the git commit, the
    params hash and its held-out scores, and the gate has judged it."""
    from tcl.platforms import get_platform
    from tcl.train.pipeline import train_one

    platform = get_platform(params, PLATFORM)
    first = train_one("mlp", platform, store, data.features_dir, "models")
    assert (first["registered_model"], first["version"], first["champion"]) == (name_of(store), "1", True)
    other = {**store, "seed": 1, "train": {**store["train"], "epochs": 3}}
    second = train_one("mlp", platform, other, data.features_dir, "models")
    assert second["version"] == "2"

    head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=REPO, capture_output=True, text=True)
    commit = head.stdout.strip() if head.returncode == 0 else "unknown"
    sections = ["seed", "split", "features", "train"]
    versions = {str(v.version): v.tags for v in tracking.registry.versions(name_of(store))}
    assert sorted(versions) == ["1", "2"]
    for version, p in (("1", store), ("2", other)):
        tags = versions[version]
        assert tags["data_version"] == "not locked yet"   # no dvc.lock in this directory
        assert tags["git_commit"] == commit
        assert tags["params_hash"] == tracking.params_hash(p, sections) and tags["params_sections"] == ",".join(sections)
        assert {"score.val_top1", "score.test_top1", "promotion.decision", "promotion.top1"} <= set(tags)
        assert tags[SPLIT_TAG] == validation_fingerprint(data.arrays["validation"])
        assert 0 < float(tags["score.val_top1"]) <= 1 and 0 < float(tags["score.test_top1"]) <= 1
    assert versions["1"]["params_hash"] != versions["2"]["params_hash"], "seed and train.epochs differ"
    assert versions["1"]["promotion.decision"] == "promoted"
    beats = float(versions["2"]["promotion.top1"]) > float(versions["2"]["promotion.champion_top1"])
    assert second["champion"] is beats and versions["2"]["promotion.decision"] == ("promoted" if beats else "refused")
    assert alias_version(store, "champion") == ("2" if beats else "1")


def test_a_version_without_provenance_is_refused(store, data, good):
    with tracking.run(store, "no-tags"), pytest.raises(ValueError, match="git_commit.*params_hash.*score"):
        tracking.registry.log_version(data.bundle(good), data.bundle(good).save("b"), name_of(store),
                                      data.arrays["validation"]["x"][:4], {"data_version": "md5"})


@pytest.mark.slow
def test_promote_flow_cli_runs_the_gate_for_an_existing_version(store, data, good, tmp_path):
    assert gate(data, store, register(store, data.bundle(good), "good")).promoted
    register(store, data.bundle(constant(good)), "blind")
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "features").symlink_to(data.root / "features")
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(store))
    # Prefect's ephemeral API gets 20 s to start by default: too little on a busy 2-core machine.
    env = dict(os.environ, PYTHONPATH=str(REPO), PREFECT_HOME=str(tmp_path / "prefect"),
               PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS="180")
    env.pop("PREFECT_API_URL", None)
    done = subprocess.run([sys.executable, "-m", "flows.promote", "--platform", PLATFORM, "--model", "mlp",
                           "--version", "2"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300)
    out = done.stdout + done.stderr
    assert done.returncode == 0, out[-3000:]
    assert f"{name_of(store)} v2 not promoted (champion stays v1): top-1" in out
    assert alias_version(store, "champion") == "1" and alias_version(store, "challenger") == "2"


# ---------------------------------------------------------------- the core without tracking

CORE_SCRIPT = """
import json, sys
from pathlib import Path
from tcl import tracking
from tcl.config import load_params
from tcl.platforms import get_platform
import tcl.data.validation.platform, tcl.features.dataset, tcl.sampling.rounds, tcl.transfer.tracked
from tcl.models.bundle import ModelBundle
from tcl.models.base import predict
from tcl.train.pipeline import train_one

params = load_params("params.yaml")
metrics = train_one("mlp", get_platform(params, sys.argv[1]), params, sys.argv[2], "models")
bundle = ModelBundle.load(Path("models") / "mlp")
scores = predict(bundle.model, __import__("numpy").load(Path(sys.argv[2]) / "test.npz")["x"])
with tracking.run(params, "nothing", {"stage": "x"}) as run:
    tracking.log_metric("ignored", 1.0)
print(json.dumps({"mlflow": sorted(m for m in sys.modules if m.split(".")[0] == "mlflow"),
                  "registered": metrics["registered_model"], "top1": metrics["test_top1_ratio_of_sums"],
                  "scores": len(scores), "run_id": run.run_id}))
"""


@pytest.mark.slow
def test_core_trains_and_predicts_with_tracking_off_without_importing_mlflow(tmp_path, data, params):
    run_params = {**params, "tracking": {"enabled": True, "mlflow_uri": f"sqlite:///{tmp_path}/never.db"},
                  "registry": {"prefix": "t"},
                  "train": {**params["train"], "epochs": 2, "batch_size": 64, "threads": 1,
                            "checkpoint_dir": str(tmp_path / "ckpt"), "hparams": {"mlp": HPARAMS}}}
    (tmp_path / "params.yaml").write_text(yaml.safe_dump(run_params))
    env = dict(os.environ, PYTHONPATH=str(REPO), TCL_TRACKING="off")
    env.pop("MLFLOW_TRACKING_URI", None)
    done = subprocess.run([sys.executable, "-c", CORE_SCRIPT, PLATFORM, str(data.features_dir)], cwd=tmp_path,
                          env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["mlflow"] == [], "a core module imported mlflow with tracking off"
    assert result["registered"] == "" and result["run_id"] is None
    assert 0 < result["top1"] <= 1 and result["scores"] == len(data.arrays["test"]["x"])
    assert not (tmp_path / "never.db").exists() and not (tmp_path / "mlruns").exists()


def test_only_the_tracking_layer_imports_mlflow():
    offenders = []
    for root in ("tcl", "flows", "benchmarks"):
        for path in (REPO / root).rglob("*.py"):
            if path.is_relative_to(REPO / "tcl" / "tracking"):
                continue
            lines = path.read_text().splitlines()
            offenders += [f"{path.relative_to(REPO)}:{i}" for i, line in enumerate(lines, 1)
                          if line.strip().startswith(("import mlflow", "from mlflow"))]
    assert offenders == []
