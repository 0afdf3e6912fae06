"""Train the configured cost models for one platform, one MLflow run each.

The metrics JSON also carries a random scorer's held-out top-k (`random`, the floor)
and the validation/test task counts. Held-out figures come from tcl.train.evaluate: eq. 12,
the mean per network and per task, each with a bootstrap CI over tasks (`*_ci_low`,
`*_ci_high`; params `train.eval`), each model's `per_task_top1` and `per_network_top1`,
and the test split's composition (`random.test_composition`).

Each run logs params, per-epoch training loss and validation top-1, the held-out
(test) ranking metrics, and the bundle (weights + featurizer + platform specs) as a
registered pyfunc model `<prefix>-<model>-<platform>`, tagged with its provenance
(tcl.tracking.provenance); the promotion gate (tcl.train.promotion) then scores it and the
current champion on the validation split and moves `champion` only if it is better. With
tracking off (tcl.tracking) nothing is logged or registered and the bundle is only saved
under `out_dir`. Tenset-MLP (`tenset_mlp`) trains
on TVM's PerStoreFeature of the same rows (tcl/train/inputs.py), the others on the
featurize stage's tokens.

Training checkpoints every epoch under `train.checkpoint_dir` (per platform and model):
a killed training resumes from its last finished epoch (the run's `resumed_from_epoch`
param says where; 0 is a fresh start, and the resumed run also carries the earlier
epochs' train_loss). The checkpoint is deleted once the model is registered.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np

from ..data.card import dvc_data_version
from ..data.store import atomic_write_bytes
from ..features.dataset import load_split
from ..models import build_model, size_on_disk
from .. import tracking
from ..platforms import Platform
from ..models.bundle import ModelBundle
from .evaluate import EvalSettings, composition, per_network, per_task, random_scorer_metrics, ranking_metrics
from .inputs import model_inputs, restrict_to_sample
from .loop import TrainConfig, fit, model_hparams
from ..models.base import predict
from .promotion import SPLIT_TAG, ValidationInputs, promote


def train_one(model_name: str, platform: Platform, params: dict[str, Any], features_dir: str | Path,
              out_dir: str | Path, sample_path: str | Path | None = None) -> dict[str, Any]:
    """Train, evaluate, log and register one model; returns its metrics.

    With `sample_path` (the sample stage's output) only the sampled training programs are used.
    """
    hparams = model_hparams(params, model_name)
    tcfg = TrainConfig.from_params(params, model_name)
    train, val, test = (load_split(features_dir, s) for s in ("train", "validation", "test"))
    pool_rows = len(train["x"])
    if pool_rows == 0:
        raise ValueError(f"platform '{platform.name}' has no training programs in {features_dir}/train.npz: "
                         f"its {len(val['x'])} validation and {len(test['x'])} test programs are all it has "
                         "(split.holdout_networks, split.min_val_tasks). Measure more tasks on it "
                         "(collect) or leave it out of train.platforms")
    splits, featurizer = model_inputs(model_name, platform.name, params, features_dir,
                                      {"train": train, "validation": val, "test": test})
    train, val, test = splits["train"], splits["validation"], splits["test"]
    if sample_path is not None:
        train = restrict_to_sample(train, sample_path)
    data_version = dvc_data_version(Path("dvc.lock"))
    settings = EvalSettings.from_params(params)
    rows, cols = featurizer.feature_shape
    model = build_model(model_name, feat_dim=cols, seq_len=rows, seed=tcfg.seed, **hparams)
    with tracking.run(params, f"train-{model_name}-{platform.name}",
                      {"stage": "train", "platform": platform.name, "model": model_name}):
        tracking.log_params({"model": model_name, "platform": platform.name, **vars(tcfg),
                             **{f"hp.{k}": v for k, v in hparams.items()},
                             "feature_shape": f"{rows}x{cols}", "train_rows": len(train["x"]),
                             "train_pool_rows": pool_rows, "sample": str(sample_path or ""),
                             "data_version": data_version,
                             "params": model.param_count()})
        eval_every = max(1, tcfg.epochs // 10)

        def log_validation(epoch: int) -> None:
            if len(val["x"]):
                m = ranking_metrics(val, predict(model, val["x"]), ks=(1,), settings=settings)
                tracking.log_metric("val_top1", m["top1_ratio_of_sums"], step=epoch)
                tracking.log_metric("val_pairwise_accuracy", m["pairwise_accuracy"], step=epoch)

        def on_epoch(epoch: int, loss: float) -> None:
            tracking.log_metric("train_loss", loss, step=epoch)
            if epoch % eval_every == 0 or epoch == tcfg.epochs - 1:
                log_validation(epoch)

        ckpt = checkpoint_path(params, platform.name, model_name)
        start = time.perf_counter()
        if getattr(model, "trains_by_gradient", True):
            history = fit(model, train["x"], train["label"], train["group"], tcfg, on_epoch, checkpoint=ckpt)
            log_resumed(history)
            trained_epochs = tcfg.epochs - history.start_epoch
        else:  # trees: one fit, no epochs to checkpoint
            model.fit_ranker(train["x"], train["label"], train["group"], seed=tcfg.seed, threads=tcfg.threads)
            log_validation(0)
            trained_epochs = 1
        seconds = time.perf_counter() - start
        metrics, evidence, test_scores = held_out_figures(model, val, test, settings)
        metrics.update({"train_seconds": seconds, "seconds_per_epoch": seconds / max(trained_epochs, 1),
                        "param_count": model.param_count(), "size_mb": size_on_disk(model) / 1e6})
        tracking.log_metrics({k: v for k, v in metrics.items() if np.isfinite(v)})
        evidence["train_rows"] = len(train["x"])
        bundle = ModelBundle.fitted(model_name, model, featurizer, platform, train)
        bundle_dir = bundle.save(Path(out_dir) / model_name)
        metrics.update(register_bundle(bundle, bundle_dir, model_name, platform, params, features_dir, data_version,
                                       train["x"][:4], {**metrics, **evidence}))
    if len(test["x"]):
        metrics.update(per_task_top1=per_task(test, test_scores), per_network_top1=per_network(test, test_scores))
    ckpt.unlink(missing_ok=True)
    return metrics


def held_out_figures(model, val: dict[str, np.ndarray], test: dict[str, np.ndarray], settings: EvalSettings
                     ) -> tuple[dict[str, float], dict[str, Any], np.ndarray]:
    """(`test_*` and `val_*` ranking metrics, the evidence behind them, the test scores) of a trained model.
    The evidence -- a random scorer's test top-1 and the number of test tasks -- is what model selection for
    an unknown CPU weighs (tcl.tvm.select)."""
    test_scores = predict(model, test["x"])
    metrics = {f"test_{k}": v for k, v in ranking_metrics(test, test_scores, settings=settings).items()}
    if len(val["x"]):
        metrics.update({f"val_{k}": v for k, v in
                        ranking_metrics(val, predict(model, val["x"]), ks=(1,), settings=settings).items()})
    floor = random_scorer_metrics(test, ks=(1,), settings=settings) if len(test["x"]) else {}
    evidence = {"random_test_top1": floor.get("top1_ratio_of_sums", float("nan")),
                "test_tasks": len(set(test["task_key"].tolist()))}
    return metrics, evidence, test_scores


def checkpoint_path(params: dict[str, Any], platform: str, model_name: str) -> Path:
    """Where the training of `model_name` on `platform` keeps its per-epoch checkpoint."""
    root = Path((params.get("train") or {}).get("checkpoint_dir") or "tmp/checkpoints")
    return root / platform / f"{model_name}.pt"


def log_resumed(history) -> None:
    """Where training started, and the losses of epochs a killed run finished (steps as then)."""
    tracking.log_param("resumed_from_epoch", history.start_epoch)
    for epoch, loss in enumerate(history.train_loss[:history.start_epoch]):
        tracking.log_metric("train_loss", loss, step=epoch)


def register_bundle(bundle: ModelBundle, bundle_dir: Path, model_name: str, platform: Platform,
                    params: dict[str, Any], features_dir: str | Path, data_version: str, example: np.ndarray,
                    metrics: dict[str, Any]) -> dict[str, Any]:
    """Register the bundle as a new version (provenance tags, held-out scores) and run the promotion
    gate on the platform's validation split; nothing to register when tracking is off."""
    if not tracking.live():
        return {"registered_model": "", "version": "", "champion": False,
                "promotion": "not registered: tracking is off"}
    name = tracking.registered_name(params["registry"]["prefix"], platform.name, model_name)
    scores = {"val_top1": metrics.get("val_top1_ratio_of_sums", float("nan"))}
    if "test_top1_ratio_of_sums" in metrics:
        scores["test_top1"] = metrics["test_top1_ratio_of_sums"]
    if np.isfinite(metrics.get("random_test_top1", float("nan"))):
        scores["random_test_top1"] = metrics["random_test_top1"]
    validation = ValidationInputs(platform.name, params, features_dir)
    tags = {"platform": platform.name, "model": model_name, SPLIT_TAG: validation.fingerprint,
            "eval.test_tasks": str(metrics.get("test_tasks", 0)), "train_rows": str(metrics.get("train_rows", 0)),
            **tracking.version_tags(params, data_version, scores)}
    version = tracking.registry.log_version(bundle, bundle_dir, name, example, tags)
    decision = promote(name, version, validation)
    return {"registered_model": name, "version": version, "champion": decision.promoted,
            "promotion": decision.reason}


def train_platform(platform: Platform, params: dict[str, Any], features_dir: str | Path,
                   out_dir: str | Path, metrics_path: str | Path, sample_path: str | Path | None = None
                   ) -> dict[str, Any]:
    """Every model of `train.models` on one platform; writes a DVC metrics JSON."""
    results = {name: train_one(name, platform, params, features_dir, out_dir, sample_path)
               for name in params["train"]["models"]}
    split = {s: load_split(features_dir, s) for s in ("validation", "test")}
    floor = random_scorer_metrics(split["test"], settings=EvalSettings.from_params(params))
    results["random"] = {**{f"test_{k}": v for k, v in floor.items()},
                         "validation_tasks": int(len(set(split["validation"]["task_key"]))),
                         "test_tasks": int(len(set(split["test"]["task_key"]))),
                         "test_composition": composition(split["test"])}
    Path(metrics_path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(Path(metrics_path), json.dumps(results, indent=2, default=str).encode())
    return results
