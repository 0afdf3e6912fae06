"""prefect.yaml is what params.yaml's `deploy:` section gives, in Prefect's own schema; task retries and
cache keys for the stage flows. The deployments running on a real server: tests/test_servers.py."""

from __future__ import annotations

import copy
import os
import re

import pytest
import yaml

from conftest import REPO
from flows._tasks import content_key, retry_if_flaky, retry_options
from tcl.config import load_params
from tcl.deploy import deployment_names, deployments, enter_checkout, main, prefect_yaml


@pytest.fixture()
def repo_params():
    return copy.deepcopy(load_params(REPO / "params.yaml"))


def test_prefect_yaml_is_written_from_params(repo_params):
    """Editing params.yaml's deploy: section without `python -m tcl.deploy` fails here."""
    assert (REPO / "prefect.yaml").read_text() == prefect_yaml(repo_params), \
        "prefect.yaml is out of date: run `python -m tcl.deploy`"
    assert main(["--params", str(REPO / "params.yaml"), "--out", str(REPO / "prefect.yaml"), "--check"]) == 0


def test_prefect_yaml_is_valid_for_prefect_and_follows_the_deploy_section(repo_params):
    from prefect.cli.deploy._models import PrefectYamlModel

    doc = PrefectYamlModel.model_validate(yaml.safe_load(prefect_yaml(repo_params)))
    cfg = repo_params["deploy"]
    expected = {f"pipeline/{p}": pool for p, pool in cfg["pipeline"]["pools"].items()}
    expected |= {f"tune/{p}": pool for p, pool in cfg["tune"]["pools"].items()}
    expected |= {f"grow/{p}": pool for p, pool in cfg["grow"]["pools"].items()}   # make collect on a schedule
    assert deployment_names(repo_params) == list(expected)
    assert doc.pull == [{"tcl.deploy.enter_checkout": {}}]
    for name, dep in zip(expected, doc.deployments):
        kind, platform = name.split("/")
        assert dep.name == platform and dep.work_pool.name == expected[name]
        assert dep.entrypoint == {"pipeline": "flows/pipeline.py:pipeline_flow", "tune": "flows/tune.py:tune_flow",
                                  "grow": "flows/grow.py:grow_flow"}[kind]
        assert dep.parameters == {"platform": platform, "params_path": "params.yaml"}
        (schedule,) = dep.schedules
        assert schedule.cron == cfg[kind]["cron"] and schedule.active is False and schedule.timezone == "UTC"


@pytest.mark.parametrize("edit, message", [
    (lambda d: d["pipeline"]["pools"].update({"no-such-cpu": "p"}),
     "deploy.pipeline.pools.no-such-cpu: 'no-such-cpu' is not declared under platforms"),
    (lambda d: d["pipeline"]["pools"].update({"host-avx512-2c": "p"}),
     "deploy.pipeline.pools.host-avx512-2c: 'host-avx512-2c' is not in train.platforms"),
    (lambda d: d["tune"]["pools"].update({"local-1c": ""}), "deploy.tune.pools.local-1c: expected a work pool name"),
    (lambda d: d["tune"].update(cron="every monday"), "deploy.tune.cron: 'every monday' is not a valid cron"),
    (lambda d: d.update(active="no"), "deploy.active: expected true or false"),
    (lambda d: d.pop("pipeline"), "deploy.pipeline: expected a mapping"),
    (lambda d: d["retries"].update(measure=-1), "deploy.retries.measure: expected a count >= 0"),
    (lambda d: d["retries"].update(delay_s="soon"), "deploy.retries.delay_s: expected seconds >= 0"),
])
def test_a_bad_deploy_section_is_refused_naming_the_field(repo_params, edit, message):
    edit(repo_params["deploy"])
    with pytest.raises(ValueError, match=re.escape(message)):
        deployments(repo_params)  # the deployments' fields, then the retries'
        retry_options(repo_params, "measure")


def test_retry_options_come_from_params_and_retry_only_what_a_retry_can_fix(repo_params):
    from prefect.states import Failed

    opts = retry_options(repo_params, "measure")
    assert opts["retries"] == repo_params["deploy"]["retries"]["measure"]
    assert opts["retry_delay_seconds"] == repo_params["deploy"]["retries"]["delay_s"]
    assert retry_options({}, "tune")["retries"] == 0
    assert retry_if_flaky(None, None, Failed(data=OSError("builder process died")))
    assert retry_if_flaky(None, None, Failed(data=RuntimeError("RPC session lost")))
    assert not retry_if_flaky(None, None, Failed(data=ValueError("params.yaml: bad value")))
    assert not retry_if_flaky(None, None, Failed(data=KeyError("unknown platform")))


@pytest.mark.parametrize("sig, handler", [("SIGTERM", True), ("SIGINT", True), ("SIGTERM", False)])
def test_a_signal_to_the_process_group_ends_a_measuring_flow(sig, handler):
    """`kill -- -<pid>` (make collect's stop) or Ctrl-C also kills the task's worker and Prefect's temporary
    server; the flow must end without retrying the task. Without `stopping_on_signals` (the control case) the
    process is still there after 12 s."""
    import signal
    import subprocess
    import sys
    import time

    cmd = [sys.executable, str(REPO / "tests" / "stop_driver.py")] + ([] if handler else ["--no-stop-handler"])
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(cmd, cwd=REPO, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            start_new_session=True)
    try:
        seen = []
        while not seen or seen[-1].strip() != "working":
            seen.append(proc.stdout.readline())
            assert seen[-1] or pytest.fail("".join(seen)[-3000:])  # ended before its task started
        time.sleep(1)
        os.killpg(proc.pid, getattr(signal, sig))
        rest, _ = proc.communicate(timeout=60 if handler else 12)
        assert handler, f"without the handler the flow ended too:\n{rest[-3000:]}"
        assert "working" not in rest and "Retry" not in rest, rest[-3000:]
    except subprocess.TimeoutExpired:
        assert not handler, "the flow went on after the signal"
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def test_content_key_changes_with_the_input_bytes_and_the_config(tmp_path):
    data = tmp_path / "inputs.bin"
    data.write_bytes(b"a")
    first = content_key([data], ["sampling"], {"rate": 0.1})
    assert content_key([data], ["sampling"], {"rate": 0.1}) == first
    assert content_key([data], ["sampling"], {"rate": 0.2}) != first
    assert content_key([data], ["sampling", "models"], {"rate": 0.1}) != first
    data.write_bytes(b"b")
    assert content_key([data], ["sampling"], {"rate": 0.1}) != first
    with pytest.raises(FileNotFoundError, match="no_such_package"):
        content_key([data], ["no_such_package"], {})


def test_an_npz_counts_by_its_arrays_not_its_zip_bytes(tmp_path):
    """Features written again (a new zip timestamp, here another compression) keep their cache key."""
    import numpy as np

    arrays = {"x": np.arange(12.0).reshape(3, 4), "program_id": np.array(["a", "bb", "c"])}
    np.savez_compressed(tmp_path / "train.npz", **arrays)
    first = content_key([tmp_path / "train.npz"], [], None)
    np.savez(tmp_path / "train.npz", **arrays)
    assert content_key([tmp_path / "train.npz"], [], None) == first
    np.savez(tmp_path / "train.npz", **dict(arrays, x=arrays["x"] + 1))
    assert content_key([tmp_path / "train.npz"], [], None) != first


def test_the_pull_step_enters_the_checkout_or_names_what_is_missing(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)  # restored after the test: the step changes directory
    monkeypatch.delenv("TCL_CHECKOUT", raising=False)
    assert enter_checkout() == {"directory": str(REPO)} and os.getcwd() == str(REPO)

    checkout = tmp_path / "clone"
    (checkout / "flows").mkdir(parents=True)
    monkeypatch.setenv("TCL_CHECKOUT", str(checkout))
    with pytest.raises(FileNotFoundError, match=r"clone is not a TCL checkout \(no params.yaml\); set TCL_CHECKOUT"):
        enter_checkout()
    (checkout / "params.yaml").write_text("seed: 0\n")
    assert enter_checkout() == {"directory": str(checkout)} and os.getcwd() == str(checkout)


def test_pools_lists_every_work_pool_the_deployments_name(repo_params, capsys):
    """README's `for pool in $(python -m tcl.deploy --pools)`: every pool `prefect deploy --all` needs."""
    cfg = repo_params["deploy"]
    assert main(["--pools"]) == 0
    printed = capsys.readouterr().out.split()
    assert printed == sorted({*cfg["pipeline"]["pools"].values(), *cfg["tune"]["pools"].values(),
                              *cfg["grow"]["pools"].values()})
    assert set(printed) == {d["work_pool"]["name"] for d in deployments(repo_params)}
