"""Ingest, validate and featurize on Dask workers give what the serial stages give.

Real components: TVM's example Ansor log (re-stamped copies, a bad line in each, one
file repeated so validation finds duplicates across batches), a real
`distributed.LocalCluster` of 2 worker processes, Prefect's DaskTaskRunner
(prefect-dask) with Prefect's ephemeral API, Great Expectations. Each stage runs once
with `compute.runner: serial` and once with `dask`, into directories of their own, and
what they wrote is compared: parts and manifest byte for byte, quarantine entries,
validated rows, reports, feature arrays and the tokenizer.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import yaml

from tcl.compute import ComputeSettings, run_units
from tcl.data.ingest import ingest_ansor_dir
from tcl.data.quarantine import read_quarantine
from tcl.data.store import RecordStore
from tcl.data.validation.batches import SchemaError, plan_batches
from tcl.data.validation.platform import validate_platform

from conftest import FIXTURES, REPO

RESNET50 = FIXTURES / "ansor" / "resnet-50-NHWC-B1-llvm.json"
P1 = "local-1c"
SPLIT = {"holdout_networks": ["held_out"], "val_fraction": 0.2, "min_val_tasks": 1}


@pytest.fixture(scope="module")
def prefect_api():
    """Prefect's ephemeral API server gets 20 s to start by default; a loaded 2-core machine
    (several test runs at once) can take longer."""
    from prefect.settings import PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS, temporary_settings

    with temporary_settings(updates={PREFECT_SERVER_EPHEMERAL_STARTUP_TIMEOUT_SECONDS: 180}):
        yield


@pytest.fixture(scope="module")
def cluster(prefect_api):
    """Two worker processes, one thread each (as compute.workers/threads_per_worker default)."""
    from distributed import LocalCluster

    with LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=":0") as c:
        yield c


@pytest.fixture(scope="module")
def logs(tmp_path_factory) -> Path:
    """6 re-stamped copies of the ResNet-50 log (26 tasks), a bad line first in each, the first
    copy once more under another name (26 record_ids seen twice), and task weights putting the
    tasks in three networks."""
    dest = tmp_path_factory.mktemp("logs")
    lines = [json.loads(ln) for ln in RESNET50.read_text().splitlines() if ln.startswith("{")]
    for c in range(6):
        body = ['{"i": [broken']
        for obj in lines:
            obj["r"][3] += 1  # a later timestamp: another measurement, another record_id
            body.append(json.dumps(obj))
        (dest / f"log{c:03d}.json").write_text("\n".join(body) + "\n")
    shutil.copy(dest / "log000.json", dest / "log999.json")
    keys = [obj["i"][0][0] for obj in lines]
    weights = {"net_a": {k: 1 for k in keys[:10]}, "net_b": {k: 2 for k in keys[10:20]},
               "held_out": {k: 3 for k in keys[20:]}}
    (dest / "weights.json").write_text(json.dumps(weights))
    return dest


def _params(compute: dict) -> dict:
    params = yaml.safe_load((REPO / "params.yaml").read_text())
    params["compute"] = compute
    params["split"] = SPLIT
    params["validate"] = {**params["validate"], "max_failed_share": 0.5, "batch_rows": 40}
    return params


def _ingest(work: Path, logs: Path, params: dict):
    return run_units(params, "ingest", lambda units: ingest_ansor_dir(
        logs, platform=P1, store_root=work / "tenset", quarantine_dir=work / "quarantine",
        task_weights_path=logs / "weights.json", chunk_size=10, progress=False, units=units))


def _validate(work: Path, params: dict):
    return run_units(params, "validate", lambda units: validate_platform(
        P1, params, stores=[work / "tenset"], validated_root=work / "validated",
        quarantine_dir=work / "quarantine", report_dir=work / "reports", track=False, units=units))


def _featurize(work: Path, params: dict):
    from tcl.features.dataset import featurize_platforms
    from tcl.platforms import get_platform

    return run_units(params, "featurize", lambda units: featurize_platforms(
        [get_platform(params, P1)], params, work / "validated", work / "tenset", work / "features", units=units))


def _files(root: Path, pattern: str) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob(pattern))}


def _quarantine(path: Path, work: Path) -> list[dict]:
    """Entries with the run's own directory taken out of the file names."""
    return [dict(e, source_file=e["source_file"].replace(str(work), "<work>")) for e in read_quarantine(path)]


def _units_run(cluster) -> int:
    """Tasks the cluster's workers have finished: only the stages submit any, one per unit."""
    return sum(prefix.state_counts["memory"] for prefix in cluster.scheduler.task_prefixes.values())


def _npz(path: Path) -> dict[str, np.ndarray]:
    with np.load(path, allow_pickle=False) as data:
        return {k: data[k] for k in data.files}


@pytest.mark.slow
def test_ingest_validate_featurize_on_dask_equal_the_serial_stages(tmp_path, logs, cluster):
    serial, dask = tmp_path / "serial", tmp_path / "dask"
    serial_params = _params({"runner": "serial"})  # featurize: one chunk per split
    dask_params = _params({"runner": "dask", "address": cluster.scheduler_address, "chunk_rows": 16})

    # ingest: one unit per log file
    ran = _units_run(cluster)
    a, b = _ingest(serial, logs, serial_params), _ingest(dask, logs, dask_params)
    assert _units_run(cluster) - ran == 7, {k: dict(v.state_counts) for k, v in cluster.scheduler.task_prefixes.items()}
    assert (a.files, a.ingested, a.records_now, a.quarantined_now) == (7, 7, 7 * 26, 7)
    assert vars(b) == {**vars(a), "quarantine": {**a.quarantine, "path": b.quarantine["path"]}}
    parts = _files(serial / "tenset", "part-*.parquet")
    assert len(parts) == 7 * 3 and parts == _files(dask / "tenset", "part-*.parquet")  # same bytes
    manifest = f"platform={P1}/_ingest_manifest.json"
    assert (serial / "tenset" / manifest).read_bytes() == (dask / "tenset" / manifest).read_bytes()
    qname = f"ingest-{P1}.jsonl"
    assert (serial / "quarantine" / qname).read_bytes() == (dask / "quarantine" / qname).read_bytes()

    # validate: one unit per batch of parts; the repeated file's 26 rows are later copies
    ran, batches = _units_run(cluster), plan_batches(RecordStore(dask / "tenset").parts(P1), 40)
    a, b = _validate(serial, serial_params), _validate(dask, dask_params)
    assert _units_run(cluster) - ran == len(batches) > 3
    assert a.rows == 7 * 26 and a.failed_rows == 26 and a.quarantined_by_expectation == {"record_id_unique": 26}
    validated = f"platform={P1}.parquet"
    assert (serial / "validated" / validated).read_bytes() == (dask / "validated" / validated).read_bytes()
    qname = f"validate-{P1}.jsonl"
    assert _quarantine(serial / "quarantine" / qname, serial) == _quarantine(dask / "quarantine" / qname, dask)
    files = json.loads((dask / "tenset" / manifest).read_text())["files"]
    copies = {f"part-{files[name]['file_id']}-" for name in ("log000.json", "log999.json")}
    later = {Path(e["source_file"]).name[:23] for e in read_quarantine(dask / "quarantine" / qname)}
    assert len(later) == 1 and later < copies  # every row of whichever copy is read second
    reports = [json.loads((w / "reports" / f"{P1}.json").read_text()) for w in (serial, dask)]
    assert reports[0] | {"paths": None} == reports[1] | {"paths": None}

    # featurize: one unit per 16 programs on Dask, one per split serially
    ran = _units_run(cluster)
    a, b = _featurize(serial, serial_params), _featurize(dask, dask_params)
    assert _units_run(cluster) - ran == sum(-(-n // 16) for n in b["platforms"][P1]["rows"].values())
    assert a == b and sum(a["platforms"][P1]["rows"].values()) == 6 * 26
    for name in ("tokenizer.json", "stats.json"):
        assert (serial / "features" / name).read_bytes() == (dask / "features" / name).read_bytes()
    for split in ("train", "validation", "test"):
        x, y = _npz(serial / "features" / P1 / f"{split}.npz"), _npz(dask / "features" / P1 / f"{split}.npz")
        assert x.keys() == y.keys() and len(x["x"]) > 0
        for k in x:
            assert np.array_equal(x[k], y[k], equal_nan=x[k].dtype.kind == "f"), (split, k)


@pytest.mark.slow
def test_a_unit_failing_on_a_worker_fails_the_stage_with_its_own_error(tmp_path, logs, cluster):
    params = _params({"runner": "dask", "address": cluster.scheduler_address})
    _ingest(tmp_path, logs, _params({"runner": "serial"}))
    part = sorted(RecordStore(tmp_path / "tenset").parts(P1))[-1]
    table = pq.read_table(part)
    pq.write_table(table.set_column(table.schema.get_field_index("mean_sec"), "mean_sec",
                                    pa.array(["fast"] * table.num_rows)), part)
    with pytest.raises(SchemaError, match=rf"{part.name}: 'mean_sec' is string, expected double"):
        _validate(tmp_path, params)
    assert not (tmp_path / "validated" / f"platform={P1}.parquet").exists()
    assert not list((tmp_path / "validated").glob(".*.tmp"))


@pytest.mark.slow
def test_ingest_flow_on_its_own_local_cluster_writes_what_the_serial_ingest_writes(tmp_path, logs, monkeypatch,
                                                                                  prefect_api):
    """The DVC stage command's flow, `compute.runner: dask` with no address: DaskTaskRunner starts
    a LocalCluster of `compute.workers` processes for the stage and stops it after."""
    from flows.ingest import ingest_flow

    work = tmp_path / "flow"
    params = _params({"runner": "dask", "workers": 2, "threads_per_worker": 1})
    params["ingest"] = {"tenset_dir": str(logs), "platform": P1, "store": str(work / "tenset"),
                        "quarantine_dir": str(work / "quarantine"), "task_weights": str(logs / "weights.json"),
                        "chunk_size": 10}
    work.mkdir()
    (work / "params.yaml").write_text(yaml.safe_dump(params))
    monkeypatch.chdir(work)
    result = ingest_flow(str(work / "params.yaml"), progress=False)
    assert result["records_now"] == 7 * 26 and result["quarantined_now"] == 7

    _ingest(tmp_path / "serial", logs, _params({"runner": "serial"}))
    assert _files(work / "tenset", "part-*.parquet") == _files(tmp_path / "serial" / "tenset", "part-*.parquet")
    assert _quarantine(work / "quarantine" / f"ingest-{P1}.jsonl", work) == \
        _quarantine(tmp_path / "serial" / "quarantine" / f"ingest-{P1}.jsonl", tmp_path / "serial")


def test_compute_settings_name_the_bad_field():
    assert ComputeSettings.from_params(yaml.safe_load((REPO / "params.yaml").read_text())).runner == "serial"
    assert ComputeSettings.from_params({}).max_in_flight == 4
    with pytest.raises(ValueError, match=r"compute.runner='spark' is not one of \['serial', 'dask'\]"):
        ComputeSettings.from_params({"compute": {"runner": "spark"}})
    with pytest.raises(ValueError, match=r"compute: unknown key\(s\) \['worker'\]"):
        ComputeSettings.from_params({"compute": {"worker": 3}})
    with pytest.raises(ValueError, match=r"compute.workers=0 must be an integer >= 1"):
        ComputeSettings.from_params({"compute": {"workers": 0}})


def test_serial_units_run_jobs_lazily_in_order():
    seen = []
    units = run_units({"compute": {"runner": "serial"}}, "t",
                      lambda units: units(lambda k: seen.append(k) or k * k, ({"k": k} for k in range(4))))
    assert seen == [] and next(units) == 0 and seen == [0]  # one job per result asked for
    assert list(units) == [1, 4, 9] and seen == [0, 1, 2, 3]
