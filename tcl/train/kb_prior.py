"""A pretrained XGB for one platform, fitted on the knowledge base of its instruction set.

A platform's own measurements are few (a new CPU after one `make collect`), while every CPU that
runs the same vector code ranks programs much alike. So the prior of platform P is an XGB
(`train.hparams.xgb`, ranking by task) fitted on the training programs of every platform of P's ISA
class -- the same kind, vector width and threads -- that has validated records, P's own included;
never a held-out network's. benchmarks/bench_new_platform.py --fit measured the rule before it
became a stage: on Zen 3's held-out tasks top-1 (mean per task) 0.562 for the AVX2 knowledge base
+ Zen 3 against 0.448 for the champion tcl/tvm/select.py picked (reports/new_platform_fit), and in
tuning MobileNet-V2 reached XGB@768's result at its first estimate in every seed
(reports/bench_tune_zen3_kb).

The platforms are featurized together under `kb_prior.work_dir` (one task split over the group;
PerStoreFeature cached there per platform, so the next fit extracts nothing again). P's validation
tasks stay out of the fit: the promotion gate scores on them. Registered as `<prefix>-xgb_kb-<P>`,
tuned as `pretrained_xgb_kb` (`+boost`: it keeps learning each task, as TVM's xgb does).
"""

from __future__ import annotations

import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .. import tracking
from ..config import check_keys
from ..data.card import dvc_data_version
from ..data.store import atomic_write_bytes
from ..features.dataset import featurize_platforms, load_split
from ..features.per_store import PerStoreFeaturizer
from ..models import build_model
from ..models.bundle import ModelBundle
from ..platforms import Platform, load_platforms
from ..tracking.names import kb_name
from .evaluate import EvalSettings, per_network, per_task
from .inputs import model_inputs
from .joint import union, widen
from .loop import TrainConfig, model_hparams
from .pipeline import held_out_figures, register_bundle

MODEL = "xgb"  # the model class a prior is; Tenset's strongest CPU model, and a fit takes seconds
SPLITS = ("train", "validation", "test")


def kb_sources(target: Platform, platforms: dict[str, Platform], validated_root: str | Path) -> list[Platform]:
    """Every platform of `target`'s ISA class with validated records, by name, `target` last; ValueError
    when the target has none (its own programs are what the gate and the held-out figures score)."""
    root = Path(validated_root)
    if not (root / f"platform={target.name}.parquet").exists():
        raise ValueError(f"{root}/platform={target.name}.parquet: {target.name} has no validated records to score "
                         f"its prior on; measure it first (make collect on its host), then dvc repro "
                         f"validate@{target.name}")
    peers = sorted(p.name for p in platforms.values() if p.name != target.name
                   and p.isa_class == target.isa_class and (root / f"platform={p.name}.parquet").exists())
    return [platforms[p] for p in peers] + [target]


def per_store_splits(params: dict[str, Any], sources: list[Platform], work: Path, validated_root: str | Path,
                     records_root: str | Path) -> dict[str, dict[str, dict[str, np.ndarray]]]:
    """{platform: {split: arrays with PerStoreFeature rows as x}}, the platforms split together and every
    `x` padded to one width."""
    featurize_platforms(sources, params, validated_root, records_root, work)
    out = {}
    for p in sources:
        splits = {s: load_split(work / p.name, s) for s in SPLITS}
        out[p.name], _ = model_inputs(MODEL, p.name, params, work / p.name, splits, records_root)
    width = max(a["x"].shape[1] for splits in out.values() for a in splits.values())
    return {p: {s: {**a, "x": widen(a["x"], width)} for s, a in splits.items()} for p, splits in out.items()}


def fit_kb_prior(params: dict[str, Any], target_name: str, out_dir: str | Path,
                 records_root: str | Path = "data/records") -> dict[str, Any]:
    """Fit, score and register the prior of `target_name`; its metrics (held-out figures, the platforms it
    was fitted on, the registered version and the gate's decision)."""
    settings = KbPriorSettings.from_params(params)
    platforms = load_platforms(params)
    if target_name not in platforms:
        raise ValueError(f"params.yaml kb_prior.platforms: {target_name!r} is not a platform of params.yaml platforms")
    target = platforms[target_name]
    validated = (params.get("validate") or {}).get("validated_root", "data/validated")
    sources = kb_sources(target, platforms, validated)
    work = Path(settings.work_dir) / target.name  # a group's split is its own: one work dir per target
    inputs = per_store_splits(params, sources, work, validated, records_root)
    names = [p.name for p in sources]
    train = union({p: inputs[p]["train"] for p in names}, names)
    own = inputs[target.name]
    name = kb_name(MODEL)
    tcfg = TrainConfig.from_params(params, name)
    hparams = model_hparams(params, name, MODEL)
    model = build_model(MODEL, feat_dim=train["x"].shape[2], seq_len=None, **hparams)
    data_version = dvc_data_version(Path("dvc.lock"))
    with tracking.run(params, f"train-{name}-{target.name}", {"stage": "kb_prior", "platform": target.name,
                                                                "model": name}):
        tracking.log_params({"model": name, "platform": target.name, "fitted_on": ",".join(names),
                             "seed": tcfg.seed, "threads": tcfg.threads, "train_rows": int(len(train["x"])),
                             "train_tasks": int(len(np.unique(train["group"]))), "data_version": data_version,
                             **{f"hp.{k}": v for k, v in hparams.items()}})
        start = time.perf_counter()
        model.fit_ranker(train["x"], train["label"], train["group"], seed=tcfg.seed, threads=tcfg.threads)
        metrics, evidence, test_scores = held_out_figures(model, own["validation"], own["test"],
                                                          EvalSettings.from_params(params))
        metrics.update({"train_seconds": time.perf_counter() - start, "param_count": model.param_count(),
                        "platform_train_rows": int(len(own["train"]["x"]))})
        tracking.log_metrics({k: v for k, v in metrics.items() if np.isfinite(v)})
        metrics.update(evidence, train_rows=int(len(train["x"])), fitted_on=names)
        bundle = ModelBundle.fitted(MODEL, model, PerStoreFeaturizer(train["x"].shape[1]), target, train,
                                    fitted_on=names)
        saved = bundle.save(Path(out_dir) / name / target.name)
        metrics.update(register_bundle(bundle, saved, name, target, params, work / target.name, data_version,
                                       train["x"][:4], metrics))
    if len(own["test"]["x"]):
        metrics.update(per_task_top1=per_task(own["test"], test_scores),
                       per_network_top1=per_network(own["test"], test_scores))
    return metrics


def fit_kb_priors(params: dict[str, Any], out_dir: str | Path, metrics_path: str | Path,
                  records_root: str | Path = "data/records") -> dict[str, Any]:
    """The prior of every `kb_prior.platforms`; writes the stage's metrics JSON ({`xgb_kb`: {platform:
    metrics}}, the shape of the train_joint stage's, so the register stage replays both alike)."""
    results = {kb_name(MODEL): {p: fit_kb_prior(params, p, out_dir, records_root)
                                for p in KbPriorSettings.from_params(params).platforms}}
    Path(metrics_path).parent.mkdir(parents=True, exist_ok=True)
    atomic_write_bytes(Path(metrics_path), json.dumps(results, indent=2, default=str).encode())
    return results


@dataclass(frozen=True)
class KbPriorSettings:
    """params.yaml `kb_prior`: which platforms get a prior, and where their groups are featurized. A section of its
    own: a key under `train` would put every train stage out of date."""

    platforms: tuple[str, ...] = ()
    work_dir: str = "tmp/kb_prior"

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "KbPriorSettings":
        section = dict(params.get("kb_prior") or {})
        check_keys(section, ("platforms", "work_dir"), "kb_prior")
        return cls(tuple(section.get("platforms") or ()), str(section.get("work_dir") or cls.work_dir))
