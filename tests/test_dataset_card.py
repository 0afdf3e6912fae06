"""The dataset card's figures on a tiny real store (two platforms, paired programs, a retest)."""

from __future__ import annotations

import json
from datetime import datetime, timedelta, timezone

import pytest

from tcl.data.card import dataset_card, render_markdown, write_card
from tcl.data.schema import records_to_table
from tcl.data.store import RecordStore

T0 = datetime(2026, 11, 22, 12, tzinfo=timezone.utc)


def _rows(platform, task, op_type, n, scale=1.0, fail=(), start=T0):
    return [{"record_id": f"{platform}/{task}/{i}", "platform": platform, "source": "metaschedule",
             "network": "resnet50@224", "task_key": task, "task_name": task, "task_weight": 1, "op_type": op_type,
             "target": "{}", "steps": [], "program": f"[{task!r},{i}]", "run_secs": [] if i in fail else [1e-3],
             "mean_sec": None if i in fail else 1e-3 * (i + 1) * scale,
             "median_sec": None if i in fail else 1e-3 * (i + 1) * scale,
             "error_code": "build_error" if i in fail else "", "error_msg": "",
             "collected_at": start + timedelta(seconds=10 * (i // 2)), "load_avg": 1.0 + i % 2}
            for i in range(n)]


@pytest.fixture
def stores(tmp_path):
    records, retest = RecordStore(tmp_path / "records"), RecordStore(tmp_path / "retest")
    for platform, scale, fail in (("a", 1.0, (5,)), ("b", 2.0, (0, 1))):
        records.append(platform, "0x1", records_to_table(_rows(platform, "0x1", "conv2d", 6, scale, fail)))
        records.append(platform, "0x2", records_to_table(_rows(platform, "0x2", "dense", 4, scale)))
        records.save_tasks(platform, [
            {"task_key": "0x1", "network": "resnet50@224", "weight": 1, "networks": {"resnet50@224": 1,
                                                                                     "resnet18@224": 2}},
            {"task_key": "0x2", "network": "bert_tiny@128", "weight": 1, "networks": {"bert_tiny@128": 1}}])
    return records, retest, tmp_path


def test_card_counts_tasks_failures_and_paired_programs(stores):
    records, retest, tmp = stores
    card = dataset_card(records.root, retest.root, tmp / "dvc.lock")
    assert card["tasks"] == 2 and card["tasks_by_op_type"] == {"conv2d": 1, "dense": 1}
    assert card["tasks_by_network"] == {"bert_tiny": 1, "resnet18": 1, "resnet50": 1}
    assert card["platforms"]["a"]["programs"] == 10 and card["platforms"]["a"]["failed"] == 1
    assert card["platforms"]["b"]["failed_by_code"] == {"build_error": 2}
    assert card["platforms"]["a"]["programs_per_task"] == {"min": 4, "median": 5.0, "max": 6}
    # programs 0, 1 (b failed) and 5 (a failed) of task 0x1 did not run on both: 3 + 4 paired
    assert card["paired_programs"] == 7
    assert card["platforms"]["a"]["latency_ms"]["min"] == pytest.approx(1.0)
    assert card["platforms"]["b"]["latency_ms"]["max"] == pytest.approx(12.0)
    # 0x1: batches at 0, 10, 20 s; 0x2: 0, 10 s -> 30 s of measuring
    assert card["platforms"]["a"]["measuring_hours"] == pytest.approx(30 / 3600, abs=1e-3)
    assert card["retest"] == {} and card["dvc_data_version"] == "not locked yet"
    assert "Not measured yet" in render_markdown(card)


def test_a_collection_of_its_own_is_counted_beside_the_main_store(stores):
    records, retest, tmp = stores
    gpu = RecordStore(tmp / "records_gpu")
    gpu.append("gpu-x", "0x1", records_to_table(_rows("gpu-x", "0x1", "conv2d", 3, fail=(2,))))
    card = dataset_card(records.root, retest.root, tmp / "dvc.lock", other_stores=[gpu.root, tmp / "absent"])
    assert "gpu-x" not in card["platforms"] and card["paired_programs"] == 7  # the main store's figures stand
    row = card["other_stores"][str(gpu.root)]["platforms"]["gpu-x"]
    assert (row["programs"], row["failed"]) == (3, 1) and card["other_stores"][str(gpu.root)]["tasks"] == 1
    assert card["other_stores"][str(tmp / "absent")] == {"tasks": 0, "platforms": {}}
    assert card["programs_total"] == 10 + 10 + 3
    text = render_markdown(card)
    assert f"| gpu-x ({gpu.root}) | 3 | 1" in text and "23 programs in all" in text


def test_retest_correlation_is_one_for_the_same_ranking_and_lower_for_a_shuffled_one(stores):
    records, retest, tmp = stores
    same = _rows("a", "0x1", "conv2d", 6, scale=1.1, fail=(5,))  # every latency 10% slower: same ranking
    retest.append("a", "0x1", records_to_table(same))
    shuffled = _rows("b", "0x1", "conv2d", 6, scale=2.0, fail=(0, 1))
    for row, secs in zip(shuffled[2:], (6e-3, 10e-3, 8e-3, 4e-3)):  # originals 6, 8, 10, 12 ms
        row["median_sec"] = row["mean_sec"] = secs
    retest.append("b", "0x1", records_to_table(shuffled))
    card = dataset_card(records.root, retest.root, tmp / "dvc.lock")
    a, b = card["retest"]["a"], card["retest"]["b"]
    assert a["n"] == 5 and a["spearman_latency"] == pytest.approx(1.0) and a["spearman_label"] == pytest.approx(1.0)
    assert a["median_rel_diff"] == pytest.approx(0.1)
    assert b["n"] == 4 and b["spearman_latency"] < 0.5
    (tmp / "dvc.lock").write_text("stages:\n  collect:\n    outs:\n    - path: data/records\n      md5: abc.dir\n")
    card = dataset_card(records.root, retest.root, tmp / "dvc.lock")
    assert card["dvc_data_version"] == "abc.dir"
    write_card(card, tmp / "r" / "dataset.md", tmp / "r" / "dataset.json")
    assert "abc.dir" in (tmp / "r" / "dataset.md").read_text()
    assert json.loads((tmp / "r" / "dataset.json").read_text())["retest"]["a"]["n"] == 5


def test_repository_footprint_attributes_the_remote_and_clones_for_real(stores):
    import subprocess

    records, retest, tmp = stores
    remote = tmp / "dvc-store" / "files" / "md5"
    for md5, size in (("aa" + "1" * 30, 300), ("bb" + "2" * 30, 500), ("cc" + "3" * 30, 70)):
        (remote / md5[:2]).mkdir(parents=True, exist_ok=True)
        (remote / md5[:2] / md5[2:]).write_bytes(b"x" * size)
    listing = [{"md5": "bb" + "2" * 30, "relpath": "platform=a/part.parquet"}]
    (remote / "dd").mkdir()
    (remote / "dd" / ("4" * 30 + ".dir")).write_text(json.dumps(listing))
    (tmp / "dvc.lock").write_text(
        "stages:\n  collect:\n    outs:\n    - path: data/records\n      md5: dd" + "4" * 30 + ".dir\n"
        "  train@a:\n    outs:\n    - path: models/a\n      md5: aa" + "1" * 30 + "\n")
    for cmd in (["init", "-q"], ["add", "dvc.lock", "dvc-store"],
                ["-c", "user.email=t@e", "-c", "user.name=t", "commit", "-q", "-m", "x"]):
        subprocess.run(["git", *cmd], cwd=tmp, check=True)
    card = dataset_card(records.root, retest.root, tmp / "dvc.lock", tmp / "dvc-store", repo_dir=tmp)
    repo = card["repository"]
    listing_bytes = len(json.dumps(listing))
    assert repo["remote_by_output"] == {"data/records": 500 + listing_bytes, "models": 300,
                                        "(not in dvc.lock: earlier versions)": 70}
    assert repo["remote_raw_bytes"] == 500 + listing_bytes and repo["remote_derived_bytes"] == 300
    per = repo["bytes_per_10k_programs"]   # 20 records in 4 parts, no pools in this store
    parts = [p for name in ("a", "b") for p in records.parts(name)]
    assert per == {"records_per_platform": round(1e4 * sum(p.stat().st_size for p in parts) / 20), "pool": 0}
    assert repo["git"]["pack_bytes"] > 0 and repo["git"]["clone_seconds"] > 0
    assert repo["git"]["clone_bytes"] > 870   # the checked-out remote and the clone's .git
    assert "## Repository" in render_markdown(card) and "| models | 0.00 |" in render_markdown(card)


def test_footprint_reads_a_directory_listing_from_the_local_cache_before_the_push(tmp_path):
    """The card runs inside `dvc repro`, before `dvc push`: the new version's listing is only in
    .dvc/cache, while most of its files were pushed with the previous version."""
    from tcl.data.footprint import UNREFERENCED, remote_by_output

    remote = tmp_path / "dvc-store" / "files" / "md5"
    (remote / "bb").mkdir(parents=True)
    (remote / "bb" / ("2" * 30)).write_bytes(b"x" * 500)
    cache = tmp_path / ".dvc" / "cache" / "files" / "md5" / "dd"
    cache.mkdir(parents=True)
    (cache / ("5" * 30 + ".dir")).write_text(json.dumps([{"md5": "bb" + "2" * 30, "relpath": "p/part.parquet"}]))
    (tmp_path / "dvc.lock").write_text(
        "stages:\n  collect:\n    outs:\n    - path: data/records\n      md5: dd" + "5" * 30 + ".dir\n")
    assert remote_by_output(tmp_path / "dvc.lock", tmp_path / "dvc-store") == {"data/records": 500}
    (cache / ("5" * 30 + ".dir")).unlink()
    assert remote_by_output(tmp_path / "dvc.lock", tmp_path / "dvc-store") == {UNREFERENCED: 500}


def test_pruning_the_remote_removes_earlier_versions_only_and_refuses_without_a_listing(tmp_path):
    from tcl.data.footprint import prune_remote

    remote = tmp_path / "dvc-store" / "files" / "md5"
    objects = {"bb" + "2" * 30: 500, "aa" + "1" * 30: 300, "cc" + "3" * 30: 70}   # a record part, a model, old
    for md5, size in objects.items():
        (remote / md5[:2]).mkdir(parents=True, exist_ok=True)
        (remote / md5[:2] / md5[2:]).write_bytes(b"x" * size)
    listing = remote / "dd" / ("4" * 30 + ".dir")
    listing.parent.mkdir()
    listing.write_text(json.dumps([{"md5": "bb" + "2" * 30, "relpath": "platform=a/part.parquet"}]))
    (tmp_path / "dvc.lock").write_text(
        "stages:\n  collect:\n    outs:\n    - path: data/records\n      md5: dd" + "4" * 30 + ".dir\n"
        "  train@a:\n    outs:\n    - path: models/a\n      md5: aa" + "1" * 30 + "\n")
    kept = {p: p.read_bytes() for p in (remote / "bb" / ("2" * 30), remote / "aa" / ("1" * 30), listing)}
    moved = listing.read_bytes()
    listing.unlink()   # the records' file list is missing: their part would look unreferenced
    with pytest.raises(RuntimeError, match="data/records"):
        prune_remote(tmp_path / "dvc.lock", tmp_path / "dvc-store")
    assert (remote / "cc" / ("3" * 30)).exists() and (remote / "bb" / ("2" * 30)).exists()
    listing.write_bytes(moved)
    assert prune_remote(tmp_path / "dvc.lock", tmp_path / "dvc-store") == (1, 70)
    assert not (remote / "cc" / ("3" * 30)).exists()
    assert all(p.read_bytes() == b for p, b in kept.items())
    assert prune_remote(tmp_path / "dvc.lock", tmp_path / "dvc-store") == (0, 0)
