"""Where a benchmark writes: a scratch directory unless asked to update the committed report.

The reports under reports/ are the figures the README quotes (tracked in git and DVC); a quick
look with fewer seeds or epochs must not overwrite them. Without flags a benchmark writes under
tmp/bench/ (gitignored); `--update-report` writes the committed report, `--out` anywhere.

Every report names its provenance (`provenance`, `provenance_line`): the data version it was
computed from, as dvc.lock records it, and the command that wrote it, so that a figure quoted
from it can be traced and rerun (tests/test_report_provenance.py reads it back).
"""

from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path
from typing import Any

import yaml

SCRATCH = Path("tmp") / "bench"
REPO = Path(__file__).resolve().parent.parent
# The data version is the collected records' md5 (as in the dataset card); the ingested tuning runs and
# the features derived from both change without it, so a report names theirs too.
DATA_OUTPUTS = ("data/records", "data/tuning", "data/features")
NOT_LOCKED = "not locked yet"


def mean_std(values) -> tuple[float, float]:
    """The mean and the sample standard deviation (0 for a single value) every report gives over seeds/rounds."""
    import numpy as np

    vals = np.asarray(values, dtype="float64")
    return float(vals.mean()), float(vals.std(ddof=1)) if len(vals) > 1 else 0.0


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


def add_epochs_args(ap: argparse.ArgumentParser, example: str) -> None:
    """--epochs (every model; default each model's recipe) and --epochs-for MODEL=N overrides."""
    ap.add_argument("--epochs", type=int, default=None, help="epochs of every gradient-trained model "
                    "(default: each model's recipe, params.yaml train.optimizer_by_model.<model>.epochs or "
                    "train.epochs)")
    ap.add_argument("--epochs-for", nargs="*", default=[], metavar="MODEL=N", help=f"per-model epochs, e.g. {example}")


def epochs_by_model(args: argparse.Namespace, params: dict, known: list[str] | dict) -> dict[str, int]:
    """Epochs of each of `args.models`: --epochs (else the model's recipe, as the train stage trains it), then
    --epochs-for; a model named there but not in --models this time is ignored (its cells stay as they are); an
    unknown one stops the run."""
    from tcl.train.loop import TrainConfig

    epochs_of = {m: args.epochs or TrainConfig.from_params(params, m).epochs for m in args.models}
    for item in args.epochs_for:
        model, _, n = item.partition("=")
        if model not in known or not n.isdigit():
            raise SystemExit(f"--epochs-for {item!r}: expected MODEL=N with MODEL one of {sorted(known)}")
        if model in epochs_of:
            epochs_of[model] = int(n)
    return epochs_of


def locked_md5s(lock: Path = REPO / "dvc.lock", paths: tuple[str, ...] = DATA_OUTPUTS) -> dict[str, str]:
    """The md5 dvc.lock records for each of `paths` (whichever stage outputs it), NOT_LOCKED where none does."""
    stages = ((yaml.safe_load(lock.read_text()) or {}).get("stages") or {}) if lock.exists() else {}
    found = {o["path"]: str(o.get("md5", NOT_LOCKED)) for stage in stages.values() for o in stage.get("outs") or []}
    return {p: found.get(p, NOT_LOCKED) for p in paths}


def command_line(script: str | Path, argv: list[str] | None = None) -> str:
    """`python <script> <argv>` (the script's path from the repository root, argv quoted for a shell;
    sys.argv[1:] unless given): the command that reruns the report."""
    path = Path(script).resolve()
    shown = path.relative_to(REPO) if path.is_relative_to(REPO) else path
    return f"python {shown.as_posix()} {shlex.join(sys.argv[1:] if argv is None else argv)}".rstrip()


def provenance(script: str | Path, argv: list[str] | None = None, lock: Path = REPO / "dvc.lock") -> dict[str, Any]:
    """What a report records about where it came from: `data_version`, `data_outputs` and `command`."""
    outputs = locked_md5s(lock)
    return {"data_version": outputs["data/records"], "data_outputs": outputs, "command": command_line(script, argv)}


def provenance_line(prov: dict[str, Any]) -> str:
    """The provenance as one Markdown line (a report's last line)."""
    others = "; ".join(f"{p} `{m}`" for p, m in prov.get("data_outputs", {}).items() if p != "data/records")
    return (f"Data version `{prov['data_version']}` (dvc.lock md5 of data/records{'; ' + others if others else ''}); "
            f"command: `{prov['command']}`")


def write_report(base: Path, report: dict[str, Any], title: str, md: str, plot, tracking) -> None:
    """`base`.json, .md (under `title`) and .png (drawn by `plot(report, path)`), each logged to the open MLflow run."""
    import json

    from tcl.data.store import atomic_write_bytes

    atomic_write_bytes(base.with_suffix(".json"), json.dumps(report, indent=1).encode())
    atomic_write_bytes(base.with_suffix(".md"), f"# {title}\n\n{md}".encode())
    plot(report, base.with_suffix(".png"))
    for suffix in (".json", ".md", ".png"):
        tracking.log_artifact(str(base.with_suffix(suffix)))


def composition_text(comp: dict[str, Any]) -> str:
    """A held-out split's composition (tcl.train.evaluate.composition) in one phrase for a report; top-k ranks
    only tasks with more than one program (reports before stop 39 counted every task)."""
    ranked = comp.get("ranked_tasks")
    tasks = f"{comp['tasks']} tasks" + (f" ({ranked} ranked: more than one program)" if ranked is not None else "")
    return (f"{tasks}, {comp['programs']} programs, {len(comp['networks'])} network instances; the 5 heaviest "
            f"ranked tasks carry {comp['eq12_weight_share_top5_tasks']:.0%} of eq. 12's weight")
