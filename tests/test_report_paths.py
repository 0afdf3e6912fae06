"""README paths that write or show reports: curves that show a single point, benchmarks that keep
their hands off the committed reports, a `dvc metrics show` table one can read, and progress
from training loops that run long."""

from __future__ import annotations

import json
import numbers
import sys
import time
from types import SimpleNamespace

import numpy as np
import pytest
import yaml

from conftest import REPO


def test_a_tuning_curve_with_a_single_point_shows():
    """A short run has one finite estimate: a step line through one point draws nothing, so each
    point is marked; the pixel at the point has the curve's colour in both panels."""
    from matplotlib.colors import to_rgb

    from tcl.tvm.curve import CurvePoint
    from tcl.tvm.plot import draw_curves

    curve = [CurvePoint(8, 1.5, float("nan")), CurvePoint(17, 3.0, 0.0021)]  # NaN until every task is measured
    fig = draw_curves([SimpleNamespace(name="tcl", result=SimpleNamespace(curve=curve))], "one point")
    fig.canvas.draw()
    pixels = np.asarray(fig.canvas.buffer_rgba())[..., :3].astype(int)
    for ax in fig.axes:
        (line,) = ax.lines
        x, y = ax.transData.transform(line.get_xydata()[0])
        row, col = pixels.shape[0] - int(round(y)), int(round(x))
        near = pixels[row - 2:row + 3, col - 2:col + 3].reshape(-1, 3)
        colour = np.array(to_rgb(line.get_color())) * 255
        assert np.abs(near - colour).sum(axis=1).min() < 40, f"{ax.get_xlabel()}: the single point is not drawn"


@pytest.mark.parametrize("script,report", [("bench_transfer", "reports/transfer"),
                                           ("eval_sampling", "reports/sampling"),
                                           ("bench_models", "reports/bench_models")])
def test_a_benchmark_writes_to_scratch_unless_asked_to_update_the_report(script, report, monkeypatch, capsys):
    import argparse
    import importlib

    from benchmarks._out import add_out_args, out_path

    ap = argparse.ArgumentParser()
    add_out_args(ap, report)
    name = report.split("/")[-1]
    assert out_path(ap.parse_args([]), report).as_posix() == f"tmp/bench/{name}"
    assert out_path(ap.parse_args(["--update-report"]), report).as_posix() == report
    assert out_path(ap.parse_args(["--out", "elsewhere"]), report).as_posix() == "elsewhere"
    with pytest.raises(SystemExit):
        ap.parse_args(["--out", "x", "--update-report"])  # one or the other
    assert "/tmp/" in (REPO / ".gitignore").read_text().split()  # the scratch path is not committed

    module = importlib.import_module(f"benchmarks.{script}")  # the script's own parser offers both
    monkeypatch.setattr(sys, "argv", [script, "--help"])
    with pytest.raises(SystemExit):
        module.main()
    text = " ".join(capsys.readouterr().out.split())
    assert "--update-report" in text and f"default tmp/bench/{name}" in text, text


# The committed full report of each stage that declares metrics, and its headline file.
REPORTS = {"ingest_tuning": "reports/tuning_ingest.json", "validate": "reports/validation/zen4-avx2-1c.json",
           "dataset_card": "reports/dataset.json", "sample": "reports/sample/zen4-avx2-1c.json",
           "train": "reports/train/zen4-avx2-1c.json", "transfer": "reports/transfer/stage.json",
           "tune": "reports/tune/local-1c.json"}


def test_dvc_metrics_are_a_few_headline_figures_per_stage(tmp_path):
    """Every stage's dvc.yaml metrics file is its headline file (reports/metrics/), and the headline
    figures of the committed reports are a few numbers per stage: a table of ~20 columns, not 600."""
    from tcl.tracking.headline import HEADLINES, write_headline

    stages = yaml.safe_load((REPO / "dvc.yaml").read_text())["stages"]
    declared = {name: [next(iter(m)) for m in (stage.get("do", stage).get("metrics") or [])]
                for name, stage in stages.items()}
    declared = {name: paths for name, paths in declared.items() if paths}
    assert set(declared) == set(HEADLINES) == set(REPORTS), declared
    for name, paths in declared.items():
        assert paths in ([f"reports/metrics/{name}.json"], [f"reports/metrics/{name}-${{item}}.json"]), (name, paths)

    columns = set()
    for name, report in REPORTS.items():
        figures = json.loads(write_headline(name, REPO / report, tmp_path / f"{name}.json").read_text())
        # at most 7: train's has one per model of train.models (tcl, mlp, xgb, pacm, tenset_mlp, tcl_stores)
        # and the random floor
        assert 1 <= len(figures) <= 7 and all(isinstance(v, numbers.Number) for v in figures.values()), figures
        columns |= set(figures)
    assert len(columns) <= 21, sorted(columns)
    assert json.loads((tmp_path / "train.json").read_text())["tcl.test_top1"] == pytest.approx(
        json.loads((REPO / REPORTS["train"]).read_text())["tcl"]["test_top1_ratio_of_sums"])


def test_training_past_the_delay_shows_a_bar_per_epoch_and_short_fits_stay_quiet(monkeypatch, capsys):
    import torch

    from tcl.train import loop

    rng = np.random.default_rng(0)
    x, labels, groups = rng.normal(size=(64, 4)), rng.random(64), np.repeat(np.arange(4), 16)

    def model():
        return torch.nn.Sequential(torch.nn.Linear(4, 1), torch.nn.Flatten(0))

    loop.fit(model(), x, labels, groups, loop.TrainConfig(epochs=3, batch_size=16))
    assert "epoch" not in capsys.readouterr().err  # done well within PROGRESS_AFTER_S: no bar
    monkeypatch.setattr(loop, "PROGRESS_AFTER_S", 0.0)  # as if every epoch came after the delay
    slow = lambda: (time.sleep(0.05), torch.zeros(()))[1]  # noqa: E731  (0.2 s epochs: the bar redraws each)
    loop.fit(model(), x, labels, groups, loop.TrainConfig(epochs=3, batch_size=16), extra_loss=slow)
    err = capsys.readouterr().err
    assert "train" in err and "1/3" in err and "2/3" in err and "loss=" in err, err
