"""Prefect deployments from params.yaml's `deploy:` section: prefect.yaml, and the pull step its runs use.

params.yaml is where knobs live, prefect.yaml is where Prefect's CLI looks for deployments,
so prefect.yaml is written from params.yaml:

    python -m tcl.deploy            # rewrite prefect.yaml from params.yaml
    python -m tcl.deploy --check    # exit 1 when prefect.yaml is not what params.yaml gives
    prefect deploy --all            # register every deployment of prefect.yaml

One `pipeline/<platform>` deployment per entry of `deploy.pipeline.pools`, one
`tune/<platform>` per entry of `deploy.tune.pools` and one `grow/<platform>` (make collect:
the host's platforms measured where the knowledge base lacks them) per entry of
`deploy.grow.pools`, each on its platform's work pool, so a process worker started on the
machine that has the platform pulls its runs.
"""

from __future__ import annotations

import argparse
import difflib
import os
import sys
from pathlib import Path
from typing import Any

import yaml

from .config import REPO_ROOT, check_keys, load_params

HEADER = """\
# Written by `python -m tcl.deploy` from params.yaml (section `deploy:`): edit that, then rerun it.
# `prefect deploy --all` registers these deployments; README, "Scheduled runs with Prefect".
"""
# What each deployed flow is, by `deploy:` subsection.
FLOWS = {
    "pipeline": {"entrypoint": "flows/pipeline.py:pipeline_flow",
                 "description": "collect -> validate -> featurize -> sample -> train for {platform}"},
    "tune": {"entrypoint": "flows/tune.py:tune_flow",
             "description": "tune.network with each model of tune.cost_models on {platform} (the target)"},
    "grow": {"entrypoint": "flows/grow.py:grow_flow",
             "description": "make collect on the host of {platform}: what the knowledge base lacks on its "
                            "platforms, committed and pushed every 20 minutes"},
}
OPTIONAL = {"grow"}  # sections a params.yaml may leave out
RETRIED_UNITS = ("measure", "train", "tune")  # deploy.retries: Prefect task retries of these units (flows/_tasks.py)
PULL_STEP = "tcl.deploy.enter_checkout"
CHECKOUT_ENV = "TCL_CHECKOUT"


def check_deploy_keys(params: dict[str, Any]) -> None:
    """Unknown keys of `deploy:` fail when params load (the schedules themselves are checked when
    prefect.yaml is written: `deployments`)."""
    deploy = params.get("deploy")
    if not isinstance(deploy, dict):
        return
    check_keys(deploy, ("timezone", "active", "retries", *FLOWS), "deploy")
    for kind in FLOWS:
        if isinstance(deploy.get(kind), dict):
            check_keys(deploy[kind], ("cron", "pools"), f"deploy.{kind}")
    if isinstance(deploy.get("retries"), dict):
        check_keys(deploy["retries"], (*RETRIED_UNITS, "delay_s"), "deploy.retries")


def _section(params: dict[str, Any], key: str) -> dict[str, Any]:
    value = (params.get("deploy") or {}).get(key)
    if not isinstance(value, dict):
        raise ValueError(f"params.yaml: deploy.{key}: expected a mapping (cron, pools), got {value!r}")
    return value


def _check_cron(field: str, cron: Any, timezone: str) -> None:
    """Prefect's own schedule model, so a bad cron fails here and not at `prefect deploy`."""
    from prefect.client.schemas.schedules import CronSchedule

    try:
        CronSchedule(cron=str(cron), timezone=timezone)
    except ValueError as e:
        raise ValueError(f"params.yaml: {field}: {cron!r} is not a valid cron schedule in {timezone!r}: "
                         f"{str(e).splitlines()[-1]}") from None


def deployments(params: dict[str, Any]) -> list[dict[str, Any]]:
    """The `deployments:` list of prefect.yaml for params.yaml's `deploy:` section."""
    deploy = params.get("deploy")
    if not isinstance(deploy, dict):
        raise ValueError("params.yaml: no `deploy:` section (the Prefect deployments' pools and schedules)")
    check_deploy_keys(params)
    declared = set(params.get("platforms") or {})
    trained = set((params.get("train") or {}).get("platforms") or [])
    timezone = str(deploy.get("timezone", "UTC"))
    active = deploy.get("active", False)
    if not isinstance(active, bool):
        raise ValueError(f"params.yaml: deploy.active: expected true or false, got {active!r}")
    out = []
    for kind, flow in FLOWS.items():
        if kind in OPTIONAL and kind not in deploy:
            continue
        cfg = _section(params, kind)
        _check_cron(f"deploy.{kind}.cron", cfg.get("cron"), timezone)
        pools = cfg.get("pools") or {}
        if not isinstance(pools, dict):
            raise ValueError(f"params.yaml: deploy.{kind}.pools: expected platform: work pool, got {pools!r}")
        for platform, pool in pools.items():
            field = f"deploy.{kind}.pools.{platform}"
            if platform not in declared:
                raise ValueError(f"params.yaml: {field}: '{platform}' is not declared under platforms:")
            if kind == "pipeline" and platform not in trained:
                raise ValueError(f"params.yaml: {field}: '{platform}' is not in train.platforms, so featurize "
                                 "makes no features for it to sample and train on")
            if not isinstance(pool, str) or not pool:
                raise ValueError(f"params.yaml: {field}: expected a work pool name, got {pool!r}")
            out.append({
                "name": platform,
                "entrypoint": flow["entrypoint"],
                "description": flow["description"].format(platform=platform),
                "tags": ["tcl", kind, platform],
                "parameters": {"platform": platform, "params_path": "params.yaml"},
                "work_pool": {"name": pool, "work_queue_name": None, "job_variables": {}},
                "schedules": [{"cron": str(cfg["cron"]), "timezone": timezone, "active": active}],
            })
    return out


def prefect_yaml(params: dict[str, Any]) -> str:
    """The whole prefect.yaml: one pull step for every deployment (`enter_checkout`), then the deployments."""
    doc = {"name": "tcl", "build": None, "push": None, "pull": [{PULL_STEP: {}}], "deployments": deployments(params)}
    return HEADER + yaml.safe_dump(doc, sort_keys=False, width=110)


def deployment_names(params: dict[str, Any]) -> list[str]:
    """`<flow>/<deployment>` of each deployment, as `prefect deployment run` takes them."""
    flow_of = {flow["entrypoint"]: kind for kind, flow in FLOWS.items()}
    return [f"{flow_of[d['entrypoint']]}/{d['name']}" for d in deployments(params)]


def work_pools(params: dict[str, Any]) -> list[str]:
    """Every work pool a deployment of prefect.yaml names (each must exist before `prefect deploy --all`)."""
    return sorted({d["work_pool"]["name"] for d in deployments(params)})


def enter_checkout() -> dict[str, str]:
    """Prefect pull step: run the flow in a TCL checkout, where params.yaml and data/ are.

    The checkout is $TCL_CHECKOUT when set (another clone, a test's copy), else the one the
    installed `tcl` package is in (`make setup` installs it editable). A worker started from
    the project's .venv therefore needs nothing else.
    """
    root = Path(os.environ.get(CHECKOUT_ENV) or REPO_ROOT).resolve()
    missing = [name for name in ("params.yaml", "flows") if not (root / name).exists()]
    if missing:
        raise FileNotFoundError(f"{root} is not a TCL checkout (no {' or '.join(missing)}); set {CHECKOUT_ENV} "
                                "to the clone the worker should run flows from")
    os.chdir(root)
    return {"directory": str(root)}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--out", default="prefect.yaml")
    ap.add_argument("--check", action="store_true", help="compare instead of writing; exit 1 when they differ")
    ap.add_argument("--pools", action="store_true", help="print the work pools the deployments need, one a line")
    args = ap.parse_args(argv)
    params = load_params(args.params)
    if args.pools:
        print("\n".join(work_pools(params)))
        return 0
    text = prefect_yaml(params)
    out = Path(args.out)
    if args.check:
        current = out.read_text() if out.exists() else ""
        if current == text:
            return 0
        sys.stdout.writelines(difflib.unified_diff(current.splitlines(True), text.splitlines(True),
                                                   str(out), f"from {args.params}"))
        print(f"{out} is out of date: run `python -m tcl.deploy`", file=sys.stderr)
        return 1
    out.write_text(text)
    print(f"wrote {out}: {', '.join(deployment_names(params))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
