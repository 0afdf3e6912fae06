"""tcl.tvm.diversity on real MetaSchedule programs of a tiny matmul (the collector's candidate source)."""

from __future__ import annotations

import json
import math

from conftest import toy_matmul_task


def _programs(platform, n: int, seed: int = 0) -> list[str]:
    from tcl.collect.candidates import CandidateSource, trace_json

    source = CandidateSource(toy_matmul_task(32).mod, platform.tvm_target(), search="replay-trace", seed=seed,
                             max_trials=n, batch_size=n)
    return [json.dumps(trace_json(c)) for c in source.next_batch()]


def test_diversity_counts_sketches_and_the_decisions_programs_differ_in(host_platform):
    from tcl.tvm.diversity import sketch_and_decisions, task_diversity

    programs = _programs(host_platform, 16)
    sketches = {sketch_and_decisions(p)[0] for p in programs}
    assert len(sketches) >= 2, "the matmul's design space has several sketches"
    count, differing = task_diversity(programs)
    assert count == len(sketches) and 0 < differing <= 1
    # one program repeated: one sketch, no decision differs; one sketch's programs only: a sketch
    one = programs[0]
    assert task_diversity([one] * 4) == (1, 0.0)
    same = [p for p in programs if sketch_and_decisions(p)[0] == sketch_and_decisions(one)[0]]
    assert task_diversity(same)[0] == 1
    # a single program has no pair to compare
    count, differing = task_diversity([one])
    assert count == 1 and math.isnan(differing)
