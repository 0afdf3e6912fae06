"""Run a toy collection in its own process (the crash/resume and two-writer tests need real processes).

    collect_toy.py STORE BUDGET [GO_FILE]

With GO_FILE, the collector waits after its first committed batch, still holding the
store, until that file exists: the two-writer test starts its second writer then.
"""

import sys
import time
from pathlib import Path

from tcl.collect.collector import measure_task
from tcl.collect.measure import LocalMeasurer
from tcl.config import load_params
from tcl.data.store import RecordStore
from tcl.platforms import get_platform

from conftest import REPO, toy_matmul_task


def on_commit(n: int) -> None:
    print("committed", n, flush=True)
    if go_file is not None:
        deadline = time.monotonic() + 600
        while not go_file.exists() and time.monotonic() < deadline:
            time.sleep(0.2)


if __name__ == "__main__":
    store_root, budget = sys.argv[1], int(sys.argv[2])
    go_file = Path(sys.argv[3]) if len(sys.argv) > 3 else None
    params = load_params(REPO / "params.yaml")
    platform = get_platform(params, "local-1c")
    measurer = LocalMeasurer(platform.tvm_target(), platform.threads, {"timeout_sec": 120}, {"number": 2})
    cfg = dict(params["collect"], pool_size=budget, batch_size=2)
    with RecordStore(store_root).exclusive_writer("toy collection") as store:  # as collect_pools holds it
        done = measure_task(toy_matmul_task(), platform, platform, store, measurer, cfg, 0, on_commit)
    print("done", done, flush=True)
