"""How widely a tuning run's measurements spread over a task's design space.

A learned model that is confident early sends the search's batches into one region, and a task
whose best programs lie elsewhere is then never measured there: trees boosted on those
measurements cannot learn what they never saw. Two figures per task, over its first measured
programs: how many sketches they cover (a sketch: the sequence of a trace's primitive kinds,
postprocessing's included, so a design space and the loops its postprocessors parallelized,
vectorized and unrolled; the design spaces alone are about 2 a task here, as many for XGB as for the
learned runs), and the mean share of sampled decisions in which two programs of the same sketch differ.
"""

from __future__ import annotations

import itertools
import json
from typing import Iterable

import numpy as np


def sketch_and_decisions(program: str) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """A trace JSON's (primitive kinds, decisions in order) as the project stores a program."""
    insts, decisions = json.loads(program)
    return tuple(inst[0] for inst in insts), tuple(json.dumps(d[1]) for d in sorted(decisions, key=lambda d: d[0]))


def task_diversity(programs: Iterable[str]) -> tuple[int, float]:
    """(distinct sketches, mean share of differing decisions over same-sketch pairs; NaN without a pair)."""
    parsed = [sketch_and_decisions(p) for p in programs]
    pairs = [(a, b) for (sa, a), (sb, b) in itertools.combinations(parsed, 2) if sa == sb and len(a) == len(b) > 0]
    differing = float(np.mean([np.mean([x != y for x, y in zip(a, b)]) for a, b in pairs])) if pairs else float("nan")
    return len({s for s, _ in parsed}), differing
