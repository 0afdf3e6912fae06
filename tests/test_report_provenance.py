"""Every report tells its provenance: the data version it was computed from and the command that wrote it.

The benchmarks write both through benchmarks/_out.py; a stage's report has them in dvc.lock. These
tests read them back from what a writer produces and from every committed report, so a writer that
drops them, or a report committed without them, fails here.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys

import pytest
import yaml

from conftest import REPO

DATA_VERSION = re.compile(r"data version\b[^\n]*?\b([0-9a-f]{32}\.dir)", re.IGNORECASE)
COMMAND = re.compile(r"command:?\s*`(python [^`\n]+)`", re.IGNORECASE)
PER_RUN = re.compile(r"/seed\d+/")   # a benchmark's per-seed, per-model run tables: the summary names them

# Committed reports that cannot carry a field yet, and why. A report that gains it must leave this list.
KNOWN_GAPS = {
    "reports/dataset.md": ("command", "the dataset_card stage's card; its command is the stage's, in dvc.lock "
                                      "(checked below): its writer, tcl/data/card.py, is a stage dependency"),
}


def committed_reports(suffix: str) -> list[str]:
    out = subprocess.run(["git", "ls-files", "reports"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    return [p for p in out.split()
            if p.endswith(suffix) and not PER_RUN.search(p) and not p.startswith("reports/metrics/")]


def stage_outputs() -> dict[str, str]:
    """Every output dvc.lock records -> the command of the stage that wrote it."""
    stages = yaml.safe_load((REPO / "dvc.lock").read_text())["stages"]
    return {o["path"]: stage["cmd"] for stage in stages.values() for o in stage.get("outs") or []}


def read_markdown(text: str) -> dict[str, str]:
    found = {}
    if m := DATA_VERSION.search(text):
        found["data_version"] = m.group(1)
    if m := COMMAND.search(text):
        found["command"] = m.group(1)
    return found


def _lock(tmp_path, **outs):
    stages = {stage: {"cmd": f"python -m flows.{stage}", "outs": [{"path": path, "md5": md5}]}
              for stage, (path, md5) in outs.items()}
    path = tmp_path / "dvc.lock"
    path.write_text(yaml.safe_dump({"schema": "2.0", "stages": stages}))
    return path


def test_provenance_names_the_locked_data_and_a_command_that_reruns_the_report(tmp_path):
    from benchmarks._out import NOT_LOCKED, provenance, provenance_line

    records, features = "0123456789abcdef0123456789abcdef.dir", "fedcba9876543210fedcba9876543210.dir"
    lock = _lock(tmp_path, collect=("data/records", records), featurize=("data/features", features))
    argv = ["--epochs", "3", "--note", "TCL: 3 epochs (a shared core)"]
    prov = provenance(REPO / "benchmarks" / "bench_models.py", argv, lock=lock)
    assert prov["data_version"] == records
    assert prov["data_outputs"] == {"data/records": records, "data/tuning": NOT_LOCKED, "data/features": features}
    assert prov["command"].startswith("python benchmarks/bench_models.py ")
    assert shlex.split(prov["command"])[2:] == argv  # pasted into a shell, it is the same call

    line = provenance_line(prov)
    assert read_markdown(line) == {"data_version": records, "command": prov["command"]}
    assert f"data/features `{features}`" in line

    unlocked = provenance(REPO / "benchmarks" / "bench_models.py", [], lock=tmp_path / "missing.lock")
    assert unlocked["data_version"] == NOT_LOCKED and "data_version" not in read_markdown(provenance_line(unlocked))


def test_the_data_version_is_the_one_the_dataset_card_names():
    from benchmarks._out import locked_md5s
    from tcl.data.card import dvc_data_version

    assert locked_md5s()["data/records"] == dvc_data_version(REPO / "dvc.lock")


def test_a_benchmark_summary_names_its_provenance(tmp_path, monkeypatch, capsys):
    """bench_tune.py --report-only on two finished runs: summary.md and summary.json name both."""
    from benchmarks import bench_tune
    from benchmarks._out import locked_md5s

    for model, ms in (("xgb", 2.0), ("random", 3.0)):
        run = tmp_path / "net" / "seed0" / model
        (run / "local-1c").mkdir(parents=True)
        row = {"cost_model": model, "trials": 65, "trial_budget": 64, "wall_s": 10.0, "final_est_ms": ms,
               "cost_model_share": 0.1, "tuned_ms": ms, "reference_ms": 2.0, "speedup_vs_reference": 2.0 / ms}
        (run / "local-1c.json").write_text(json.dumps({model: row}))
        (run / "local-1c" / "curves.csv").write_text(f"cost_model,trial,seconds,estimated_ms\n{model},64,8.0,{ms}\n")
    argv = ["--platform", "local-1c", "--networks", "net", "--trials", "64", "--seeds", "0", "--models", "xgb",
            "random", "--report-only", "--retime-rounds", "0", "--out", str(tmp_path)]
    monkeypatch.setenv("TCL_TRACKING", "off")
    monkeypatch.setattr(sys, "argv", ["benchmarks/bench_tune.py", *argv])
    bench_tune.main()
    capsys.readouterr()
    expected = {"data_version": locked_md5s()["data/records"],
                "command": "python benchmarks/bench_tune.py " + shlex.join(argv)}
    assert read_markdown((tmp_path / "summary.md").read_text()) == expected
    summary = json.loads((tmp_path / "summary.json").read_text())
    assert {k: summary[k] for k in expected} == expected and summary["data_outputs"] == locked_md5s()


@pytest.mark.parametrize("path", committed_reports(".md"))
def test_every_committed_report_names_its_data_version_and_command(path):
    found = read_markdown((REPO / path).read_text())
    missing = {"data_version", "command"} - set(found)
    gap = KNOWN_GAPS.get(path, ("", ""))[0]
    if gap:
        expected = {"data_version", "command"} if gap == "both" else {gap}
        assert missing == expected, f"{path}: KNOWN_GAPS says it lacks {sorted(expected)}, it lacks {sorted(missing)}"
    else:
        assert not missing, f"{path} does not name its {' and '.join(sorted(missing))} (benchmarks/_out.py)"
    if path in stage_outputs():
        assert stage_outputs()[path].startswith("python -m flows."), path


@pytest.mark.parametrize("path", [p for p in committed_reports(".json") if p not in stage_outputs()])
def test_every_committed_benchmark_summary_records_its_data_version_and_command(path):
    """The JSON a benchmark writes (a stage's JSON reports have theirs in dvc.lock)."""
    report = json.loads((REPO / path).read_text())
    if KNOWN_GAPS.get(path, ("",))[0] == "both":
        assert "command" not in report, f"{path} records its command now: take it off KNOWN_GAPS"
        return
    assert re.fullmatch(r"[0-9a-f]{32}\.dir", str(report.get("data_version"))), f"{path}: data_version"
    assert str(report.get("command", "")).startswith("python "), f"{path}: command"
