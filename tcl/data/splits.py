"""Train / validation / test splits and ranking labels.

Test = every task of the held-out networks (TCL/TLP hold out ResNet-50,
MobileNet-V2, ResNeXt-50, BERT-tiny, BERT-base), so the top-k evaluation sees
networks the model never trained on. A task shared with a held-out network is a
test task even if it also occurs in a training network: otherwise the "unseen"
network would be partly seen. The remaining tasks are split 9:1 into train and
validation BY TASK (all platforms' records of a task land in the same split),
with a seeded shuffle of the sorted task keys: the same data and seed give the
same split on every machine.

Network names are compared normalized (lower case, without `_`/`-` and without an
`@<input size>` suffix), so Tenset's `resnet_50` and our `resnet50@224` are the same network.

Label (TCL eq. 6 / TLP): `min latency of the task on its platform / latency`, in
(0, 1] for programs that ran; failed programs get 0.
"""

from __future__ import annotations

import json
import re
from dataclasses import asdict, dataclass, fields
from pathlib import Path
from typing import Any, Iterable, Mapping

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ..config import check_keys

SPLITS = ("train", "validation", "test")
DEFAULT_HOLDOUT = ("resnet50", "mobilenet_v2", "resnext50", "bert_tiny", "bert_base")


@dataclass(frozen=True)
class SplitSettings:
    """The `split:` section (seed defaults to the top-level one); unknown keys fail naming them."""

    holdout_networks: tuple[str, ...] = DEFAULT_HOLDOUT
    val_fraction: float = 0.1
    min_val_tasks: int = 0
    seed: int = 0

    @classmethod
    def from_params(cls, params: Mapping[str, Any]) -> "SplitSettings":
        cfg = params.get("split") or {}
        check_keys(cfg, [f.name for f in fields(cls)], "split")
        return cls(holdout_networks=tuple(cfg.get("holdout_networks", cls.holdout_networks)),
                   val_fraction=float(cfg.get("val_fraction", cls.val_fraction)),
                   min_val_tasks=int(cfg.get("min_val_tasks", cls.min_val_tasks)),
                   seed=int(cfg.get("seed", params.get("seed", cls.seed))))

    def kwargs(self) -> dict[str, Any]:
        """As task_splits / assign_splits take them."""
        return asdict(self)


def normalize_network(name: str) -> str:
    """`ResNet_50@224` -> `resnet50`: the input size of a workload instance is not part of the network."""
    return re.sub(r"[-_\s]", "", (name or "").split("@", 1)[0]).lower()


def add_labels(table: pa.Table) -> pa.Table:
    """Append `label` = min mean_sec of the (platform, task) / mean_sec; 0 for failed records."""
    ok = pc.and_(pc.equal(pc.fill_null(table.column("error_code"), "x"), ""),
                 pc.greater(pc.fill_null(table.column("mean_sec"), 0.0), 0.0))
    best = (table.select(["platform", "task_key", "mean_sec"]).filter(ok)
            .group_by(["platform", "task_key"]).aggregate([("mean_sec", "min")]))
    best_of = {(p, t): m for p, t, m in zip(best.column("platform").to_pylist(),
                                            best.column("task_key").to_pylist(),
                                            best.column("mean_sec_min").to_pylist())}
    labels = []
    for p, t, m, good in zip(table.column("platform").to_pylist(), table.column("task_key").to_pylist(),
                             table.column("mean_sec").to_pylist(), ok.to_pylist()):
        labels.append(best_of[(p, t)] / m if good else 0.0)
    return table.append_column("label", pa.array(labels, pa.float64()))


def task_splits(table: pa.Table, *, holdout_networks: Iterable[str] = DEFAULT_HOLDOUT,
                val_fraction: float = 0.1, seed: int = 0, min_val_tasks: int = 0,
                task_networks: Mapping[str, Iterable[str]] | None = None) -> dict[str, str]:
    """task_key -> split name. `task_networks` adds networks a task occurs in beyond its records'.

    Validation gets `val_fraction` of the training tasks, and at least `min_val_tasks`
    (a champion gate on one or two tasks is a coin toss), while at least one task trains.
    """
    if not 0 <= val_fraction < 1:
        raise ValueError(f"split.val_fraction={val_fraction} is not in [0, 1)")
    holdout = {normalize_network(n) for n in holdout_networks}
    networks: dict[str, set[str]] = {}
    for key, net in zip(table.column("task_key").to_pylist(), table.column("network").to_pylist()):
        networks.setdefault(key, set()).add(normalize_network(net))
    for key, nets in (task_networks or {}).items():
        if key in networks:
            networks[key].update(normalize_network(n) for n in nets)
    test = sorted(k for k, nets in networks.items() if nets & holdout)
    rest = np.array(sorted(k for k in networks if not networks[k] & holdout), dtype=object)
    order = np.random.default_rng(seed).permutation(len(rest))
    n_val = min(max(int(round(len(rest) * val_fraction)), min_val_tasks), max(len(rest) - 1, 0))
    out = {k: "test" for k in test}
    for rank, i in enumerate(order):
        out[rest[i]] = "validation" if rank < n_val else "train"
    return out


def assign_splits(table: pa.Table, *, holdout_networks: Iterable[str] = DEFAULT_HOLDOUT,
                  val_fraction: float = 0.1, seed: int = 0, min_val_tasks: int = 0,
                  task_networks: Mapping[str, Iterable[str]] | None = None) -> pa.Table:
    """The table with `label` and `split` columns appended."""
    of = task_splits(table, holdout_networks=holdout_networks, val_fraction=val_fraction, seed=seed,
                     min_val_tasks=min_val_tasks, task_networks=task_networks)
    split = pa.array([of[k] for k in table.column("task_key").to_pylist()], pa.string())
    return add_labels(table).append_column("split", split)


def task_networks_of(records_dir: str | Path) -> dict[str, list[str]]:
    """task_key -> every workload instance it occurs in, from a records partition's `_tasks.jsonl`
    (empty when there is none, e.g. ingested logs without task metadata)."""
    path = Path(records_dir) / "_tasks.jsonl"
    if not path.exists():
        return {}
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return {r["task_key"]: sorted(r.get("networks") or [r["network"]]) for r in rows}


def split_tables(table: pa.Table, params: dict[str, Any],
                 task_networks: Mapping[str, Iterable[str]] | None = None) -> dict[str, pa.Table]:
    """{train, validation, test} tables (with labels) using `params['split']` and `params['seed']`."""
    marked = assign_splits(table, **SplitSettings.from_params(params).kwargs(), task_networks=task_networks)
    return {name: marked.filter(pc.equal(marked.column("split"), name)).drop_columns(["split"])
            for name in SPLITS}
