"""Measuring on a remote board through TVM's RPC tracker (`collect.runner.mode: rpc`).

Programs are still built here, for the platform's target; MetaSchedule's RPCRunner then
uploads each one (an object file the board links with its C compiler) and times it on
the board whose RPC server registered with the tracker under the platform's `rpc.key`,
one session per program.

TVM's own session set-up waits without end for a key no server has registered, and
retries an unreachable tracker for a minute per program. Here every wait is bounded:
the measurer asks the tracker first (`check_board`, a few seconds at most) and fails
naming the key and the address, and the runner's sessions go through the same check.
A batch the board could not be reached for is never recorded as failed programs: it
stops the measurer, so a rerun measures it then.
"""

from __future__ import annotations

import functools
import socket
import struct
from dataclasses import dataclass
from typing import Any

from .measure import LocalMeasurer, evaluator_config

MODES = ("local", "rpc")
# Every message of RemoteUnavailable starts so: the runner's worker process can only hand text back.
UNAVAILABLE = "cannot measure remotely: "
_FIELD = "params.yaml: collect.runner"


class RemoteUnavailable(RuntimeError):
    """The tracker cannot be reached, or no board is registered under the platform's key."""

    def __init__(self, message: str):
        super().__init__(message if message.startswith(UNAVAILABLE) else UNAVAILABLE + message)


@dataclass(frozen=True)
class RemoteBoard:
    """Where one platform is timed: a tracker address and the key its board's server registered."""

    platform: str
    host: str
    port: int
    key: str
    session_timeout_sec: float  # one program's session: upload, link, timing
    connect_timeout_sec: float  # reaching the tracker and its answer
    priority: int = 1

    @property
    def tracker(self) -> str:
        return f"{self.host}:{self.port}"

    def describe(self) -> str:
        return f"key '{self.key}' (platforms.{self.platform}.rpc.key) at tracker {self.tracker}"


def measure_mode(runner_cfg: dict[str, Any]) -> str:
    """`collect.runner.mode`: local (the default) or rpc."""
    mode = runner_cfg.get("mode") or "local"
    if mode not in MODES:
        raise ValueError(f"{_FIELD}.mode: {mode!r:.40} is not one of {list(MODES)}")
    return mode


def _positive(rpc: dict[str, Any], name: str, default: float) -> float:
    value = rpc.get(name, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not value > 0:
        raise ValueError(f"{_FIELD}.rpc.{name}: expected a positive number of seconds, got {value!r:.40}")
    return float(value)


def remote_board(platform, runner_cfg: dict[str, Any]) -> RemoteBoard | None:
    """The board that times `platform` under `collect.runner`, or None when it is timed here."""
    if measure_mode(runner_cfg) == "local":
        return None
    rpc = runner_cfg.get("rpc")
    if not isinstance(rpc, dict) or not isinstance(rpc.get("tracker"), str):
        raise ValueError(f"{_FIELD}.mode is rpc but {_FIELD}.rpc.tracker is not set: expected "
                         f"rpc: {{tracker: \"<host>:<port>\", session_timeout_sec: ...}}, got {rpc!r:.60}")
    host, _, port = rpc["tracker"].strip().rpartition(":")
    if not host or not port.isdigit() or not 0 < int(port) < 65536:
        raise ValueError(f"{_FIELD}.rpc.tracker: expected \"<host>:<port>\", got {rpc['tracker']!r:.60}")
    if platform.rpc_key is None:
        raise ValueError(f"{_FIELD}.mode is rpc but platform '{platform.name}' has no board: add "
                         f"rpc: {{key: <tracker key>}} to params.yaml: platforms.{platform.name}, the key its "
                         "board's RPC server registers under (python -m tvm.exec.rpc_server --key ...)")
    priority = rpc.get("priority", 1)
    if type(priority) is not int:
        raise ValueError(f"{_FIELD}.rpc.priority: expected an integer, got {priority!r:.40}")
    return RemoteBoard(platform=platform.name, host=host.strip("[]"), port=int(port), key=platform.rpc_key,
                       session_timeout_sec=_positive(rpc, "session_timeout_sec", 60),
                       connect_timeout_sec=_positive(rpc, "connect_timeout_sec", 10), priority=priority)


def _ask_tracker(board: RemoteBoard, message: list, wait: float, waiting_for: str) -> Any:
    """One request on a socket of our own: reaching the tracker is bounded by the connect timeout,
    its answer by `wait` (TVM's TrackerSession has no bound on either)."""
    from tvm.rpc import base

    try:
        sock = socket.create_connection((board.host, board.port), timeout=board.connect_timeout_sec)
    except OSError as err:  # refused, unknown host, no route, timed out
        raise RemoteUnavailable(f"cannot reach the RPC tracker {board.tracker} ({_FIELD}.rpc.tracker) for "
                                f"{board.describe()}: {err}. Start one with: python -m tvm.exec.rpc_tracker "
                                f"--host 0.0.0.0 --port {board.port}") from None
    with sock:
        try:
            sock.sendall(struct.pack("<i", base.RPC_TRACKER_MAGIC))
            magic = struct.unpack("<i", base.recvall(sock, 4))[0]
        except OSError as err:  # silent (timed out), or closed (TVM's recvall: "connection reset")
            raise RemoteUnavailable(f"{board.tracker} ({_FIELD}.rpc.tracker) did not answer as a TVM RPC tracker "
                                    f"within {board.connect_timeout_sec:g} s, for {board.describe()}: "
                                    f"{err or type(err).__name__}") from None
        if magic != base.RPC_TRACKER_MAGIC:
            raise RemoteUnavailable(f"{board.tracker} ({_FIELD}.rpc.tracker) answers but is not a TVM RPC tracker")
        try:
            sock.settimeout(wait)
            base.sendjson(sock, message)
            answer = base.recvjson(sock)
        except TimeoutError:
            raise RemoteUnavailable(f"{waiting_for} within {wait:g} s, for {board.describe()}") from None
        except (OSError, RuntimeError) as err:
            raise RemoteUnavailable(f"the RPC tracker {board.tracker} closed the connection, for "
                                    f"{board.describe()}: {err}") from None
    if not isinstance(answer, list) or not answer or answer[0] != base.TrackerCode.SUCCESS:
        raise RemoteUnavailable(f"the RPC tracker {board.tracker} refused a request for {board.describe()}: "
                                f"{answer!r:.80}")
    return answer[1]


def registered_keys(board: RemoteBoard) -> dict[str, int]:
    """Servers registered with the tracker, by key (busy ones included)."""
    from tvm.rpc import base

    summary = _ask_tracker(board, [base.TrackerCode.SUMMARY], board.connect_timeout_sec,
                           "the RPC tracker gave no summary")
    keys: dict[str, int] = {}
    for server in summary.get("server_info", []):
        key = str(server.get("key", "")).split(":", 1)[-1]  # "server:<key>"
        keys[key] = keys.get(key, 0) + 1
    return keys


def open_session(board: RemoteBoard):
    """An RPC session on a board of the key, after checking that one is registered: a session
    for a key no server has would wait forever. Waits for a busy board at most one session's time."""
    from tvm import rpc
    from tvm.rpc import base

    keys = registered_keys(board)
    if board.key not in keys:
        have = ", ".join(f"'{k}' ({n})" for k, n in sorted(keys.items())) or "none"
        raise RemoteUnavailable(f"no RPC server is registered under {board.describe()}; the tracker has: {have}. "
                                f"On the board: python -m tvm.exec.rpc_server --tracker {board.tracker} "
                                f"--key {board.key}")
    wait = board.session_timeout_sec + board.connect_timeout_sec
    url, port, matchkey = _ask_tracker(board, [base.TrackerCode.REQUEST, board.key, "", board.priority], wait,
                                       "no board became free")
    try:
        return rpc.connect(url, port, matchkey, session_timeout=board.session_timeout_sec)
    except (OSError, RuntimeError) as err:
        raise RemoteUnavailable(f"the board under {board.describe()} at {url}:{port} refused the session: "
                                f"{err}") from None


def _runner_session(board: RemoteBoard, _rpc_config) -> Any:
    """RPCRunner's f_create_session (its worker calls it with its RPCConfig, which `board` already holds)."""
    return open_session(board)


def check_board(board: RemoteBoard, threads: int, device_type: str) -> None:
    """One session before anything is built: the board is there, has the device, and times with the
    platform's thread count (a board timing with all its cores would give another platform's labels)."""
    session = open_session(board)
    try:
        problem = _board_problem(session, threads, device_type)
    finally:
        del session  # the server serves one session at a time: free it before raising
    if problem:
        raise RemoteUnavailable(f"the board under {board.describe()} {problem}")


def _board_problem(session, threads: int, device_type: str) -> str:
    if not session.device(device_type, 0).exist:
        return f"has no {device_type} device"
    try:
        session.get_function("tvm.contrib.random.random_fill_for_measure")
    except (AttributeError, RuntimeError):
        return "has a TVM runtime without tvm.contrib.random.random_fill_for_measure (build it with USE_RANDOM ON)"
    if device_type == "cpu":
        remote_threads = int(session.get_function("runtime.NumThreads")())
        if remote_threads != threads:
            return (f"times with {remote_threads} TVM threads and the platform has {threads}: start its server "
                    f"with TVM_NUM_THREADS={threads}")
    return ""


class RemoteMeasurer(LocalMeasurer):
    """Build here, time on the board: the builder, batches and outcomes are LocalMeasurer's."""

    def __init__(self, target, threads: int, builder_cfg: dict[str, Any], runner_cfg: dict[str, Any],
                 board: RemoteBoard):
        self.board = board
        super().__init__(target, threads, builder_cfg, runner_cfg)

    def _make_runner(self, threads: int, runner_cfg: dict[str, Any]):
        check_board(self.board, threads, self.device_type)
        b = self.board
        config = self._ms.runner.RPCConfig(tracker_host=b.host, tracker_port=b.port, tracker_key=b.key,
                                           session_priority=b.priority, session_timeout_sec=b.session_timeout_sec)
        # One program at a time: two sessions on one board would time each other's load.
        return self._ms.runner.RPCRunner(rpc_config=config, evaluator_config=evaluator_config(runner_cfg),
                                         f_create_session=functools.partial(_runner_session, b), max_workers=1)

    def _may_overlap(self, build_cpus) -> bool:
        return True  # the board times while this machine builds the next batch

    @property
    def runner_info(self) -> dict[str, Any]:
        return {"runner": "rpc", "tracker": self.board.tracker, "key": self.board.key}

    def machine_load(self) -> float | None:
        return None  # the board's load is not known here, and this machine's says nothing about it

    def tuning_callbacks(self) -> list:
        return [stop_when_board_lost()]

    def collect(self, pending):
        """LocalMeasurer's outcomes, unless the board could not be reached: then nothing is recorded."""
        outcomes, results = super().collect(pending)
        lost = [o.error_msg for o in outcomes if UNAVAILABLE in o.error_msg]
        if lost:
            raise RemoteUnavailable(lost[0][lost[0].index(UNAVAILABLE):])
        return outcomes, results


def stop_when_board_lost():
    """A MetaSchedule measure callback for tuning over RPC, placed before the default ones: a batch
    the board could not be reached for stops the tuning instead of entering the database as failures."""
    from tvm.ir.utils import derived_object
    from tvm.s_tir.meta_schedule.measure_callback import PyMeasureCallback

    @derived_object
    class StopWhenBoardLost(PyMeasureCallback):
        def apply(self, task_scheduler, task_id, measure_candidates, builder_results, runner_results) -> None:
            for res in runner_results:
                msg = str(res.error_msg or "")
                if UNAVAILABLE in msg:
                    raise RemoteUnavailable(msg[msg.index(UNAVAILABLE):])

    return StopWhenBoardLost()
