"""The promotion gate: a registered version becomes `champion` only if it ranks better now.

A score stored when a version was registered may come from other data (an earlier
featurize run, another split), so the gate loads the candidate and the current champion
from the registry and scores both on the same held-out programs: the platform's current
validation split (`data/features/<platform>/validation.npz`), top-1 as the mean per task
(tcl.train.evaluate.gate_top1). Not eq. 12: eq. 12 weights each task by weight x best
latency, so on a split of a few tasks one or two heavy tasks decide it, and two runs of
the same model swing across the gate by chance; the mean per task counts every held-out
task once. The candidate gets the `challenger` alias; `champion` moves to it only when its
top-1 is strictly higher than the champion's, or when there is no champion yet. A NaN top-1
(a model emitting non-finite scores, or nothing to score) never promotes.

Scores on one split compare only models validated on it: when the split changes (more tasks measured,
other held-out networks), the champion may have trained on tasks that are validation tasks now, and
its score there is inflated. A version is tagged with a fingerprint of its validation tasks
(`split.validation_tasks`); a candidate whose fingerprint the champion does not share takes over (if
its top-1 is finite), the champion's score on today's split shown for information only.

Each model is scored with its own featurizer: a token model whose tokenizer is not the
current one (trained before a refit) is re-tokenized from the platform's validated records
of the same programs; Tenset-MLP and PaCM read features made from the records (tcl.train.inputs).
"""

from __future__ import annotations

import hashlib
import math
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any, Callable

import numpy as np

from .. import tracking
from ..features.dataset import load_split, load_tokenizer
from ..features.kinds import TOKENS
from ..tracking.provenance import format_score
from ..models.bundle import ModelBundle
from .evaluate import gate_top1
from ..models.base import predict

Split = dict[str, np.ndarray]
SPLIT_TAG = "split.validation_tasks"  # a version's validation tasks, fingerprinted (validation_fingerprint)


def validation_fingerprint(split: Split) -> str:
    """sha256 (16 hex) of a split's sorted task keys: equal fingerprints, the same held-out tasks."""
    keys = sorted({str(k) for k in split["task_key"].tolist()})
    return hashlib.sha256("\n".join(keys).encode()).hexdigest()[:16]


def other_split(candidate_tags: dict[str, str], champion_tags: dict[str, str], champion_version: str) -> str | None:
    """Why the champion cannot be compared on the candidate's validation split, or None when it can.
    A candidate without the tag (a knowledge-base snapshot, scored on a fixed held-out set) compares as before."""
    mine = candidate_tags.get(SPLIT_TAG)
    theirs = champion_tags.get(SPLIT_TAG)
    if not mine or theirs == mine:
        return None
    return (f"champion v{champion_version} was validated on {'an untagged split' if not theirs else 'tasks ' + theirs}, "
            f"the candidate on tasks {mine}: the champion may have trained on today's validation tasks, so its "
            "score there is no comparison")


@dataclass(frozen=True)
class Decision:
    """What the gate decided for `name` version `version`, with both scores and why."""

    name: str
    version: str
    candidate_top1: float
    champion_version: str | None  # the champion before the gate (None: there was none)
    champion_top1: float          # NaN when there was none
    promoted: bool                # the candidate holds `champion` after the gate
    reason: str
    programs: int                 # held-out programs both were scored on

    def describe(self) -> str:
        if self.champion_version == self.version:
            verdict = "stays champion"
        elif self.promoted:
            verdict = "promoted to champion"
        else:
            verdict = f"not promoted (champion stays {'v' + self.champion_version if self.champion_version else 'unset'})"
        champ = (f"champion v{self.champion_version} {self.champion_top1:.4f}" if self.champion_version
                 else "no champion")
        return (f"{self.name} v{self.version} {verdict}: {self.reason} [top-1 (mean per task) on {self.programs} "
                f"validation programs: candidate {self.candidate_top1:.4f}, {champ}]")

    def tags(self) -> dict[str, str]:
        """`promotion.*` tags for the candidate version."""
        return {"promotion.decision": "promoted" if self.promoted else "refused",
                "promotion.reason": self.reason,
                "promotion.top1": format_score(self.candidate_top1),
                "promotion.champion_version": self.champion_version or "none",
                "promotion.champion_top1": format_score(self.champion_top1),
                "promotion.programs": str(self.programs)}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


def held_out_top1(bundle: ModelBundle, split: Split) -> float:
    """The gate's top-1 (mean per task) of the bundle's scores on `split`; NaN if it emits any
    non-finite score or there is nothing to score."""
    if len(split["x"]) == 0:
        return math.nan
    return gate_top1(split, predict(bundle.model, split["x"]))


def decide(candidate_top1: float, champion_version: str | None, champion_top1: float) -> tuple[bool, str]:
    """(promote?, why): strictly higher top-1 than the champion's, or no champion; never on NaN."""
    if not math.isfinite(candidate_top1):
        return False, "the candidate's top-1 is NaN (non-finite scores, or no validation programs): NaN never promotes"
    if champion_version is None:
        return True, "there is no champion yet"
    if not math.isfinite(champion_top1):
        return True, f"champion v{champion_version} scores NaN on the current validation split"
    if candidate_top1 > champion_top1:
        return True, f"top-1 {candidate_top1:.4f} beats champion v{champion_version}'s {champion_top1:.4f}"
    return False, (f"top-1 {candidate_top1:.4f} is not higher than champion v{champion_version}'s "
                   f"{champion_top1:.4f}")


def promote(name: str, version: str, inputs_for: Callable[[ModelBundle], Split],
            log: Callable[[str], None] = print) -> Decision:
    """Run the gate for registered version `version` of `name`. `inputs_for(bundle)` is the held-out
    split with `x` as that bundle's model reads it (`ValidationInputs` for a platform's validation split).
    Tags the candidate with the decision (`promotion.*`), logs one line, returns the decision."""
    registry = tracking.registry
    version = str(version)
    candidate_tags = dict(registry.get_version(name, version).tags)
    current = registry.champion(name)
    registry.set_alias(name, tracking.CHALLENGER, version)
    candidate = registry.load_version(name, version)
    split = inputs_for(candidate)
    candidate_top1 = held_out_top1(candidate, split)
    if current is not None and str(current.version) == version:
        promoted, reason = True, "it is the champion already"
        champion_version, champion_top1 = version, candidate_top1
    else:
        champion_version = str(current.version) if current is not None else None
        champion_top1 = math.nan
        stale = None if current is None else other_split(candidate_tags, dict(current.tags), champion_version)
        if stale is not None and math.isfinite(candidate_top1):
            promoted, reason = True, stale + "; the candidate takes over"  # no score of the champion to compare
        else:
            if current is not None and stale is None:
                champion = registry.load_version(name, champion_version)
                champion_top1 = held_out_top1(champion, inputs_for(champion))
            promoted, reason = decide(candidate_top1, champion_version, champion_top1)
    decision = Decision(name, version, candidate_top1, champion_version, champion_top1, promoted, reason,
                        int(len(split["x"])))
    if promoted and champion_version != version:
        registry.set_champion(name, version)
    registry.set_version_tags(name, version, decision.tags())
    log(decision.describe())
    return decision


class ValidationInputs:
    """A platform's current validation split, featurized for whichever bundle asks (see the module docstring)."""

    def __init__(self, platform: str, params: dict[str, Any], features_dir: str | Path,
                 records_root: str | Path = "data/records"):
        self.platform, self.params = platform, params
        self.features_dir, self.records_root = Path(features_dir), records_root
        self.split = load_split(self.features_dir, "validation")
        self.fingerprint = validation_fingerprint(self.split)
        self._current: dict | None = None
        self._derived: dict[str, Split] = {}

    def __call__(self, bundle: ModelBundle) -> Split:
        kind = bundle.featurizer.input_kind
        if kind != TOKENS:
            return self._derived_split(bundle.model_name, kind)
        if self._current is None:
            self._current = load_tokenizer(self.features_dir).to_dict()
        if bundle.featurizer.to_dict() == self._current:
            return self.split
        return {**self.split, "x": self._retokenize(bundle)}

    def _derived_split(self, model_name: str, kind: str) -> Split:
        """The validation split in an input kind made from the records (PerStoreFeature, PaCM's), once per kind."""
        from .inputs import model_inputs

        if kind not in self._derived:
            splits, _ = model_inputs(model_name, self.platform, self.params, self.features_dir,
                                     {"validation": self.split}, self.records_root, log=lambda _: None)
            self._derived[kind] = splits["validation"]
        return self._derived[kind]

    def _retokenize(self, bundle: ModelBundle) -> np.ndarray:
        """The validation programs' steps from the validated records, through the bundle's own tokenizer."""
        import pyarrow.parquet as pq

        root = Path((self.params.get("validate") or {}).get("validated_root", "data/validated"))
        path = root / f"platform={self.platform}.parquet"
        if not path.exists():
            raise FileNotFoundError(f"{path}: needed to score a {bundle.model_name} model whose tokenizer is not "
                                    f"the current {self.features_dir.parent / 'tokenizer.json'} (run validate)")
        table = pq.read_table(path, columns=["program_id", "steps"])
        steps_of = dict(zip(table.column("program_id").to_pylist(), table.column("steps").to_pylist()))
        missing = [p for p in self.split["program_id"].tolist() if p not in steps_of]
        if missing:
            raise ValueError(f"{path} lacks {len(missing)} program(s) of {self.features_dir}/validation.npz "
                             f"(first {missing[0]}): the features are stale, run `dvc repro featurize`")
        steps = [steps_of[p] for p in self.split["program_id"].tolist()]
        return bundle.featurizer.transform(steps, bundle.spec_vector)
