"""The registry rebuilt from the pipeline's versioned products (tcl/records -> tcl/tracking/replay.py).

A small pipeline product tree in tmp_path, as DVC and git would hand it to a fresh clone: a
dvc.lock with the params each stage ran with, real saved bundles (tiny MLPs over a real
Tokenizer), the train metrics JSON, the transfer history, KB snapshots and stage.json. The
rebuild writes a real sqlite MLflow store; the tests read it back through MLflow and load a
model by `models:/...@champion` through tcl.tvm.cost_model. Nothing is mocked.
"""

from __future__ import annotations

import json
import math

import mlflow
import numpy as np
import pytest
import yaml

from tcl import tracking
from tcl.features.tokenizer import Tokenizer
from tcl.models import build_model
from tcl.records import pipeline_records
from tcl.models.bundle import ModelBundle
from tcl.models.base import predict

P = "local-1c"
ROWS, COLS = 4, 8
HP = {"hidden": 16, "encoder_layers": 1, "res_blocks": 1}
DATA_MD5 = "0123456789abcdef0123456789abcdef.dir"
USED = {"seed": 0, "train": {"epochs": 3, "lr": 0.001, "batch_size": 64, "loss": "lambdarank", "threads": 1,
                             "models": ["mlp"], "hparams": {"mlp": HP},
                             "optimizer_by_model": {"mlp": {"lr": 0.002, "batch_size": 32}}},
        "registry": {"prefix": "rb", "params_sections": ["seed", "split", "train"]},
        "split": {"val_fraction": 0.1}, "sampling": {"rate": 0.1},
        "transfer": {"order": ["local-sse4-1c", P], "cl_epochs": 2, "kd_epochs": 2}}


def bundle(tokenizer: Tokenizer, seed: int, meta: dict) -> ModelBundle:
    model = build_model("mlp", feat_dim=COLS, seq_len=ROWS + 1, seed=seed, **HP).eval()
    return ModelBundle("mlp", model, tokenizer, P, [1.0] * 11, meta)


@pytest.fixture(scope="module")
def products(tmp_path_factory):
    """What a clone holds after `dvc pull`: bundles, metrics JSONs, transfer history, dvc.lock."""
    root = tmp_path_factory.mktemp("products")
    steps = [[{"kind": "SamplePerfectTile", "nums": [float(t), 64.0 / t], "strs": []}] for t in (1, 2, 4, 8)]
    tok = Tokenizer(rows=ROWS, cols=COLS).fit(steps, [[1.0] * 11])
    bundle(tok, 0, {"train_rows": 64}).save(root / f"models/{P}/mlp")
    for i, platform in enumerate(USED["transfer"]["order"][:-1], start=1):
        bundle(tok, i, {"platforms": [platform], "data_version": DATA_MD5}).save(
            root / f"models/transfer/kb/{i}-{platform}")
    bundle(tok, 9, {"method": "ckd"}).save(root / "models/transfer/target")
    (root / "reports/train").mkdir(parents=True)
    (root / f"reports/train/{P}.json").write_text(json.dumps({
        "mlp": {"test_top1_ratio_of_sums": 0.5, "val_top1_ratio_of_sums": 0.625, "param_count": 1234,
                "registered_model": f"rb-mlp-{P}", "version": "3", "champion": True,
                "promotion": "top-1 0.6250 beats champion v2's 0.5000"},
        "random": {"test_top1_ratio_of_sums": 0.25}}))
    history = [{"phase": "cl", "platform": "local-sse4-1c", "seen": ["local-sse4-1c"], "losses": [3.0, 2.0],
                "metrics": [{"ac_top1.local-sse4-1c": 0.4}, {"ac_top1.local-sse4-1c": 0.5}]},
               {"phase": "kd", "platform": "local-sse4-1c", "seen": ["local-sse4-1c"], "losses": [1.5, 1.0],
                "metrics": [{"kb_top1.local-sse4-1c": 0.3}, {"kb_top1.local-sse4-1c": 0.45}]},
               {"phase": "cl", "platform": P, "seen": ["local-sse4-1c", P], "losses": [2.5, 2.0],
                "metrics": [{"ac_top1.local-1c": 0.6}, {"ac_top1.local-1c": 0.7}]}]
    (root / "models/transfer/history.json").write_text(json.dumps(history))
    (root / "reports/transfer").mkdir(parents=True)
    (root / "reports/transfer/stage.json").write_text(json.dumps({
        "method": "ckd", "order": USED["transfer"]["order"], "target": P, "seed": 0, "validation_top1": 0.7,
        "previous_champion_validation_top1": None, "params_deployed": 10, "params_total": 20,
        "kb_model": "rb-kb-tcl", "kb_versions": ["1"], "registered_model": f"rb-ckd-{P}", "version": "1",
        "champion": True}))
    stage = lambda names, outs: {"params": {"params.yaml": {n: USED[n] for n in names}},  # noqa: E731
                                 "outs": [{"path": o, "md5": f"md5-of-{o}"} for o in outs]}
    lock = {"schema": "2.0", "stages": {
        "collect": {"outs": [{"path": "data/records", "md5": DATA_MD5}]},
        "featurize": stage(["seed", "split"], ["data/features"]),
        f"sample@{P}": stage(["seed", "sampling", "train"], [f"data/samples/{P}.npz"]),
        f"train@{P}": stage(["seed", "train", "registry"], [f"models/{P}", f"reports/train/{P}.json"]),
        "transfer": stage(["seed", "transfer", "registry", "sampling"], ["models/transfer"])}}
    (root / "dvc.lock").write_text(yaml.safe_dump(lock))
    return root


@pytest.fixture(scope="module")
def rebuilt(products, tmp_path_factory):
    """One store for the module (a rebuild takes ~10 s): (params, the first rebuild's manifest)."""
    from tcl.tracking.replay import rebuild

    where = tmp_path_factory.mktemp("store")
    uri = f"sqlite:///{where}/mlflow.db"
    with pytest.MonkeyPatch.context() as mp:
        mp.chdir(where)
        mp.delenv("TCL_TRACKING", raising=False)
        mp.setenv("MLFLOW_TRACKING_URI", uri)
        params = {"tracking": {"mlflow_uri": uri, "experiment": "tcl"}}
        manifest = rebuild(pipeline_records(products), params, products, log=lambda _: None)
        yield params, manifest
    mlflow.set_tracking_uri(None)


def counts() -> tuple[int, int]:
    client = mlflow.MlflowClient()
    runs = client.search_runs([mlflow.get_experiment_by_name("tcl").experiment_id], max_results=1000)
    versions = client.search_model_versions("name LIKE 'rb-%'")
    return len(runs), len(versions)


def test_rebuild_registers_the_recorded_versions_aliases_and_provenance(rebuilt):
    manifest = rebuilt[1]
    reg = tracking.registry
    name = f"rb-mlp-{P}"
    # version 3 as recorded; 1 and 2 were earlier trainings whose bundles are not in this commit
    assert [str(v.version) for v in reg.versions(name)] == ["1", "2", "3"]
    assert reg.versions(name)[0].tags.get("tcl.placeholder")
    champ = reg.champion(name)
    assert str(champ.version) == "3" and str(reg.alias(name, tracking.CHALLENGER).version) == "3"
    want_hash = tracking.params_hash(USED, ["seed", "split", "train"])
    assert champ.tags["data_version"] == DATA_MD5 and champ.tags["params_hash"] == want_hash
    assert champ.tags["score.val_top1"] == "0.625000" and champ.tags["score.test_top1"] == "0.500000"
    assert champ.tags["promotion.decision"] == "promoted" and "beats" in champ.tags["promotion.reason"]
    assert champ.tags["git_commit"] == "unknown"            # the tree is not a git checkout
    # transfer: KB snapshot (score = the KD phase's last KB top-1) and the target, champion
    kb = reg.get_version("rb-kb-tcl", "1")
    assert kb.tags["platforms"] == "local-sse4-1c" and kb.tags["score.val_top1"] == "0.450000"
    assert kb.tags["params_hash"] == tracking.params_hash(USED, ["seed", "split", "train", "transfer"])
    assert str(reg.champion(f"rb-ckd-{P}").version) == "1"
    assert manifest["registered_models"][name]["aliases"] == {"champion": "3", "challenger": "3"}
    assert "git_commit" not in manifest["registered_models"][name]["versions"]["3"]["tags"]


def test_rebuilt_runs_hold_params_metrics_and_nested_phase_curves(rebuilt):
    client = mlflow.MlflowClient()
    exp = mlflow.get_experiment_by_name("tcl").experiment_id
    train = client.search_runs([exp], f"tags.`mlflow.runName` = 'train-mlp-{P}'")[0]
    assert train.data.params["epochs"] == "3" and train.data.params["hp.hidden"] == "16"
    assert (train.data.params["lr"], train.data.params["batch_size"]) == ("0.002", "32"), "the model's own recipe"
    assert train.data.metrics["val_top1_ratio_of_sums"] == 0.625
    parent = client.search_runs([exp], f"tags.`mlflow.runName` = 'transfer-ckd-{P}'")[0]
    phases = client.search_runs([exp], f"tags.`mlflow.parentRunId` = '{parent.info.run_id}'")
    assert sorted(r.info.run_name for r in phases) == ["cl-local-1c", "cl-local-sse4-1c", "kd-local-sse4-1c"]
    kd = next(r for r in phases if r.info.run_name == "kd-local-sse4-1c")
    curve = client.get_metric_history(kd.info.run_id, "kb_top1.local-sse4-1c")
    assert [(m.step, m.value) for m in sorted(curve, key=lambda m: m.step)] == [(2, 0.3), (3, 0.45)]
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} >= {"history.json"}


def test_a_second_rebuild_adds_nothing_and_gives_the_same_manifest(products, rebuilt):
    from tcl.tracking.replay import rebuild

    params, first = rebuilt
    before = counts()
    assert rebuild(pipeline_records(products), params, products, log=lambda _: None) == first
    assert counts() == before


def test_the_champion_loads_as_a_tvm_cost_model_with_the_saved_weights(products, rebuilt):
    import tcl.tvm.cost_model as tcm

    model = tcm.cost_model(f"models:/rb-mlp-{P}@champion")
    saved = ModelBundle.load(products / f"models/{P}/mlp")
    x = np.random.default_rng(0).random((5, ROWS + 1, COLS), dtype=np.float32)
    assert np.allclose(predict(model.bundle.model, x), predict(saved.model, x))
    assert not any(math.isnan(v) for v in predict(model.bundle.model, x))


def test_tuning_on_an_empty_store_rebuilds_the_registry_first(products, tmp_path, monkeypatch):
    """A fresh clone whose store is empty (the tune stage ran before register): the tune flow's model
    choice replays the committed pipeline and loads the champion instead of failing."""
    from tcl.config import load_params
    from tcl.platforms import get_platform
    from tcl.tvm.stage import registered_choice

    uri = f"sqlite:///{tmp_path}/mlflow.db"
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("TCL_TRACKING", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    params = load_params()
    params["tracking"] = {**params.get("tracking", {}), "mlflow_uri": uri, "experiment": "tcl", "enabled": True}
    params["registry"] = {**params["registry"], "prefix": "rb"}
    lines = []
    try:
        bundle, pin = registered_choice("mlp", get_platform(params, P), params, lines.append, root=products)
        assert pin["registered_model"] == f"rb-mlp-{P}" and pin["version"] == "3"
        assert any("rebuilding it first" in line for line in lines), lines
        x = np.random.default_rng(0).random((3, ROWS + 1, COLS), dtype=np.float32)
        assert np.allclose(predict(bundle.model, x), predict(ModelBundle.load(products / f"models/{P}/mlp").model, x))
        with pytest.raises(LookupError, match="no registered 'tcl' champion"):  # nothing committed: no rebuild
            registered_choice("tcl", get_platform(params, P), params, lines.append, root=products)
    finally:
        mlflow.set_tracking_uri(None)


def test_lock_ignores_entries_of_stages_no_longer_defined(tmp_path):
    """dvc.lock keeps `train@b` after b leaves train.platforms; the registry must not look for its reports."""
    from tcl.records.lock import Lock

    (tmp_path / "dvc.yaml").write_text("stages:\n  train:\n    foreach: ${train.platforms}\n    do:\n"
                                       "      cmd: echo ${item}\n  register:\n    cmd: echo\n")
    (tmp_path / "params.yaml").write_text("train:\n  platforms: [a]\n")
    (tmp_path / "dvc.lock").write_text("schema: '2.0'\nstages:\n  train@a:\n    cmd: echo a\n  train@b:\n"
                                       "    cmd: echo b\n  register:\n    cmd: echo\n  gone:\n    cmd: echo\n")
    lock = Lock(tmp_path)
    assert lock.instances("train") == ["a"]
    assert lock.has("register") and not lock.has("gone")


def test_a_refused_version_stands_in_as_champion_only_when_no_committed_version_holds_it():
    """The gate kept an older champion whose bundle the commit no longer holds: the newest committed
    version takes `champion` (tagged why); a promoted version, or a model without a gate, is left as it is."""
    from tcl.tracking.run_record import Registration, RunRecord
    from tcl.records.pipeline import STAND_IN, stand_in_champions

    def reg(name, version, decision, aliases):
        tags = {"promotion.decision": decision} if decision else {}
        return Registration(name, version, f"models/{name}", tags, list(aliases))

    refused = reg("tcl-tcl-p", "2", "refused", ["challenger"])
    promoted_old, refused_new = reg("tcl-mlp-p", "1", "promoted", ["champion"]), reg("tcl-mlp-p", "2", "refused", [])
    snapshot = reg("tcl-kb-tcl", "4", None, [])
    parent = RunRecord("k", "train", {}, registrations=[refused])
    parent.children.append(RunRecord("c", "child", {}, registrations=[promoted_old, refused_new, snapshot]))
    stand_in_champions([parent])
    assert refused.aliases == ["challenger", "champion"] and STAND_IN in refused.tags
    assert promoted_old.aliases == ["champion"] and refused_new.aliases == [] and STAND_IN not in refused_new.tags
    assert snapshot.aliases == []
