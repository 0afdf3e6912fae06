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

from conftest import REPO

pytestmark = pytest.mark.slow

TINY = {
    "collect": {"platforms": ["host-avx512-2c"], "networks": ["tiny_cnn", "bert_tiny"], "tasks_per_network": 2,
                "trials_per_task": 8, "batch_size": 4},
    "workloads": {"image_size": 16, "seq_len": 8},
    "validate": {"platforms": ["host-avx512-2c"]},
    "split": {"holdout_networks": ["bert_tiny"]},
    "train": {"platforms": ["host-avx512-2c"], "models": ["tcl", "mlp"], "epochs": 3},
    "tune": {"platforms": ["host-avx512-2c"], "network": "tiny_cnn", "cost_models": ["xgb", "tcl"],
             "trials": 16, "num_trials_per_iter": 4},
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
        if rel.startswith(("data/", "models/", "reports/")) or not (REPO / rel).is_file():
            continue
        (dst / rel).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(REPO / rel, dst / rel)
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
    assert "Running stage 'tune@host-avx512-2c'" in out

    from tcl.data.store import RecordStore

    records = RecordStore(repo / "data/records").read("host-avx512-2c")
    assert records.num_rows == 4 * 8  # 2 networks x 2 tasks x 8 trials
    assert set(records.column("network").to_pylist()) == {"tiny_cnn", "bert_tiny"}
    assert (repo / "data/validated/platform=host-avx512-2c.parquet").exists()
    validation = json.loads((repo / "reports/validation/host-avx512-2c.json").read_text())
    assert validation["passed"] and validation["rows"] == 32

    trained = json.loads((repo / "reports/train/host-avx512-2c.json").read_text())
    assert set(trained) == {"tcl", "mlp"}
    for name, metrics in trained.items():
        assert metrics["registered_model"] == f"tcl-{name}-host-avx512-2c" and metrics["champion"]
        assert 0 < metrics["test_top1_ratio_of_sums"] <= 1

    import mlflow

    client = mlflow.MlflowClient(tracking_uri=env["MLFLOW_TRACKING_URI"])
    version = client.get_model_version_by_alias("tcl-tcl-host-avx512-2c", "champion")
    assert version.tags["platform"] == "host-avx512-2c"
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()])
    stages = {r.data.tags.get("stage") for r in runs}
    assert {"validate", "train", "tune"} <= stages

    tuned = json.loads((repo / "reports/tune/host-avx512-2c.json").read_text())
    assert set(tuned) == {"xgb", "tcl"}
    for row in tuned.values():
        assert row["trials"] == 16
        assert row["max_abs_diff"] < 1e-4  # the tuned network computes what PyTorch computes
        assert row["tuned_ms"] > 0 and row["torch_eager_ms"] > 0
    assert (repo / "reports/tune/host-avx512-2c.png").stat().st_size > 10_000

    again = _run([sys.executable, "-m", "dvc", "repro"], repo, env)
    assert "Running stage" not in again
