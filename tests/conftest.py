"""Shared fixtures: tiny real TVM tasks and a local platform.

TVM's tensor intrinsics are loaded once per process, the fast way (tcl/collect/intrinsics.py), before
any test module imports Prefect or MLflow; tuning/measuring fixtures are session-scoped.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from types import SimpleNamespace

import pytest

# `make test TEST_WORKERS=2` runs two pytest-xdist workers (`-n 2 --dist loadgroup`; the default is one process,
# the Makefile says why): the whole-pipeline test (a `dvc repro` of every stage) in one lane, everything else
# in the other. On two or more cores each lane has a core of its own, the one its measurements are pinned to:
# the pipeline's tiny params time on core 0, params.yaml's collect.runner on core 1. Each worker gets its own
# Prefect home, so two temporary Prefect servers never share one SQLite file.
PIPELINE_LANE = {"test_pipeline.py"}
XDIST_WORKER = os.environ.get("PYTEST_XDIST_WORKER")
if XDIST_WORKER:
    os.environ["PREFECT_HOME"] = str(Path(tempfile.gettempdir()) / f"tcl-tests-prefect-{XDIST_WORKER}")

from tcl.collect.intrinsics import load_tensor_intrinsics  # noqa: E402

load_tensor_intrinsics()

os.environ.setdefault("PREFECT_SERVER_ANALYTICS_ENABLED", "false")
os.environ.setdefault("MLFLOW_DISABLE_TELEMETRY", "true")
os.environ.setdefault("DVC_NO_ANALYTICS", "1")

REPO = Path(__file__).resolve().parent.parent
# `tune.search` for tests that tune a tiny network: MetaSchedule's default search (a population of 512 evolved
# for 4 generations per round) is most of a 16-trial tuning's time here; the search code is the same.
TINY_SEARCH = {"population": 32, "genetic_iters": 1}
FIXTURES = REPO / "tests" / "fixtures"


def lane_of(item) -> str:
    return "pipeline" if item.path.name in PIPELINE_LANE else "suite"


def pytest_collection_modifyitems(config, items):
    for item in items:
        item.add_marker(pytest.mark.xdist_group(lane_of(item)))


_lane_pinned: list[str] = []


def pytest_runtest_setup(item):
    """Under xdist, pin this worker to its lane's core (once: a worker runs one lane)."""
    if not XDIST_WORKER or _lane_pinned:
        return
    cpus = sorted(os.sched_getaffinity(0))
    if len(cpus) >= 2:
        os.sched_setaffinity(0, {cpus[0] if lane_of(item) == "pipeline" else cpus[1]})
    _lane_pinned.append(lane_of(item))


@pytest.fixture(autouse=True)
def keeps_the_process_cores():
    """No test may leave this process pinned: code that pins itself (the collector's search core) must
    give the cores back, or every later test of the run has one core (and a lane shares the other's)."""
    before = os.sched_getaffinity(0)
    yield
    assert os.sched_getaffinity(0) == before, "a test left this process pinned to other cores"


def toy_matmul_task(n: int = 16, network: str = "toy"):
    """A real (tiny) MetaSchedule task: an n x n x n matmul, shaped like `tcl.workloads.Task`."""
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), "k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    mod = tvm.IRModule({"main": te.create_prim_func([a, b, c])})
    return SimpleNamespace(network=network, name=f"matmul{n}", key=ms.utils.shash2hex(mod), weight=2,
                           op_type="dense", flops=2.0 * n ** 3, mod=mod)


@pytest.fixture
def one_thread():
    """Small ops on a shared 2-core box run far faster without OpenMP thread hand-offs."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def print_past_capture(request, *lines: str) -> None:
    """Print even without -s (module summaries such as the fuzz suites' example counts)."""
    with request.config.pluginmanager.get_plugin("capturemanager").global_and_fixture_disabled():
        print("\n" + "\n".join(lines))


@pytest.fixture(scope="session")
def params():
    from tcl.config import load_params

    return load_params(REPO / "params.yaml")


@pytest.fixture(scope="session")
def host_platform(params):
    from tcl.platforms import get_platform

    return get_platform(params, "local-1c")


@pytest.fixture(scope="module")
def tiny_cnn(params, host_platform):
    """The tiny CNN of the tuning tests, fused into tasks as tune_network receives a network."""
    from tcl.workloads import fuse_for_tuning, load_network
    from tcl.workloads.settings import WorkloadSettings

    net = load_network("tiny_cnn", WorkloadSettings.from_params(params))
    return fuse_for_tuning(net.relax_mod, host_platform.tvm_target())


@pytest.fixture(scope="session")
def measurer(host_platform):
    from tcl.collect.measure import LocalMeasurer

    return LocalMeasurer(host_platform.tvm_target(), host_platform.threads, {"timeout_sec": 120},
                         {"number": 2, "repeat": 2, "timeout_sec": 30})
