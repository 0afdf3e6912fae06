"""The `transfer` stage of `dvc repro`: one CKD sequence over `transfer.order`, tracked and registered.

The benchmark (benchmarks/bench_transfer.py) compares every method over several seeds;
this stage is what a team runs routinely: the target's sample (the same picker as the
benchmark), then TCL's continual knowledge distillation as one MLflow parent run with
a nested run per phase, each KB snapshot registered as a new version of `<prefix>-kb-tcl`
and the target's model as `<prefix>-ckd-<target>` (champion only if it beats the current
one on the same held-out split). It writes a metrics JSON and the forgetting plot.
"""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..data.card import dvc_data_version
from ..data.store import atomic_write_bytes
from ..features.dataset import load_split, load_tokenizer
from ..models import param_count
from ..platforms import load_platforms
from ..sampling.offline import sample_offline
from ..sampling.settings import SamplingSettings
from ..train.evaluate import EvalSettings, ranking_metrics
from ..models.base import predict
from .base import make_method
from .data import PlatformData
from .settings import TransferSettings
from .tracked import TrackingContext, run_tracked

METHOD = "ckd"


def target_sample(params: dict, settings: TransferSettings, features: Path, seed: int) -> np.ndarray:
    """Rows of the target's training split that it may learn from (the same for every method of a seed)."""
    sampling = SamplingSettings.from_params(params, strategy=settings.sampler, rate=settings.rate,
                                            epochs=settings.sampler_epochs, device=settings.device)
    return sample_offline(load_split(features / settings.target, "train"), params, sampling, seed).picks


def _finite_or_none(value: float | None) -> float | None:
    """No champion yet is NaN in the registry; the metrics file says null (strict JSON readers reject NaN)."""
    return None if value is None or not np.isfinite(value) else float(value)


def run_stage(params: dict[str, Any], features: str | Path, out_dir: str | Path, metrics_path: str | Path,
              plot_path: str | Path) -> dict[str, Any]:
    """Sample the target, run CKD tracked, write the metrics JSON and the forgetting PNG; returns the metrics."""
    settings = TransferSettings.from_params(params)
    features, out_dir = Path(features), Path(out_dir)
    seed = int(params.get("seed", 0))
    start = time.perf_counter()
    sample = target_sample(params, settings, features, seed)
    platforms = load_platforms(params)
    ctx = TrackingContext(params, load_tokenizer(features / settings.target),
                          {p: platforms[p].spec_vector for p in settings.order},
                          dvc_data_version(Path("dvc.lock")), out_dir)
    data = PlatformData.from_features(features, samples={settings.target: sample})
    outcome = run_tracked(make_method(METHOD, settings, settings.hparams(params, "tcl"), seed), data, ctx)
    test = load_split(features / settings.target, "test")
    held_out = ranking_metrics(test, predict(outcome.result.model, test["x"]),
                               settings=EvalSettings.from_params(params))
    metrics = {"method": METHOD, "order": settings.order, "target": settings.target, "seed": seed,
               "target_programs": int(len(sample)), "cl_epochs": settings.cl_epochs, "kd_epochs": settings.kd_epochs,
               **{f"test_{k}": v for k, v in held_out.items()},
               "validation_top1": outcome.held_out_top1, "previous_champion_validation_top1": _finite_or_none(outcome.champion_top1),
               "params_deployed": param_count(outcome.result.model), "params_total": outcome.result.params_total,
               "kb_model": f"{params['registry']['prefix']}-kb-tcl", "kb_versions": outcome.kb_versions,
               "registered_model": outcome.registered_model, "version": outcome.version,
               "champion": outcome.champion, "platforms_loaded": data.loads, "run_id": outcome.run_id,
               "seconds": time.perf_counter() - start}
    Path(metrics_path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(Path(metrics_path), json.dumps(metrics, indent=2, default=float).encode())
    shutil.copyfile(out_dir / "forgetting.png", plot_path)
    return metrics
