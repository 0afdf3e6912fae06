"""Platform data for a transfer sequence, one platform's training arrays in memory at a time.

CKD's point against multi-task learning is that it never needs two platforms' data
together (TCL §6): each phase reads only its own platform. `PlatformData` makes that
checkable: `train(p)` drops the previous platform's arrays before loading p's, and
`loads` / `resident` record what was read and what is held. A sampled platform (the
target at 10%) yields only its sampled rows, relabelled against the best sampled
program of each task (the unsampled optimum is unknown to it).

Held-out splits (`evaluation`) are read separately: they only score models (the
forgetting picture, the champion gate) and are never trained on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Callable, Mapping

import numpy as np

from ..features.dataset import load_split
from ..models.bundle import op_type_tasks
from ..sampling.scorer import relabel_within

Arrays = dict[str, np.ndarray]


class PlatformData:
    """`train(platform)` -> that platform's training arrays; at most one platform resident."""

    def __init__(self, load: Callable[[str, str], Arrays], samples: Mapping[str, np.ndarray] | None = None,
                 eval_split: str = "validation"):
        self._load = load
        self.samples = {p: np.asarray(rows, dtype=np.int64) for p, rows in (samples or {}).items()}
        self.eval_split = eval_split
        self.loads: list[str] = []
        self._tasks: dict[str, Arrays] = {}  # platform -> the task_key and op_type columns it trained on
        self._resident: dict[str, Arrays] = {}

    @classmethod
    def from_features(cls, features_root: str | Path, samples: Mapping[str, np.ndarray] | None = None,
                      eval_split: str = "validation") -> PlatformData:
        """Platforms' splits as the featurize stage wrote them: <features_root>/<platform>/<split>.npz."""
        root = Path(features_root)
        return cls(lambda platform, split: load_split(root / platform, split), samples, eval_split)

    @property
    def resident(self) -> tuple[str, ...]:
        """The platforms whose training arrays are held now (never more than one)."""
        return tuple(self._resident)

    def train(self, platform: str) -> Arrays:
        """The platform's training arrays (its sample when it has one); the previous platform's are dropped."""
        if platform in self._resident:
            return self._resident[platform]
        self._resident.clear()
        arrays = self._load(platform, "train")
        if len(arrays["x"]) == 0:
            raise ValueError(f"platform {platform!r} has no training programs: it cannot take part in a transfer")
        if platform in self.samples:
            rows = self.samples[platform]
            arrays = {**{k: v[rows] for k, v in arrays.items()},
                      "label": relabel_within(arrays["label"], arrays["group"], rows).astype(np.float32)}
        self.loads.append(platform)
        self._tasks[platform] = {k: arrays[k] for k in ("task_key", "op_type") if k in arrays}
        self._resident[platform] = arrays
        return arrays

    @property
    def op_types(self) -> dict[str, int]:
        """Training tasks per operator type over every platform trained on so far (a bundle's meta)."""
        return op_type_tasks(*self._tasks.values())

    def evaluation(self, platform: str) -> Arrays:
        """The platform's held-out split for scoring (not cached here, not counted as resident)."""
        return self._load(platform, self.eval_split)
