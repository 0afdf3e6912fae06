"""Tune flow: tune a network on a platform with each configured cost model; compile, check, compare.

    python -m flows.tune --platform local-1c                        # tune.network of params.yaml
    python -m flows.tune --platform local-1c --network my_net.pt2   # your own torch.export program
    python -m flows.tune --platform local-1c --network my_net.onnx  # or ONNX (checked against ONNX Runtime)

Each cost model's tuning database and compiled library (`<network>.so`) land in
`<report dir>/<platform>/<cost model>/`, next to the comparison `<report dir>/<platform>.json`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from flows import _tvm_first  # noqa: F401  (must precede Prefect: see its docstring)
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows._tasks import retry_options
from flows._params import load_checked_params
from tcl.tracking.headline import write_headline
from tcl.platforms import get_platform
from tcl.tvm.stage import run_tuning_stage


@task(name="tune", cache_policy=NO_CACHE, task_run_name="tune {params[tune][network]} on {platform.name}")
def tune_stage(platform, params: dict, out_dir: str) -> list:
    """One tuning run (every cost model side by side); a retry tunes again from an empty database."""
    return run_tuning_stage(platform, params, out_dir, log=get_run_logger().info)


@flow(name="tune", log_prints=True)
def tune_flow(platform: str, params_path: str = "params.yaml", out_dir: str = "reports/tune",
              network: str | None = None, trials: int | None = None) -> list:
    """Tune `network` (default `tune.network`) on `platform` with every model of `tune.cost_models`."""
    params = load_checked_params(params_path)
    for key, value in (("network", network), ("trials", trials)):
        if value is not None:
            params["tune"][key] = value
    log = get_run_logger()
    table = tune_stage.with_options(**retry_options(params, "tune"))(get_platform(params, platform), params, out_dir)
    if network is None:  # the stage's network: its dvc.yaml metrics
        out = Path(out_dir)
        write_headline("tune", out / f"{platform}.json", out.parent / "metrics" / f"tune-{platform}.json")
    for row in table:
        log.info("%s", row)
    return table


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--platform", required=True, help="a platform declared in params.yaml")
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--network", help="a built-in network name, alone or at one instance size (r3d18@4x96, "
                                      "bert_base@64), a torch.export .pt2 file or an .onnx file")
    ap.add_argument("--trials", type=int, help="measurements per cost model (default tune.trials)")
    ap.add_argument("--out", default=None, help="report directory (default reports/tune, or "
                                                "reports/tune/<network> with --network)")
    args = ap.parse_args()
    out = args.out or ("reports/tune" if args.network is None else f"reports/tune/{Path(args.network).stem}")
    tune_flow(args.platform, args.params, out, args.network, args.trials)
