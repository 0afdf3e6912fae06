"""Background servers and headless Chromium for the tests that open real UIs (test_servers.py,
test_fresh_clone.py): every server listens on loopback, on a free port, and is stopped with
everything it started when its block ends, failed or not."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from contextlib import contextmanager
from pathlib import Path

import pytest

BIN = Path(sys.executable).parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def clean_env(**extra: str) -> dict[str, str]:
    """This process's environment without Prefect or MLflow settings, plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("PREFECT_", "MLFLOW_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", PREFECT_SERVER_ANALYTICS_ENABLED="false",
               MLFLOW_DISABLE_TELEMETRY="true", DO_NOT_TRACK="1", **extra)
    return env


def _descendants(pid: int) -> list[int]:
    """Every process below `pid` (by parent id), including those that started sessions of their own."""
    parents: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [pid]
    while todo:
        children = parents.get(todo.pop(), [])
        found += children
        todo += children
    return found


@contextmanager
def background(cmd: list[str], env: dict[str, str], log: Path, cwd: Path | None = None):
    """A long-running subprocess in a process group of its own; on exit it and everything it
    started are stopped: SIGTERM, then SIGKILL for what is left after 20 s."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, env=env, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    try:
        yield proc
    finally:
        tree = [proc.pid, *_descendants(proc.pid)]
        for pid in tree:
            try:
                os.kill(pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
        try:
            proc.wait(20)
        except subprocess.TimeoutExpired:
            pass
        for pid in tree:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        proc.wait(10)


def wait_until_up(url: str, proc: subprocess.Popen, log: Path, timeout: float = 300) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"{proc.args[:3]} exited with {proc.returncode}:\n{log.read_text()[-3000:]}")
        try:
            urllib.request.urlopen(url, timeout=5).close()
            return
        except (urllib.error.URLError, OSError):
            pass
        time.sleep(1)
    pytest.fail(f"{url} did not answer within {timeout} s:\n{log.read_text()[-3000:]}")


@contextmanager
def mlflow_server(db: Path, root: Path):
    """An MLflow tracking server on the SQLite store `db` (artifacts proxied to root/artifacts,
    log in root/server.log); yields its URL."""
    port = free_port()
    log = root / "server.log"
    cmd = [str(BIN / "mlflow"), "server", "--host", "127.0.0.1", "--port", str(port), "--workers", "1",
           "--backend-store-uri", f"sqlite:///{db}", "--artifacts-destination", str(root / "artifacts")]
    with background(cmd, clean_env(), log, cwd=root) as proc:
        wait_until_up(f"http://127.0.0.1:{port}/health", proc, log)
        yield f"http://127.0.0.1:{port}"


def chromium() -> str:
    for name in ("chromium", "chromium-browser", "google-chrome"):
        if shutil.which(name):
            return shutil.which(name)
    pytest.fail("Chromium is not installed: `apt-get install -y chromium` (`make test` installs it)")


def browse(url: str, profile: Path, *args: str) -> str:
    """Headless Chromium on `url` (a JS app gets 30 s of virtual time to render); its stdout,
    the DOM with --dump-dom."""
    cmd = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
           f"--user-data-dir={profile}", "--virtual-time-budget=30000", "--window-size=1400,1000", *args, url]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    assert done.returncode == 0, f"chromium failed ({done.returncode}): {done.stderr[-3000:]}"
    return done.stdout
