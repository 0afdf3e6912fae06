"""Real collection on this CPU: tiny matmul tasks, real builds and runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tcl.collect.collector import collect_task
from tcl.data.store import RecordStore

from conftest import REPO, toy_matmul_task

pytestmark = pytest.mark.slow


def _cfg(params, budget, batch=2):
    return dict(params["collect"], trials_per_task=budget, batch_size=batch)


def test_collect_commits_measured_records_and_tops_up_without_duplicates(tmp_path, params, host_platform,
                                                                        measurer):
    store = RecordStore(tmp_path)
    task = toy_matmul_task()
    progress = []
    measured, failed = collect_task(task, host_platform, store, measurer, _cfg(params, 4), 0, progress.append)
    assert measured == 4 and sum(progress) == 4
    table = store.read(host_platform.name)
    rows = table.to_pylist()
    assert len(rows) == 4 and len({r["record_id"] for r in rows}) == 4
    ok = [r for r in rows if not r["error_code"]]
    assert len(ok) >= 1, [r["error_msg"][-300:] for r in rows]
    for r in ok:
        assert r["mean_sec"] > 0 and len(r["run_secs"]) == 2 and r["median_sec"] > 0
    for r in rows:
        assert r["task_key"] == task.key and r["op_type"] == "dense" and r["task_weight"] == 2
        kinds = [s["kind"] for s in r["steps"]]
        assert "SamplePerfectTile" in kinds and "Split" in kinds
    # Same budget again: nothing to do. A larger budget measures only the difference.
    assert collect_task(task, host_platform, store, measurer, _cfg(params, 4), 0, progress.append) == (0, 0)
    measured, _ = collect_task(task, host_platform, store, measurer, _cfg(params, 6), 0, progress.append)
    assert measured == 2
    ids = store.read(host_platform.name, columns=["record_id"]).column("record_id").to_pylist()
    assert len(ids) == 6 == len(set(ids))
    assert (store.platform_dir(host_platform.name) / "_workloads" / f"{task.key}.json").exists()


def test_sigkilled_collection_resumes_without_losing_or_repeating(tmp_path):
    """SIGKILL the collector after its first committed batch; the rerun completes the budget."""
    store_root, budget = tmp_path / "records", 8
    cmd = [sys.executable, str(REPO / "tests" / "collect_toy.py"), str(store_root), str(budget)]
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{REPO / 'tests'}")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
    line = proc.stdout.readline()  # first committed batch
    assert line.startswith("committed"), line
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    store = RecordStore(store_root)
    before = store.read("host-avx512-2c").column("record_id").to_pylist()
    assert 2 <= len(before) < budget
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    after = store.read("host-avx512-2c").column("record_id").to_pylist()
    assert len(after) == budget == len(set(after))
    assert set(before) <= set(after)
    assert not list(store.platform_dir("host-avx512-2c").glob(".*.tmp"))
