"""One cost model trained on every knowledge-base platform's programs at once (TCL's premise).

The train stage gives each platform a model of its own; this trains one model on the union of
`train.platforms`' training splits (a sampled platform contributes its sample, as in its own
training), scores it on each platform's held-out splits and registers it once per platform as
`<prefix>-<model>_joint-<platform>`, with that platform's scores and promotion gate. So a tuning
run names it like any learned model (`tcl_stores_joint`, `tcl_stores_joint+moa`) and model
selection finds it per platform; the registered versions of one training share their weights.

In the union a task keeps one group per platform: its programs are ranked against each other only
within one platform's measurements. benchmarks/bench_joint.py measured why (reports/joint/):
TCL on per-store rows gains most from the union (top-1 mean per task +0.08 on zen4-avx512-1c).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import tracking
from ..data.card import dvc_data_version
from ..data.store import atomic_write_bytes
from ..features.dataset import load_split
from ..models import MODELS, build_model
from ..models.bundle import ModelBundle
from ..platforms import get_platform
from ..tracking.names import joint_name
from .evaluate import EvalSettings, per_network, per_task
from .inputs import model_inputs, restrict_to_sample
from .loop import TrainConfig, fit, model_hparams
from .pipeline import checkpoint_path, held_out_figures, log_resumed, register_bundle

SPLITS = ("train", "validation", "test")
Splits = dict[str, dict[str, np.ndarray]]


def widen(x: np.ndarray, width: int) -> np.ndarray:
    """`x` (N, rows, cols) with zero rows appended up to `width` (per-store padding; tokens never need it)."""
    if x.shape[1] > width:
        raise ValueError(f"cannot narrow inputs of {x.shape[1]} rows to {width}")
    return x if x.shape[1] == width else np.pad(x, ((0, 0), (0, width - x.shape[1]), (0, 0)))


def union(splits: dict[str, dict[str, np.ndarray]], platforms: list[str]) -> dict[str, np.ndarray]:
    """The rows of `platforms`' splits stacked, with a `platform` column; each platform's groups are
    renumbered past the previous ones, so a task measured on two platforms is two groups."""
    if not platforms:
        raise ValueError("no platform to train on: a joint model needs at least one")
    parts, offset = [], 0
    for p in platforms:
        s = splits[p]
        parts.append({**s, "group": s["group"] + offset, "platform": np.full(len(s["label"]), p)})
        offset += int(s["group"].max()) + 1 if len(s["group"]) else 0
    return {k: np.concatenate([part[k] for part in parts]) for k in parts[0]}


def platform_inputs(model_name: str, platforms: list[str], params: dict[str, Any], features_root: Path,
                    samples_dir: Path | None = None, records_root: str | Path = "data/records", log=print
                    ) -> tuple[dict[str, Splits], Any]:
    """({platform: {split: arrays with the model's x}}, featurizer): every platform at one input width,
    a platform of `sampling.platforms` restricted to its sample (`samples_dir/<platform>.npz`)."""
    sampled = set((params.get("sampling") or {}).get("platforms") or [])
    out, featurizer = {}, None
    for p in platforms:
        base = {s: load_split(features_root / p, s) for s in SPLITS}
        out[p], featurizer = model_inputs(model_name, p, params, features_root / p, base, records_root, log)
        if samples_dir is not None and p in sampled:
            out[p]["train"] = restrict_to_sample(out[p]["train"], samples_dir / f"{p}.npz")
    width = max(s["x"].shape[1] for splits in out.values() for s in splits.values())
    return {p: {n: {**s, "x": widen(s["x"], width)} for n, s in splits.items()} for p, splits in out.items()}, featurizer


def train_joint_model(model_name: str, params: dict[str, Any], features_root: str | Path, out_dir: str | Path,
                      samples_dir: str | Path | None = None) -> dict[str, dict[str, Any]]:
    """Train `model_name` once on every `train.platforms` training split; per platform its held-out
    metrics and the registered version of `<model>_joint` for that platform (a nested run each)."""
    features_root = Path(features_root)
    platforms = list(params["train"]["platforms"])
    name = joint_name(model_name)
    # Its own recipe under its registered name (train.hparams / train.optimizer_by_model `<model>_joint`): a
    # recipe searched for the per-platform model need not suit the union; without hparams of its own, the model's.
    hparams = model_hparams(params, name, model_name)
    tcfg = TrainConfig.from_params(params, name)
    if not getattr(MODELS[model_name], "trains_by_gradient", True):
        raise ValueError(f"train.joint_models: {model_name!r} is trained by its own fit, not by gradient steps "
                         "over the union; a joint model is one of the neural models")
    inputs, featurizer = platform_inputs(model_name, platforms, params, features_root,
                                         Path(samples_dir) if samples_dir else None)
    train = union({p: inputs[p]["train"] for p in platforms}, platforms)
    rows, cols = train["x"].shape[1:]
    model = build_model(model_name, feat_dim=cols, seq_len=rows, seed=tcfg.seed, **hparams)
    run = RunInfo(name, train, dvc_data_version(Path("dvc.lock")), EvalSettings.from_params(params))
    with tracking.run(params, f"train-{name}", {"stage": "train_joint", "model": name}):
        tracking.log_params({"model": name, "platforms": ",".join(platforms), **vars(tcfg),
                             **{f"hp.{k}": v for k, v in hparams.items()}, "feature_shape": f"{rows}x{cols}",
                             "train_rows": run.train_rows, "train_tasks": len(np.unique(train["task_key"])),
                             "data_version": run.data_version, "params": model.param_count()})
        ckpt = checkpoint_path(params, "joint", name)
        start = time.perf_counter()
        history = fit(model, train["x"], train["label"], train["group"], tcfg,
                      lambda epoch, loss: tracking.log_metric("train_loss", loss, step=epoch), checkpoint=ckpt)
        log_resumed(history)
        run.seconds = time.perf_counter() - start
        tracking.log_metric("train_seconds", run.seconds)
        results = {p: score_and_register(model, model_name, featurizer, inputs[p], p, params, features_root,
                                         Path(out_dir) / name / p, run) for p in platforms}
    ckpt.unlink(missing_ok=True)
    return results


@dataclass
class RunInfo:
    """What every platform's registration of one joint training shares."""

    name: str           # the registered model name's model part: `tcl_stores_joint`
    train: dict[str, np.ndarray]  # the union's training split (each bundle's meta says what the fit saw)
    data_version: str
    settings: EvalSettings
    seconds: float = 0.0

    @property
    def train_rows(self) -> int:
        return int(len(self.train["x"]))


def score_and_register(model, model_name: str, featurizer, splits: Splits, platform: str, params: dict[str, Any],
                       features_root: Path, bundle_dir: Path, run: RunInfo) -> dict[str, Any]:
    """The joint model's held-out figures on one platform, saved as that platform's bundle and registered
    as its `<model>_joint`, in a nested run."""
    spec = get_platform(params, platform)
    test = splits["test"]
    with tracking.run(params, f"train-{run.name}-{platform}",
                      {"stage": "train_joint", "platform": platform, "model": run.name}, nested=True):
        metrics, evidence, test_scores = held_out_figures(model, splits["validation"], test, run.settings)
        metrics.update({"train_seconds": run.seconds, "param_count": model.param_count(),
                        "platform_train_rows": int(len(splits["train"]["x"]))})
        metrics.update(evidence, train_rows=run.train_rows)
        tracking.log_metrics({k: v for k, v in metrics.items() if np.isfinite(v)})
        bundle = ModelBundle.fitted(model_name, model, featurizer, spec, run.train, joint=True)
        saved = bundle.save(bundle_dir)
        metrics.update(register_bundle(bundle, saved, run.name, spec, params, features_root / platform,
                                       run.data_version, splits["train"]["x"][:4], metrics))
    if len(test["x"]):
        metrics.update(per_task_top1=per_task(test, test_scores), per_network_top1=per_network(test, test_scores))
    return metrics


def train_joint(params: dict[str, Any], features_root: str | Path, out_dir: str | Path, metrics_path: str | Path,
                samples_dir: str | Path | None = None) -> dict[str, Any]:
    """Every model of `train.joint_models`, one joint training each; writes the stage's metrics JSON
    ({registered name: {platform: metrics}})."""
    results = {joint_name(m): train_joint_model(m, params, features_root, out_dir, samples_dir)
               for m in (params["train"].get("joint_models") or [])}
    Path(metrics_path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(Path(metrics_path), json.dumps(results, indent=2, default=str).encode())
    return results
