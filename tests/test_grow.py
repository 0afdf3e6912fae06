"""`make collect`: this machine's platforms found from its CPU (a new CPU gets the entries to
declare), a real collection of what the store lacks, and checkpoints that commit the store to
DVC, push it to a remote inside the repository and commit that to git (real git, real DVC)."""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tcl.collect.grow import Checkpointer, grow, remote_dir_in_repo, uncommitted_params
from tcl.collect.host import NewMachine, choose_llvm_cpu, host_platforms, require_host_platforms
from tcl.platforms import _parse_platform, this_cpu

REPO = Path(__file__).resolve().parent.parent
SPECS = {"cores": 1, "threads": 1, "turbo_ghz": 3.0, "boost_ghz": 3.0, "l1_kb": 32, "l2_kb": 512, "l3_kb": 8192,
         "mem_channels": 2, "mem_capacity_gb": 16, "mem_bandwidth_gbs": 40, "simd_bytes": 16}


def _params(family=None):
    cpu = this_cpu()
    host = {"vendor": cpu["vendor"], "family": cpu["family"] if family is None else family}
    return {
        "seed": 0,
        "platforms": {
            "here-1c": {"kind": "cpu", "target": {"kind": "llvm", "num-cores": 1}, "specs": SPECS, "host": host},
            "elsewhere-1c": {"kind": "cpu", "target": {"kind": "llvm", "num-cores": 1}, "specs": SPECS,
                             "host": {"vendor": "NoSuchVendor", "family": 1}},
            "local-1c": {"kind": "cpu", "target": {"kind": "llvm", "num-cores": 1}, "specs": SPECS},
        },
        "workloads": {"batch": 1},
        "collect": {"source": "here-1c", "platforms": ["here-1c", "elsewhere-1c", "local-1c"],
                    "networks": ["tiny_cnn"], "image_sizes": [16], "seq_lens": [8], "tasks_per_network": 2,
                    "max_tasks": 0, "pool_size": 4, "batch_size": 4, "population": 16, "search_cpus": [],
                    "runner": {"number": 1, "repeat": 2, "min_repeat_ms": 0, "timeout_sec": 30, "cpus": []},
                    "builder": {"timeout_sec": 60, "cpus": []}},
    }


def test_the_suggested_llvm_cpu_matches_the_isa_the_kernel_reports():
    """A KVM guest whose CPUID model LLVM reads as Rocket Lake, on a Xeon whose flags carry AMX and
    AVX512-FP16: the suggestion is the newest Intel CPU the flags cover (real LLVM feature tables)."""
    guest = {"vendor": "GenuineIntel",
             "flags": {"avx2", "avx512f", "avx512_vnni", "avx512_bf16", "avx512_fp16", "amx_tile"}}
    assert choose_llvm_cpu(guest, "rocketlake") == "sapphirerapids"      # no amx_fp16: not graniterapids
    assert choose_llvm_cpu({**guest, "flags": guest["flags"] | {"amx_fp16"}}, "rocketlake") == "graniterapids"
    # LLVM's own answer stands when it matches; one that needs what the kernel lacks is replaced
    assert choose_llvm_cpu({"vendor": "AuthenticAMD", "flags": {"avx2"}}, "znver3") == "znver3"
    assert choose_llvm_cpu({"vendor": "GenuineIntel", "flags": {"avx2"}}, "skylake-avx512") == "haswell"


def test_platforms_come_from_this_cpu_and_a_new_cpu_is_told_what_to_declare():
    params = _params()
    assert host_platforms(params) == (["here-1c"], [])   # local-1c has no host: never filed by a machine
    params["collect"]["platforms"] = ["elsewhere-1c"]
    with pytest.raises(NewMachine, match=r"matches the declared platforms \['here-1c'\].*collect.platforms"):
        require_host_platforms(params)
    cpu = {**this_cpu(), "family": 4242, "model": 7, "name": "Brand-new CPU"}
    with pytest.raises(NewMachine, match="Brand-new CPU .*family 4242 model 7.* matches no platform") as e:
        require_host_platforms(_params(), cpu)
    entries = yaml.safe_load(str(e.value).split("\n\n", 1)[1])   # the suggestion is valid params.yaml
    assert entries and all(n.endswith("-1c") for n in entries)
    for name, entry in entries.items():
        p = _parse_platform(name, entry)
        assert p.host["family"] == 4242 and p.specs["l1_kb"] > 0 and p.specs["mem_capacity_gb"] > 0


def _git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True).stdout


@pytest.fixture
def repo(tmp_path):
    """A git repository with DVC, a `collect` stage and its remote inside the repository, like this one."""
    repo = tmp_path / "repo"
    repo.mkdir()
    _git(repo, "init", "-q")
    _git(repo, "config", "user.email", "t@example.com")
    _git(repo, "config", "user.name", "test")
    subprocess.run(["dvc", "init", "-q"], cwd=repo, check=True)
    subprocess.run(["dvc", "remote", "add", "-d", "store", "dvc-store"], cwd=repo, check=True)
    shutil.copy(REPO / ".dvcignore", repo / ".dvcignore")   # the writer lock and temp parts are not data
    (repo / "dvc.yaml").write_text("stages:\n  collect:\n    cmd: python -m flows.collect\n"
                                   "    outs:\n      - data/records:\n          persist: true\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-q", "-m", "init")
    return repo


def test_checkpoints_happen_on_their_period_and_only_when_something_changed(repo, caplog):
    caplog.set_level(logging.INFO, logger="tcl.collect.grow")
    assert remote_dir_in_repo(repo) == (repo / "dvc-store").resolve()
    now = [0.0]
    ckpt = Checkpointer(repo, every_s=60, clock=lambda: now[0])
    (repo / "data" / "records").mkdir(parents=True)
    (repo / "data" / "records" / "a.txt").write_text("1")
    ckpt(1, 3)
    assert ckpt.done == []          # not due yet
    now[0] = 61
    ckpt(2, 3)
    assert ckpt.done == ["collect checkpoint: 2/3 catalog tasks done"]
    assert "dvc-store/" in _git(repo, "show", "--stat", "HEAD") and "dvc.lock" in _git(repo, "show", "--stat", "HEAD")
    assert ckpt.checkpoint("again") and len(ckpt.done) == 1   # nothing new: no empty commit
    # Every checkpoint says so in the log (`tail -f logs/collect-*.log`), a run without git commits too.
    assert "collect checkpoint: 2/3 catalog tasks done (dvc commit, dvc push, git commit)" in caplog.text
    (repo / "data" / "records" / "b.txt").write_text("2")
    assert Checkpointer(repo, git=False).checkpoint("3/3 catalog tasks done")
    assert "collect checkpoint: 3/3 catalog tasks done (dvc commit, dvc push)" in caplog.text


def test_a_flow_log_carries_tcl_s_own_log_lines(tmp_path):
    # make collect's log is a flow's output: tcl's INFO lines (checkpoints, the platforms measured) must reach it.
    script = tmp_path / "flow.py"
    script.write_text("import logging\nfrom flows import _env  # noqa: F401\nfrom prefect import flow\n\n"
                      "@flow\ndef f():\n    logging.getLogger('tcl.collect.grow').info('this machine measures here-1c')\n\n"
                      "f()\n")
    res = subprocess.run([sys.executable, str(script)], cwd=REPO, capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(REPO)})
    assert res.returncode == 0, res.stderr[-2000:]
    assert "tcl.collect.grow - this machine measures here-1c" in res.stdout + res.stderr


@pytest.mark.slow
def test_grow_measures_what_is_missing_and_commits_it(repo):
    params = _params()
    first = grow(params, repo / "data" / "records", repo=repo, every_min=0, progress=False)
    (s,) = first   # only this machine's platform: elsewhere-1c and local-1c are not touched
    assert (s.platform, s.tasks, s.already_had) == ("here-1c", 2, 0) and s.measured_now >= 2
    log = _git(repo, "log", "--format=%s")
    # One checkpoint after each task (every_min=0); the final one found nothing new to commit.
    assert log.splitlines()[:2] == ["collect checkpoint: 2/2 catalog tasks done",
                                    "collect checkpoint: 1/2 catalog tasks done"]
    pushed = _git(repo, "ls-files", "dvc-store")
    assert pushed.count("\n") >= 3   # the parts, the catalog and the .dir listing are in git
    assert subprocess.run(["dvc", "status", "-q", "collect"], cwd=repo).returncode == 0
    # each checkpoint prunes the remote: the first checkpoint's file list is in git history only
    from tcl.data.footprint import UNREFERENCED, remote_by_output

    assert UNREFERENCED not in remote_by_output(repo / "dvc.lock", repo / "dvc-store")
    earlier = yaml.safe_load(_git(repo, "show", "HEAD~1:dvc.lock"))["stages"]["collect"]["outs"][0]["md5"]
    assert earlier != yaml.safe_load((repo / "dvc.lock").read_text())["stages"]["collect"]["outs"][0]["md5"]
    listing = f"dvc-store/files/md5/{earlier[:2]}/{earlier[2:]}"
    assert not (repo / listing).exists() and _git(repo, "cat-file", "-t", f"HEAD~1:{listing}").strip() == "blob"
    # A rerun (a resumed or scheduled run) measures nothing and commits nothing.
    head = _git(repo, "rev-parse", "HEAD")
    (again,) = grow(params, repo / "data" / "records", repo=repo, every_min=0, progress=False)
    assert (again.measured_now, again.already_had) == (0, s.measured_now)
    assert _git(repo, "rev-parse", "HEAD") == head
    with pytest.raises(RuntimeError, match="'elsewhere-1c' is not measured on this machine"):
        grow(params, repo / "data" / "records", repo=repo, only="elsewhere-1c")
    # Checkpoints record the params they ran with: an uncommitted collect section stops the run first.
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    _git(repo, "add", "params.yaml")
    _git(repo, "commit", "-q", "-m", "params")
    assert uncommitted_params(repo, repo / "params.yaml") == []
    params["collect"]["extra_networks"] = ["m5"]
    (repo / "params.yaml").write_text(yaml.safe_dump(params))
    with pytest.raises(RuntimeError, match=r"sections \['collect'\] differ from the last commit"):
        grow(params, repo / "data" / "records", repo=repo, params_path=repo / "params.yaml")


def test_grow_measures_only_the_platforms_asked_for_when_given(tmp_path):
    """`make collect COLLECT_ARGS="--platforms ..."`: of this CPU's platforms, only those named are
    measured (the pools are still drawn on the source); a platform of another CPU is refused by name."""
    params = _params()
    here = params["platforms"]["here-1c"]
    params["platforms"]["here-sse4-1c"] = {**here, "target": {"kind": "llvm", "mcpu": "nehalem", "num-cores": 1}}
    params["collect"]["platforms"] = ["here-1c", "here-sse4-1c"]
    params["collect"]["tasks_per_network"] = 1
    store = tmp_path / "records"
    summaries = grow(params, store, repo=tmp_path, push=False, git=False, progress=False, platforms=["here-sse4-1c"])
    measured = {s.platform: s.measured_now for s in summaries}
    assert measured.get("here-sse4-1c", 0) >= 1 and measured.get("here-1c", 0) == 0, measured
    with pytest.raises(RuntimeError, match=r"platforms \['elsewhere-1c'\] are not measured on this machine"):
        grow(params, store, repo=tmp_path, push=False, git=False, progress=False, platforms=["elsewhere-1c"])
