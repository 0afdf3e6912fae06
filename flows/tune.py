"""Tune flow: tune a network on a platform with each configured cost model; compile, check, compare."""

from __future__ import annotations

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from flows import _tvm_first  # noqa: F401  (must precede Prefect: see its docstring)
from flows._cli import run_platform_flow
from prefect import flow, get_run_logger

from tcl.config import load_params
from tcl.platforms import get_platform
from tcl.tvm.report import run_tuning_stage


@flow(name="tune", log_prints=True)
def tune_flow(platform: str, params_path: str = "params.yaml", out_dir: str = "reports/tune") -> list:
    """Tune `tune.network` on `platform` with every model of `tune.cost_models`, side by side."""
    params = load_params(params_path)
    log = get_run_logger()
    table = run_tuning_stage(get_platform(params, platform), params, out_dir, log=log.info)
    for row in table:
        log.info("%s", row)
    return table


if __name__ == "__main__":
    run_platform_flow(tune_flow)
