"""Where a benchmark writes: a scratch directory unless asked to update the committed report.

The reports under reports/ are the figures the README quotes (tracked in git and DVC); a quick
look with fewer seeds or epochs must not overwrite them. Without flags a benchmark writes under
tmp/bench/ (gitignored); `--update-report` writes the committed report, `--out` anywhere.
"""

from __future__ import annotations

import argparse
from pathlib import Path

SCRATCH = Path("tmp") / "bench"


def add_out_args(ap: argparse.ArgumentParser, report: str) -> None:
    """--out and --update-report (one or the other) for a benchmark whose committed report is `report`."""
    group = ap.add_mutually_exclusive_group()
    group.add_argument("--out", default=None, help=f"where to write (default {SCRATCH / Path(report).name}, "
                                                   "a gitignored scratch path)")
    group.add_argument("--update-report", action="store_true", help=f"overwrite the committed report {report}")


def out_path(args: argparse.Namespace, report: str) -> Path:
    if args.out:
        return Path(args.out)
    return Path(report) if args.update_report else SCRATCH / Path(report).name
