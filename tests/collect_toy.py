"""Run a toy collection in its own process (the crash/resume test kills it mid-run)."""

import sys

from tcl.collect.collector import measure_task
from tcl.collect.measure import LocalMeasurer
from tcl.config import load_params
from tcl.data.store import RecordStore
from tcl.platforms import get_platform

from conftest import REPO, toy_matmul_task

if __name__ == "__main__":
    store_root, budget = sys.argv[1], int(sys.argv[2])
    params = load_params(REPO / "params.yaml")
    platform = get_platform(params, "local-1c")
    measurer = LocalMeasurer(platform.tvm_target(), platform.threads, {"timeout_sec": 120}, {"number": 2})
    cfg = dict(params["collect"], pool_size=budget, batch_size=2)
    done = measure_task(toy_matmul_task(), platform, platform, RecordStore(store_root), measurer, cfg, 0,
                        lambda n: print("committed", n, flush=True))
    print("done", done, flush=True)
