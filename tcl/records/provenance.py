"""The tags a rebuilt version carries: the same provenance tags training wrote (tcl.tracking.provenance),
computed from what dvc.lock recorded, plus the promotion gate's decision as the metrics JSON kept it."""

from __future__ import annotations

import math
from typing import Any, Iterable

from ..tracking.names import CHALLENGER, CHAMPION
from ..tracking.provenance import format_score, params_hash, params_sections
from .lock import Lock

NO_CHAMPION = "there is no champion yet"


def provenance_tags(lock: Lock, used: dict[str, Any], data_version: str, scores: dict[str, float],
                    commit: str, extra_sections: Iterable[str] = ()) -> dict[str, str]:
    sections = params_sections(used, extra_sections)
    return {"data_version": data_version, "git_commit": commit, "params_hash": params_hash(used, sections),
            "params_sections": ",".join(sections),
            **{f"score.{k}": format_score(float(v)) for k, v in scores.items() if v is not None}}


def promotion(champion: bool, reason: str, top1: float | None) -> tuple[dict[str, str], list[str]]:
    """(promotion.* tags, aliases) of a version the gate looked at, from the stage's metrics JSON."""
    top1 = math.nan if top1 is None else float(top1)
    tags = {"promotion.decision": "promoted" if champion else "refused", "promotion.reason": reason,
            "promotion.top1": format_score(top1)}
    if reason == NO_CHAMPION:
        tags.update({"promotion.champion_version": "none", "promotion.champion_top1": format_score(math.nan)})
    return tags, ([CHAMPION, CHALLENGER] if champion else [CHALLENGER])
