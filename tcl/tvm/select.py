"""Pick the registered model to tune a platform with.

The platform's own champion if one is registered. Otherwise the champion of another
platform of the same kind; for a knowledge-base prior (`<model>_kb`, tcl/train/kb_prior.py)
first one of the target's ISA class (`Platform.isa_class`: vector width and threads). That
prior was fitted on every validated platform of its class, the target's own programs included
when it has any; one of another class saw none of them, and on Zen 1's held-out tasks the
AVX2 knowledge base ranks at 0.715 (top-1 mean/task) and the AVX-512 platforms' champions at
0.28-0.57 (reports/new_platform_fit/zen1-avx2-1c.md). A per-platform model is weighed by its evidence
alone: there the same class can be a model no better than random on 4 tasks. Then the one
expected to rank programs best on a CPU none of them was measured on: the one whose held-out
top-1 beats a random scorer by the most, on the most evidence. Its expected lift is

    (top1 - random) / (1 - random)  x  t / (t + TASKS_HALF)  x  n / (n + PROGRAMS_HALF)

from its version tags: `score.test_top1` and `score.random_test_top1` (the model and a random
scorer on the same held-out networks of its platform), `eval.test_tasks` (t, how many tasks
that score rests on) and `train_rows` (n, programs it learned from). Raw top-1 is not
comparable across platforms: on a 4-task held-out split a random scorer already gets 0.4, on
48 tasks 0.15. Ties, and versions without these tags, fall back to platforms measured on this
very CPU (their `host` matches it), then to the nearest by hardware spec (Euclidean distance
of the log-scaled Table-1 vectors). The caller is told which was used and why, with the
runners-up. The alias is resolved to its version number, so a run records (and loads)
exactly the model it used even if the alias moves meanwhile.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .. import tracking
from ..platforms import Platform, host_mismatch
from ..tracking.hints import how_to_get
from ..tracking import CHAMPION, registered_name
from ..tracking.names import is_kb_name

# A score on t held-out tasks counts t / (t + 20): top-1 (eq. 12) moves by +-0.06 between seeds
# even on 48 tasks (README, "Sampling"), so a lift measured on 4 tasks counts a sixth.
TASKS_HALF = 20.0
# n training programs count n / (n + 500): about four tasks' pools (128 programs each).
PROGRAMS_HALF = 500.0


@dataclass(frozen=True)
class Selection:
    uri: str  # models:/<name>/<version>: pinned, not the moving alias
    platform: str  # the platform the model was trained for
    reason: str
    name: str = ""
    version: str = ""
    data_version: str = ""  # the dataset version the model was trained on (its version tag)


def spec_distance(a: Platform, b: Platform) -> float:
    return float(np.linalg.norm(np.log1p(np.asarray(a.spec_vector)) - np.log1p(np.asarray(b.spec_vector))))


def _number(tags: dict, key: str) -> float | None:
    try:
        value = float(tags[key])
    except (KeyError, TypeError, ValueError):
        return None
    return value if math.isfinite(value) else None


def expected_lift(tags: dict) -> tuple[float, str] | None:
    """(expected lift over random, how it was computed) from a version's tags; None without the evidence."""
    top1, floor = _number(tags, "score.test_top1"), _number(tags, "score.random_test_top1")
    tasks, rows = _number(tags, "eval.test_tasks"), _number(tags, "train_rows")
    if None in (top1, floor, tasks, rows) or floor >= 1.0:
        return None
    lift = (top1 - floor) / (1.0 - floor)
    value = lift * tasks / (tasks + TASKS_HALF) * rows / (rows + PROGRAMS_HALF)
    return value, (f"expected lift {value:.3f}: top-1 {top1:.3f} vs random {floor:.3f} on {tasks:.0f} held-out "
                   f"tasks, {rows:.0f} training programs")


def select_model(target: Platform, platforms: dict[str, Platform], prefix: str, model_name: str) -> Selection:
    """The champion for `target`, or the one expected to rank best there; LookupError if none is registered."""

    def selection(p: Platform, found, reason: str) -> Selection:
        name = registered_name(prefix, p.name, model_name)
        return Selection(f"models:/{name}/{found.version}", p.name, reason, name, str(found.version),
                         found.tags.get("data_version", "unknown"))

    by_isa = is_kb_name(model_name)
    own = tracking.registry.champion(registered_name(prefix, target.name, model_name))
    if own is not None:
        return selection(target, own, f"champion registered for {target.name}")
    ranked = []
    for p in platforms.values():
        if p.kind != target.kind or p.name == target.name:
            continue
        found = tracking.registry.champion(registered_name(prefix, p.name, model_name))
        if found is None:
            continue
        lift = expected_lift(dict(found.tags))
        here = bool(p.host) and host_mismatch(p) is None
        dist = spec_distance(target, p)
        # a prior of the target's ISA class first; then highest expected lift, without evidence last; then
        # measured here, then nearest spec
        other_isa = by_isa and p.isa_class != target.isa_class
        key = (other_isa, lift is None, -(lift[0] if lift else 0.0), not here, dist, p.name)
        ranked.append((key, p, found, lift, here, dist))
    if not ranked:
        raise LookupError(f"no registered '{model_name}' champion for {target.name} or any {target.kind} platform "
                          f"(looked for {prefix}-{model_name}-<platform>@{CHAMPION} in {_store()}). "
                          + how_to_get(model_name, prefix))
    ranked.sort(key=lambda r: r[0])
    _, p, found, lift, here, dist = ranked[0]
    where = "measured on this CPU" if here else "measured on another CPU"
    isa = _isa_note(target, p) if by_isa else ""
    others = "; ".join(f"{q.name}: " + (f"{lf[0]:.3f}" if lf else "no evidence") for _, q, _, lf, _, _ in ranked[1:])
    others = f" [others: {others}]" if others else ""
    if lift:
        reason = (f"no {model_name} model for {target.name}; {p.name}'s is expected to rank best here ({isa}"
                  f"{lift[1]}; {where}, spec distance {dist:.3f}){others}")
    else:
        reason = (f"no {model_name} model for {target.name} and no held-out evidence tags to weigh; nearest platform "
                  f"by hardware spec {where} is {p.name} ({isa}distance {dist:.3f}){others}")
    return selection(p, found, reason)


def _isa_note(target: Platform, chosen: Platform) -> str:
    """The reason's words on the ISA class: the target's, and the chosen prior's when it is another."""

    def label(p: Platform) -> str:
        kind, width, threads = p.isa_class
        vector = f"{width:g}-byte vectors" if kind == "cpu" else f"arch {width}"
        return f"({kind}, {vector}, {threads} thread{'s' if threads != 1 else ''})"

    if chosen.isa_class == target.isa_class:
        return f"of its ISA class {label(target)}; "
    return f"none of its ISA class {label(target)} has one, this is {label(chosen)}; "


def _store() -> str:
    return tracking.registry.store_uri()
