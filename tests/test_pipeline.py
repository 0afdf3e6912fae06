"""The whole pipeline through a real `dvc repro` on a tiny configuration.

A copy of the repository in a temporary directory, with params shrunk so every
stage runs in minutes: real collection on this CPU, Great Expectations
validation, featurization, training with MLflow runs and registered models, and
a tuning stage that uses the registered TCL model inside MetaSchedule and checks
the compiled network against PyTorch. A second `dvc repro` must do nothing.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from conftest import REPO, TINY_SEARCH

pytestmark = pytest.mark.slow

P1, P2 = "local-1c", "local-sse4-1c"
TINY = {
    "collect": {"source": P1, "platforms": [P1, P2], "networks": ["tiny_cnn", "bert_tiny"], "image_sizes": [16],
                "extra_networks": [],  # no tier 1 (params.yaml lists 18 families)
                "seq_lens": [8], "tasks_per_network": 2, "max_tasks": 0, "pool_size": 8, "batch_size": 4, "population": 16,
                # one core for everything: the pinning code runs, and a collection running beside the test
                # on core 1 (as while this project collects its dataset) is left alone
                "search_cpus": [0], "runner": {"cpus": [0]}, "builder": {"cpus": [0]}},
    "retest": {"fraction": 0.5},
    "workloads": {"image_size": 16, "seq_len": 8},
    "validate": {"platforms": [P1, P2]},
    "split": {"holdout_networks": ["bert_tiny"], "min_val_tasks": 1},
    "train": {"platforms": [P1, P2], "models": ["tcl", "tenset_mlp"], "epochs": 3},
    "kb_prior": {"platforms": [P1]},   # P2 has P1's vector width (16 bytes) and threads: one ISA class
    "sampling": {"platforms": [P2], "rate": 0.5, "rounds": 1, "model": "mlp", "epochs": 2},
    "transfer": {"order": [P1, P2], "rate": 0.5, "sampler": "random", "cl_epochs": 1, "kd_epochs": 1,
                 "threads": 1},
    "tune": {"platforms": [P1], "network": "tiny_cnn", "cost_models": ["xgb", "tcl", "tenset_mlp", "tcl_stores_joint",
                                                                      "pretrained_xgb_kb+boost"],
             "trials": 16, "num_trials_per_iter": 4, "search": TINY_SEARCH, "learned_search": TINY_SEARCH},
}


def _merge(base: dict, over: dict) -> dict:
    for key, value in over.items():
        base[key] = _merge(dict(base.get(key) or {}), value) if isinstance(value, dict) else value
    return base


def _run(cmd, cwd, env):
    done = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    assert done.returncode == 0, f"{' '.join(cmd)} failed:\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    return done.stdout + done.stderr


@pytest.fixture(scope="module")
def repo_copy(tmp_path_factory):
    dst = tmp_path_factory.mktemp("pipeline") / "repo"
    files = subprocess.run(["git", "ls-files", "-co", "--exclude-standard"], cwd=REPO, capture_output=True,
                           text=True, check=True).stdout.split()
    for rel in files:
        if rel.startswith(("data/", "models/", "reports/", "dvc-store/")) or not (REPO / rel).is_file():
            continue
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dst / rel)
    (dst / "data" / "records_gpu").mkdir(parents=True)  # the dataset card's GPU store: none measured here
    params = _merge(yaml.safe_load((REPO / "params.yaml").read_text()), TINY)
    (dst / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    subprocess.run(["git", "init", "-q"], cwd=dst, check=True)
    env = dict(os.environ, PATH=f"{os.path.dirname(sys.executable)}:{os.environ['PATH']}",
               MLFLOW_TRACKING_URI=f"sqlite:///{dst}/mlflow.db")
    env.pop("PREFECT_API_URL", None)
    return dst, env


def test_dvc_repro_collects_validates_trains_registers_and_tunes(repo_copy):
    repo, env = repo_copy
    out = _run([sys.executable, "-m", "dvc", "repro"], repo, env)
    assert f"Running stage 'tune@{P1}'" in out

    from tcl.data.store import RecordStore

    store = RecordStore(repo / "data/records")
    first, second = store.read(P1), store.read(P2)
    assert first.num_rows == second.num_rows == 4 * 8  # 2 networks x 2 tasks x a pool of 8, on each platform
    assert set(first.column("program_id").to_pylist()) == set(second.column("program_id").to_pylist())
    assert set(first.column("network").to_pylist()) == {"tiny_cnn@16", "bert_tiny@8"}
    for p in (P1, P2):
        validation = json.loads((repo / f"reports/validation/{p}.json").read_text())
        assert validation["passed"] and validation["rows"] == 32
    retested = RecordStore(repo / "data/retest")
    assert 0 < retested.read(P1).num_rows < 32 and retested.read(P2).num_rows > 0

    card = json.loads((repo / "reports/dataset.json").read_text())
    assert card["tasks"] == 4 and card["platforms"][P1]["programs"] == 32
    assert set(card["retest"]) == {P1, P2} and card["dvc_data_version"].endswith(".dir")
    assert (repo / "data/features/tokenizer.json").exists()
    assert not list((repo / "data/features").glob("*/tokenizer.json"))

    sampled = {p: json.loads((repo / f"reports/sample/{p}.json").read_text()) for p in (P1, P2)}
    assert sampled[P1]["mode"] == "all" and sampled[P1]["picked"] == sampled[P1]["pool_size"]
    assert sampled[P2]["mode"] == "offline" and sampled[P2]["strategy"] == "rdu"
    assert sampled[P2]["picked"] == round(0.5 * sampled[P2]["pool_size"]) > 0

    trained = json.loads((repo / f"reports/train/{P1}.json").read_text())
    assert set(trained) == {"tcl", "tenset_mlp", "random"}
    assert 0 < trained["random"]["test_top1_ratio_of_sums"] <= 1
    for name in ("tcl", "tenset_mlp"):
        metrics = trained[name]
        assert metrics["registered_model"] == f"tcl-{name}-{P1}" and metrics["champion"]
        assert 0 < metrics["test_top1_ratio_of_sums"] <= 1

    import mlflow

    client = mlflow.MlflowClient(tracking_uri=env["MLFLOW_TRACKING_URI"])
    version = client.get_model_version_by_alias(f"tcl-tcl-{P1}", "champion")
    assert version.tags["platform"] == P1
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    stages = {r.data.tags.get("stage") for r in runs}
    assert {"validate", "sample", "train", "train_joint", "kb_prior", "transfer", "tune"} <= stages
    on_sample = [r for r in runs if r.data.tags.get("stage") == "train" and r.data.tags.get("platform") == P2]
    assert on_sample and all(int(r.data.params["train_rows"]) == sampled[P2]["picked"] for r in on_sample)
    # one joint model over both platforms: P1's whole training split and P2's sample, registered for each
    joint = json.loads((repo / "reports/train/joint.json").read_text())["tcl_stores_joint"]
    assert set(joint) == {P1, P2} and all(m["registered_model"] == f"tcl-tcl_stores_joint-{p}" for p, m in joint.items())
    [joint_run] = [r for r in runs if r.data.tags.get("mlflow.runName") == "train-tcl_stores_joint"]
    own = [r for r in runs if r.data.tags.get("stage") == "train" and r.data.tags.get("model") == "tenset_mlp"]
    assert int(joint_run.data.params["train_rows"]) == sum(int(r.data.params["train_rows"]) for r in own)

    # the knowledge-base prior of P1: fitted on both platforms of its ISA class, P1's validation tasks left out
    prior = json.loads((repo / "reports/train/kb_prior.json").read_text())["xgb_kb"][P1]
    assert prior["fitted_on"] == [P2, P1] and prior["registered_model"] == f"tcl-xgb_kb-{P1}" and prior["champion"]
    assert prior["train_rows"] > prior["platform_train_rows"] > 0

    transfer = json.loads((repo / "reports/transfer/stage.json").read_text())
    assert transfer["order"] == [P1, P2] and transfer["platforms_loaded"] == [P1, P2]
    assert transfer["kb_versions"] == ["1"] and transfer["registered_model"] == f"tcl-ckd-{P2}"
    assert 0 < transfer["test_top1_ratio_of_sums"] <= 1
    assert client.get_model_version("tcl-kb-tcl", "1").tags["platforms"] == P1
    assert (repo / "reports/transfer/stage-forgetting.png").stat().st_size > 5_000

    tuned = json.loads((repo / f"reports/tune/{P1}.json").read_text())
    assert set(tuned) == {"xgb", "tcl", "tenset_mlp", "tcl_stores_joint", "pretrained_xgb_kb+boost"}
    assert tuned["pretrained_xgb_kb+boost"]["model"]["registered_model"] == f"tcl-xgb_kb-{P1}"
    assert tuned["tenset_mlp"]["model"]["registered_model"] == f"tcl-tenset_mlp-{P1}"
    assert tuned["tcl_stores_joint"]["model"]["registered_model"] == f"tcl-tcl_stores_joint-{P1}"
    for row in tuned.values():
        assert row["trials"] == 16
        assert row["max_abs_diff"] < 1e-4  # the tuned network computes what PyTorch computes
        assert row["tuned_ms"] > 0 and row["reference_ms"] > 0
    assert (repo / f"reports/tune/{P1}.png").stat().st_size > 10_000

    again = _run([sys.executable, "-m", "dvc", "repro"], repo, env)
    assert "Running stage" not in again
