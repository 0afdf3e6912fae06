"""The forgetting picture (TCL Fig. 8) as a PNG: top-1 on every platform seen so far, epoch by epoch.

One panel per watched model (CKD: the AC with its laterals, and the KB), one line per
platform, the epochs of all phases end to end; KD phases are shaded, every phase is
named at the top. A platform's line starts at the phase that first sees it.
"""

from __future__ import annotations

import io
from collections import defaultdict
from pathlib import Path

from ..data.store import atomic_write_bytes
from .base import PhaseRecord


def curves(history: list[PhaseRecord]) -> dict[str, dict[str, tuple[list[int], list[float]]]]:
    """{model: {platform: (global epochs, top-1)}} from the per-epoch metrics ("<model>_top1.<platform>")."""
    out: dict[str, dict[str, tuple[list[int], list[float]]]] = defaultdict(dict)
    step = 0
    for record in history:
        for metrics in record.metrics:
            step += 1
            for key, value in metrics.items():
                model, platform = key.split("_top1.", 1)
                xs, ys = out[model].setdefault(platform, ([], []))
                xs.append(step)
                ys.append(value)
    return dict(out)


def plot_forgetting(history: list[PhaseRecord], path: str | Path, title: str) -> Path:
    """Write the PNG (atomically) and return its path; needs per-epoch metrics (a Monitor) in `history`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    lines = curves(history)
    if not lines:
        raise ValueError("the history has no per-epoch top-1: run the sequence with a Monitor to plot forgetting")
    fig, axes = plt.subplots(1, len(lines), figsize=(6 * len(lines), 4), squeeze=False)
    for ax, (model, per_platform) in zip(axes[0], sorted(lines.items())):
        start = 0
        for record in history:
            end = start + len(record.metrics)
            if record.phase == "kd":
                ax.axvspan(start + 0.5, end + 0.5, color="0.9")
            ax.text((start + end + 1) / 2, 1.01, f"{record.phase} {record.platform}", ha="center", va="bottom",
                    fontsize=7, rotation=20, transform=ax.get_xaxis_transform())
            start = end
        for platform, (xs, ys) in per_platform.items():
            ax.plot(xs, ys, marker=".", label=platform)
        ax.set_xlabel("epoch (all phases end to end)")
        ax.set_ylabel(f"{model}: held-out top-1 (TCL eq. 12)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title, y=1.08)
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    plt.close(fig)
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(path, buf.getvalue())
    return path
