"""Cost models side by side on one platform's collected data, trained and scored the same way.

TCL-Mamba, TLP and MLP read our schedule-primitive tokens (data/features/<platform>, made
by `dvc repro`'s featurize stage); Tenset-MLP and XGB read TVM's PerStoreFeature, extracted
from the same validated records (cached next to the features). Every model gets the same
splits, labels (min latency / latency per task), seed and epochs, and is scored with the same
ranking metrics on the test split (held-out networks), or on validation if test is empty.

    python benchmarks/bench_models.py [--platform zen4-avx512-1c] [--epochs N]

Columns: parameters (XGB: tree nodes), size of the saved model, training time, inference
throughput on 512-candidate batches with one thread (model only), featurization throughput
from MetaSchedule candidates with one thread (tokens vs PerStoreFeature: what a tuner pays
before the model), top-1/top-5 in both conventions, pairwise accuracy.
Writes tmp/bench/bench_models/<platform>.{json,md}, or with --update-report the committed
reports/bench_models/<platform>.{json,md},
naming the data version and this command.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parent.parent
TOKEN_MODELS = ("tcl", "tlp", "mlp")
PSF_MODELS = ("tenset_mlp", "tcl_stores", "xgb", "pacm")  # read TVM's PerStoreFeature (PaCM: + dataflow blocks)
FEATURES = {"tokens": "tokens", "per_store": "PerStoreFeature", "pacm": "PerStoreFeature + dataflow"}  # by input kind
LABELS = {"tcl": "TCL-Mamba", "tlp": "TLP", "mlp": "MLP", "tenset_mlp": "Tenset-MLP", "tcl_stores": "TCL on stores",
          "xgb": "XGB", "pacm": "PaCM"}
METRICS = ("top1_ratio_of_sums", "top1_mean_per_network", "top5_ratio_of_sums", "top5_mean_per_network",
           "pairwise_accuracy")


def _throughput(fn, n: int, min_seconds: float = 0.5) -> float:
    """Items per second of fn() (which handles n items), after one warm-up call."""
    fn()
    reps, start = 0, time.perf_counter()
    while True:
        fn()
        reps += 1
        elapsed = time.perf_counter() - start
        if elapsed >= min_seconds or reps >= 200:
            return n * reps / elapsed


def _batch(x: np.ndarray, size: int) -> np.ndarray:
    """`size` rows cycled from x (the eval rows, so inference sees realistic inputs)."""
    return np.ascontiguousarray(x[np.arange(size) % len(x)])


def pick_eval_split(splits: dict[str, dict]) -> tuple[str, str]:
    """(split name, note): test, else validation, else train; the note says why."""
    if len(splits["test"]["label"]):
        return "test", "test (held-out networks)"
    if len(splits["validation"]["label"]):
        return "validation", "VALIDATION (the test split is empty: no held-out network was collected)"
    return "train", "TRAIN (test and validation are empty: these numbers measure fit, not generalization)"


def featurize_rates(table, store_root: Path, platform, tokenizer, spec, n: int = 128) -> dict[str, float]:
    """Candidates/s (1 thread) of our tokenizer vs PerStoreFeature vs PaCM's input, on the same replayed candidates."""
    import tvm

    from tcl.features import per_store
    from tcl.features.dataflow import PacmFeaturizer, platform_levels

    rows = table.slice(0, min(n, table.num_rows))
    by_task: dict[tuple[str, str], list[str]] = {}
    for key, target, program in zip(rows.column("task_key").to_pylist(), rows.column("target").to_pylist(),
                                    rows.column("program").to_pylist()):
        by_task.setdefault((key, target), []).append(program)
    tok_s = psf_s = pacm_s = 0.0
    count = 0
    fe = per_store.extractor()
    pacm = PacmFeaturizer(8, 64, platform_levels(platform))
    for (key, target), programs in by_task.items():
        path = per_store.workload_dir(store_root, platform.name) / f"{key}.json"
        if not path.exists():
            continue
        mod = tvm.ir.load_json(path.read_text())
        cands = [c for c in per_store.replay(mod, programs)[0] if c is not None]
        if not cands:
            continue
        ctx = per_store.context(mod, tvm.target.Target(json.loads(target)), num_threads=1)
        start = time.perf_counter()
        tokenizer.featurize_traces(cands, spec)
        tok_s += time.perf_counter() - start
        start = time.perf_counter()
        fe.extract_from(ctx, cands)
        psf_s += time.perf_counter() - start
        start = time.perf_counter()
        pacm.featurize_candidates(ctx, cands)
        pacm_s += time.perf_counter() - start
        count += len(cands)
    return {"tokens": count / tok_s if tok_s else float("nan"),
            "per_store": count / psf_s if psf_s else float("nan"),
            "pacm": count / pacm_s if pacm_s else float("nan"), "candidates": count}


def train_torch(name: str, x: dict[str, np.ndarray], split_arrays: dict[str, dict], eval_name: str,
                tcfg, hparams: dict, feat_dim: int, seq_len: int | None, infer_batch: int) -> dict[str, Any]:
    import torch

    from tcl.models import build_model, param_count, size_on_disk
    from tcl.train.evaluate import ranking_metrics
    from tcl.train.loop import fit
    from tcl.models.base import predict

    torch.manual_seed(tcfg.seed)
    model = build_model(name, feat_dim=feat_dim, seq_len=seq_len, **hparams)
    train = split_arrays["train"]
    start = time.perf_counter()
    fit(model, x["train"], train["label"], train["group"], tcfg)
    seconds = time.perf_counter() - start
    torch.set_num_threads(1)
    scores = predict(model, x[eval_name])
    batch = _batch(x[eval_name], infer_batch)
    rate = _throughput(lambda: predict(model, batch, batch_size=infer_batch), infer_batch)
    return {"params": param_count(model), "size_mb": size_on_disk(model) / 1e6, "train_s": seconds,
            "s_per_epoch": seconds / max(tcfg.epochs, 1), "infer_per_s": rate,
            **ranking_metrics(split_arrays[eval_name], scores)}


def train_xgb(x: dict[str, np.ndarray], split_arrays: dict[str, dict], eval_name: str, rounds: int, seed: int,
              infer_batch: int) -> dict[str, Any]:
    from tcl.train.evaluate import ranking_metrics
    from tcl.models.xgb_ranker import XGBConfig, XGBRanker

    train = split_arrays["train"]
    start = time.perf_counter()
    model = XGBRanker(XGBConfig(rounds=rounds, seed=seed, threads=1)).fit(x["train"], train["label"], train["group"])
    seconds = time.perf_counter() - start
    batch = _batch(x[eval_name], infer_batch)
    rate = _throughput(lambda: model.score(batch), infer_batch)
    return {"params": model.n_nodes(), "size_mb": model.size_bytes() / 1e6, "train_s": seconds,
            "s_per_epoch": None, "infer_per_s": rate, "rounds": rounds,
            **ranking_metrics(split_arrays[eval_name], model.score(x[eval_name]))}


def _fmt(v: Any, digits: int = 3) -> str:
    if v is None or (isinstance(v, float) and not np.isfinite(v)):
        return "-"
    if isinstance(v, float):
        return f"{v:,.0f}" if abs(v) >= 1000 else f"{v:.{digits}f}"
    return f"{v:,}" if isinstance(v, int) else str(v)


def render(result: dict[str, Any]) -> str:
    """The markdown table (also what is printed)."""
    head = ["model", "features", "params", "size MB", "epochs", "train s", "s/epoch", "infer cand/s",
            "featurize cand/s", "top1 sums", "top1 mean/net", "top5 sums", "top5 mean/net", "pairwise acc"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in result["models"]:
        cells = [r["label"], r["features"], _fmt(r["params"]) + (" nodes" if r["name"] == "xgb" else ""),
                 _fmt(r["size_mb"]), _fmt(r.get("epochs", result["epochs"])), _fmt(r["train_s"], 1),
                 _fmt(r["s_per_epoch"], 2), _fmt(r["infer_per_s"], 0),
                 _fmt(r.get("featurize_per_s"), 0), *(_fmt(r.get(m)) for m in METRICS)]
        lines.append("| " + " | ".join(cells) + " |")
    rows = result["rows"]
    epochs = result["epochs"] or "of each model's recipe (column)"
    notes = [f"platform {result['platform']}; evaluated on {result['eval_note']}; rows train/validation/test = "
             f"{rows['train']}/{rows['validation']}/{rows['test']}; epochs {epochs}, seed {result['seed']}"
             f", XGB {result['xgb_rounds']} rounds (rank:pairwise, qid = task)."]
    if "per_store" in result:
        ps = result["per_store"]
        missing = {k: v["rows"] for k, v in ps["missing"].items()}
        notes.append(f"PerStoreFeature: up to {ps['max_rows']} stores/program (mean {ps['mean_rows']:.1f}), "
                     f"rows without features per split {missing} (scored from all-zero input).")
    notes.append("top-k 'sums' = TCL eq. 12 (one ratio over all held-out networks); 'mean/net' = Tenset's mean "
                 "of per-network ratios. Inference: 512-candidate batches, 1 thread, model only; featurize: "
                 "MetaSchedule candidates -> model input, 1 thread.")
    notes += result.get("notes", [])
    return "\n".join(lines) + "\n\n" + "\n".join(f"- {n}" for n in notes) + "\n"


def run(platform_name: str, params: dict[str, Any], *, epochs: int | None, seed: int, models: list[str],
        features_root: Path, validated: Path, store_root: Path, xgb_rounds: int = 200,
        infer_batch: int = 512, extract_threads: int = 1, log=print) -> dict[str, Any]:
    """Train and score every requested model (for `epochs`, else each for its recipe's); returns the result
    dict (see render())."""
    from tcl.features.dataset import load_split
    from tcl.features.per_store import default_cache_path, pad_stores, split_features, sum_stores
    from tcl.models import MODELS
    from tcl.features.tokenizer import Tokenizer
    from tcl.platforms import get_platform
    from tcl.train.inputs import model_inputs, workload_stores
    from tcl.train.loop import TrainConfig, model_hparams

    unknown = sorted(set(models) - set(TOKEN_MODELS) - set(PSF_MODELS))
    if unknown:
        raise SystemExit(f"unknown model(s) {unknown}; choose from {TOKEN_MODELS + PSF_MODELS}")
    platform = get_platform(params, platform_name)
    features_dir = features_root / platform_name
    if not (features_dir / "train.npz").exists():
        raise SystemExit(f"{features_dir}: no features; run `dvc repro featurize` first")
    splits = {s: load_split(features_dir, s) for s in ("train", "validation", "test")}
    eval_name, eval_note = pick_eval_split(splits)
    log(f"evaluating on {eval_note}")
    tokenizer = Tokenizer.load(features_dir.parent / "tokenizer.json")
    rows, cols = tokenizer.feature_shape
    result: dict[str, Any] = {"platform": platform_name, "eval_split": eval_name, "eval_note": eval_note,
                              "epochs": epochs, "seed": seed, "xgb_rounds": xgb_rounds,
                              "rows": {s: int(len(a["label"])) for s, a in splits.items()}, "models": []}
    token_x = {s: a["x"] for s, a in splits.items()}
    psf = None
    if set(models) & set(PSF_MODELS):
        log("PerStoreFeature: loading/extracting ...")
        try:
            roots = workload_stores(params, store_root)
            feats, result["per_store"] = split_features(platform_name, validated, roots, splits,
                                                          default_cache_path(platform_name, features_root),
                                                          extract_threads)
        except ValueError as e:
            raise SystemExit(str(e)) from None
        width = result["per_store"]["max_rows"]
        padded = {s: pad_stores(f, width) for s, f in feats.items()}
        psf = {"tenset_mlp": padded, "tcl_stores": padded,
               "xgb": {s: sum_stores(f) for s, f in feats.items()}}
    rates = {}
    if psf is not None:
        import pyarrow.parquet as pq

        from tcl.features.dataset import platform_splits

        table = platform_splits({platform_name: pq.read_table(validated)}, params, store_root)[platform_name][eval_name]
        rates = featurize_rates(table, store_root, platform, tokenizer, platform.spec_vector)
    for name in models:
        log(f"training {LABELS[name]} ...")
        tcfg = TrainConfig.from_params(params, name, epochs=epochs, seed=seed)  # the model's own recipe
        if name == "xgb":
            r = train_xgb(psf["xgb"], splits, eval_name, xgb_rounds, seed, infer_batch)
        elif name == "pacm":
            at = dict(params, validate={**(params.get("validate") or {}), "validated_root": str(validated.parent)})
            pacm_splits, _ = model_inputs(name, platform_name, at, features_dir, splits, store_root, log)
            pacm_x = {s: a["x"] for s, a in pacm_splits.items()}
            r = train_torch(name, pacm_x, splits, eval_name, tcfg, model_hparams(params, name),
                            feat_dim=pacm_x["train"].shape[-1], seq_len=pacm_x["train"].shape[1],
                            infer_batch=infer_batch)
        elif name in ("tenset_mlp", "tcl_stores"):
            r = train_torch(name, psf[name], splits, eval_name, tcfg, model_hparams(params, name),
                            feat_dim=psf[name]["train"].shape[-1], seq_len=None, infer_batch=infer_batch)
        else:
            r = train_torch(name, token_x, splits, eval_name, tcfg, model_hparams(params, name),
                            feat_dim=cols, seq_len=rows, infer_batch=infer_batch)
        kind = MODELS[name].input_kind  # tokens, per_store or pacm: the keys of FEATURES and of the rates
        r.update(name=name, label=LABELS[name], features=FEATURES[kind], featurize_per_s=rates.get(kind),
                 epochs=None if name == "xgb" else tcfg.epochs)
        result["models"].append(r)
    return result


def main(argv: list[str] | None = None) -> dict[str, Any]:
    sys.path.insert(0, str(REPO))  # run as a script, benchmarks/ is on the path instead
    from benchmarks._out import add_out_args, out_path, provenance, provenance_line
    from tcl.config import load_params

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--platform", default="zen4-avx512-1c")
    ap.add_argument("--params", default=str(REPO / "params.yaml"))
    ap.add_argument("--epochs", type=int, default=None, help="every model's epochs (default: each model's recipe, "
                    "train.optimizer_by_model.<model>.epochs or train.epochs)")
    ap.add_argument("--seed", type=int, default=None, help="default: params seed")
    ap.add_argument("--models", default=",".join(TOKEN_MODELS + PSF_MODELS))
    ap.add_argument("--xgb-rounds", type=int, default=200)
    ap.add_argument("--features-root", default="data/features")
    ap.add_argument("--validated", default=None, help="default: data/validated/platform=<platform>.parquet")
    ap.add_argument("--store", default="data/records", help="record store holding _workloads/")
    ap.add_argument("--extract-threads", type=int, default=1)
    add_out_args(ap, "reports/bench_models")  # a folder: <out>/<platform>.json and .md
    ap.add_argument("--note", action="append", default=[], help="a line for the report (e.g. why epochs are lower)")
    args = ap.parse_args(argv)
    prov = provenance(__file__, argv)  # the data as locked when the run starts
    params = load_params(args.params)
    result = run(args.platform, params, epochs=args.epochs,
                 seed=args.seed if args.seed is not None else int(params.get("seed", 0)),
                 models=[m.strip() for m in args.models.split(",") if m.strip()],
                 features_root=Path(args.features_root),
                 validated=Path(args.validated or f"data/validated/platform={args.platform}.parquet"),
                 store_root=Path(args.store), xgb_rounds=args.xgb_rounds, extract_threads=args.extract_threads,
                 log=lambda m: print(m, file=sys.stderr, flush=True))
    result.update(prov, notes=args.note)
    table = render(result) + f"- {provenance_line(result)}\n"
    print(table)
    out = out_path(args, "reports/bench_models") / result["platform"]
    out.parent.mkdir(parents=True, exist_ok=True)
    out.with_suffix(".json").write_text(json.dumps(result, indent=2, default=float))
    out.with_suffix(".md").write_text(f"# Cost models on {result['platform']}\n\n{table}")
    return result


if __name__ == "__main__":
    main()
