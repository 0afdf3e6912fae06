"""Measuring through TVM's RPC tracker: a real tracker and real RPC servers on loopback.

Each server is `python -m tvm.exec.rpc_server` registered under a key, exactly as on a
board; here the "board" is this machine. The collector and the tuner get their measurer
from `make_measurer`, so a collection and a tuning that arrive through the tracker (the
server's log shows every program it loaded) cover the flows that use it, active sampling
included. Nothing is mocked.
"""

from __future__ import annotations

import json
import math
import os
import signal
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np
import pytest

from tcl.collect.remote import RemoteBoard, RemoteUnavailable, registered_keys, remote_board
from tcl.platforms import get_platform, load_platforms

from conftest import toy_matmul_task

KEY = "tcl-test-board"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _start(args: list[str], log: Path, threads: int = 1) -> subprocess.Popen:
    env = dict(os.environ, TVM_NUM_THREADS=str(threads))
    # A session of its own: teardown ends the process and the workers it started, and only those.
    return subprocess.Popen([sys.executable, "-m", *args], stdout=log.open("w"), stderr=subprocess.STDOUT,
                            env=env, start_new_session=True)


def _stop(proc: subprocess.Popen) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _board(port: int, key: str = KEY, connect_timeout: float = 5.0) -> RemoteBoard:
    return RemoteBoard(platform="local-1c", host="127.0.0.1", port=port, key=key, session_timeout_sec=60,
                       connect_timeout_sec=connect_timeout)


def _wait_for(check, what: str, timeout: float = 600.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            if check():
                return
        except RemoteUnavailable:
            pass
        time.sleep(0.5)
    raise TimeoutError(f"{what} did not come up within {timeout:g} s")


@pytest.fixture(scope="module")
def tracker(tmp_path_factory):
    port = _free_port()
    log = tmp_path_factory.mktemp("tracker") / "tracker.log"
    proc = _start(["tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", str(port),
                   "--port-end", str(port + 1)], log)
    try:
        _wait_for(lambda: registered_keys(_board(port)) is not None, f"the tracker on port {port} ({log})")
        yield port
    finally:
        _stop(proc)


@contextmanager
def rpc_server(tracker_port: int, key: str, log: Path, threads: int = 1):
    """`python -m tvm.exec.rpc_server` registered under `key`, as a board would run it."""
    port = _free_port()
    proc = _start(["tvm.exec.rpc_server", "--host", "127.0.0.1", "--port", str(port), "--port-end",
                   str(port + 1), "--tracker", f"127.0.0.1:{tracker_port}", "--key", key], log, threads)
    try:
        _wait_for(lambda: key in registered_keys(_board(tracker_port, key)), f"the RPC server '{key}' ({log})")
        yield proc
    finally:
        _stop(proc)


@pytest.fixture(scope="module")
def board_log(tracker, tmp_path_factory):
    log = tmp_path_factory.mktemp("board") / "server.log"
    with rpc_server(tracker, KEY, log):
        yield log


def rpc_params(params, tracker_port: int, key: str = KEY, **rpc) -> dict:
    """params.yaml with local-1c on the board `key` and `collect.runner.mode: rpc` (parsed as a user's would be)."""
    platforms = {name: dict(entry) for name, entry in params["platforms"].items()}
    platforms["local-1c"]["rpc"] = {"key": key}
    runner = dict(params["collect"]["runner"], mode="rpc", number=2, repeat=2, min_repeat_ms=0,
                  rpc={"tracker": f"127.0.0.1:{tracker_port}", "session_timeout_sec": 60,
                       "connect_timeout_sec": 5, **rpc})
    collect = dict(params["collect"], runner=runner, builder={"timeout_sec": 60, "cpus": [0]}, pool_size=4,
                   batch_size=2, population=16)
    return {**params, "platforms": platforms, "collect": collect}


def tiny_dense(platform):
    """A one-task Relax network (matmul + ReLU), fused as the tune flow fuses a network."""
    from tvm import relax

    from tcl.workloads import fuse_for_tuning

    bb = relax.BlockBuilder()
    x = relax.Var("x", relax.TensorType((4, 16), "float32"))
    with bb.function("main", [x]):
        with bb.dataflow():
            w = relax.const(np.ones((16, 16), "float32"))
            out = bb.emit_output(bb.emit(relax.op.nn.relu(relax.op.matmul(x, w))))
        bb.emit_func_output(out)
    return fuse_for_tuning(bb.get(), platform.tvm_target())


def _loaded(log: Path) -> int:
    """Programs the RPC server loaded (its log has one `load_module` line each)."""
    return log.read_text().count("load_module")


# ---- settings: parsed with errors that name the field ----------------------------------------------

def test_a_platform_names_its_board_by_tracker_key(params):
    p = rpc_params(params, 9190)
    platform = get_platform(p, "local-1c")
    assert platform.rpc_key == KEY and get_platform(params, "local-1c").rpc_key is None
    board = remote_board(platform, p["collect"]["runner"])
    assert (board.host, board.port, board.key, board.session_timeout_sec) == ("127.0.0.1", 9190, KEY, 60.0)
    assert remote_board(platform, params["collect"]["runner"]) is None, "params.yaml measures locally"


@pytest.mark.parametrize("rpc, message", [
    ("tcl-board", "platforms.x.rpc: expected a mapping with one field, key"),
    ({"key": "a board"}, "platforms.x.rpc.key: expected a tracker key"),
    ({"key": "server:b"}, "platforms.x.rpc.key"),
    ({"key": "b", "host": "10.0.0.2"}, "platforms.x.rpc: expected a mapping with one field"),
])
def test_a_bad_rpc_field_is_refused_by_name(params, rpc, message):
    entry = dict(params["platforms"]["local-1c"], rpc=rpc)
    with pytest.raises(ValueError, match=message):
        load_platforms({"platforms": {"x": entry}})


@pytest.mark.parametrize("runner, message", [
    ({"mode": "remote"}, r"collect.runner.mode: 'remote' is not one of \['local', 'rpc'\]"),
    ({"mode": "rpc"}, "collect.runner.rpc.tracker is not set"),
    ({"mode": "rpc", "rpc": {"tracker": "9190"}}, r"collect.runner.rpc.tracker: expected \"<host>:<port>\""),
    ({"mode": "rpc", "rpc": {"tracker": "h:99999"}}, "collect.runner.rpc.tracker"),
    ({"mode": "rpc", "rpc": {"tracker": "h:9190", "session_timeout_sec": 0}}, "rpc.session_timeout_sec"),
])
def test_a_bad_runner_setting_is_refused_by_name(params, runner, message):
    with pytest.raises(ValueError, match=message):
        remote_board(get_platform(rpc_params(params, 1), "local-1c"), runner)


def test_rpc_mode_on_a_platform_without_a_board_names_the_platform(params):
    with pytest.raises(ValueError, match=r"platform 'local-sse4-1c' has no board: add rpc: \{key: "):
        remote_board(get_platform(params, "local-sse4-1c"), rpc_params(params, 1)["collect"]["runner"])


# ---- a tracker that cannot serve the key: a clear error, in seconds -------------------------------------

def test_an_unreachable_tracker_fails_at_once_naming_its_address(params):
    from tcl.collect.measure import make_measurer

    port = _free_port()  # nothing listens there
    p = rpc_params(params, port)
    start = time.monotonic()
    with pytest.raises(RemoteUnavailable, match=rf"cannot reach the RPC tracker 127.0.0.1:{port} .*key '{KEY}'"):
        make_measurer(get_platform(p, "local-1c"), p["collect"]["builder"], p["collect"]["runner"])
    assert time.monotonic() - start < 5


def test_a_tracker_that_never_answers_fails_after_the_connect_timeout(params):
    from tcl.collect.measure import make_measurer

    with socket.socket() as silent:  # accepts connections (the kernel's backlog) and never says a word
        silent.bind(("127.0.0.1", 0))
        silent.listen()
        p = rpc_params(params, silent.getsockname()[1], connect_timeout_sec=1)
        start = time.monotonic()
        with pytest.raises(RemoteUnavailable, match="did not answer as a TVM RPC tracker within 1 s"):
            make_measurer(get_platform(p, "local-1c"), p["collect"]["builder"], p["collect"]["runner"])
        assert time.monotonic() - start < 5


@pytest.mark.slow
def test_a_key_no_server_has_fails_at_once_naming_key_and_tracker(params, tracker, board_log):
    from tcl.collect.measure import make_measurer

    p = rpc_params(params, tracker, key="no-such-board")
    start = time.monotonic()
    with pytest.raises(RemoteUnavailable) as err:
        make_measurer(get_platform(p, "local-1c"), p["collect"]["builder"], p["collect"]["runner"])
    assert time.monotonic() - start < 15, "TVM's own session request would wait forever"
    msg = str(err.value)
    assert f"no RPC server is registered under key 'no-such-board' (platforms.local-1c.rpc.key) at tracker " \
           f"127.0.0.1:{tracker}" in msg
    assert f"'{KEY}' (1)" in msg.split("the tracker has: ")[1] and "--key no-such-board" in msg


@pytest.mark.slow
def test_a_board_timing_with_other_threads_than_the_platform_is_refused(params, tracker, tmp_path):
    from tcl.collect.measure import make_measurer

    with rpc_server(tracker, "tcl-two-threads", tmp_path / "server.log", threads=2):
        p = rpc_params(params, tracker, key="tcl-two-threads")
        with pytest.raises(RemoteUnavailable, match="times with 2 TVM threads and the platform has 1: start its "
                                                    "server with TVM_NUM_THREADS=1"):
            make_measurer(get_platform(p, "local-1c"), p["collect"]["builder"], p["collect"]["runner"])


# ---- measurements that arrive through the tracker ----------------------------------------------------

@pytest.mark.slow
def test_a_collection_is_measured_on_the_board_and_recorded_as_usual(tmp_path, params, tracker, board_log):
    from tcl.collect.collector import LazyMeasurers, measure_task
    from tcl.collect.remote import RemoteMeasurer
    from tcl.collect.runner_log import runner_at, runner_history
    from tcl.data.schema import RECORD_SCHEMA
    from tcl.data.store import RecordStore

    p = rpc_params(params, tracker)
    platform, cfg = get_platform(p, "local-1c"), p["collect"]
    measurer = LazyMeasurers(cfg).get(platform)  # what collect, retest and active sampling use
    assert isinstance(measurer, RemoteMeasurer)
    store, task = RecordStore(tmp_path), toy_matmul_task()
    loaded = _loaded(board_log)
    assert measure_task(task, platform, platform, store, measurer, cfg, 0, lambda n: None)[0] == 4
    table = store.read(platform.name)
    assert table.schema == RECORD_SCHEMA and table.num_rows == 4
    rows = table.to_pylist()
    ok = [r for r in rows if not r["error_code"]]
    assert ok, [r["error_msg"][-300:] for r in rows]
    for r in ok:
        assert len(r["run_secs"]) == 2 and r["mean_sec"] > 0 and r["median_sec"] > 0
    assert all(r["load_avg"] is None for r in rows), "this machine's load says nothing about the board's"
    assert _loaded(board_log) - loaded == len(ok), "every timed program was loaded by the RPC server"
    (line,) = runner_history(store, platform.name)
    assert {k: line[k] for k in ("runner", "tracker", "key")} == {"runner": "rpc", "tracker": f"127.0.0.1:{tracker}",
                                                                  "key": KEY}
    assert all(runner_at([line], r["collected_at"]) == line for r in rows)
    # Resumed: nothing is measured twice, and the history does not grow.
    assert measure_task(task, platform, platform, store, measurer, cfg, 0, lambda n: None) == (0, 0)
    assert len(runner_history(store, platform.name)) == 1


@pytest.mark.slow
def test_a_tuning_is_measured_on_the_board(tmp_path, params, tracker, board_log):
    from tvm.s_tir import meta_schedule as ms

    from tcl.tvm.tuning import tune_network

    p = rpc_params(params, tracker)
    platform = get_platform(p, "local-1c")
    loaded = _loaded(board_log)
    result = tune_network(tiny_dense(platform), platform, network="tiny_dense", cost_model=ms.cost_model.RandomModel(seed=0),
                          cost_model_name="random", trials=4, work_dir=tmp_path / "tune", num_trials_per_iter=2,
                          runner_cfg=p["collect"]["runner"], progress=False)
    assert result.trials >= 4 and math.isfinite(result.final_estimate) and result.final_estimate > 0
    records = [json.loads(line) for line in (tmp_path / "tune" / "database_tuning_record.json").read_text().splitlines()]
    timed = [r for r in records if r[1][1] and all(t < 1e9 for t in r[1][1])]
    assert len(records) == result.trials and timed
    assert _loaded(board_log) - loaded >= len(timed), "the trials were timed by the RPC server"


@pytest.mark.slow
def test_a_board_lost_mid_run_stops_collection_and_tuning_and_records_nothing(tmp_path, params, tracker):
    from tvm.s_tir import meta_schedule as ms

    from tcl.collect.collector import replay_task, task_pool
    from tcl.collect.measure import make_measurer
    from tcl.data.store import RecordStore
    from tcl.tvm.tuning import tune_network

    p = rpc_params(params, tracker, key="tcl-doomed")
    platform, cfg = get_platform(p, "local-1c"), p["collect"]
    store, task = RecordStore(tmp_path), toy_matmul_task()
    pool = task_pool(store, task, platform, cfg, 0)
    with rpc_server(tracker, "tcl-doomed", tmp_path / "server.log"):
        measurer = make_measurer(platform, cfg["builder"], cfg["runner"])  # the board was there
    _wait_for(lambda: "tcl-doomed" not in registered_keys(_board(tracker, "tcl-doomed")), "the server's removal")
    lost = "no RPC server is registered under key 'tcl-doomed'"
    with pytest.raises(RemoteUnavailable, match=lost):
        replay_task(task, platform, pool, store, measurer, 2, lambda n: None)
    assert store.count(platform.name) == 0, "a batch the board never timed is not filed as failed programs"
    with pytest.raises(Exception, match=lost):
        tune_network(tiny_dense(platform), platform, network="tiny_dense", cost_model=ms.cost_model.RandomModel(seed=0),
                     cost_model_name="random", trials=4, work_dir=tmp_path / "tune", num_trials_per_iter=2,
                     progress=False, measurer=measurer)
    db = tmp_path / "tune" / "database_tuning_record.json"
    assert not db.exists() or not db.read_text().strip(), "nor are trials the board never timed"
