"""The command line every per-platform flow shares: `python -m flows.<stage> --platform NAME`."""

from __future__ import annotations

import argparse
from typing import Callable


def run_platform_flow(flow_fn: Callable[[str, str], object]) -> None:
    ap = argparse.ArgumentParser(description=flow_fn.__doc__)
    ap.add_argument("--platform", required=True, help="a platform declared in params.yaml")
    ap.add_argument("--params", default="params.yaml")
    args = ap.parse_args()
    flow_fn(args.platform, args.params)
