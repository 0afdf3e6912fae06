"""Tuning curves as a PNG: estimated network latency vs trials and vs wall seconds."""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def draw_curves(runs, title: str):
    """The figure: one step curve per run, each point marked, so that a run with a single
    finite estimate (a short `--trials`) still shows."""
    fig, (by_trial, by_time) = plt.subplots(1, 2, figsize=(11, 4))
    for run in runs:
        pts = [p for p in run.result.curve if p.estimated_latency == p.estimated_latency]
        ms = [p.estimated_latency * 1e3 for p in pts]
        by_trial.plot([p.trial for p in pts], ms, label=run.name, drawstyle="steps-post", marker="o", markersize=4)
        by_time.plot([p.seconds for p in pts], ms, label=run.name, drawstyle="steps-post", marker="o", markersize=4)
    by_trial.set_xlabel("measured trials")
    by_time.set_xlabel("tuning wall time (s)")
    for ax in (by_trial, by_time):
        ax.set_ylabel("estimated network latency (ms)")
        ax.grid(alpha=0.3)
        ax.legend()
    fig.suptitle(title)
    fig.tight_layout()
    return fig


def plot_curves(runs, path: str | Path, title: str) -> Path:
    fig = draw_curves(runs, title)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path
