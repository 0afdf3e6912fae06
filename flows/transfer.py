"""Transfer flow: continual knowledge distillation over transfer.order, as tracked, registered MLflow runs."""

from __future__ import annotations

import argparse

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from prefect import flow, get_run_logger

from flows._params import load_checked_params
from tcl.tracking.headline import write_headline
from tcl.transfer.stage import run_stage


@flow(name="transfer", log_prints=True)
def transfer_flow(params_path: str = "params.yaml") -> dict:
    """Sample the target, learn every platform of transfer.order into the knowledge base, register each snapshot."""
    params = load_checked_params(params_path)
    m = run_stage(params, "data/features", "models/transfer", "reports/transfer/stage.json",
                  "reports/transfer/stage-forgetting.png")
    write_headline("transfer", "reports/transfer/stage.json", "reports/metrics/transfer.json")
    get_run_logger().info(
        "CKD %s: target %s (%d sampled programs) held-out top-1 %.3f, top-5 %.3f; KB %s versions %s; %s v%s%s "
        "(%.0f s)", " -> ".join(m["order"]), m["target"], m["target_programs"], m["test_top1_ratio_of_sums"],
        m["test_top5_ratio_of_sums"], m["kb_model"], ",".join(m["kb_versions"]), m["registered_model"],
        m["version"], " (champion)" if m["champion"] else "", m["seconds"])
    return m


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=transfer_flow.__doc__)
    ap.add_argument("--params", default="params.yaml")
    transfer_flow(ap.parse_args().params)
