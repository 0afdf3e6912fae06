"""KB-prior flow: a pretrained XGB per platform of `kb_prior.platforms`, fitted on every validated
platform of its ISA class (tcl/train/kb_prior.py), registered as `<prefix>-xgb_kb-<platform>`."""

from __future__ import annotations

import argparse

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from prefect import flow, get_run_logger, task
from prefect.cache_policies import NO_CACHE

from flows._params import load_checked_params
from tcl.train.kb_prior import fit_kb_priors

METRICS = "reports/train/kb_prior.json"


@task(name="kb-prior", cache_policy=NO_CACHE)
def fit_priors(params: dict) -> dict:
    return fit_kb_priors(params, out_dir="models/kb", metrics_path=METRICS)


@flow(name="kb-prior", log_prints=True)
def kb_prior_flow(params_path: str = "params.yaml") -> dict:
    """Fit, score on each platform's held-out tasks, register and gate every platform's prior."""
    params = load_checked_params(params_path)
    results = fit_priors(params)
    log = get_run_logger()
    for name, by_platform in results.items():
        for platform, m in by_platform.items():
            log.info("%s for %s, fitted on %s (%d programs): test top-1 %.3f (eq. 12; random %.3f), mean per task "
                     "%.3f; %s v%s%s", name, platform, ",".join(m["fitted_on"]), m["train_rows"],
                     m.get("test_top1_ratio_of_sums", float("nan")), m.get("random_test_top1", float("nan")),
                     m.get("test_top1_mean_per_task", float("nan")),
                     m["registered_model"] or "not registered", m["version"], " (champion)" if m["champion"] else "")
    return results


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--params", default="params.yaml")
    kb_prior_flow(ap.parse_args().params)
