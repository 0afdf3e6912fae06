"""End-to-end tuning benchmark: the same network, trial budget and seed, tuned with
TVM's default XGB cost model and with our registered models, side by side.

Prints, per cost model: trials and wall seconds needed to reach XGB's final
latency estimate, the estimate at equal trials, the cost model's share of tuning
time, and the tuned network's latency against PyTorch eager on the same CPU (plus
the numerics check). Saves the tuning-curve PNG (latency vs trials and vs seconds).

    python benchmarks/bench_tune.py --network mobilenet_v2 --trials 256 --models xgb tcl tlp mlp

Learned models come from the MLflow registry (run `dvc repro` first); pick a
network that is not in the models' training data (params.yaml `split.holdout_networks`).
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from flows import _tvm_first  # noqa: E402,F401  (before MLflow: see flows/_tvm_first.py)
from tcl.config import load_params  # noqa: E402
from tcl.platforms import get_platform  # noqa: E402
from tcl.tvm.report import run_tuning_stage  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--platform", default="local-1c")
    ap.add_argument("--network")
    ap.add_argument("--trials", type=int)
    ap.add_argument("--per-iter", type=int)
    ap.add_argument("--models", nargs="+")
    ap.add_argument("--out", default="reports/bench_tune")
    args = ap.parse_args()
    params = load_params(args.params)
    tune = params["tune"]
    for key, value in (("network", args.network), ("trials", args.trials), ("num_trials_per_iter", args.per_iter),
                       ("cost_models", args.models)):
        if value is not None:
            tune[key] = value
    table = run_tuning_stage(get_platform(params, args.platform), params, args.out)
    print(f"\n{tune['network']} on {args.platform}: {tune['trials']} trials per model, "
          f"{tune['num_trials_per_iter']} per batch, seed {params.get('seed', 0)}")
    cols = list(table[0])
    print(" | ".join(cols))
    for row in table:
        print(" | ".join(f"{row[c]:.4g}" if isinstance(row[c], float) else str(row[c]) for c in cols))
    print(f"curve: {Path(args.out) / (args.platform + '.png')}")
    (Path(args.out) / "table.json").write_text(json.dumps(table, indent=2))


if __name__ == "__main__":
    main()
