"""Validate flow: Great Expectations over one platform's records; bad rows quarantined, loud failure."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from prefect import flow, get_run_logger

from tcl.compute import run_units
from flows._params import load_checked_params
from tcl.data.validation.platform import ValidationFailed, validate_platform
from tcl.tracking.headline import write_headline

DEFAULT_STORES = ("data/records", "data/tenset")


@flow(name="validate", log_prints=True)
def validate_flow(platform: str, params_path: str = "params.yaml") -> dict:
    """Validate every record of `platform`; raises ValidationFailed past `validate.max_failed_share`.
    Batches run where `compute.runner` says (in this process, or one per Dask task)."""
    params = load_checked_params(params_path)
    cfg = params.get("validate") or {}
    summary = run_units(params, f"validate-{platform}", lambda units: validate_platform(
        platform, params, stores=list(cfg.get("stores", DEFAULT_STORES)),
        validated_root=cfg.get("validated_root", "data/validated"),
        quarantine_dir=cfg.get("quarantine_dir", "data/quarantine"),
        report_dir=cfg.get("report_dir", "reports/validation"), units=units))
    reports = Path(cfg.get("report_dir", "reports/validation"))
    write_headline("validate", reports / f"{platform}.json", reports.parent / "metrics" / f"validate-{platform}.json")
    get_run_logger().info(summary.describe())
    return summary.to_json()


def main() -> None:
    ap = argparse.ArgumentParser(description=validate_flow.__doc__)
    ap.add_argument("--platform", required=True)
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args()
    try:
        validate_flow(args.platform, args.params)
    except ValidationFailed as e:
        print(f"VALIDATION FAILED\n{e}", file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
