"""The MLflow store as several processes open it: two benchmarks started together, one per core."""

from __future__ import annotations

import multiprocessing as mp


def _open_store(uri: str, barrier, results) -> None:
    """One process: wait for the others, then configure tracking on the same, still missing, store."""
    try:
        from tcl.tracking import runs

        barrier.wait(timeout=120)
        with runs.run({"tracking": {"mlflow_uri": uri, "experiment": "race"}}, "one") as handle:  # configures first
            results.put(("ok", handle.run_id))
    except Exception as e:  # the child reports; the parent asserts
        results.put(("error", f"{type(e).__name__}: {e}"))


def test_processes_that_create_one_sqlite_store_at_once_all_get_it(tmp_path, monkeypatch):
    """Without the creation lock one of them fails with "table ... already exists" (seen with two bench_tune
    processes on a fresh logs/bench-mlflow.db); with it every process opens the store and logs its run."""
    ctx = mp.get_context("spawn")
    uri, n = f"sqlite:///{tmp_path}/sub/store.db", 4
    # The children inherit the environment, and MLFLOW_TRACKING_URI wins over params: an earlier test in
    # this worker that called mlflow.set_tracking_uri leaves it set to its own store.
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    barrier, results = ctx.Barrier(n), ctx.Queue()
    procs = [ctx.Process(target=_open_store, args=(uri, barrier, results)) for _ in range(n)]
    for p in procs:
        p.start()
    outcomes = [results.get(timeout=300) for _ in procs]
    for p in procs:
        p.join(timeout=60)
    assert [kind for kind, _ in outcomes] == ["ok"] * n, outcomes
    assert len({run_id for _, run_id in outcomes}) == n

    from mlflow.tracking import MlflowClient

    client = MlflowClient(tracking_uri=uri)
    experiment = client.get_experiment_by_name("race")
    assert len(client.search_runs([experiment.experiment_id])) == n
