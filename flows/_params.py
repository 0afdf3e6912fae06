"""params.yaml as every flow reads it: loaded, then checked whole.

Each section is built into its settings object (each strict about unknown keys) and every
`tune.cost_models` name is parsed against the registries, so a typo anywhere fails the first stage
`dvc repro` starts, naming the key and the valid ones, not the stage (maybe hours later) that reads it.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tcl.collect.settings import check_collect_params
from tcl.compute import ComputeSettings
from tcl.config import load_params
from tcl.data.ingest import IngestSettings
from tcl.data.splits import SplitSettings
from tcl.data.tuning_dbs import TuningIngestSettings
from tcl.data.validation.suite import ValidateConfig
from tcl.deploy import check_deploy_keys
from tcl.features.settings import FeatureSettings
from tcl.models import MODELS
from tcl.sampling.settings import SamplingSettings
from tcl.tracking.runs import check_params as check_tracking_params
from tcl.train.evaluate import EvalSettings
from tcl.train.kb_prior import KbPriorSettings
from tcl.train.loop import TrainConfig
from tcl.transfer.settings import TransferSettings
from tcl.tvm.controller import ControllerSettings
from tcl.tvm.draft import DraftSettings
from tcl.tvm.guard import GuardSettings
from tcl.tvm.online import OnlineSettings
from tcl.tvm.stage import check_tune_params
from tcl.tvm.tuning import SearchSettings
from tcl.workloads.settings import WorkloadSettings

SECTION_SETTINGS = {"workloads": [WorkloadSettings], "ingest": [IngestSettings],
                    "tuning_ingest": [TuningIngestSettings], "features": [FeatureSettings],
                    "compute": [ComputeSettings], "validate": [ValidateConfig], "split": [SplitSettings],
                    "train": [TrainConfig, EvalSettings], "kb_prior": [KbPriorSettings], "sampling": [SamplingSettings],
                    "transfer": [TransferSettings],
                    "tune": [SearchSettings, OnlineSettings, DraftSettings, GuardSettings, ControllerSettings]}


def check_params(params: dict[str, Any]) -> None:
    """Build every present section's settings and parse the cost model names; ValueError on the first fault."""
    for section, classes in SECTION_SETTINGS.items():
        if section in params:
            for cls in classes:
                cls.from_params(params)
    unknown = [m for m in (params.get("train") or {}).get("models") or [] if m not in MODELS]
    if unknown:
        raise ValueError(f"params.yaml train.models: {unknown} are not cost models; known: {sorted(MODELS)}")
    check_collect_params(params)  # collect and retest stay mappings (tcl/collect/settings.py says why)
    check_deploy_keys(params)
    check_tune_params(params)
    check_tracking_params(params)


def load_checked_params(path: str | Path | None = None) -> dict[str, Any]:
    params = load_params(path)
    check_params(params)
    return params
