"""Train a cost model with a whole operator family held out, and pin it for the unseen-operator benchmark.

The tuning issue asks that the best configuration be never worse than TVM's XGB on a network whose
operator types the model never saw. The registered models were trained on every collected network,
M5's conv1d included, so for that run this script fits the same model on the platform's training
split without any task of the held-out operator types and without any task of a network that has
one (M5, wav2vec 2.0 and Whisper for conv1d: their pooling and dense tasks go too), and saves it
where benchmarks/bench_tune.py's `--pin-dir` finds pinned bundles. The bundle's `op_types` says what
it was trained on, so the guard knows the held-out type is new to it.

    python benchmarks/pin_without_family.py --platform host-avx512-1c --model xgb --op-types conv1d \\
        --out reports/bench_tune_unseen/models/pretrained_xgb
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flows import _tvm_first  # noqa: E402,F401  (before MLflow: see flows/_tvm_first.py)
from tcl.config import load_params  # noqa: E402
from tcl.data.card import dvc_data_version  # noqa: E402
from tcl.data.splits import normalize_network  # noqa: E402
from tcl.data.store import RecordStore  # noqa: E402
from tcl.features.dataset import load_split  # noqa: E402
from tcl.models import MODELS, build_model  # noqa: E402
from tcl.models.base import predict  # noqa: E402
from tcl.models.bundle import ModelBundle  # noqa: E402
from tcl.platforms import get_platform  # noqa: E402
from tcl.train.evaluate import EvalSettings, ranking_metrics  # noqa: E402
from tcl.train.inputs import model_inputs  # noqa: E402
from tcl.train.loop import TrainConfig, model_hparams  # noqa: E402
from tcl.tvm.pinned import pin_bundle  # noqa: E402


def family_mask(split: dict[str, np.ndarray], tasks: list[dict], op_types: set[str]) -> tuple[np.ndarray, set[str]]:
    """(rows to hold out, the networks they come from): every program of a held-out operator type and of any
    network (any input size) that has one. A task is read from the platform's task list (`tasks`, which knows
    every network a shared task is in) and from the split's own columns (a tuning run's tasks, ingested from
    another store, are in the split and not in the list)."""
    def networks(task: dict) -> list[str]:
        return list(task.get("networks") or {task["network"]: 1})

    family = {normalize_network(n) for t in tasks if t["op_type"] in op_types for n in networks(t)}
    family |= {normalize_network(n) for n, op in zip(split["network"].tolist(), split["op_type"].tolist())
               if op in op_types}
    shared = [t["task_key"] for t in tasks if any(normalize_network(n) in family for n in networks(t))]
    mask = (np.isin(split["op_type"], sorted(op_types)) | np.isin(split["task_key"], shared)
            | np.isin([normalize_network(n) for n in split["network"].tolist()], sorted(family)))
    return mask, family


def keep_rows(split: dict[str, np.ndarray], mask: np.ndarray) -> dict[str, np.ndarray]:
    return {k: v[mask] for k, v in split.items()}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--platform", required=True)
    ap.add_argument("--model", default="xgb", help="a train.models name (xgb: the pretrained XGB)")
    ap.add_argument("--op-types", nargs="+", required=True, help="operator types to hold out (tcl/workloads/tasks.py)")
    ap.add_argument("--out", required=True, help="<pin dir>/<model as bench_tune names it>")
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args()
    trees = sorted(m for m, cls in MODELS.items() if not getattr(cls, "trains_by_gradient", True))
    if args.model not in trees:
        raise SystemExit(f"--model {args.model}: only tree models (one fit, no epochs) are trained here: {trees}")

    params = load_params(args.params)
    platform = get_platform(params, args.platform)
    features_dir = Path("data/features") / platform.name
    tasks = RecordStore("data/records").tasks(platform.name)
    train_all, validation = (load_split(features_dir, s) for s in ("train", "validation"))
    in_family, family = family_mask(train_all, tasks, set(args.op_types))
    print(f"holding out {', '.join(args.op_types)} and every task of {sorted(family)}: "
          f"{len(np.unique(train_all['task_key'][in_family]))} tasks, {int(in_family.sum())} of {len(in_family)} "
          "training programs")
    splits = {"train": keep_rows(train_all, ~in_family), "family": keep_rows(train_all, in_family),
              "validation": keep_rows(validation, ~family_mask(validation, tasks, set(args.op_types))[0])}

    def train():
        inputs, featurizer = model_inputs(args.model, platform.name, params, features_dir, splits)
        rows, cols = featurizer.feature_shape
        tcfg = TrainConfig.from_params(params, args.model)
        model = build_model(args.model, feat_dim=cols, seq_len=rows, seed=tcfg.seed, **model_hparams(params, args.model))
        fit_data = inputs["train"]
        model.fit_ranker(fit_data["x"], fit_data["label"], fit_data["group"], seed=tcfg.seed, threads=tcfg.threads)
        settings = EvalSettings.from_params(params)
        for name in ("validation", "family"):
            m = ranking_metrics(inputs[name], predict(model, inputs[name]["x"]), ks=(1,), settings=settings)
            print(f"{name}: top-1 {m['top1_ratio_of_sums']:.3f}, pairwise accuracy {m['pairwise_accuracy']:.3f}")
        bundle = ModelBundle.fitted(args.model, model, featurizer, platform, fit_data,
                                    held_out={"op_types": sorted(args.op_types), "networks": sorted(family)})
        return bundle, {"uri": f"benchmarks/pin_without_family.py --op-types {' '.join(args.op_types)}",
                        "registered_model": "", "version": "", "trained_for": platform.name,
                        "data_version": dvc_data_version(Path("dvc.lock")),
                        "why": f"trained without {', '.join(args.op_types)} and the networks {sorted(family)}"}

    pin = pin_bundle(args.out, train)  # a bundle pinned there already is kept, not trained again
    print(f"pinned {pin['bundle_dir']} (sha256 {pin['sha256'][:12]})")


if __name__ == "__main__":
    main()
