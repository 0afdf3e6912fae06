"""The knowledge-base prior (tcl.train.kb_prior): which platforms teach a platform's prior, and a real fit
on programs measured here, registered in a real MLflow store behind the promotion gate.

Programs of four toy matmul tasks are measured for real on `here-1c`; a `twin-1c` (the same ISA class, a
slower clock: every latency x1.3) and a `wide-1c` (another vector width, latencies reversed) hold the same
programs. Nothing is mocked.
"""

from __future__ import annotations

import shutil

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from conftest import toy_matmul_task
from tcl import tracking
from tcl.platforms import load_platforms
from tcl.train.kb_prior import fit_kb_prior, kb_sources
from tcl.tvm.names import parse_cost_model

SPECS = {"cores": 1, "threads": 1, "turbo_ghz": 3.0, "boost_ghz": 3.0, "l1_kb": 32, "l2_kb": 512, "l3_kb": 8192,
         "mem_channels": 2, "mem_capacity_gb": 16, "mem_bandwidth_gbs": 40, "simd_bytes": 16}
TASKS = [(8, "toyA"), (12, "toyA"), (16, "toyB"), (10, "toyC")]  # toyC is held out: its task is the test split


def _validated_root(tmp_path, names):
    root = tmp_path / "validated"
    root.mkdir()
    for name in names:
        (root / f"platform={name}.parquet").touch()
    return root


def test_the_knowledge_base_of_a_cpu_is_every_validated_platform_of_its_vector_width_and_threads(params, tmp_path):
    platforms = load_platforms(params)
    root = _validated_root(tmp_path, ["zen4-avx512-1c", "emr-avx512-1c", "gnr-avx512-1c", "host-avx512-2c",
                                      "zen4-avx2-1c", "zen3-avx2-1c", "zen1-sse4-1c"])
    assert [p.name for p in kb_sources(platforms["zen4-avx512-1c"], platforms, root)] == \
        ["emr-avx512-1c", "gnr-avx512-1c", "zen4-avx512-1c"]   # not 2 threads, not AVX2; host-avx512-1c: no records
    assert [p.name for p in kb_sources(platforms["zen3-avx2-1c"], platforms, root)] == ["zen4-avx2-1c", "zen3-avx2-1c"]
    assert platforms["zen4-avx2-1c"].isa_class == platforms["emr-avx2-1c"].isa_class != \
        platforms["zen4-avx512-1c"].isa_class
    with pytest.raises(ValueError, match=r"platform=emr-avx2-1c\.parquet.*make collect"):
        kb_sources(platforms["emr-avx2-1c"], platforms, root)


def test_the_tuning_name_of_the_prior_is_its_registered_name():
    name = parse_cost_model("pretrained_xgb_kb+boost+draft")
    assert (name.base, name.registered, name.adaptation, name.modifiers) == \
        ("pretrained_xgb_kb", "xgb_kb", "boost", ("draft",))


@pytest.fixture(scope="module")
def measured(tmp_path_factory, params):
    """Records of TASKS measured on here-1c, and the same programs as twin-1c's and wide-1c's."""
    from tcl.collect.collector import measure_task
    from tcl.collect.measure import LocalMeasurer
    from tcl.data.store import RecordStore

    root = tmp_path_factory.mktemp("kb")
    here = {"kind": "cpu", "target": {"kind": "llvm", "num-cores": 1}, "specs": SPECS}
    declared = {"here-1c": here, "twin-1c": here, "wide-1c": {**here, "specs": {**SPECS, "simd_bytes": 32}}}
    platform = load_platforms({"platforms": declared})["here-1c"]
    measurer = LocalMeasurer(platform.tvm_target(), 1, {"timeout_sec": 120}, {"number": 2})
    cfg = dict(params["collect"], pool_size=8, batch_size=8)
    with RecordStore(root / "records").exclusive_writer("kb prior test") as store:
        for n, network in TASKS:
            measure_task(toy_matmul_task(n, network), platform, platform, store, measurer, cfg, 0, lambda _: None)
        table = store.read("here-1c")
    (root / "validated").mkdir()
    for name, scale in (("here-1c", 1.0), ("twin-1c", 1.3), ("wide-1c", -1.0)):
        mean = table.column("mean_sec").to_numpy(zero_copy_only=False)
        latency = mean * scale if scale > 0 else 1e-3 / mean  # wide-1c: the fastest program here is its slowest
        copy = table.set_column(table.schema.get_field_index("mean_sec"), "mean_sec", pa.array(latency))
        copy = copy.set_column(copy.schema.get_field_index("platform"), "platform",
                               pc.cast(pa.array([name] * len(copy)), pa.string()))
        pq.write_table(copy, root / "validated" / f"platform={name}.parquet")
        if name != "here-1c":
            shutil.copytree(root / "records" / "platform=here-1c", root / "records" / f"platform={name}")
    return root, declared


def test_a_prior_is_fitted_on_its_isa_class_and_registered_behind_the_gate(measured, params, monkeypatch):
    import mlflow

    root, declared = measured
    uri = f"sqlite:///{root}/mlflow.db"
    used = {**params, "platforms": {**params["platforms"], **declared},
            "tracking": {"mlflow_uri": uri, "experiment": "kb-test"},
            "registry": {"prefix": "kbt", "params_sections": ["seed", "kb_prior"]},
            "split": {"holdout_networks": ["toyC"], "val_fraction": 0.3, "min_val_tasks": 1},
            "validate": {**params["validate"], "validated_root": str(root / "validated"), "stores": []},
            "train": {**params["train"], "threads": 1, "eval": {"bootstrap": 0},
                      "hparams": {**params["train"]["hparams"], "xgb": {"rounds": 20, "max_depth": 4}}},
            "kb_prior": {"platforms": ["here-1c"], "work_dir": str(root / "work")}}
    monkeypatch.delenv("TCL_TRACKING", raising=False)
    monkeypatch.setenv("MLFLOW_TRACKING_URI", uri)
    tracking.configure(used)
    try:
        m = fit_kb_prior(used, "here-1c", root / "models", records_root=root / "records")
        again = fit_kb_prior(used, "here-1c", root / "models", records_root=root / "records")
        version = tracking.registry.get_version("kbt-xgb_kb-here-1c", "1")
        loaded = tracking.registry.load_version("kbt-xgb_kb-here-1c", "1")
    finally:
        mlflow.set_tracking_uri(None)
    assert m["fitted_on"] == ["twin-1c", "here-1c"], "the other vector width teaches nothing"
    assert m["train_rows"] == 2 * m["platform_train_rows"] > 0   # here's training programs and twin's
    assert (m["registered_model"], m["version"], m["champion"]) == ("kbt-xgb_kb-here-1c", "1", True)
    # the same fit again scores the same: the gate keeps v1 (a rerun never churns the champion)
    assert (again["version"], again["champion"]) == ("2", False) and "not higher" in again["promotion"]
    assert version.tags["model"] == "xgb_kb" and int(version.tags["train_rows"]) == m["train_rows"]
    assert int(version.tags["eval.test_tasks"]) == 1   # toyC's task: the held-out evidence select.py weighs
    assert loaded.meta["fitted_on"] == ["twin-1c", "here-1c"] and loaded.model_name == "xgb"
    # what the guard reads to tell familiar operators from new ones: both platforms' training tasks by op type
    assert loaded.meta["train_rows"] == m["train_rows"] and sum(loaded.op_types.values()) >= 1
    assert np.isfinite(m["test_top1_mean_per_task"]) and np.isfinite(m["val_top1_mean_per_task"])
