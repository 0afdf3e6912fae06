"""Real collection on this CPU: tiny matmul tasks, real builds and runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys

import pytest

from tcl.collect.collector import measure_task, replay_task
from tcl.collect.retest import in_sample, retest_platform
from tcl.data.schema import make_program_id
from tcl.data.store import RecordStore
from tcl.platforms import get_platform

from conftest import REPO, toy_matmul_task

pytestmark = pytest.mark.slow


def _cfg(params, budget, batch=2):
    return dict(params["collect"], pool_size=budget, batch_size=batch)


def _collect(task, platform, store, measurer, cfg, on_progress=lambda n: None):
    return measure_task(task, platform, platform, store, measurer, cfg, 0, on_progress)


def test_pool_is_drawn_once_and_measured_without_duplicates(tmp_path, params, host_platform, measurer):
    store = RecordStore(tmp_path)
    task = toy_matmul_task()
    progress = []
    measured, failed = _collect(task, host_platform, store, measurer, _cfg(params, 4), progress.append)
    assert measured == 4 and sum(progress) == 4
    pool = store.pool(task.key)
    assert len(pool) == 4 == len(set(pool))
    table = store.read(host_platform.name)
    rows = table.to_pylist()
    assert len(rows) == 4 and len({r["record_id"] for r in rows}) == 4
    assert sorted(r["program"] for r in rows) == sorted(pool)
    ok = [r for r in rows if not r["error_code"]]
    assert len(ok) >= 1, [r["error_msg"][-300:] for r in rows]
    for r in ok:
        assert r["mean_sec"] > 0 and len(r["run_secs"]) == 2 and r["median_sec"] > 0
    for r in rows:
        assert r["task_key"] == task.key and r["op_type"] == "dense" and r["task_weight"] == 2
        kinds = [s["kind"] for s in r["steps"]]
        assert "SamplePerfectTile" in kinds and "Split" in kinds
    # Again: the saved pool is reused and nothing is measured twice.
    assert _collect(task, host_platform, store, measurer, _cfg(params, 4)) == (0, 0)
    assert store.pool(task.key) == pool
    assert all(r["program_id"] == make_program_id(task.key, r["program"]) for r in rows)
    assert all(r["load_avg"] is not None and r["load_avg"] >= 0 for r in rows)
    assert (store.platform_dir(host_platform.name) / "_workloads" / f"{task.key}.json").exists()


def test_an_embedding_lookup_runs_with_valid_indices(measurer):
    """A gather by integer ids (BERT's token embedding) is timed: with MetaSchedule's random integers its indices
    fall outside the table and every run of it crashes, so a network with one never gets a full estimate."""
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    table = te.placeholder((1000, 64), "float32", name="table")
    ids = te.placeholder((128,), "int32", name="ids")
    lookup = te.compute((128, 64), lambda i, j: table[ids[i], j], name="lookup")
    mod = tvm.IRModule({"main": te.create_prim_func([table, ids, lookup])})
    candidate = ms.MeasureCandidate(tvm.s_tir.Schedule(mod), ms.arg_info.ArgInfo.from_prim_func(mod["main"]))
    (outcome,), (result,) = measurer.measure([candidate])
    assert outcome.error_code == "" and result.error_msg is None, outcome.error_msg
    assert len(outcome.run_secs) == 2 and all(0 < s < 1e-2 for s in outcome.run_secs)


def test_replayed_pool_pairs_every_program_across_platforms(tmp_path, params, host_platform, measurer):
    """The pool, measured on an AVX-512 and an AVX2 target, gives one record per program on each."""
    from tcl.collect.measure import LocalMeasurer

    store, task = RecordStore(tmp_path), toy_matmul_task()
    _collect(task, host_platform, store, measurer, _cfg(params, 6))
    pool = store.pool(task.key)
    other = get_platform(params, "local-sse4-1c")
    avx2 = LocalMeasurer(other.tvm_target(), other.threads, {"timeout_sec": 120}, {"number": 2, "repeat": 2})
    progress = []
    assert replay_task(task, other, pool[:4], store, avx2, 3, progress.append) == (4, 0)
    assert sum(progress) == 4
    # A resumed replay measures only the rest of the pool.
    assert replay_task(task, other, pool, store, avx2, 3, progress.append)[0] == 2
    src = store.read(host_platform.name).to_pylist()
    dst = store.read(other.name).to_pylist()
    assert {r["program_id"] for r in src} == {r["program_id"] for r in dst}
    assert len({r["record_id"] for r in src} | {r["record_id"] for r in dst}) == 12
    assert {r["target"] for r in dst} == {other.target_json}
    assert all(r["mean_sec"] > 0 for r in dst)


def test_retest_measures_the_fixed_sample_once(tmp_path, params, host_platform, measurer):
    from tcl.collect.catalog import CatalogTask, save_catalog

    store, retest, task = RecordStore(tmp_path / "r"), RecordStore(tmp_path / "t"), toy_matmul_task()
    _collect(task, host_platform, store, measurer, _cfg(params, 8))
    save_catalog(store, host_platform.name, [CatalogTask(task, {"toy@16": 2})], "sig")
    ids = store.read(host_platform.name).column("program_id").to_pylist()
    fraction = 0.5
    expected = {i for i in ids if in_sample(i, fraction, 0)}
    assert 0 < len(expected) < len(ids)  # (the hash split of these 8 ids is fixed)
    cfg = {"fraction": fraction, "seed": 0, "batch_size": 4}
    measured, sampled = retest_platform(host_platform, store, retest, lambda p: measurer, cfg, lambda n: None)
    assert measured == sampled == len(expected)
    again = retest.read(host_platform.name).to_pylist()
    assert {r["program_id"] for r in again} == expected
    assert set(r["record_id"] for r in again) <= set(store.read(host_platform.name).column("record_id").to_pylist())
    assert retest_platform(host_platform, store, retest, lambda p: measurer, cfg, lambda n: None)[0] == 0

    # the stage: the same sample found complete; a platform of another host is skipped with the reason
    from tcl.collect.retest import retest_stage

    from tcl.platforms import get_platform, host_mismatch

    foreign = next(n for n in params["platforms"] if host_mismatch(get_platform(params, n)))
    stage_params = {**params, "retest": cfg, "collect": {**params["collect"], "search_cpus": [],
                                                         "platforms": [host_platform.name, foreign]}}
    out = retest_stage(stage_params, str(tmp_path / "r"), str(tmp_path / "t"), log=lambda _: None)
    assert out[host_platform.name] == {"measured_now": 0, "sampled": len(expected)}
    assert out[foreign]["measured_now"] == 0 and foreign in out[foreign]["skipped"]


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
    before = store.read("local-1c").column("record_id").to_pylist()
    assert 2 <= len(before) < budget
    done = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert done.returncode == 0, done.stderr[-2000:]
    after = store.read("local-1c").column("record_id").to_pylist()
    assert len(after) == budget == len(set(after))
    assert set(before) <= set(after)
    assert not list(store.platform_dir("local-1c").glob(".*.tmp"))
    print(f"\ncollection killed with {len(before)} records committed; rerun: {len(after)} records, "
          f"{len(set(after))} distinct (budget {budget})")


def test_a_second_collection_of_the_same_store_fails_fast_and_nothing_collides(tmp_path):
    """Two real processes on one store: the second stops at once naming the first, which finishes whole."""
    store_root, budget = tmp_path / "records", 6
    cmd = [sys.executable, str(REPO / "tests" / "collect_toy.py"), str(store_root), str(budget)]
    env = dict(os.environ, PYTHONPATH=f"{REPO}:{REPO / 'tests'}")
    go = tmp_path / "go"
    first = subprocess.Popen([*cmd, str(go)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                             env=env)
    assert first.stdout.readline().startswith("committed")  # it holds the lock, mid-collection
    second = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)
    go.touch()
    assert second.returncode != 0
    assert f"is being written by toy collection (pid {first.pid}" in second.stderr
    assert "committed" not in second.stdout
    first.stdout.read()
    assert first.wait(timeout=900) == 0
    store = RecordStore(store_root)
    ids = store.read("local-1c").column("record_id").to_pylist()
    assert len(ids) == budget == len(set(ids))
    again = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=300)  # the lock is free again
    assert again.returncode == 0 and "done (0," in again.stdout, again.stderr[-2000:]
    assert store.read("local-1c").num_rows == budget
    print(f"\nsecond collection refused: {second.stderr.strip().splitlines()[-1]}\n"
          f"first collection: {len(ids)} records, {len(set(ids))} distinct (budget {budget})")


def test_a_gpu_collection_on_a_machine_without_the_gpu_draws_its_pools_and_times_nothing(tmp_path, params):
    """Search needs no device: on this CUDA-less machine the GPU section draws the pools (for the GPU's
    target) and leaves the timing, with the reason, to a machine that has the GPU."""
    import tvm

    from tcl.collect.catalog import CatalogTask, catalog_signature, save_catalog
    from tcl.collect.collector import collect_pools

    if tvm.cuda(0).exist:
        pytest.skip("this machine has a CUDA device: the GPU collection would time the pools here")
    gpu = get_platform(params, "nvidia-h100")
    cfg = dict(params["collect"], source=gpu.name, platforms=[gpu.name], pool_size=4, batch_size=4,
               extra_networks=[], search_cpus=[])
    store, task = RecordStore(tmp_path), toy_matmul_task()
    save_catalog(store, gpu.name, [CatalogTask(task, {"toy@16": 2})], catalog_signature(cfg, 1, gpu.target_json))
    [summary] = collect_pools({**params, "collect": cfg}, store, progress=False)
    assert summary.platform == gpu.name and "needs a CUDA device" in summary.skipped
    assert summary.measured_now == 0 and store.count(gpu.name) == 0
    pool = store.pool(task.key)
    assert pool and len(pool) <= 4
    assert all("threadIdx" in p or "blockIdx" in p for p in pool), pool[0][:400]  # drawn for the GPU target
