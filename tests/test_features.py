"""Features: tokenizer + hardware row on real MetaSchedule traces and real Ansor logs."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pytest

from tcl.config import load_params
from tcl.data.metaschedule import to_plain_json, trace_to_steps
from tcl.features import HW_ROW, UNK_ID, HardwareNormalizer, Tokenizer, sequence_stats
from tcl.platforms import load_platforms

REPO = Path(__file__).resolve().parent.parent
ANSOR_DIR = REPO / "tests" / "fixtures" / "ansor"  # Apache-2.0 TVM logs (LICENSE-apache-tvm.txt there)


def ansor_step(step: list) -> dict:
    """Local stand-in for the Ansor reader: code -> kind, numbers -> nums, strings -> strs."""
    nums, strs = [], []

    def walk(x):
        if isinstance(x, (bool, int, float)):
            nums.append(float(x))
        elif isinstance(x, str):
            strs.append(x)
        elif isinstance(x, list):
            for y in x:
                walk(y)

    walk(step[1:])
    return {"kind": step[0], "nums": nums, "strs": strs}


def read_ansor(name: str) -> list[list[dict]]:
    out = []
    for line in (ANSOR_DIR / name).read_text().splitlines():
        if line.strip() and not line.startswith("#"):
            out.append([ansor_step(s) for s in json.loads(line)["i"][1][1]])
    return out


@pytest.fixture(scope="module")
def platforms():
    return load_platforms(load_params(REPO / "params.yaml"))


@pytest.fixture(scope="module")
def cpu_specs(platforms):
    return [p.spec_vector for p in platforms.values() if p.kind == "cpu"]


@pytest.fixture(scope="module")
def ansor_cpu():
    return read_ansor("resnet-50-NHWC-B1-llvm.json") + read_ansor("matmul.json") + read_ansor("conv2d.json")


@pytest.fixture(scope="module")
def ansor_gpu():
    return read_ansor("resnet-18-NHWC-B1-cuda.json")


@pytest.fixture(scope="session")
def ms_traces():
    """Real traces of a 16x16 matmul: design spaces + one evolutionary round (~25 s, once)."""
    import tvm
    from tvm import te
    from tvm.s_tir import meta_schedule as ms

    a = te.placeholder((16, 16), name="A")
    b = te.placeholder((16, 16), name="B")
    k = te.reduce_axis((0, 16), name="k")
    c = te.compute((16, 16), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    mod = tvm.IRModule({"main": te.create_prim_func([a, b, c])})
    ctx = ms.TuneContext(mod=mod, target=tvm.target.Target({"kind": "llvm", "num-cores": 1}),
                         space_generator="post-order-apply", search_strategy="evolutionary",
                         task_name="matmul16", rand_state=0, num_threads=1)
    spaces = ctx.space_generator.generate_design_space(mod)
    ctx.search_strategy.pre_tuning(max_trials=16, num_trials_per_iter=16, design_spaces=spaces,
                                   database=ms.database.MemoryDatabase(),
                                   cost_model=ms.cost_model.RandomModel())
    cands = ctx.search_strategy.generate_measure_candidates()
    traces = [s.trace for s in spaces] + [cand.sch.trace for cand in cands]
    jsons = [to_plain_json(t.as_json()) for t in traces]
    return {"traces": traces, "json": jsons, "steps": [trace_to_steps(j) for j in jsons],
            "candidates": list(cands)}


def test_shapes_cpu_and_gpu(ansor_cpu, ansor_gpu, cpu_specs, platforms):
    x = Tokenizer().fit(ansor_cpu, cpu_specs).transform(ansor_cpu, cpu_specs[0])
    assert x.shape == (len(ansor_cpu), 26, 22) and x.dtype == np.float32
    gpu_spec = platforms["nvidia-h100"].spec_vector
    y = Tokenizer.for_kind("gpu").fit(ansor_gpu, [gpu_spec]).transform(ansor_gpu, gpu_spec)
    assert y.shape == (len(ansor_gpu), 41, 20) and y.dtype == np.float32
    assert np.isfinite(x).all() and np.isfinite(y).all()


def test_metaschedule_shape_and_fast_path(ms_traces, cpu_specs):
    tok = Tokenizer().fit(ms_traces["steps"], cpu_specs)
    ref = tok.transform(ms_traces["steps"], cpu_specs[0])
    assert ref.shape == (len(ms_traces["steps"]), 26, 22)
    # tuning-time path on Trace objects, candidates and JSON: same matrices as the record path
    assert np.array_equal(tok.featurize_traces(ms_traces["traces"], cpu_specs[0]), ref)
    n_spaces = len(ms_traces["traces"]) - len(ms_traces["candidates"])
    assert np.array_equal(tok.featurize_traces(ms_traces["candidates"], cpu_specs[0]), ref[n_spaces:])
    assert np.array_equal(tok.featurize_traces(ms_traces["json"], cpu_specs[0]), ref)


def test_deterministic(ansor_cpu, ms_traces, cpu_specs):
    data = ansor_cpu + ms_traces["steps"]
    a, b = Tokenizer().fit(data, cpu_specs), Tokenizer().fit(data, cpu_specs)
    assert a.to_dict() == b.to_dict()
    x = a.transform(data, cpu_specs[1])
    assert np.array_equal(x, a.transform(data, cpu_specs[1]))
    assert np.array_equal(x, b.transform(data, cpu_specs[1]))
    # batching does not matter: one program at a time gives the same rows
    assert np.array_equal(x[3], a.transform([data[3]], cpu_specs[1])[0])


def test_fit_on_train_only(ansor_cpu, cpu_specs):
    train, test = ansor_cpu[:20], ansor_cpu[20:]
    tok = Tokenizer().fit(train, cpu_specs)
    before = tok.to_dict()
    probe = [{"kind": "PR", "nums": [], "strs": ["never_seen_in_training"]},
             {"kind": "NEW_KIND", "nums": [3.0], "strs": []}]
    x = tok.transform(test + [probe], cpu_specs[0])
    assert tok.to_dict() == before  # transform never grows a vocabulary
    assert "never_seen_in_training" not in tok.strings and tok.string_id("never_seen_in_training") == UNK_ID
    assert tok.kind_id("NEW_KIND") == UNK_ID
    kw = tok.kind_width
    row_str, row_kind = x[-1, 1], x[-1, 2]
    assert row_str[kw] == pytest.approx(UNK_ID / (len(tok.strings) + 1))  # unknown string token
    assert row_kind[kw - 1] == 1.0 and row_kind[: kw - 1].sum() == 0  # unknown kind -> "other" = 1


def test_save_load_round_trip(tmp_path, ansor_cpu, ms_traces, cpu_specs):
    data = ansor_cpu + ms_traces["steps"]
    tok = Tokenizer(skip_kinds=["EnterPostproc"]).fit(data, cpu_specs)
    path = tok.save(tmp_path / "features" / "tokenizer.json")
    loaded = Tokenizer.load(path)
    assert loaded.to_dict() == tok.to_dict()
    assert np.array_equal(loaded.transform(data, cpu_specs[2]), tok.transform(data, cpu_specs[2]))
    assert np.array_equal(loaded.featurize_traces(ms_traces["traces"], cpu_specs[0]),
                          tok.featurize_traces(ms_traces["traces"], cpu_specs[0]))
    with pytest.raises(ValueError):
        Tokenizer.from_dict({"format": "something else"})


def _mutate_first_tile_decision(trace_json):
    """Same trace with the first SamplePerfectTile decision reversed (another schedule)."""
    insts, decisions = json.loads(json.dumps(trace_json))
    for pair in decisions:
        if insts[pair[0]][0] == "SamplePerfectTile" and pair[1] != pair[1][::-1]:
            pair[1] = pair[1][::-1]
            return [insts, decisions], pair[0]
    raise AssertionError("no SamplePerfectTile decision to mutate")


def test_different_decisions_give_different_matrices(ms_traces, cpu_specs):
    tok = Tokenizer().fit(ms_traces["steps"], cpu_specs)
    original = ms_traces["json"][-1]
    mutated, inst = _mutate_first_tile_decision(original)
    x = tok.transform([trace_to_steps(original), trace_to_steps(mutated)], cpu_specs[0])
    changed = np.flatnonzero((x[0] != x[1]).any(axis=1))
    assert changed.tolist() == [inst + 1]  # exactly the row of that primitive
    # real candidates are distinct schedules: their matrices are (almost all) distinct
    cand = tok.featurize_traces(ms_traces["candidates"], cpu_specs[0])
    assert len({m.tobytes() for m in cand}) > len(cand) // 2


def test_hardware_row_differs_between_platforms(ms_traces, platforms, cpu_specs):
    tok = Tokenizer().fit(ms_traces["steps"], cpu_specs)
    avx512, avx2 = platforms["host-avx512-2c"].spec_vector, platforms["host-avx2-2c"].spec_vector
    a = tok.transform(ms_traces["steps"][:2], avx512)
    b = tok.transform(ms_traces["steps"][:2], avx2)
    assert not np.array_equal(a[:, HW_ROW], b[:, HW_ROW])
    assert np.array_equal(a[:, 1:], b[:, 1:])  # the program part does not depend on the platform
    # per-program spec vectors work too
    mixed = tok.transform(ms_traces["steps"][:2], [avx512, avx2])
    assert np.array_equal(mixed[0], a[0]) and np.array_equal(mixed[1], b[1])


def test_hardware_normalizer(platforms, cpu_specs):
    hw = HardwareNormalizer().fit(cpu_specs)
    rows = hw.transform(cpu_specs, cols=22)
    assert rows.shape == (len(cpu_specs), 22) and np.all(rows[:, 11:] == 0)
    assert rows[:, :11].max() == pytest.approx(1.0) and rows.min() >= 0
    # a platform twice as big as any training one stays on the same scale (2 -> 4 cores: 1.46)
    big = [2 * v for v in cpu_specs[0]]
    assert 1.0 < hw.transform(big, cols=22).max() < 1.5
    with pytest.raises(ValueError, match="fields"):
        hw.transform(platforms["nvidia-h100"].spec_vector, cols=22)
    assert np.array_equal(HardwareNormalizer.from_dict(hw.to_dict()).transform(cpu_specs, 22), rows)


def test_crop_pad_and_numeric_scale(cpu_specs):
    long_row = {"kind": "SampleCategorical", "nums": [float(i) for i in range(1, 41)], "strs": ["x"]}
    program = [{"kind": "Split", "nums": [1024.0, 1.0], "strs": []}] + [long_row] * 30
    tok = Tokenizer(rows=25, cols=22).fit([program], [cpu_specs[0]])
    assert tok.num_scale == pytest.approx(math.log1p(1024.0))
    x = tok.transform([program, []], cpu_specs[0])
    assert x.shape == (2, 26, 22)
    kw, aw = tok.kind_width, tok.arg_width
    assert x[0, 1, kw] == pytest.approx(1.0)  # the largest training number maps to 1
    row = x[0, 2, kw:]
    expect = np.log1p(np.array(list(range(1, aw)) + [40], dtype=np.float64)) / tok.num_scale
    assert np.allclose(row, expect)  # head of the numbers, then the last one (the decision)
    assert np.all(x[1, 1:] == 0)  # an empty program is padding only


def test_kind_block_when_kinds_exceed_budget(cpu_specs):
    kinds = [f"K{i:02d}" for i in range(30)]
    program = [{"kind": k, "nums": [], "strs": []} for i, k in enumerate(kinds) for _ in range(30 - i)]
    tok = Tokenizer(rows=500, cols=22).fit([program], [cpu_specs[0]])
    assert tok.kinds == kinds and tok.kind_width == 11 and tok.arg_width == 11
    steps = [[{"kind": k, "nums": [], "strs": []}] for k in kinds]
    block = tok.transform(steps, cpu_specs[0])[:, 1, :11]
    assert np.array_equal(block[:10, :10], np.eye(10))  # 10 most frequent: one-hot
    rare = block[10:, 10]
    assert np.all((rare > 0) & (rare < 1)) and len(set(rare.tolist())) == 20  # others: distinct ids
    one_col = Tokenizer(rows=500, cols=22, kind_cols=1).fit([program], [cpu_specs[0]])
    ids = one_col.transform(steps, cpu_specs[0])[:, 1, 0]
    assert one_col.arg_width == 21 and len(set(ids.tolist())) == 30


def test_sequence_stats(ansor_cpu, ms_traces):
    stats = sequence_stats(ansor_cpu)
    assert stats["programs"] == len(ansor_cpu)
    assert stats["length"]["max"] == max(len(s) for s in ansor_cpu)
    assert sum(k["count"] for k in stats["kinds"].values()) == sum(len(s) for s in ansor_cpu)
    assert stats["kinds"]["RE"]["max_args"] >= stats["width"]["p50"]
    ms = sequence_stats(ms_traces["steps"], skip_kinds=["GetLoops"])
    assert "GetLoops" not in ms["kinds"] and ms["length"]["p50"] <= ms["length"]["max"]


def test_errors(cpu_specs, platforms):
    with pytest.raises(RuntimeError, match="not fitted"):
        Tokenizer().transform([[]], cpu_specs[0])
    with pytest.raises(ValueError):
        Tokenizer(cols=22, kind_cols=22)
    tok = Tokenizer().fit([[{"kind": "A", "nums": [1.0], "strs": []}]], cpu_specs)
    with pytest.raises(ValueError, match="fields"):
        tok.transform([[]], platforms["nvidia-h100"].spec_vector)
    with pytest.raises(ValueError, match="spec vectors"):
        tok.transform([[], []], cpu_specs)  # 3 vectors for 2 programs


def _paired_records(platform: str, n_tasks: int = 24, per_task: int = 4) -> list[dict]:
    """The same programs on every platform (same program text, task, order), different latencies."""
    rows = []
    for t in range(n_tasks):
        key, net = f"t{t:02d}", "resnet50@224" if t >= 20 else "resnet18@224"
        for i in range(per_task):
            program = f"[{t},{i}]"
            secs = (1 + i + t % 3) * (2e-3 if platform.startswith("host-avx2") else 1e-3)
            rows.append({"record_id": f"{platform}-{key}-{i}", "platform": platform, "source": "metaschedule",
                         "network": net, "task_key": key, "task_name": key, "task_weight": 1, "op_type": "dense",
                         "target": "{}", "program": program, "run_secs": [secs], "mean_sec": secs,
                         "median_sec": secs, "error_code": "", "error_msg": "", "collected_at": None,
                         "steps": [{"kind": "Split", "nums": [float(t + 2), float(i + 1)], "strs": []},
                                   {"kind": "Annotate", "nums": [], "strs": ["meta_schedule.parallel"]}]})
    return rows


def test_featurize_shares_one_tokenizer_and_keeps_held_out_tasks_out_of_training(tmp_path, params):
    """One tokenizer for all platforms; same program -> same tokens, different hardware rows; a
    training-network task that a held-out network also has is test-only; validation >= min_val_tasks."""
    import json

    import pyarrow.parquet as pq

    from tcl.data.schema import records_to_table
    from tcl.features.dataset import featurize_platforms, load_split, load_tokenizer
    from tcl.platforms import get_platform

    names = ["host-avx512-1c", "host-avx2-1c"]
    for name in names:
        pq.write_table(records_to_table(_paired_records(name)), tmp_path / f"platform={name}.parquet")
        pdir = tmp_path / "records" / f"platform={name}"
        pdir.mkdir(parents=True)
        rows = [{"task_key": f"t{t:02d}", "network": "resnet18@224",
                 "networks": {"resnet18@224": 1, **({"resnet50@160": 2} if t == 0 else {})}} for t in range(20)]
        (pdir / "_tasks.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    run_params = dict(params, split={"holdout_networks": ["resnet50"], "val_fraction": 0.1, "min_val_tasks": 10})
    platforms = [get_platform(params, n) for n in names]
    stats = featurize_platforms(platforms, run_params, tmp_path, tmp_path / "records", tmp_path / "features")
    out = tmp_path / "features"
    assert (out / "tokenizer.json").exists() and not list(out.glob("*/tokenizer.json"))
    assert load_tokenizer(out / names[0]).to_dict() == json.loads((out / "tokenizer.json").read_text())
    a, b = (load_split(out / n, "train") for n in names)
    assert len(a["x"]) > 0 and a["program_id"].tolist() == b["program_id"].tolist()
    assert np.array_equal(a["x"][:, 1:], b["x"][:, 1:])          # the same tokens on both platforms
    assert not np.array_equal(a["x"][0, HW_ROW], b["x"][0, HW_ROW])  # only the hardware row differs
    assert stats["platforms"][names[0]]["hardware_row"] != stats["platforms"][names[1]]["hardware_row"]
    for n in names:
        test = load_split(out / n, "test")
        assert set(test["task_key"]) == {"t00", "t20", "t21", "t22", "t23"}  # t00 is also in resnet50@160
        assert stats["platforms"][n]["tasks"] == {"train": 9, "validation": 10, "test": 5}


def test_a_platform_declared_later_does_not_rescale_the_hardware_row(params):
    """With features.hardware_scale_platforms pinned, declaring a platform with larger caches leaves the
    fitted scale (and so every trained model's input) as it was; unpinned, the new platform rescales it."""
    import copy

    from tcl.features.dataset import hardware_scale_specs

    big = copy.deepcopy(params)
    name = next(n for n, p in big["platforms"].items() if p["kind"] == "cpu")
    big["platforms"]["huge-cache-1c"] = dict(copy.deepcopy(big["platforms"][name]), description="larger caches")
    big["platforms"]["huge-cache-1c"]["specs"] = dict(big["platforms"][name]["specs"], l2_kb=10 ** 6, l3_kb=10 ** 8)
    pinned = HardwareNormalizer().fit(hardware_scale_specs(params, "cpu")).scale
    assert np.array_equal(HardwareNormalizer().fit(hardware_scale_specs(big, "cpu")).scale, pinned)

    def unpinned(p):
        return {**p, "features": {k: v for k, v in p["features"].items() if k != "hardware_scale_platforms"}}

    # against every declared platform unpinned (a platform declared after the pin may have grown any field)
    before = HardwareNormalizer().fit(hardware_scale_specs(unpinned(params), "cpu")).scale
    rescaled = HardwareNormalizer().fit(hardware_scale_specs(unpinned(big), "cpu")).scale
    assert (rescaled >= before).all() and (rescaled > before).sum() == 2   # the two cache fields grew

    with pytest.raises(ValueError, match="hardware_scale_platforms: \\['nowhere-1c'\\] not declared"):
        hardware_scale_specs({**params, "features": {"hardware_scale_platforms": ["nowhere-1c"]}}, "cpu")
