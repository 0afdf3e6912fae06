"""The deployed pipeline on a real Prefect server and worker; the model registry on a real MLflow server.

Everything listens on loopback and lives in temporary directories: a Prefect server (its
own PREFECT_HOME, SQLite), a process work pool with a worker, an MLflow tracking server
(SQLite, local artifacts) and headless Chromium for MLflow's UI. Their settings
(PREFECT_API_URL, PREFECT_HOME, MLFLOW_TRACKING_URI) go only into the subprocesses'
environments, and every server and worker is stopped when its fixture or test ends,
failed or not. Chromium is Debian's `chromium` package (`make test` installs it): without
it the UI test fails, it does not skip.
"""

from __future__ import annotations

import copy
import json
import re
import shutil
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

import pytest
import yaml

from conftest import REPO
from servers import BIN, background
from servers import browse as _browse
from servers import clean_env as _env
from servers import free_port as _free_port
from servers import mlflow_server as mlflow_on
from servers import wait_until_up as _wait_until_up

pytestmark = pytest.mark.slow

P = "local-1c"
POOL = "tcl-test"
# The pipeline on one platform, shrunk as in test_pipeline.py: 2 networks x 2 tasks x a pool of 8 programs.
TINY = {
    "collect": {"source": P, "platforms": [P], "networks": ["tiny_cnn", "bert_tiny"], "image_sizes": [16],
                "extra_networks": [],  # no tier 1 (params.yaml lists 18 families)
                "seq_lens": [8], "tasks_per_network": 2, "max_tasks": 0, "pool_size": 8, "batch_size": 4,
                "population": 16, "search_cpus": [0], "runner": {"cpus": [0]}, "builder": {"cpus": [0]}},
    "workloads": {"image_size": 16, "seq_len": 8},
    "validate": {"platforms": [P]},
    "split": {"holdout_networks": ["bert_tiny"], "min_val_tasks": 1},
    "train": {"platforms": [P], "models": ["mlp"], "epochs": 2},
    "sampling": {"platforms": [P], "rate": 0.5, "rounds": 1, "model": "mlp", "epochs": 2},
}
STAGES = {"collect", "validate", "featurize", "sample", "train"}
FINAL = {"COMPLETED", "FAILED", "CRASHED", "CANCELLED"}


def _http(method: str, url: str, body: dict | None = None, timeout: float = 30):
    """One JSON request (the standard library's client); returns the decoded answer."""
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=timeout) as response:
        return json.loads(response.read() or b"null")


def _run(cmd: list[str], env: dict[str, str], cwd: Path | None = None, timeout: float = 600) -> str:
    done = subprocess.run(cmd, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)
    out = done.stdout + done.stderr
    assert done.returncode == 0, f"{' '.join(map(str, cmd))} failed ({done.returncode}):\n{out[-5000:]}"
    return out


@pytest.fixture(scope="module")
def prefect_server(tmp_path_factory):
    """A Prefect server on a free loopback port with its own PREFECT_HOME and SQLite database;
    yields (API URL, the environment its clients run with)."""
    root = tmp_path_factory.mktemp("prefect")
    port = _free_port()
    api = f"http://127.0.0.1:{port}/api"
    env = _env(PREFECT_HOME=str(root / "home"), PREFECT_API_URL=api,
               PREFECT_API_DATABASE_CONNECTION_URL=f"sqlite+aiosqlite:///{root}/prefect.db",
               PREFECT_WORKER_QUERY_SECONDS="2")
    log = root / "server.log"
    with background([str(BIN / "prefect"), "server", "start", "--host", "127.0.0.1", "--port", str(port)],
                    env, log) as proc:
        _wait_until_up(f"{api}/health", proc, log)
        yield api, env


@pytest.fixture(scope="module")
def mlflow_server(tmp_path_factory):
    """An MLflow tracking server on a free loopback port (SQLite backend, artifacts proxied to a local dir)."""
    root = tmp_path_factory.mktemp("mlflow")
    with mlflow_on(root / "mlflow.db", root) as url:
        yield url


def _merge(base: dict, over: dict) -> dict:
    for key, value in over.items():
        base[key] = _merge(dict(base.get(key) or {}), value) if isinstance(value, dict) else value
    return base


def _checkout(root: Path) -> Path:
    """The flows and a tiny params.yaml whose deploy: section puts both flows on POOL; the code of
    `tcl` is the installed package, as on any machine where `make setup` ran."""
    checkout = root / "checkout"
    shutil.copytree(REPO / "flows", checkout / "flows", ignore=shutil.ignore_patterns("__pycache__"))
    params = _merge(copy.deepcopy(yaml.safe_load((REPO / "params.yaml").read_text())), TINY)
    for kind in ("pipeline", "tune", "grow"):  # every flow deploy writes, so no pool is left to the repo's params
        params["deploy"][kind]["pools"] = {P: POOL}
    (checkout / "params.yaml").write_text(yaml.safe_dump(params, sort_keys=False))
    return checkout


def _api(api: str, method: str, path: str, body: dict | None = None):
    return _http(method, f"{api}{path}", body)


def _wait_for_run(api: str, run_id: str, log: Path, timeout: float) -> dict:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        run = _api(api, "GET", f"/flow_runs/{run_id}")
        if run["state_type"] in FINAL:
            return run
        time.sleep(5)
    pytest.fail(f"flow run {run_id} not finished after {timeout} s; worker log:\n{log.read_text()[-5000:]}")


def _subflows(api: str, run_id: str) -> dict[str, dict]:
    """The child flow runs of `run_id`, by flow name."""
    runs = _api(api, "POST", "/flow_runs/filter", {"flow_runs": {"parent_flow_run_id": {"any_": [run_id]}},
                                                   "limit": 50})
    return {_api(api, "GET", f"/flows/{r['flow_id']}")["name"]: r for r in runs}


def _task_runs(api: str, run_id: str, expected: str) -> dict[str, dict]:
    """The task runs of `run_id`'s subflows by name, once `expected` is among them (task runs reach
    the server as events, shortly after the flow run's own state)."""
    subflows = [r["id"] for r in _subflows(api, run_id).values()]
    deadline = time.monotonic() + 60
    while True:
        runs = {r["name"]: r for r in _api(api, "POST", "/task_runs/filter",
                                           {"task_runs": {"flow_run_id": {"any_": subflows}}, "limit": 200})}
        if expected in runs or time.monotonic() > deadline:
            return runs
        time.sleep(2)


def test_pipeline_deployment_runs_on_a_process_worker(prefect_server, mlflow_server, tmp_path):
    """prefect.yaml from a tiny params.yaml, `prefect deploy --all`, a worker on the pool, `prefect
    deployment run`: the worker runs collect -> validate -> featurize -> sample -> train in the
    checkout, the model is registered on the MLflow server; a second run takes its picks from the cache."""
    api, env = prefect_server
    checkout = _checkout(tmp_path)
    written = _run([sys.executable, "-m", "tcl.deploy"], env, cwd=checkout)
    assert all(f"{flow}/{P}" in written for flow in ("pipeline", "tune", "grow")), written
    _run([str(BIN / "prefect"), "work-pool", "create", POOL, "--type", "process"], env)
    out = _run([str(BIN / "prefect"), "--no-prompt", "deploy", "--all"], env, cwd=checkout, timeout=900)
    assert f"pipeline/{P}" in out and f"tune/{P}" in out

    deployment = _api(api, "GET", f"/deployments/name/pipeline/{P}")
    assert deployment["work_pool_name"] == POOL and deployment["parameters"] == {"platform": P,
                                                                                "params_path": "params.yaml"}
    assert deployment["pull_steps"] == [{"tcl.deploy.enter_checkout": {}}]
    (schedule,) = deployment["schedules"]
    assert schedule["schedule"]["cron"] == "0 2 * * *" and schedule["active"] is False  # created paused
    assert _api(api, "GET", f"/deployments/name/tune/{P}")["work_pool_name"] == POOL
    assert _api(api, "GET", f"/deployments/name/grow/{P}")["work_pool_name"] == POOL

    # The worker starts elsewhere: the deployment's pull step takes each run into the checkout.
    worker_env = dict(env, TCL_CHECKOUT=str(checkout), MLFLOW_TRACKING_URI=mlflow_server)
    (tmp_path / "worker").mkdir()
    log = tmp_path / "worker.log"
    with background([str(BIN / "prefect"), "worker", "start", "--pool", POOL, "--limit", "1"], worker_env, log,
                    cwd=tmp_path / "worker"):
        runs = []
        for attempt in range(2):
            out = _run([str(BIN / "prefect"), "deployment", "run", f"pipeline/{P}"], env)
            run_id = re.search(r"UUID: ([0-9a-f-]{36})", out).group(1)
            run = _wait_for_run(api, run_id, log, timeout=1800)
            assert run["state_type"] == "COMPLETED", f"run {attempt}: {run['state_name']}\n{log.read_text()[-6000:]}"
            assert run_id in log.read_text()  # this worker picked it up
            runs.append(run)
    print(f"\nworker log: {log}")

    for run in runs:
        subflows = _subflows(api, run["id"])
        assert set(subflows) == STAGES and all(r["state_type"] == "COMPLETED" for r in subflows.values())
    first = _task_runs(api, runs[0]["id"], f"train {P}")
    measured = [name for name in first if name.startswith(f"{P} ")]  # one measure task per catalog task
    assert len(measured) == 4 and all(first[n]["state_type"] == "COMPLETED" for n in measured)
    assert first[f"pick {P}"]["state_name"] == "Completed" and first[f"train {P}"]["state_type"] == "COMPLETED"
    again = _task_runs(api, runs[1]["id"], f"train {P}")
    assert again[f"pick {P}"]["state_name"] == "Cached"  # same features, knobs and code: the picks are reused
    assert not [n for n in again if n.startswith(f"{P} ")]  # nothing left to measure: no measure task ran

    assert (checkout / f"reports/train/{P}.json").exists() and (checkout / f"data/samples/{P}.npz").exists()
    query = urllib.parse.urlencode({"filter": f"name = 'tcl-mlp-{P}'"})
    versions = _http("GET", f"{mlflow_server}/api/2.0/mlflow/model-versions/search?{query}").get("model_versions", [])
    assert len(versions) == 2  # one per pipeline run, registered through the server
    assert all({"key": "platform", "value": P} in v["tags"] for v in versions), versions


def test_registered_versions_and_tags_show_on_the_mlflow_server_and_its_ui(mlflow_server, tmp_path):
    """Two versions of a model registered through the server, with tags; the UI's page of the model
    (a JS app, rendered by headless Chromium) lists both versions and the tag."""
    from mlflow import MlflowClient

    client = MlflowClient(tracking_uri=mlflow_server, registry_uri=mlflow_server)
    name = "tcl-ui-check"
    client.create_registered_model(name, tags={"purpose": "render-check"}, description="registered by test_servers.py")
    experiment = client.create_experiment("ui-check")
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "weights.txt").write_text("0.5\n")
    for score in ("0.61", "0.64"):
        run = client.create_run(experiment)
        client.log_artifacts(run.info.run_id, str(tmp_path / "model"), "model")
        client.set_terminated(run.info.run_id)
        client.create_model_version(name, f"{run.info.artifact_uri}/model", run_id=run.info.run_id,
                                    tags={"platform": P, "score.val_top1": score})
    versions = client.search_model_versions(f"name = '{name}'")
    assert sorted(v.version for v in versions) == ["1", "2"]
    assert {v.tags["score.val_top1"] for v in versions} == {"0.61", "0.64"}
    assert client.get_registered_model(name).tags == {"purpose": "render-check"}

    page = f"{mlflow_server}/#/models/{name}"
    dom = _browse(page, tmp_path / "chromium", "--dump-dom")
    assert "Version 1" in dom and "Version 2" in dom, dom[-3000:]
    assert "purpose" in dom and "render-check" in dom, dom[-3000:]  # the model's tag, key and value
    assert "score.val_top1" in dom and P in dom, dom[-3000:]  # and the versions' tags
    shot = tmp_path / "mlflow-model.png"
    _browse(page, tmp_path / "chromium", f"--screenshot={shot}")
    assert shot.stat().st_size > 10_000
    print(f"\nMLflow UI screenshot of {page}: {shot}")
