"""Active-learning samplers (tcl.sampling): budgets, contracts, RDU's maths against brute force."""

from __future__ import annotations

import numpy as np
import pytest

from tcl.sampling import (SAMPLERS, Pool, RDUSampler, apportion, make_sampler, op_type_budgets,
                          round_budgets, total_budget)
from tcl.sampling.alt import neighbour_gap
from tcl.sampling.normalize import normalize
from tcl.sampling.rdu import nearest_distance, uncertainty


def synthetic_pool(seed=0, tasks=40, per_task=(5, 30), ops=("conv2d", "dense", "pool", "softmax"),
                   labelled_share=0.1, ensemble=0, features=0) -> Pool:
    """Tasks of uneven size and op type, per-task score scales that differ by orders of magnitude."""
    rng = np.random.default_rng(seed)
    sizes = rng.integers(per_task[0], per_task[1] + 1, size=tasks)
    task = np.repeat(np.arange(tasks), sizes)
    op_of_task = np.array(ops)[rng.integers(0, len(ops), size=tasks)]
    op_of_task[: len(ops)] = ops  # every op type present
    scale = 10.0 ** rng.uniform(-3, 3, size=tasks)
    scores = rng.normal(size=len(task)) * scale[task] + rng.normal(size=tasks)[task] * scale[task]
    return Pool(op_type=op_of_task[task], task=task, scores=scores,
                labelled=rng.random(len(task)) < labelled_share,
                ensemble=scores + rng.normal(size=(ensemble, len(task))) * scale[task] if ensemble else None,
                features=rng.normal(size=(len(task), features)) if features else None)


def brute_rdu(pool: Pool, budget: int, method: str, reference: str) -> list[int]:
    """Algorithm 1, one round, recomputing eqs. 1-3 from scratch at every step (O(n * M) per pick)."""
    f = normalize(pool.scores, pool.task_codes, method)
    group = pool.task_codes if reference == "task" else np.zeros(len(pool), int)
    labelled = pool.labelled.copy()
    quota = dict(op_type_budgets(pool, budget))
    excluded = np.zeros(len(pool), bool)
    picks = []
    while len(picks) < budget:
        best, best_t = None, -np.inf
        for i in np.flatnonzero(~labelled & ~excluded):
            ref = f[labelled & (group == group[i])]
            d = np.abs(f[i] - ref).min() if len(ref) else 1.0
            u = np.var(np.append(ref, f[i]))
            t = f[i] * d + u
            if t > best_t + 1e-12:
                best, best_t = i, t
        if best is None:
            break
        if quota[pool.op_type[best]] > 0:
            quota[pool.op_type[best]] -= 1
            labelled[best] = True
            picks.append(best)
        else:
            excluded[best] = True  # Alg. 1 line 32: out of budget, drop it
    return picks


# --- budgets -------------------------------------------------------------------------------------

def test_op_budgets_follow_task_share_not_program_share_and_sum_exactly():
    # conv: 5 tasks x 10 programs, dense: 3 tasks x 40, pool: 2 tasks x 5 -> program shares 50:120:10
    task = np.repeat(np.arange(10), [10] * 5 + [40] * 3 + [5] * 2)
    op = np.array(["conv"] * 5 + ["dense"] * 3 + ["pool"] * 2)[task]
    pool = Pool(op_type=op, task=task, scores=np.zeros(len(task)), labelled=np.zeros(len(task), bool))
    assert op_type_budgets(pool, 10) == {"conv": 5, "dense": 3, "pool": 2}
    assert op_type_budgets(pool, 20) == {"conv": 10, "dense": 6, "pool": 4}
    # 7 = 3.5 / 2.1 / 1.4 -> floors 3/2/1, one unit left for the largest remainder (conv's .5)
    assert op_type_budgets(pool, 7) == {"conv": 4, "dense": 2, "pool": 1}
    picks = make_sampler("rdu").select(pool, 20)
    got = dict(zip(*np.unique(op[picks], return_counts=True)))
    assert {k: int(v) for k, v in got.items()} == {"conv": 10, "dense": 6, "pool": 4}


def test_op_budget_capped_by_unlabelled_programs_and_excess_redistributed():
    sizes = [3, 50, 50, 50]
    task = np.repeat(["t-softmax", "t-conv-a", "t-conv-b", "t-dense"], sizes)  # string task ids
    op = np.repeat(["softmax", "conv", "conv", "dense"], sizes)
    pool = Pool(op_type=op, task=task, scores=np.arange(len(task), dtype=float),
                labelled=np.zeros(len(task), bool))
    # softmax has 1 of 4 tasks (share 25 of 100) but only 3 programs; the 22 left go 2:1 to conv:dense
    budgets = op_type_budgets(pool, 100)
    assert budgets["softmax"] == 3 and sum(budgets.values()) == 100
    assert budgets == {"softmax": 3, "conv": 65, "dense": 32}  # 50+14.67 / 25+7.33, largest remainder
    assert len(make_sampler("rdu").select(pool, 100)) == 100


@pytest.mark.parametrize("total", [0, 1, 7, 97, 1000])
def test_apportion_sums_exactly_and_stays_within_one_of_the_share(total):
    w = np.array([5.0, 3.0, 1.0, 0.0, 11.0])
    out = apportion(w, total)
    assert out.sum() == total and out[3] == 0
    assert np.all(np.abs(out - w / w.sum() * total) < 1.0)


def test_round_budgets_and_total_budget():
    assert round_budgets(1000, rounds=4, first_batch=0.2) == [200, 200, 200, 200, 200]
    parts = round_budgets(1003, rounds=3, first_batch=0.1)
    assert sum(parts) == 1003 and parts[0] == 100 and max(parts[1:]) - min(parts[1:]) <= 1
    assert round_budgets(10, rounds=2, first_batch=0.0) == [0, 5, 5]
    assert total_budget(100_000, 0.1) == 10_000
    with pytest.raises(ValueError):
        round_budgets(10, rounds=0)


# --- contracts of every sampler ----------------------------------------------------------------

@pytest.mark.parametrize("name", sorted(SAMPLERS))
@pytest.mark.parametrize("budget", [1, 57, 10_000])
def test_every_sampler_picks_distinct_unlabelled_programs(name, budget):
    pool = synthetic_pool(seed=3, ensemble=4, features=3, labelled_share=0.3)
    picks = make_sampler(name).select(pool, budget)
    assert len(picks) == min(budget, int((~pool.labelled).sum()))
    assert len(np.unique(picks)) == len(picks)
    assert not pool.labelled[picks].any()
    assert picks.min() >= 0 and picks.max() < len(pool)


def test_registry_lookup_and_unknown_name_error():
    assert set(SAMPLERS) >= {"rdu", "alt", "balto", "random"}
    assert isinstance(make_sampler("rdu", reference="global"), RDUSampler)
    assert make_sampler("random", seed=5).seed == 5
    with pytest.raises(ValueError, match="unknown sampler 'coreset'") as err:
        make_sampler("coreset")
    for known in ("alt", "balto", "random", "rdu"):
        assert known in str(err.value)
    with pytest.raises(TypeError):
        make_sampler("rdu", no_such_option=1)


def test_random_is_seeded():
    pool = synthetic_pool(seed=1)
    a = make_sampler("random", seed=7).select(pool, 30)
    assert np.array_equal(a, make_sampler("random", seed=7).select(pool, 30))
    assert not np.array_equal(a, make_sampler("random", seed=8).select(pool, 30))


# --- RDU maths ---------------------------------------------------------------------------------

def test_closed_form_uncertainty_equals_np_var_of_the_set():
    rng = np.random.default_rng(0)
    for m in (0, 1, 2, 7, 50):
        lab = rng.random(m)
        for x in rng.random(5):
            closed = uncertainty(x, m, lab.mean() if m else 0.0, lab.var() if m else 0.0)
            assert closed == pytest.approx(np.var(np.append(lab, x)), abs=1e-12)


@pytest.mark.parametrize("reference", ["task", "global"])
def test_incremental_distance_and_uncertainty_match_brute_force_after_every_pick(reference):
    pool = synthetic_pool(seed=5, tasks=12, per_task=(3, 12), labelled_share=0.15)
    st = RDUSampler(reference=reference).state(pool, budget=40)
    f = normalize(pool.scores, pool.task_codes, "task_rank")
    group = pool.task_codes if reference == "task" else np.zeros(len(pool), int)
    labelled = pool.labelled.copy()
    for _ in range(40):
        for k, i in enumerate(st.index):
            if labelled[i]:
                continue
            ref = f[labelled & (group == group[i])]
            assert st.d[k] == pytest.approx(np.abs(f[i] - ref).min() if len(ref) else 1.0, abs=1e-12)
            assert st.u[k] == pytest.approx(np.var(np.append(ref, f[i])), abs=1e-12)
        k = st.next()
        st.take(k)
        labelled[st.index[k]] = True


def test_nearest_distance_matches_brute_force():
    rng = np.random.default_rng(2)
    f, groups = rng.random(300), rng.integers(0, 9, size=300)
    ref = rng.random(300) < 0.2
    ref[groups == 4] = False  # a group with nothing labelled
    got = nearest_distance(f, groups, ref)
    for i in range(300):
        r = f[ref & (groups == groups[i])]
        assert got[i] == pytest.approx(np.abs(f[i] - r).min() if len(r) else 1.0, abs=1e-12)


@pytest.mark.parametrize("method", ["task_rank", "task_minmax", "global_minmax"])
@pytest.mark.parametrize("reference", ["task", "global"])
def test_rdu_pick_sequence_equals_algorithm_1_recomputed_from_scratch(method, reference):
    pool = synthetic_pool(seed=11, tasks=15, per_task=(4, 14), labelled_share=0.1)
    budget = 35
    got = RDUSampler(normalize=method, reference=reference).select(pool, budget).tolist()
    assert got == brute_rdu(pool, budget, method, reference)


def test_rdu_prefers_the_uncovered_score_over_the_greedy_one():
    # One task; labelled at 0.0 and 1.0; candidates 0.95 (index 2) and 0.5 (index 3). Min-max keeps the values.
    # t(0.95) = .95*.05 + (2/3*.25 + 2/9*.45^2) = .259;  t(0.5) = .5*.5 + 2/3*.25 = .417  -> pick index 3.
    pool = Pool(op_type=["conv"] * 4, task=[0] * 4, scores=[0.0, 1.0, 0.95, 0.5],
                labelled=[True, True, False, False])
    assert RDUSampler(normalize="task_minmax").select(pool, 1).tolist() == [3]
    # Labelled at 0.0 only: t(.5) = .25 + .0625 = .3125, t(1.0) = 1 + .25 = 1.25, t(.9) = .81 + .2025 -> index 2.
    pool = Pool(op_type=["conv"] * 4, task=[0] * 4, scores=[0.0, 0.5, 1.0, 0.9],
                labelled=[True, False, False, False])
    assert RDUSampler(normalize="task_minmax").select(pool, 3).tolist() == [2, 1, 3]


def test_rdu_task_with_no_labels_starts_from_its_best_prediction():
    pool = Pool(op_type=["a"] * 6, task=[0, 0, 0, 1, 1, 1], scores=[3.0, 1.0, 2.0, -5.0, 9.0, 0.0],
                labelled=[True, False, False, False, False, False])
    picks = RDUSampler().select(pool, 2).tolist()
    assert 4 in picks  # task 1 is unlabelled: its top program (d = 1, f = 1) scores the maximal t = 1


# --- ALT and BALTO ------------------------------------------------------------------------------

def test_alt_picks_where_the_ensemble_disagrees():
    n = 8
    base = np.arange(n, dtype=float)
    ens = np.stack([base, base, base])
    ens[0, [2, 5]], ens[1, [2, 5]] = base[[5, 2]], base[[2, 5]] - 10  # members disagree on 2 and 5 only
    pool = Pool(op_type=["x"] * n, task=[0] * n, scores=base, labelled=np.zeros(n, bool), ensemble=ens)
    assert sorted(make_sampler("alt").select(pool, 2).tolist()) == [2, 5]


def test_alt_without_ensemble_picks_crowded_predictions():
    scores = np.array([0.0, 0.5, 0.51, 1.0, 0.2])
    assert neighbour_gap(scores, np.zeros(5, int))[[1, 2]].tolist() == pytest.approx([0.01, 0.01])
    pool = Pool(op_type=["x"] * 5, task=[0] * 5, scores=scores, labelled=np.zeros(5, bool))
    assert sorted(make_sampler("alt").select(pool, 2).tolist()) == [1, 2]


def test_balto_diversifies_inside_the_best_predicted_shortlist():
    # Predicted best-first: 0 (best), 1 (near-duplicate of 0 in feature space), 2 (far), 3 (far, but predicted worst)
    feats = np.array([[0.0, 0.0], [0.01, 0.0], [5.0, 5.0], [-9.0, 9.0]])
    pool = Pool(op_type=["x"] * 4, task=[0] * 4, scores=[4.0, 3.0, 2.0, 1.0],
                labelled=np.zeros(4, bool), features=feats)
    assert make_sampler("balto", shortlist=1.5).select(pool, 2).tolist() == [0, 2]   # shortlist {0,1,2}
    assert make_sampler("balto", shortlist=1.0).select(pool, 2).tolist() == [0, 1]   # pure greed
    assert make_sampler("balto", shortlist=2.0).select(pool, 2).tolist() == [0, 3]   # 3 is farthest
