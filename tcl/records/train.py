"""Run records of the train stages: one run per trained model, its bundle registered (tcl.train.pipeline),
and per joint model (tcl.train.joint) or knowledge-base prior (tcl.train.kb_prior) one run with a nested
run per platform it is registered for.

Rebuilt from `reports/train/<platform>.json` / `reports/train/joint.json` (final metrics, the
registered name and version, the gate's decision), the saved bundles' `bundle.json` and the params
dvc.lock says the stage ran with. Per-epoch curves are not in these files, so a rebuilt run has the
final figures only.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..train.loop import TrainConfig, model_hparams
from .lock import Lock
from ..tracking.run_record import Registration, RunRecord, record_key
from .provenance import promotion, provenance_tags

NOT_METRICS = {"registered_model", "version", "champion", "promotion"}


def train_records(root: Path, lock: Lock) -> list[RunRecord]:
    records = []
    for platform in lock.instances("train"):
        stage = f"train@{platform}"
        metrics_path = root / "reports" / "train" / f"{platform}.json"
        results = json.loads(metrics_path.read_text())
        used = lock.params(stage, "featurize", f"sample@{platform}")
        commit = lock.recording_commit(stage, f"models/{platform}")
        for model, m in results.items():
            if not isinstance(m, dict) or not m.get("registered_model"):
                continue   # the random floor, or a model trained with tracking off
            records.append(_record(root, lock, platform, model, m, used, commit, metrics_path,
                                   results.get("random") or {}))
    return records


def joint_train_records(root: Path, lock: Lock, stage: str = "train_joint", metrics: str = "reports/train/joint.json",
                        models: str = "models/joint") -> list[RunRecord]:
    """A parent run per model of a stage that registers one model per platform ({model: {platform: metrics}}
    in `metrics`, bundles in `models`/<model>/<platform>): train_joint, and kb_prior (`kb_prior_records`)."""
    metrics_path = root / metrics
    if not lock.has(stage) or not metrics_path.exists():
        return []
    used = lock.params(stage)
    commit = lock.recording_commit(stage, models)
    records = []
    for name, by_platform in json.loads(metrics_path.read_text()).items():
        parent = RunRecord(record_key(f"train-{name}", metrics_path), f"train-{name}", {"stage": stage, "model": name})
        parent.params = {"model": name, "platforms": ",".join(by_platform), "data_version": lock.data_version()}
        for platform, m in by_platform.items():
            if m.get("registered_model"):
                floor = {"test_top1_ratio_of_sums": m.get("random_test_top1"), "test_tasks": m.get("test_tasks", "")}
                parent.children.append(_record(root, lock, platform, name, m, used, commit, metrics_path, floor,
                                               bundle_dir=f"{models}/{name}/{platform}", stage=stage))
        records.append(parent)
    return records


def kb_prior_records(root: Path, lock: Lock) -> list[RunRecord]:
    """The kb_prior stage's priors (tcl.train.kb_prior), one nested run per platform."""
    return joint_train_records(root, lock, "kb_prior", "reports/train/kb_prior.json", "models/kb")


def _record(root: Path, lock: Lock, platform: str, model: str, m: dict, used: dict, commit: str,
            metrics_path: Path, floor: dict, bundle_dir: str | None = None, stage: str = "train") -> RunRecord:
    bundle_dir = bundle_dir or f"models/{platform}/{model}"
    bundle = json.loads((root / bundle_dir / "bundle.json").read_text())
    recipe = TrainConfig.from_params(used, model)  # the model's own optimizer settings, as its stage trained it
    hparams = model_hparams(used, model, bundle["model_name"])  # a joint model's: its own, else its class's
    data_version = lock.data_version()
    name = f"train-{model}-{platform}"
    run = RunRecord(record_key(name, metrics_path, root / bundle_dir / "bundle.json"), name,
                    {"stage": stage, "platform": platform, "model": model})
    run.params = {"model": model, "platform": platform, "seed": used.get("seed", 0),
                  **{k: getattr(recipe, k) for k in ("epochs", "lr", "batch_size", "loss", "threads")},
                  **{f"hp.{k}": v for k, v in hparams.items()},
                  "feature_shape": "x".join(str(d) for d in bundle.get("feature_shape", [])),
                  "train_rows": (bundle.get("meta") or {}).get("train_rows", ""),
                  "sample": f"data/samples/{platform}.npz", "data_version": data_version,
                  "params": m.get("param_count", "")}
    run.add_metrics({k: v for k, v in m.items() if k not in NOT_METRICS})
    scores = {"val_top1": m.get("val_top1_ratio_of_sums"), "test_top1": m.get("test_top1_ratio_of_sums"),
              "random_test_top1": floor.get("test_top1_ratio_of_sums")}
    # the figure the gate compared: the mean per task (tcl.train.evaluate.gate_top1); eq. 12 in reports
    # written before the gate changed
    gate_figure = m.get("val_top1_mean_per_task", m.get("val_top1_ratio_of_sums"))
    gate, aliases = promotion(bool(m.get("champion")), str(m.get("promotion", "")), gate_figure)
    # the evidence tcl.tvm.select weighs for a CPU without a platform of its own
    evidence = {"eval.test_tasks": str(floor.get("test_tasks", "")), "train_rows": str(run.params["train_rows"])}
    tags = {"platform": platform, "model": model,
            **provenance_tags(lock, used, data_version, scores, commit), **evidence, **gate}
    run.registrations.append(Registration(m["registered_model"], str(m["version"]), bundle_dir, tags, aliases))
    return run
