"""Every stage resumes after a real SIGKILL without losing or repeating anything.

As tests/test_collect.py does for collection: each test starts the stage in a process of
its own (tests/resume_driver.py: what the flow calls, without Prefect), SIGKILLs it at an
observed point of progress (manifest entries, quarantined rows, an array file, a round,
a checkpoint), runs it again to the end, and compares what it left with an
uninterrupted run on the same inputs: records and quarantine entries (none lost, none
twice), arrays, picks, trained weights (bit for bit). Inputs are built from the Ansor
fixtures (real schedule steps; no TVM measurement), sized so the kill lands mid-run;
active sampling measures its picks for real (tiny matmul pools drawn by MetaSchedule).
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import subprocess
import sys
import time
import zlib
from pathlib import Path
from typing import Callable

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest
import torch
import yaml

from tcl.data.ansor import read_ansor_log
from tcl.data.ingest import ingest_ansor_dir, read_manifest
from tcl.data.quarantine import Quarantine, read_quarantine
from tcl.data.schema import make_program_id, make_record_id, records_to_table
from tcl.data.store import RecordStore
from tcl.models import build_model
from tcl.train.loop import TrainConfig, fit

from conftest import FIXTURES, REPO

DRIVER = REPO / "tests" / "resume_driver.py"
RESNET50 = FIXTURES / "ansor" / "resnet-50-NHWC-B1-llvm.json"
P1, P2 = "local-1c", "local-sse4-1c"
SPLIT = {"holdout_networks": ["held_out"], "val_fraction": 0.1, "min_val_tasks": 1}


# ---------------------------------------------------------------- running and killing a stage

def _write_params(work: Path, **blocks) -> dict:
    """params.yaml in `work`: the repository's, with `blocks` merged into its sections."""
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    for name, block in blocks.items():
        params[name] = {**(params.get(name) or {}), **block}
    # a pipeline that trains a platform validates it (tcl.config checks the DVC foreach lists when params load)
    validated = params["validate"]["platforms"]
    validated += [p for p in [*params["train"]["platforms"], *params["collect"]["platforms"]] if p not in validated]
    work.mkdir(parents=True, exist_ok=True)
    (work / "params.yaml").write_text(yaml.safe_dump(params))
    return params


def _env(work: Path) -> dict:
    return dict(os.environ, PYTHONPATH=str(REPO), MLFLOW_TRACKING_URI=f"sqlite:///{work}/mlflow.db")


def _start(work: Path, *args: str) -> subprocess.Popen:
    with open(work / "stderr.log", "ab") as err:
        return subprocess.Popen([sys.executable, str(DRIVER), *args], cwd=work, env=_env(work),
                                stdout=subprocess.PIPE, stderr=err, text=True)


def _run(work: Path, *args: str) -> str:
    done = subprocess.run([sys.executable, str(DRIVER), *args], cwd=work, env=_env(work), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0 and done.stdout.rstrip().endswith("done"), done.stderr[-3000:]
    return done.stdout


def _kill(proc: subprocess.Popen) -> None:
    proc.send_signal(signal.SIGKILL)
    assert proc.wait(timeout=60) == -signal.SIGKILL, "the stage finished before the kill: make its input bigger"


def _kill_when(proc: subprocess.Popen, ready: Callable[[], bool], what: str, timeout: float = 300) -> None:
    """SIGKILL `proc` as soon as `ready()`; a stage that ends first fails the test (kill it mid-run)."""
    deadline = time.monotonic() + timeout
    while not ready():
        assert proc.poll() is None, f"the stage ended (exit {proc.returncode}) before {what}"
        assert time.monotonic() < deadline, f"no {what} after {timeout} s"
        time.sleep(0.02)
    _kill(proc)


def _kill_after_line(proc: subprocess.Popen, prefix: str) -> None:
    for line in proc.stdout:
        if line.startswith(prefix):
            return _kill(proc)
    pytest.fail(f"the stage ended (exit {proc.wait()}) without printing {prefix!r}")


def _tmp_files(root: Path) -> list[Path]:
    """Half-written files (the atomic writer's temporaries) left under `root`."""
    return list(root.rglob("*.tmp"))


# ---------------------------------------------------------------- inputs

@pytest.fixture(scope="module")
def ansor_rows(tmp_path_factory) -> list[dict]:
    """TVM's example ResNet-50 Ansor log as record dicts: 26 programs with real schedule steps."""
    with Quarantine(tmp_path_factory.mktemp("q"), "fixture") as q:
        return pa.concat_tables(read_ansor_log(RESNET50, platform=P1, quarantine=q)).to_pylist()


def _records(base: list[dict], platform: str, tasks: int, per_task: int) -> pa.Table:
    """tasks x per_task distinct programs (the fixture's steps, renamed), times drawn per platform."""
    rng = np.random.default_rng(zlib.crc32(platform.encode()))
    rows = []
    for t in range(tasks):
        key = f"task{t:03d}"
        for k in range(per_task):
            src = base[(t + k) % len(base)]
            program, mean = f"{src['program']} #{t}-{k}", float(1e-4 * (1 + rng.random()))
            rows.append({**src, "platform": platform, "task_key": key, "program": program,
                         "network": ("net_a", "net_b", "net_c", "held_out")[t % 4], "op_type": "conv2d",
                         "record_id": make_record_id(platform, key, program),
                         "program_id": make_program_id(key, program), "run_secs": [mean], "mean_sec": mean,
                         "median_sec": mean, "error_code": "", "error_msg": ""})
    return records_to_table(rows)


def _validated_inputs(work: Path, base: list[dict], tasks: int, per_task: int) -> None:
    """What featurize reads: validated records of P1 and P2 (no task table: networks from the rows)."""
    (work / "data" / "validated").mkdir(parents=True)
    (work / "data" / "records").mkdir()
    for p in (P1, P2):
        pq.write_table(_records(base, p, tasks, per_task), work / "data" / "validated" / f"platform={p}.parquet")


@pytest.fixture(scope="module")
def small_features(tmp_path_factory, ansor_rows) -> Path:
    """A work directory with data/features of P1 and P2 (20 tasks x 40 programs), as featurize writes them."""
    from tcl.features.dataset import featurize_platforms
    from tcl.platforms import get_platform

    work = tmp_path_factory.mktemp("features")
    _validated_inputs(work, ansor_rows, tasks=20, per_task=40)
    params = _write_params(work, split=SPLIT, train={"platforms": [P1, P2]})
    featurize_platforms([get_platform(params, p) for p in (P1, P2)], params, work / "data" / "validated",
                        work / "data" / "records", work / "data" / "features")
    return work


def _work_with_features(work: Path, features: Path, **blocks) -> dict:
    shutil.copytree(features / "data" / "features", work / "data" / "features")
    return _write_params(work, split=SPLIT, **blocks)


# ---------------------------------------------------------------- ingest

def _many_logs(dest: Path, copies: int) -> None:
    """`copies` Ansor logs of 26 distinct records each (the fixture, re-stamped), a bad line first."""
    dest.mkdir(parents=True)
    lines = [json.loads(ln) for ln in RESNET50.read_text().splitlines() if ln.startswith("{")]
    for c in range(copies):
        body = ['{"i": [broken']
        for obj in lines:
            obj["r"][3] += 1  # a later timestamp: another measurement, another record_id
            body.append(json.dumps(obj))
        (dest / f"log{c:03d}.json").write_text("\n".join(body) + "\n")


def _store_ids(root: Path) -> list[str]:
    return sorted(RecordStore(root).read(P1, columns=["record_id"]).column("record_id").to_pylist())


def _quarantined(path: Path) -> list[tuple]:
    return sorted((e["source_file"], e["line"], e["reason"]) for e in read_quarantine(path))


def test_sigkilled_ingest_resumes_without_losing_or_repeating_records(tmp_path):
    """Killed after 10 of 60 files; the rerun skips the finished files, redoes the one in flight."""
    copies, logs, work = 60, tmp_path / "logs", tmp_path / "run"
    _many_logs(logs, copies)
    _write_params(work, ingest={"tenset_dir": str(logs), "platform": P1, "store": str(work / "tenset"),
                                "quarantine_dir": str(work / "quarantine"), "chunk_size": 10})
    ref = ingest_ansor_dir(logs, platform=P1, store_root=tmp_path / "ref", quarantine_dir=tmp_path / "ref_q",
                           chunk_size=10, progress=False)
    assert (ref.records_now, ref.quarantined_now) == (26 * copies, copies)

    store, qpath = RecordStore(work / "tenset"), work / "quarantine" / f"ingest-{P1}.jsonl"
    proc = _start(work, "ingest")
    _kill_when(proc, lambda: len(read_manifest(store, P1)["files"]) >= 10, "10 ingested files")
    finished = len(read_manifest(store, P1)["files"])
    before = _store_ids(work / "tenset")
    assert 10 <= finished < copies and 26 * finished <= len(before) < 26 * copies

    out = _run(work, "ingest")
    summary = json.loads(next(ln for ln in out.splitlines() if ln.startswith("summary "))[len("summary "):])
    assert (summary["skipped"], summary["ingested"]) == (finished, copies - finished)
    after = _store_ids(work / "tenset")
    assert after == _store_ids(tmp_path / "ref") and len(set(after)) == len(after) == 26 * copies
    assert set(before) <= set(after)
    assert _quarantined(qpath) == _quarantined(tmp_path / "ref_q" / f"ingest-{P1}.jsonl")
    assert len(read_quarantine(qpath)) == copies  # one bad line per file, none twice
    parts = sorted(p.name for p in store.platform_dir(P1).glob("part-*"))
    assert parts == sorted(p.name for p in RecordStore(tmp_path / "ref").platform_dir(P1).glob("part-*"))
    assert not _tmp_files(work)
    print(f"\ningest killed after {finished}/{copies} files with {len(before)} records stored; "
          f"rerun: {len(after)} records ({len(set(after))} distinct, {26 * copies} in the logs), "
          f"{len(read_quarantine(qpath))} quarantined ({copies} bad lines)")


# ---------------------------------------------------------------- validate

def _lines(path: Path) -> int:
    return path.read_bytes().count(b"\n") if path.exists() else 0


@pytest.mark.slow
def test_sigkilled_validation_reruns_to_the_same_outputs_without_repeating_quarantine(tmp_path, ansor_rows):
    """An uninterrupted validation, then one killed after its first quarantined rows, then a rerun."""
    from tcl.data.validation.platform import validate_platform

    table = _records(ansor_rows, P1, tasks=30, per_task=100)
    broken = pa.array([i % 40 == 0 for i in range(table.num_rows)])  # a success without a time
    table = table.set_column(table.schema.get_field_index("mean_sec"), "mean_sec",
                             pc.if_else(broken, pa.scalar(None, pa.float64()), table.column("mean_sec")))
    store = RecordStore(tmp_path / "records")
    for key in sorted(set(table.column("task_key").to_pylist())):
        store.append(P1, key, table.filter(pc.equal(table.column("task_key"), key)))
    dirs = {k: str(tmp_path / k) for k in ("validated", "quarantine", "reports")}
    params = _write_params(tmp_path, validate={"stores": [str(tmp_path / "records")], "batch_rows": 200,
                                               "validated_root": dirs["validated"],
                                               "quarantine_dir": dirs["quarantine"], "report_dir": dirs["reports"]})
    ref = validate_platform(P1, params, stores=[tmp_path / "records"], validated_root=dirs["validated"],
                            quarantine_dir=dirs["quarantine"], report_dir=dirs["reports"], track=False)
    validated = tmp_path / "validated" / f"platform={P1}.parquet"
    qpath, report = tmp_path / "quarantine" / f"validate-{P1}.jsonl", tmp_path / "reports" / f"{P1}.json"
    expected = (pq.read_table(validated), read_quarantine(qpath), report.read_text())
    assert ref.passed and ref.failed_rows == len(expected[1]) == 75 and expected[0].num_rows == 3000 - 75

    proc = _start(tmp_path, "validate", P1)
    in_flight = validated.with_name(f".{validated.name}.tmp")
    _kill_when(proc, lambda: in_flight.exists() and 0 < _lines(qpath) < 75, "quarantined rows")
    assert not validated.exists() and not report.exists(), "a killed validation left an earlier output current"
    at_kill = _lines(qpath)

    _run(tmp_path, "validate", P1)
    assert pq.read_table(validated).equals(expected[0])
    assert read_quarantine(qpath) == expected[1]  # every failed row once, in order
    assert report.read_text() == expected[2]
    assert not _tmp_files(tmp_path)
    print(f"\nvalidate killed with {at_kill} quarantine lines written, no output published; rerun: "
          f"{pq.read_metadata(validated).num_rows} valid + {len(read_quarantine(qpath))} quarantined "
          f"= {table.num_rows} records")


# ---------------------------------------------------------------- featurize

def _arrays(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


def _same_arrays(a: Path, b: Path) -> bool:
    x, y = _arrays(a), _arrays(b)
    return x.keys() == y.keys() and all(np.array_equal(x[k], y[k], equal_nan=x[k].dtype.kind == "f") for k in x)


def test_sigkilled_featurize_leaves_only_whole_files_and_reruns_to_the_same_arrays(tmp_path, ansor_rows):
    """Killed once its first array file is there; what it left loads whole, the rerun equals a clean run."""
    from tcl.features.dataset import featurize_platforms
    from tcl.platforms import get_platform

    ref, work = tmp_path / "ref", tmp_path / "run"
    for w in (ref, work):
        _validated_inputs(w, ansor_rows, tasks=40, per_task=100)
        params = _write_params(w, split=SPLIT, train={"platforms": [P1, P2]})  # the same in both
    featurize_platforms([get_platform(params, p) for p in (P1, P2)], params, ref / "data" / "validated",
                        ref / "data" / "records", ref / "data" / "features")
    expected = sorted(p.relative_to(ref / "data" / "features") for p in (ref / "data" / "features").rglob("*.*"))
    assert len(expected) == 2 + 2 * 3  # tokenizer, stats, 3 splits per platform

    proc = _start(work, "featurize")
    _kill_when(proc, (work / "data" / "features" / P1 / "train.npz").exists, "an array file")
    left = sorted((work / "data" / "features").rglob("*.npz"))
    assert left and len(left) < 6, left
    for path in left:  # whole, and what an uninterrupted run writes
        assert _same_arrays(path, ref / "data" / "features" / path.relative_to(work / "data" / "features"))

    _run(work, "featurize")
    got = sorted(p.relative_to(work / "data" / "features") for p in (work / "data" / "features").rglob("*.*"))
    assert got == expected
    print(f"\nfeaturize killed with {len(left)} of 6 array files written (each whole); rerun: {len(got)} files, "
          f"equal to an uninterrupted run's")
    for rel in expected:
        a, b = ref / "data" / "features" / rel, work / "data" / "features" / rel
        assert _same_arrays(a, b) if rel.suffix == ".npz" else a.read_bytes() == b.read_bytes(), rel
    assert not _tmp_files(work)


# ---------------------------------------------------------------- sampling rounds

def test_sigkilled_offline_sampling_publishes_nothing_and_reruns_to_the_same_picks(tmp_path, small_features):
    """Killed after round 1 of 4: no sample file; the rerun picks what an uninterrupted run picks."""
    from tcl.features.dataset import load_split
    from tcl.sampling.offline import sample_offline
    from tcl.sampling.settings import SamplingSettings

    params = _work_with_features(tmp_path, small_features, sampling={
        "platforms": [P2], "mode": "offline", "strategy": "rdu", "rate": 0.5, "rounds": 4, "first_batch": 0.2,
        "model": "mlp", "epochs": 40, "ensemble": 1})
    split = load_split(tmp_path / "data" / "features" / P2, "train")
    ref = sample_offline(split, params, SamplingSettings.from_params(params), int(params["seed"]))
    sample = tmp_path / "data" / "samples" / f"{P2}.npz"

    proc = _start(tmp_path, "sample", P2)
    _kill_after_line(proc, "round 1")
    assert not sample.exists(), "a killed sampling published picks"

    out = _run(tmp_path, "sample", P2)
    print(f"\noffline sampling killed after round 1: no sample file; rerun picked {len(ref.picks)} "
          f"of {len(split['x'])} programs, the uninterrupted run's picks")
    assert [ln for ln in out.splitlines() if ln.startswith("round")] == [f"round {r}" for r in range(5)]
    with np.load(sample) as got:
        picked, rounds = got["program_id"], got["round"]
    assert np.array_equal(picked, split["program_id"][ref.picks])
    assert np.array_equal(rounds, np.concatenate([np.full(r.picked, r.round) for r in ref.rounds]))
    assert len(set(picked)) == len(ref.picks) == round(0.5 * len(split["x"]))


class _NoMeasuring:
    """The measurer of a run that must find every pick measured already: any measurement fails it."""

    can_overlap = False

    def submit(self, candidates):
        raise AssertionError(f"measured {len(candidates)} programs that the store already holds")


def _active_inputs(work: Path, params: dict, platform) -> list:
    """data/records with the saved pools (drawn by MetaSchedule, unmeasured) and catalog of two tiny
    matmul tasks on P1, the tokenizer in data/features, and params.yaml for active sampling on P2."""
    from tcl.collect.catalog import CatalogTask, save_catalog
    from tcl.collect.collector import task_pool
    from tcl.data.metaschedule import trace_to_steps
    from tcl.features.tokenizer import Tokenizer
    from tcl.platforms import get_platform

    from conftest import toy_matmul_task

    tasks, records = [toy_matmul_task(16), toy_matmul_task(12)], RecordStore(work / "data" / "records")
    collect = {"source": P1, "pool_size": 10, "population": 16, "batch_size": 2,  # 2 programs a committed part
               "builder": {"timeout_sec": 120}, "runner": {"number": 2, "repeat": 2, "timeout_sec": 30}}
    pools = [task_pool(records, t, platform, {**params["collect"], **collect}, 0) for t in tasks]
    save_catalog(records, P1, [CatalogTask(t, {"toy@16": 1}) for t in tasks], "test")
    run_params = _write_params(work, collect=collect, sampling={
        "platforms": [P2], "mode": "active", "strategy": "rdu", "rate": 0.5, "rounds": 2, "first_batch": 0.2,
        "model": "mlp", "epochs": 5, "ensemble": 1})
    specs = [get_platform(run_params, p).spec_vector for p in (P1, P2)]
    Tokenizer.for_kind("cpu").fit([trace_to_steps(json.loads(p)) for pool in pools for p in pool], specs) \
        .save(work / "data" / "features" / "tokenizer.json")
    return pools


def _active_ids(root: Path) -> tuple[list[str], list[str]]:
    table = RecordStore(root).read(P2, columns=["record_id", "program_id"])
    return table.column("record_id").to_pylist(), table.column("program_id").to_pylist()


@pytest.mark.slow
def test_sigkilled_active_sampling_resumes_without_remeasuring_and_picks_as_an_uninterrupted_run(
        tmp_path, params, host_platform):
    """Active RDU on two tiny matmul tasks (pools of 10, 10 picks: 2 random, then 2 rounds of 4), measured
    for real on P2; SIGKILLed after the first committed batch of round 1, then rerun to the end.

    The reference is an uninterrupted run with the same seed *on the same measurements*: a run
    over a copy of the final store, which finds each round's picks measured and measures nothing.
    An uninterrupted run that measures afresh cannot be expected to pick the same programs:
    real timings differ between two measurements of a program, and RDU retrains f on them
    every round (only the random first batch is independent of them, and it is checked
    against the killed run's own).
    """
    from tcl.collect.catalog import load_tasks_by_key
    from tcl.features.dataset import load_tokenizer
    from tcl.platforms import get_platform
    from tcl.sampling.active import sample_active
    from tcl.sampling.base import round_budgets, total_budget
    from tcl.sampling.settings import SamplingSettings

    work = tmp_path / "run"
    pools = _active_inputs(work, params, host_platform)
    budgets = round_budgets(total_budget(sum(len(p) for p in pools), 0.5), 2, 0.2)
    budget, first = sum(budgets), budgets[0]
    assert budgets == [2, 4, 4], budgets  # round 1 takes more than one committed part: the kill lands in it
    sample = work / "data" / "samples" / f"{P2}.npz"

    proc = _start(work, "active", P2)
    killed_round0 = None
    for line in proc.stdout:
        if line.startswith("round 0 measured "):
            killed_round0 = json.loads(line[len("round 0 measured "):])
        elif line.startswith("measured") and killed_round0 is not None:  # round 1's first committed part
            _kill(proc)
            break
    else:
        pytest.fail(f"the sampling ended (exit {proc.wait()}) before round 1 committed a batch")
    before_records, before_programs = _active_ids(work / "data" / "active")
    assert len(killed_round0) == first and set(killed_round0) < set(before_programs)
    assert len(before_records) == len(set(before_records)) == len(set(before_programs)) < budget
    assert not sample.exists(), "a killed sampling published picks"

    out = _run(work, "active", P2).splitlines()
    measured_now = sum(int(ln.split()[1]) for ln in out if ln.startswith("measured"))
    picks = json.loads(next(ln for ln in out if ln.startswith("picks "))[len("picks "):])
    per_round = json.loads(next(ln for ln in out if ln.startswith("rounds "))[len("rounds "):])
    after_records, after_programs = _active_ids(work / "data" / "active")
    # none lost, none twice, and only what the killed run had not measured is measured now
    assert len(after_records) == len(set(after_records)) == len(set(after_programs)) == budget
    assert set(before_records) <= set(after_records)
    assert measured_now == budget - len(before_records)
    assert sorted(picks) == sorted(after_programs) and len(set(picks)) == budget
    # the rerun made the killed run's decisions again: its first batch, and round 1 holds what was measured
    assert per_round == budgets
    assert sorted(picks[:first]) == sorted(killed_round0)
    assert set(before_programs) - set(killed_round0) <= set(picks[first:first + per_round[1]])
    with np.load(sample) as got:
        assert got["program_id"].tolist() == picks
    print(f"\nactive sampling killed in round 1 with {len(before_records)} programs measured; rerun measured "
          f"{measured_now} more: {len(after_records)} records, {len(set(after_programs))} distinct programs "
          f"(budget {budget})")

    ref_store = tmp_path / "ref_active"
    shutil.copytree(work / "data" / "active", ref_store)
    run_params = yaml.safe_load((work / "params.yaml").read_text())
    records = RecordStore(work / "data" / "records")
    run, pool, _ = sample_active(get_platform(run_params, P2), run_params, SamplingSettings.from_params(run_params),
                                 int(run_params["seed"]), records, RecordStore(ref_store),
                                 sorted(load_tasks_by_key(records, P1)),
                                 load_tokenizer(work / "data" / "features" / P1), _NoMeasuring(), lambda n: None)
    assert pool.program_id[run.picks].tolist() == picks
    assert [r.picked for r in run.rounds] == per_round
    assert not _tmp_files(work / "data")


# ---------------------------------------------------------------- training

def _finished_train_run(work: Path):
    import mlflow

    client = mlflow.MlflowClient(tracking_uri=f"sqlite:///{work}/mlflow.db")
    runs = client.search_runs([e.experiment_id for e in client.search_experiments()],
                              "tags.stage = 'train' and attributes.status = 'FINISHED'")
    assert len(runs) == 1, [r.info.status for r in runs]
    losses = [(m.step, m.value) for m in client.get_metric_history(runs[0].info.run_id, "train_loss")]
    return runs[0], sorted(losses), client


@pytest.mark.slow
def test_sigkilled_training_resumes_from_its_checkpoint_to_the_same_weights(tmp_path, small_features):
    """TCL-Mamba trained uninterrupted, and killed after its first checkpoint then rerun: same weights."""
    epochs = 4  # ~1 s each
    train = {"platforms": [P1], "models": ["tcl"], "epochs": epochs, "batch_size": 128,
             "checkpoint_dir": "tmp/checkpoints"}
    ref, work = tmp_path / "ref", tmp_path / "run"
    for w in (ref, work):
        _work_with_features(w, small_features, train=train)
    _run(ref, "train", P1)

    proc = _start(work, "train", P1)
    ckpt = work / "tmp" / "checkpoints" / P1 / "tcl.pt"
    _kill_when(proc, ckpt.exists, "a checkpoint")
    done = torch.load(ckpt, weights_only=True)["epochs_done"]
    assert 1 <= done < epochs
    _run(work, "train", P1)

    assert not ckpt.exists(), "the checkpoint outlived the registered model"
    print(f"\ntraining killed after {done}/{epochs} epochs checkpointed; rerun resumed at epoch {done}")
    got = torch.load(work / "models" / P1 / "tcl" / "model.pt", weights_only=True)
    want = torch.load(ref / "models" / P1 / "tcl" / "model.pt", weights_only=True)
    assert got.keys() == want.keys() and all(torch.equal(got[k], want[k]) for k in want)
    (run, losses, client), (ref_run, ref_losses, _) = _finished_train_run(work), _finished_train_run(ref)
    assert run.data.params["resumed_from_epoch"] == str(done) and ref_run.data.params["resumed_from_epoch"] == "0"
    assert losses == ref_losses and [s for s, _ in losses] == list(range(epochs))
    assert len(client.search_model_versions(f"name = 'tcl-tcl-{P1}'")) == 1  # the killed run registered nothing
    metrics, ref_metrics = (json.loads((w / "reports" / "train" / f"{P1}.json").read_text())["tcl"]
                            for w in (work, ref))
    assert {k: v for k, v in metrics.items() if k.startswith("test_")} == \
        {k: v for k, v in ref_metrics.items() if k.startswith("test_")}


# ---------------------------------------------------------------- checkpoints in-process

def _synthetic(n_tasks: int = 8, per_task: int = 30):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(n_tasks * per_task, 6, 5)).astype(np.float32)
    return x, rng.random(len(x)).astype(np.float32), np.repeat(np.arange(n_tasks), per_task)


class _Stop(Exception):
    pass


def _stop_after(epochs_done: int):
    def on_epoch(epoch: int, loss: float) -> None:
        if epoch + 1 > epochs_done:
            raise _Stop  # before the checkpoint of this epoch: `epochs_done` epochs are saved
    return on_epoch


@pytest.mark.parametrize("model", ["mlp", "tlp", "tcl"])
def test_a_training_stopped_after_epoch_k_resumes_to_bit_identical_weights(tmp_path, model):
    x, y, g = _synthetic()
    cfg = TrainConfig(epochs=5, batch_size=64, seed=3)
    new = lambda: build_model(model, feat_dim=5, seq_len=6, seed=cfg.seed)  # noqa: E731
    whole = new()
    history = fit(whole, x, y, g, cfg)
    with pytest.raises(_Stop):
        fit(new(), x, y, g, cfg, _stop_after(2), checkpoint=tmp_path / "c.pt")
    seen: list[int] = []
    resumed = new()
    again = fit(resumed, x, y, g, cfg, lambda e, loss: seen.append(e), checkpoint=tmp_path / "c.pt")
    assert again.start_epoch == 2 and seen == [2, 3, 4] and again.train_loss == history.train_loss
    for a, b in zip(whole.state_dict().values(), resumed.state_dict().values()):
        assert torch.equal(a, b)


def test_a_checkpoint_of_other_settings_or_data_is_ignored_and_overwritten(tmp_path, caplog):
    x, y, g = _synthetic()
    cfg, path = TrainConfig(epochs=3, batch_size=64, seed=0), tmp_path / "c.pt"
    with pytest.raises(_Stop):
        fit(build_model("mlp", feat_dim=5, seq_len=6, seed=0), x, y, g, cfg, _stop_after(2), checkpoint=path)
    others = {"lr": (x, y, TrainConfig(epochs=3, batch_size=64, seed=0, lr=1e-2)),
              "labels": (x, y[::-1].copy(), cfg)}
    for what, (xs, ys, c) in others.items():
        with caplog.at_level(logging.WARNING, logger="tcl.train.checkpoint"):
            h = fit(build_model("mlp", feat_dim=5, seq_len=6, seed=0), xs, ys, g, c, checkpoint=path)
        assert h.start_epoch == 0, what
        assert "checkpoint of other data or settings" in caplog.text
        caplog.clear()
    path.write_bytes(b"not a checkpoint")
    with caplog.at_level(logging.WARNING, logger="tcl.train.checkpoint"):
        assert fit(build_model("mlp", feat_dim=5, seq_len=6, seed=0), x, y, g, cfg, checkpoint=path).start_epoch == 0
    assert "unreadable checkpoint" in caplog.text
    assert torch.load(path, weights_only=True)["epochs_done"] == 3  # overwritten by the training that ran
