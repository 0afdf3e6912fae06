"""Every run record of the committed pipeline, in the order the stages ran."""

from __future__ import annotations

from pathlib import Path

from .lock import Lock
from .model import RunRecord
from .stages import sample_records, tune_records, validate_records
from .train import train_records
from .transfer import transfer_records


def pipeline_records(root: str | Path = ".") -> list[RunRecord]:
    """validate, sample, train, transfer, tune: what `dvc.lock` says ran, from the products it recorded."""
    root = Path(root)
    lock = Lock(root)
    return [*validate_records(root, lock), *sample_records(root, lock), *train_records(root, lock),
            *transfer_records(root, lock), *tune_records(root, lock)]
