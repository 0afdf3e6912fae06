"""The online-adaptation interface, its settings and the registry by name.

An adapter turns a trained bundle into per-task scorers. MetaSchedule tunes many tasks
in turn and reports each measured batch through `update`; the adapter keeps every
task's measured programs (features and latencies) apart, so what one task teaches its
scorer never changes another task's ranking (unless the method shares state on purpose,
as MoA's Siamese model does, slowly).
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass
from typing import Any, Callable, ClassVar

import numpy as np

from ...config import settings_from
from ...registry import registrar

Prior = Callable[[str, np.ndarray], np.ndarray]  # (task, model inputs) -> pretrained scores
ADAPTERS: dict[str, type["OnlineAdapter"]] = {}
register_adapter = registrar(ADAPTERS, "online adaptation")


@dataclass(frozen=True)
class OnlineSettings:
    """`tune.online` of params.yaml."""

    steps: int = 20          # ft, moa: gradient steps on the task's measured programs per update
    lr: float = 7e-4         # ft, moa: Adam learning rate of those steps
    momentum: float = 0.99   # moa: Siamese <- momentum * Siamese + (1 - momentum) * target (the paper's 0.99)
    period: int = 1          # moa: the momentum update after every `period`-th update of a task
    boost_rounds: int = 10   # boost: trees grown on top of the pretrained scores at each update
    boost_scope: str = "task"  # boost: "task" (a booster per task) | "run" (one over every task's measurements)
    min_programs: int = 2    # no adaptation before a task has this many measured programs

    @classmethod
    def from_params(cls, params: dict[str, Any]) -> "OnlineSettings":
        return settings_from(cls, (params.get("tune") or {}).get("online"), "tune.online")

    def recorded(self, adaptation: str) -> dict[str, Any]:
        """What a tuning run with `adaptation` records of these settings beside its search's, to tell it from the
        runs before them: the boost scope when its trees learn from more than their own task."""
        return {"boost_scope": self.boost_scope} if adaptation == "boost" and self.boost_scope != "task" else {}


def concat_rows(arrays: list[np.ndarray]) -> np.ndarray:
    """Stack batches of model inputs; per-store inputs differ in width (axis 1) and are zero-padded."""
    if arrays[0].ndim == 3:
        width = max(a.shape[1] for a in arrays)
        arrays = [np.pad(a, ((0, 0), (0, width - a.shape[1]), (0, 0))) if a.shape[1] < width else a
                  for a in arrays]
    return np.concatenate(arrays)


class OnlineAdapter(ABC):
    """Per-task scoring of candidates that may learn from the task's measurements."""

    name: ClassVar[str]
    learns: ClassVar[bool] = True  # False: `observe` is never called (nothing to featurize after measuring)
    takes_prior: ClassVar[bool] = False  # True: the pretrained scores may come from `prior` (an ensemble)

    def __init__(self, bundle, settings: OnlineSettings | None = None, prior: Prior | None = None):
        """`prior(task, x)`, when given, scores in place of the bundle's model (tcl.tvm.ensemble); the bundle
        still featurizes, and methods that train the bundle's network refuse it."""
        if prior is not None and not self.takes_prior:
            raise ValueError(f"online adaptation '{self.name}' trains one network; an ensemble is scored "
                             f"{' or '.join(prior_adaptations())}")
        self.bundle = bundle
        self.prior = prior
        self.settings = settings or OnlineSettings()
        self._seen: dict[str, tuple[list[np.ndarray], list[np.ndarray]]] = {}
        self.updates: dict[str, int] = {}  # task -> adaptations made
        self.check(bundle)

    def check(self, bundle) -> None:
        """Raise ValueError when this method cannot adapt `bundle`'s model."""

    @abstractmethod
    def score(self, task: str, x: np.ndarray) -> np.ndarray:
        """Scores (higher = faster) of model inputs `x` of candidates of `task`."""

    def observe(self, task: str, x: np.ndarray, latencies: np.ndarray) -> None:
        """Measured programs of `task` (inputs and mean latencies in seconds): keep them, then adapt."""
        xs, lats = self._seen.setdefault(task, ([], []))
        xs.append(np.asarray(x, dtype=np.float32))
        lats.append(np.asarray(latencies, dtype=np.float64))
        all_lat = np.concatenate(lats)
        if len(all_lat) < self.settings.min_programs:
            return
        labels = (all_lat.min() / all_lat).astype(np.float32)  # the training label: best / own latency
        self.adapt(task, concat_rows(xs), labels)
        self.updates[task] = self.updates.get(task, 0) + 1

    def adapt(self, task: str, x: np.ndarray, labels: np.ndarray) -> None:
        """Learn from all measured programs of `task` so far (labels in (0, 1], 1 = the best)."""


def prior_adaptations() -> list[str]:
    """The adaptations that take an ensemble as their prior (`takes_prior`)."""
    return sorted(name for name, adapter in ADAPTERS.items() if adapter.takes_prior)


def make_adapter(name: str, bundle, settings: OnlineSettings | None = None,
                 prior: Prior | None = None) -> OnlineAdapter:
    if name not in ADAPTERS:
        raise ValueError(f"unknown online adaptation {name!r}; known: {sorted(ADAPTERS)}")
    return ADAPTERS[name](bundle, settings, prior)
