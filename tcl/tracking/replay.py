"""Write run records (tcl/tracking/run_record.py, built by tcl.records) into the MLflow store: the registry rebuilt on a fresh clone.

Additive and idempotent. A record whose run is already in the experiment (a run tagged with
its `tcl.record` key, or a run of the same name: the original, in the store that logged it)
is skipped with its nested runs; a version already registered is kept as it is. So on the
machine that trained, where the store holds the real runs, nothing is added, and a second
rebuild adds nothing. Versions get the recorded numbers: if the store's next number would
be lower (earlier versions whose bundles are not in this commit), the missing numbers are
filled with empty placeholder versions tagged `tcl.placeholder`, so that `name/3` is the
third version everywhere.

`rebuild` returns the registry manifest: every recorded version with its tags and aliases,
checked against the store. Its content depends on the records only, so it is the same on
every clone (the register stage's DVC output).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Callable

import mlflow
import numpy as np
from mlflow.entities import Metric, Param

from .run_record import Registration, RunRecord
from ..models.bundle import ModelBundle
from . import registry
from .runs import require_enabled

RECORD_TAG = "tcl.record"
# Tags that differ between clones for the same records: kept in the store, not in the manifest.
LOCAL_TAGS = ("git_commit",)


def rebuild(records: list[RunRecord], params: dict[str, Any], root: str | Path = ".",
            log: Callable[[str], None] = print) -> dict[str, Any]:
    """Replay `records` into the configured store (see the module docstring); returns the manifest."""
    require_enabled(params, "rebuilding the model registry")
    root = Path(root)
    client = mlflow.MlflowClient()
    experiment = mlflow.get_experiment_by_name((params.get("tracking") or {}).get("experiment", "tcl"))
    added = skipped = 0
    for record in records:
        if _logged(client, experiment.experiment_id, record):
            skipped += 1
            continue
        _replay(client, record, root, parent_id=None)
        added += 1
    log(f"registry rebuild: {added} run(s) replayed from the pipeline's records, {skipped} already in "
        f"{mlflow.get_tracking_uri()}")
    return manifest(records, log)


def _logged(client, experiment_id: str, record: RunRecord) -> bool:
    for filt in (f"tags.`{RECORD_TAG}` = '{record.key}'", f"tags.`mlflow.runName` = '{record.name}'"):
        if client.search_runs([experiment_id], filter_string=filt, max_results=1):
            return True
    return False


def _replay(client, record: RunRecord, root: Path, parent_id: str | None) -> None:
    tags = {**record.tags, RECORD_TAG: record.key, "tcl.rebuilt_from": "the pipeline's DVC-tracked products"}
    run = mlflow.start_run(run_name=record.name, tags=tags, nested=parent_id is not None)
    try:
        run_id = run.info.run_id
        params = [Param(k, str(v)[:6000]) for k, v in record.params.items()]
        for i in range(0, len(params), 100):
            client.log_batch(run_id, params=params[i:i + 100])
        metrics = [Metric(k, v, 0, step) for k, points in record.metrics.items() for step, v in points]
        for i in range(0, len(metrics), 1000):
            client.log_batch(run_id, metrics=metrics[i:i + 1000])
        for path, artifact_path in record.artifacts:
            full = root / path
            if full.is_dir():
                mlflow.log_artifacts(str(full), artifact_path=artifact_path)
            elif full.exists():
                mlflow.log_artifact(str(full), artifact_path=artifact_path)
        for reg in record.registrations:
            _register(reg, root)
        for child in record.children:
            _replay(client, child, root, parent_id=run_id)
    except BaseException:
        mlflow.end_run("FAILED")
        raise
    mlflow.end_run()


def _register(reg: Registration, root: Path) -> None:
    """`reg` as version `reg.version` of `reg.name` in the active run (kept if it exists), with its aliases."""
    have = [int(v.version) for v in registry.versions(reg.name)]
    wanted = int(reg.version)
    if wanted in have:
        return
    for missing in range(max(have, default=0) + 1, wanted):
        _placeholder(reg.name, missing)
    bundle_dir = root / reg.bundle_dir
    bundle = ModelBundle.load(bundle_dir)
    rows, cols = bundle.featurizer.feature_shape
    version = registry.log_version(bundle, bundle_dir, reg.name, np.zeros((4, rows, cols), np.float32),
                                   {**reg.tags, "tcl.bundle": reg.bundle_dir})
    if version != reg.version:
        raise RuntimeError(f"rebuilding {reg.name}: the store gave version {version}, the pipeline recorded "
                           f"{reg.version} (registered meanwhile by another process?)")
    for alias in reg.aliases:
        registry.set_alias(reg.name, alias, version)


def _placeholder(name: str, version: int) -> None:
    """An empty version `version` of `name`: the pipeline registered it once, its bundle is not in this commit."""
    client = mlflow.MlflowClient()
    if not registry.versions(name):
        client.create_registered_model(name)
    mv = client.create_model_version(name, source="placeholder:not-in-this-commit", tags={
        "tcl.placeholder": "an earlier version whose bundle is not in this commit (see git history of dvc.lock)"})
    if int(mv.version) != version:
        raise RuntimeError(f"placeholder for {name}: got version {mv.version}, wanted {version}")


def manifest(records: list[RunRecord], log: Callable[[str], None] = print) -> dict[str, Any]:
    """The recorded registry (versions, tags without the clone-specific ones, aliases), each entry checked
    against the store; a mismatch is logged (e.g. `flows.promote` moved an alias since), not fatal."""
    models: dict[str, Any] = {}
    for record in records:
        for run in record.walk():
            for reg in run.registrations:
                entry = models.setdefault(reg.name, {"versions": {}, "aliases": {}})
                entry["versions"][reg.version] = {"bundle": reg.bundle_dir, "run": run.name,
                                                  "tags": {k: v for k, v in sorted(reg.tags.items())
                                                           if k not in LOCAL_TAGS}}
                for alias in reg.aliases:
                    entry["aliases"][alias] = reg.version
    for name, entry in models.items():
        for alias, version in entry["aliases"].items():
            held = registry.alias(name, alias)
            if held is None or str(held.version) != version:
                log(f"note: {name}@{alias} is version {held.version if held else 'none'} in this store; "
                    f"the pipeline's records say {version}")
    return {"registered_models": dict(sorted(models.items())),
            "runs": sorted(r.key for r in records)}


def write_manifest(data: dict[str, Any], path: str | Path) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=1, sort_keys=True) + "\n")
    return path
