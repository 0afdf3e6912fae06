"""The keys of params.yaml's `collect:` and `retest:` sections, checked when params load.

These sections stay mappings: six modules (catalog, collector, measure, remote, retest, grow) each read
the keys they need with their own defaults, and a settings class would hold a second copy of every
default. What a typo needs is to fail before hours of measuring start, naming the key: that is here.
"""

from __future__ import annotations

from typing import Any

from ..config import check_keys

COLLECT_KEYS = ("source", "platforms", "networks", "image_sizes", "seq_lens", "sizes_by_network",
                "tasks_per_network", "max_tasks", "pool_size", "extra_networks", "extra_pool_size", "audio_lens",
                "clip_sizes", "cache_lens", "tabular_rows", "batch_size", "search", "population", "search_cpus",
                "runner", "builder")
RUNNER_KEYS = ("number", "repeat", "min_repeat_ms", "timeout_sec", "cpu_cache_flush", "cpus", "mode", "rpc")
RPC_KEYS = ("tracker", "session_timeout_sec", "connect_timeout_sec", "priority")
BUILDER_KEYS = ("timeout_sec", "cpus")
RETEST_KEYS = ("fraction", "seed")  # and any collect key: the retest measures with collect's settings overridden
# A collection of its own (params.yaml `gpu_collect`): its store, and any collect key it overrides. A GPU's pools
# cannot share the CPU store: pools are keyed by task, and a GPU task has the CPU task's key.
OVERLAY_KEYS = ("store",)
OVERLAYS = ("gpu_collect",)


def _check_mapping(value: Any, known: tuple[str, ...], where: str) -> None:
    if value is not None and not isinstance(value, dict):
        raise ValueError(f"params.yaml {where}: expected a mapping, got {value!r:.60}")
    check_keys(value, known, where)


def check_collect_params(params: dict[str, Any]) -> None:
    """ValueError naming the first unknown key of `collect` (runner, rpc, builder included) or `retest`."""
    collect = params.get("collect")
    if collect is None:
        return
    check_keys(collect, COLLECT_KEYS, "collect")
    _check_mapping(collect.get("runner"), RUNNER_KEYS, "collect.runner")
    _check_mapping((collect.get("runner") or {}).get("rpc"), RPC_KEYS, "collect.runner.rpc")
    _check_mapping(collect.get("builder"), BUILDER_KEYS, "collect.builder")
    for name in OVERLAYS:
        if params.get(name) is not None:
            check_keys(params[name], OVERLAY_KEYS + COLLECT_KEYS, name)
    retest = params.get("retest")
    if retest is not None:
        check_keys(retest, RETEST_KEYS + COLLECT_KEYS, "retest")
        fraction = retest.get("fraction")
        if isinstance(fraction, bool) or not isinstance(fraction, (int, float)) or not 0 < fraction <= 1:
            raise ValueError(f"params.yaml retest.fraction: expected a share in (0, 1], got {fraction!r:.40}")


def overlaid(params: dict[str, Any], section: str) -> tuple[dict[str, Any], str]:
    """(params with `collect` overridden by `section`'s keys, the section's store): the collect flow run for
    a collection of its own, e.g. `gpu_collect`."""
    if section not in OVERLAYS or not params.get(section):
        raise ValueError(f"params.yaml has no collection section {section!r} (known: {', '.join(OVERLAYS)})")
    overlay = dict(params[section])
    store = overlay.pop("store", None)
    if not store:
        raise ValueError(f"params.yaml {section}.store: a collection of its own needs its own store directory")
    return {**params, "collect": {**params["collect"], **overlay}}, str(store)
