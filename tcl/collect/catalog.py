"""Which tasks the dataset measures, in which order, and which networks each belongs to.

A *workload instance* is one network at one input size (``resnet50@224``). For each
instance the catalog takes `tasks_per_network` tasks: first the heaviest task of each
operator type (so depthwise convs, pools, softmax and norms are in the data, not just
the big convs), then the heaviest of the rest, by weight x FLOPs. Instances are then
interleaved round-robin, so a collection cut short anywhere still covers every
network. A task shared by several instances is measured once and remembers all of
them (`networks`: instance -> weight): the splits need that to keep every task of a
held-out network out of training.

The catalog has two tiers. Tier 0 is `networks`, what the dataset has measured from the
start; tier 1 is `extra_networks` (issue 28's wider families), selected after every tier-0
task (a task tier 0 already has is not picked again, though tier-1 instances are added to
its `networks`) and measured with `extra_pool_size` programs per task. Tier 0's order,
selection and signature do not depend on tier 1, so widening the catalog appends tasks
and never reorders or re-selects the ones measured already.

Extraction of 20+ instances costs minutes, so the catalog is saved with the store
(`_tasks.jsonl` + `_workloads/`) and reloaded when the selection settings are the same
(per tier: a new tier 1 reuses the saved tier 0).
"""

from __future__ import annotations

import hashlib
import json
import logging
from dataclasses import dataclass
from typing import Any

from ..data.store import RecordStore
from ..workloads import Task
from ..workloads.inputs import SIZE_KEYS, Size, instance_name, sizes_for
from ..workloads.networks import input_kind

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class CatalogTask:
    """A selected task and every workload instance it occurs in."""

    task: Task
    networks: dict[str, int]  # "resnet50@224" -> weight in that instance
    tier: int = 0             # 0: `networks`; 1: `extra_networks` (measured with `extra_pool_size`)


def workload_instances(cfg: dict[str, Any], tier: int = 0) -> list[tuple[str, Size]]:
    """(network, input size) pairs of one tier: every network at every size of its input kind
    (`image_sizes`, `seq_lens`, `audio_lens`, ... see `workloads/inputs.py`), unless
    `sizes_by_network` names the sizes of a network."""
    out = []
    for net in tier_networks(cfg, tier):
        out.extend((net, s) for s in sizes_for(cfg, net, input_kind(net)))
    return out


def tier_networks(cfg: dict[str, Any], tier: int) -> list[str]:
    nets = list(cfg.get("networks") or []) if tier == 0 else list(cfg.get("extra_networks") or [])
    if tier == 1:
        both = sorted(set(nets) & set(cfg.get("networks") or []))
        if both:
            raise ValueError(f"collect.extra_networks {both} are in collect.networks already")
    return nets


def tier_pool_size(cfg: dict[str, Any], tier: int) -> int:
    """Programs per task: `pool_size` for tier 0, `extra_pool_size` (default the same) for tier 1."""
    return int(cfg["pool_size"] if tier == 0 else cfg.get("extra_pool_size") or cfg["pool_size"])


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
    """What tier 0's selection depends on; a saved tier 0 is reused only when it matches.

    Only the settings that select something enter it (`sizes_by_network` of tier-0 networks,
    size lists of kinds beyond image/tokens that tier 0 uses), so adding tier-1 networks and
    their sizes leaves it, and the measured catalog, as they were.
    """
    import tvm

    nets = tier_networks(cfg, 0)
    keys = {k: cfg.get(k) for k in ("networks", "image_sizes", "seq_lens", "tasks_per_network")}
    by_net = {n: v for n, v in (cfg.get("sizes_by_network") or {}).items() if n in nets}
    keys["sizes_by_network"] = by_net if by_net or cfg.get("sizes_by_network") is not None else None
    for kind in sorted({input_kind(n) for n in nets} - {"image", "tokens"}):
        keys[SIZE_KEYS[kind]] = cfg.get(SIZE_KEYS[kind])
    text = json.dumps([keys, batch, target_json, tvm.__version__], sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def extra_signature(cfg: dict[str, Any], batch: int, target_json: str) -> str:
    """What tier 1's selection depends on: tier 0's signature, then its own instances."""
    text = json.dumps([catalog_signature(cfg, batch, target_json),
                       [instance_name(n, s) for n, s in workload_instances(cfg, 1)],
                       cfg.get("tasks_per_network")], sort_keys=True)
    return hashlib.sha1(text.encode()).hexdigest()[:16]


def _select(cfg: dict[str, Any], target, batch: int, tier: int, taken: set[str],
            membership: dict[str, dict[str, int]]) -> list[Task]:
    """Extract one tier's instances and pick its tasks (interleaved); fills `membership` and `taken`."""
    from tqdm.auto import tqdm

    from ..workloads import extract_tasks

    limit = int(cfg.get("tasks_per_network", 0))
    groups = []
    for net, size in tqdm(workload_instances(cfg, tier), desc=f"extract tasks (tier {tier})", unit="network"):
        tasks = extract_tasks(net, target, batch=batch, size=size)
        inst = instance_name(net, size)
        for t in tasks:
            membership.setdefault(t.key, {})[inst] = membership.get(t.key, {}).get(inst, 0) + int(t.weight)
        picked = pick_tasks(tasks, limit or len(tasks), taken)
        taken.update(t.key for t in picked)
        groups.append([Task(network=inst, name=t.name, key=t.key, weight=t.weight, op_type=t.op_type,
                            flops=t.flops, mod=t.mod) for t in picked])
    return interleave(groups)


def build_catalog(cfg: dict[str, Any], target, batch: int = 1,
                  tier0: list[CatalogTask] | None = None) -> list[CatalogTask]:
    """Extract every instance's tasks and select the catalog (minutes for 20+ instances).

    `tier0`, a saved tier 0 with a matching signature, is reused as it is (its tasks' `networks`
    gain the tier-1 instances they occur in); only tier 1 is extracted then.
    """
    membership: dict[str, dict[str, int]] = {}
    if tier0 is None:
        first = _select(cfg, target, batch, 0, set(), membership)
    else:
        first = [c.task for c in tier0]
        membership = {c.task.key: dict(c.networks) for c in tier0}
    second = _select(cfg, target, batch, 1, {t.key for t in first}, membership) if tier_networks(cfg, 1) else []
    return ([CatalogTask(t, membership[t.key]) for t in first]
            + [CatalogTask(t, membership[t.key], tier=1) for t in second])


def save_catalog(store: RecordStore, platform: str, catalog: list[CatalogTask], signature: str,
                 extra_sig: str = "") -> None:
    """`_tasks.jsonl` (+ workloads): each row carries its tier's signature; tier-1 rows say `tier: 1`
    (tier-0 rows are written as they always were)."""
    import tvm

    for c in catalog:
        store.save_workload(platform, c.task.key, tvm.ir.save_json(c.task.mod))
    store.save_tasks(platform, [
        {"network": c.task.network, "task_key": c.task.key, "task_name": c.task.name,
         "weight": int(c.task.weight), "op_type": c.task.op_type, "flops": float(c.task.flops),
         "networks": c.networks, "order": i, "signature": extra_sig if c.tier else signature,
         **({"tier": c.tier} if c.tier else {})}
        for i, c in enumerate(catalog)])


def _saved_task(store: RecordStore, platform: str, row: dict[str, Any]) -> Task | None:
    import tvm

    path = store.platform_dir(platform) / "_workloads" / f"{row['task_key']}.json"
    if not path.exists():
        return None
    return Task(network=row["network"], name=row["task_name"], key=row["task_key"], weight=int(row["weight"]),
                op_type=row["op_type"], flops=float(row["flops"]), mod=tvm.ir.load_json(path.read_text()))


def load_catalog(store: RecordStore, platform: str, signature: str, extra_sig: str | None = None
                 ) -> list[CatalogTask] | None:
    """The saved catalog, or None when there is none or it was selected with other settings.

    With `extra_sig` None only tier 0 is compared and returned; otherwise both tiers must match
    (a catalog without tier-1 rows matches when tier 1 is empty: `extra_sig` "")."""
    rows = sorted(store.tasks(platform), key=lambda r: r["order"])
    first = [r for r in rows if not r.get("tier")]
    second = [r for r in rows if r.get("tier")]
    if not first or any(r.get("signature") != signature for r in first):
        return None
    if extra_sig is not None and (bool(second) != bool(extra_sig)
                                  or any(r.get("signature") != extra_sig for r in second)):
        return None
    out = []
    for r in first + (second if extra_sig else []):
        task = _saved_task(store, platform, r)
        if task is None:
            return None
        out.append(CatalogTask(task, dict(r["networks"]), tier=int(r.get("tier", 0))))
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
    """The catalog saved under `platform`, or a freshly extracted one (then saved there).

    A saved tier 0 that still matches is kept as it is when only tier 1 changed."""
    signature = catalog_signature(cfg, batch, target_json)
    extra_sig = extra_signature(cfg, batch, target_json) if tier_networks(cfg, 1) else ""
    catalog = load_catalog(store, platform, signature, extra_sig)
    if catalog is not None:
        log.info("task catalog: %d tasks reused from %s", len(catalog), store.platform_dir(platform))
        return catalog
    tier0 = load_catalog(store, platform, signature)
    if tier0 is not None:
        log.info("task catalog: tier 0 (%d tasks) reused, extracting tier 1", len(tier0))
    catalog = build_catalog(cfg, target, batch, tier0)
    save_catalog(store, platform, catalog, signature, extra_sig)
    return catalog
