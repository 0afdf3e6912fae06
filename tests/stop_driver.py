"""A flow whose task waits on a worker process and is retried as `measure` is (flows/_tasks.py).

    stop_driver.py [--no-stop-handler]

`kill -- -<pid>` signals the whole process group: the worker dies, the task fails, and the
flow must end there instead of retrying (test_prefect_yaml.py)."""

import subprocess
import sys

from flows import _env  # noqa: F401
from prefect import flow, task

from flows._tasks import retry_options, stopping_on_signals


@task
def work() -> None:
    worker = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    print("working", flush=True)
    if worker.wait():
        raise RuntimeError("the worker process died")


@flow
def measuring(stop_handler: bool) -> None:
    retried = work.with_options(**retry_options({"deploy": {"retries": {"measure": 3, "delay_s": 1}}}, "measure"))
    if stop_handler:
        with stopping_on_signals(grace_s=5):
            retried()
    else:
        retried()


if __name__ == "__main__":
    measuring("--no-stop-handler" not in sys.argv)
