"""Which tasks the dataset measures, in which order, and which networks each belongs to.

A *workload instance* is one network at one input size (``resnet50@224``). For each
instance the catalog takes `tasks_per_network` tasks: first the heaviest task of each
operator type (so depthwise convs, pools, softmax and norms are in the data, not just
the big convs), then the heaviest of the rest, by weight x FLOPs. Instances are then
interleaved round-robin, so a collection cut short anywhere still covers every
network. A task shared by several instances is measured once and remembers all of
them (`networks`: instance -> weight): the splits need that to keep every task of a
held-out network out of training.

Extraction of 20+ instances costs minutes, so the catalog is saved with the store
(`_tasks.jsonl` + `_workloads/`) and reloaded when the selection settings are the same.
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from ..data.store import RecordStore
from ..workloads import Task
from ..workloads.networks import is_image_network

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CatalogTask:
    """A selected task and every workload instance it occurs in."""

    task: Task
    networks: dict[str, int]  # "resnet50@224" -> weight in that instance


def instance_name(network: str, size: int) -> str:
    return f"{network}@{size}"


def base_network(instance: str) -> str:
    """`resnet50@224` -> `resnet50` (names without a size are returned as they are)."""
    return instance.split("@", 1)[0]


def workload_instances(cfg: dict[str, Any]) -> list[tuple[str, int]]:
    """(network, input size) pairs: image networks at every `image_sizes`, token networks at every
    `seq_lens`, unless `sizes_by_network` names the sizes of a network."""
    out = []
    for net in cfg["networks"]:
        sizes = (cfg.get("sizes_by_network") or {}).get(net) or (
            cfg["image_sizes"] if is_image_network(net) else cfg["seq_lens"])
        if not sizes:
            raise ValueError(f"collect: no input sizes for network '{net}' (image_sizes / seq_lens)")
        out.extend((net, int(s)) for s in sizes)
    return out


def pick_tasks(tasks: list[Task], limit: int, taken: set[str]) -> list[Task]:
    """Up to `limit` tasks not in `taken`: the heaviest of each op type first, then by weight x FLOPs.

    `tasks` must be sorted heaviest first (as `extract_tasks` returns them).
    """
    fresh = [t for t in tasks if t.key not in taken]
    first_of_type: dict[str, Task] = {}
    for t in fresh:
        first_of_type.setdefault(t.op_type, t)
    chosen = list(first_of_type.values())[:limit]
    keys = {t.key for t in chosen}
    chosen += [t for t in fresh if t.key not in keys][: max(0, limit - len(chosen))]
    return sorted(chosen, key=lambda t: (-t.weighted_flops, t.name, t.key))


def interleave(groups: list[list[Any]]) -> list[Any]:
    """Round-robin: the first of every group, then the second of every group, ..."""
    out = []
    for i in range(max((len(g) for g in groups), default=0)):
        out.extend(g[i] for g in groups if i < len(g))
    return out


def catalog_signature(cfg: dict[str, Any], batch: int, target_json: str) -> str:
    """What the selection depends on; a saved catalog is reused only when it matches."""
    import tvm

    keys = {k: cfg.get(k) for k in ("networks", "image_sizes", "seq_lens", "sizes_by_network", "tasks_per_network")}
    text = json.dumps([keys, batch, target_json, tvm.__version__], sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def build_catalog(cfg: dict[str, Any], target, batch: int = 1) -> list[CatalogTask]:
    """Extract every instance's tasks and select the catalog (minutes for 20+ instances)."""
    from tqdm.auto import tqdm

    from ..workloads import extract_tasks

    limit = int(cfg.get("tasks_per_network", 0))
    membership: dict[str, dict[str, int]] = {}
    groups, taken = [], set()
    for net, size in tqdm(workload_instances(cfg), desc="extract tasks", unit="network"):
        tasks = extract_tasks(net, target, batch=batch, image_size=size, seq_len=size)
        inst = instance_name(net, size)
        for t in tasks:
            membership.setdefault(t.key, {})[inst] = membership.get(t.key, {}).get(inst, 0) + int(t.weight)
        picked = pick_tasks(tasks, limit or len(tasks), taken)
        taken.update(t.key for t in picked)
        groups.append([Task(network=inst, name=t.name, key=t.key, weight=t.weight, op_type=t.op_type,
                            flops=t.flops, mod=t.mod) for t in picked])
    return [CatalogTask(t, membership[t.key]) for t in interleave(groups)]


def save_catalog(store: RecordStore, platform: str, catalog: list[CatalogTask], signature: str) -> None:
    import tvm

    for c in catalog:
        store.save_workload(platform, c.task.key, tvm.ir.save_json(c.task.mod))
    store.save_tasks(platform, [
        {"network": c.task.network, "task_key": c.task.key, "task_name": c.task.name,
         "weight": int(c.task.weight), "op_type": c.task.op_type, "flops": float(c.task.flops),
         "networks": c.networks, "order": i, "signature": signature}
        for i, c in enumerate(catalog)])


def _saved_task(store: RecordStore, platform: str, row: dict[str, Any]) -> Task | None:
    import tvm

    path = store.platform_dir(platform) / "_workloads" / f"{row['task_key']}.json"
    if not path.exists():
        return None
    return Task(network=row["network"], name=row["task_name"], key=row["task_key"], weight=int(row["weight"]),
                op_type=row["op_type"], flops=float(row["flops"]), mod=tvm.ir.load_json(path.read_text()))


def load_catalog(store: RecordStore, platform: str, signature: str) -> list[CatalogTask] | None:
    """The saved catalog, or None when there is none or it was selected with other settings."""
    rows = store.tasks(platform)
    if not rows or any(r.get("signature") != signature for r in rows):
        return None
    out = []
    for r in sorted(rows, key=lambda r: r["order"]):
        task = _saved_task(store, platform, r)
        if task is None:
            return None
        out.append(CatalogTask(task, dict(r["networks"])))
    return out


def load_tasks_by_key(store: RecordStore, platform: str) -> dict[str, Task]:
    """The tasks saved with a platform's records (with their workloads), by task key."""
    out = {}
    for row in store.tasks(platform):
        task = _saved_task(store, platform, row)
        if task is None:
            raise FileNotFoundError(f"{store.platform_dir(platform)}/_workloads/{row['task_key']}.json is missing: "
                                    "the store is incomplete (dvc pull?)")
        out[task.key] = task
    return out


def task_catalog(store: RecordStore, platform: str, cfg: dict[str, Any], target, target_json: str,
                 batch: int = 1) -> list[CatalogTask]:
    """The catalog saved under `platform`, or a freshly extracted one (then saved there)."""
    signature = catalog_signature(cfg, batch, target_json)
    catalog = load_catalog(store, platform, signature)
    if catalog is not None:
        log.info("task catalog: %d tasks reused from %s", len(catalog), store.platform_dir(platform))
        return catalog
    catalog = build_catalog(cfg, target, batch)
    save_catalog(store, platform, catalog, signature)
    return catalog
