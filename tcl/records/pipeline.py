"""Every run record of the committed pipeline, in the order the stages ran."""

from __future__ import annotations

from pathlib import Path

from ..tracking.names import CHAMPION
from .lock import Lock
from ..tracking.run_record import Registration, RunRecord
from .stages import sample_records, tune_records, validate_records
from .train import joint_train_records, kb_prior_records, train_records
from .transfer import transfer_records


def pipeline_records(root: str | Path = ".") -> list[RunRecord]:
    """validate, sample, train, train_joint, kb_prior, transfer, tune: what `dvc.lock` says ran, from the products
    it recorded."""
    root = Path(root)
    lock = Lock(root)
    records = [*validate_records(root, lock), *sample_records(root, lock), *train_records(root, lock),
               *joint_train_records(root, lock), *kb_prior_records(root, lock), *transfer_records(root, lock),
               *tune_records(root, lock)]
    stand_in_champions(records)
    return records


def rebuild_registry(params: dict, root: str | Path = ".", log=print) -> dict:
    """Replay every record of the pipeline committed at `root` into the MLflow store (the register
    stage; tcl.tracking.replay); returns the registry manifest."""
    from ..tracking.replay import rebuild

    return rebuild(pipeline_records(root), params, root, log=log)


STAND_IN = "champion.stand_in"


def _registrations(records: list[RunRecord]) -> list[Registration]:
    return [r for rec in records for r in (*rec.registrations, *_registrations(rec.children))]


def stand_in_champions(records: list[RunRecord]) -> None:
    """A clone can serve only the bundles its commit holds. When the gate refused the committed version
    of a model and kept an older champion whose bundle a later run replaced, no recorded version holds
    `champion`; then the newest committed version takes the alias, tagged `champion.stand_in` with why,
    so `models:/<name>@champion` (what tuning asks for) loads on every clone."""
    by_name: dict[str, list[Registration]] = {}
    for reg in _registrations(records):
        by_name.setdefault(reg.name, []).append(reg)
    for regs in by_name.values():
        refused = [r for r in regs if r.tags.get("promotion.decision") == "refused"]
        if not refused or any(CHAMPION in r.aliases for r in regs):
            continue
        newest = max(regs, key=lambda r: int(r.version))
        newest.aliases = [*newest.aliases, CHAMPION]
        newest.tags = {**newest.tags, STAND_IN: "the gate kept an earlier champion whose bundle is not in this "
                       "commit; the newest committed version stands in"}
