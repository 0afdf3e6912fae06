"""How the stage flows use Prefect tasks: retries from params.yaml, and cache keys from content.

Retries are for work the machine may do differently next time (a builder or runner
process that died, a tracking server that did not answer); a mistake in params.yaml or
the code fails at once, without retrying. Each task's docstring says what a retry repeats:
measuring resumes from the record store, so a retry measures only what is missing.
"""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Iterable

import tcl
from tcl.deploy import RETRIED_UNITS

# Failures a retry cannot fix: wrong configuration or code.
NOT_RETRIED = (ValueError, KeyError, TypeError, LookupError, FileNotFoundError, NotImplementedError)


def retry_options(params: dict[str, Any], unit: str) -> dict[str, Any]:
    """`Task.with_options` arguments for `unit` from params.yaml's `deploy.retries` (0 when unset)."""
    if unit not in RETRIED_UNITS:
        raise ValueError(f"unknown retried unit {unit!r}; expected one of {RETRIED_UNITS}")
    cfg = (params.get("deploy") or {}).get("retries") or {}
    count, delay = cfg.get(unit, 0), cfg.get("delay_s", 0)
    if not isinstance(count, int) or isinstance(count, bool) or count < 0:
        raise ValueError(f"params.yaml: deploy.retries.{unit}: expected a count >= 0, got {count!r}")
    if not isinstance(delay, (int, float)) or isinstance(delay, bool) or delay < 0:
        raise ValueError(f"params.yaml: deploy.retries.delay_s: expected seconds >= 0, got {delay!r}")
    return {"retries": count, "retry_delay_seconds": delay, "retry_condition_fn": retry_if_flaky}


_stopping = threading.Event()


@contextmanager
def stopping_on_signals(grace_s: float = 15.0):
    """Around a measuring flow's body: SIGTERM and Ctrl-C end the process for good.

    `kill -- -<pid>` (make collect's stop) signals the builder and runner processes too; their death
    fails the running task, and a retry would start them again and go on measuring. The signal also
    stops Prefect's temporary server, and Prefect's shutdown then waits on it: after `grace_s` the
    process exits anyway (what was measured is committed batch by batch). Prefect sets its own
    SIGTERM handler when a flow starts, hence inside the flow; that handler still runs. The previous
    handlers come back when the body ends (a test that runs a flow keeps its Ctrl-C)."""
    if threading.current_thread() is not threading.main_thread():  # signals can only be set there
        yield
        return

    def chained(previous):
        def stop(signum, frame):
            if not _stopping.is_set():
                _stopping.set()
                threading.Timer(grace_s, os._exit, (128 + signum,)).start()
            if callable(previous):
                previous(signum, frame)
            raise KeyboardInterrupt(f"stopped by signal {signal.Signals(signum).name}")
        return stop

    previous = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    for sig, handler in previous.items():
        signal.signal(sig, chained(handler))
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def retry_if_flaky(task, task_run, state) -> bool:
    """Prefect retry condition: retry unless the failure is one a retry cannot fix (NOT_RETRIED)
    or the process was told to stop (`stopping_on_signals`)."""
    return not _stopping.is_set() and not isinstance(state.result(raise_on_failure=False), NOT_RETRIED)


def content_key(files: Iterable[str | Path], code: Iterable[str], config: Any) -> str:
    """A cache key for pure work: the content of its input files, the source of the `tcl` packages
    it runs (`code`, e.g. "sampling") and its configuration. Any change to one gives a new key.

    An .npz counts by its arrays, not its bytes: the zip container stamps the time it was
    written, so the same features written again would otherwise look new."""
    h = hashlib.sha256()
    for path in files:
        h.update(str(path).encode() + b"\0" + _file_digest(Path(path)))
    root = Path(tcl.__file__).parent
    for name in code:
        sources = sorted((root / name).rglob("*.py")) if (root / name).is_dir() else [root / f"{name}.py"]
        if not sources or not sources[0].exists():
            raise FileNotFoundError(f"no tcl source for cache key: {root / name}")
        for src in sources:
            h.update(str(src.relative_to(root)).encode() + b"\0" + _file_digest(src))
    h.update(json.dumps(config, sort_keys=True, default=str).encode())
    return h.hexdigest()


def _file_digest(path: Path) -> bytes:
    h = hashlib.sha256()
    if path.suffix == ".npz":
        import numpy as np

        with np.load(path, allow_pickle=False) as data:
            for name in sorted(data.files):
                array = np.ascontiguousarray(data[name])
                h.update(f"{name}:{array.dtype.str}:{array.shape}".encode() + b"\0")
                h.update(array.tobytes())
        return h.digest()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.digest()
