"""Grow flow: measure what the knowledge base lacks on this machine's platforms, checkpointing.

    make collect                                   # in the background, log in logs/
    python -m flows.grow                            # the same, in the foreground
    python -m flows.grow --every-min 20 --no-git    # commit to DVC and push, but no git commits
    make collect COLLECT_ARGS="--platforms host-avx512-1c"   # one of this CPU's platforms only

Deployed as `grow/<platform>` on that platform's host pool (params.yaml `deploy.grow`), on a
schedule: every machine measures while it is there (tcl/collect/grow.py).
"""

from __future__ import annotations

import argparse
import sys

from flows import _env  # noqa: F401  (closed-network defaults before Prefect loads)
from flows.collect import measure  # first: it loads TVM's intrinsics before Prefect (flows/_tvm_first.py)
from prefect import flow, get_run_logger

from flows._tasks import retry_options, stopping_on_signals
from tcl.collect.grow import grow
from tcl.collect.host import NewMachine
from flows._params import load_checked_params


@flow(name="grow", log_prints=True)
def grow_flow(platform: str | None = None, params_path: str = "params.yaml", store_root: str = "data/records",
              every_min: float = 20.0, push: bool = True, git: bool = True, progress: bool = True,
              platforms: list[str] | None = None) -> list:
    """Measure, on every platform of this CPU, what the store lacks; commit and push every `every_min`."""
    params = load_checked_params(params_path)
    with stopping_on_signals():  # `kill -- -<pid>` or Ctrl-C: no retry starts the measuring processes again
        summaries = grow(params, store_root, every_min=every_min, push=push, git=git, progress=progress,
                         measure=measure.with_options(**retry_options(params, "measure")), only=platform,
                         params_path=params_path, platforms=platforms)
    logger = get_run_logger()
    for s in summaries:
        logger.info("platform %s: %d tasks, %d measured now (%d failed), %d were already there, %d records in store",
                    s.platform, s.tasks, s.measured_now, s.failed_now, s.already_had, s.total_records)
    return [vars(s) for s in summaries]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--params", default="params.yaml")
    ap.add_argument("--store", default="data/records")
    ap.add_argument("--every-min", type=float, default=20.0, help="minutes between checkpoints (default 20)")
    ap.add_argument("--no-push", action="store_true", help="no `dvc push` (and so no git commit of the remote)")
    ap.add_argument("--no-git", action="store_true", help="no git commits of dvc.lock and the remote")
    ap.add_argument("--platforms", default="", help="comma-separated: only these of this CPU's platforms")
    args = ap.parse_args()
    try:
        grow_flow(None, args.params, args.store, args.every_min, push=not args.no_push, git=not args.no_git,
                  platforms=[p for p in args.platforms.split(",") if p] or None)
    except (NewMachine, RuntimeError) as e:
        print(f"make collect: {e}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
