"""The hint for a missing registered model names the rebuild when a committed stage registered it
(per-platform train, the joint stage, transfer) and the training command only when none did."""

import json

from tcl.tracking.hints import committed_names, how_to_get


def _write(path, obj):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj))


def test_committed_names_read_every_stage(tmp_path):
    _write(tmp_path / "reports/train/p1.json", {"tcl": {"registered_model": "tcl-tcl-p1"}, "note": "x"})
    _write(tmp_path / "reports/train/joint.json",
           {"tcl_stores_joint": {"p1": {"registered_model": "tcl-tcl_stores_joint-p1"},
                                 "p2": {"registered_model": "tcl-tcl_stores_joint-p2"}}})
    _write(tmp_path / "reports/transfer/stage.json", {"registered_model": "tcl-ckd-p2", "kb_model": "tcl-kb-p2"})
    assert committed_names(tmp_path) == {"tcl-tcl-p1", "tcl-tcl_stores_joint-p1", "tcl-tcl_stores_joint-p2",
                                         "tcl-ckd-p2", "tcl-kb-p2"}


def test_how_to_get_rebuilds_committed_models_and_trains_the_rest(tmp_path):
    _write(tmp_path / "reports/train/joint.json",
           {"tcl_stores_joint": {"p1": {"registered_model": "tcl-tcl_stores_joint-p1"}}})
    assert "flows.register" in how_to_get("tcl_stores_joint", "tcl", tmp_path)
    assert "train.models" in how_to_get("tlp", "tcl", tmp_path)
