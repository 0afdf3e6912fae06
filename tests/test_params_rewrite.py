"""`dvc exp run -S key=value` rewrites params.yaml with DVC's own YAML round-trip; the file must
survive it (DVC reads it back with the same reader, and so do the stages)."""

from __future__ import annotations

import shutil

import yaml
from dvc.utils.serialize import load_yaml, modify_yaml

from conftest import REPO


def test_params_yaml_survives_dvcs_rewrite(tmp_path):
    path = tmp_path / "params.yaml"
    shutil.copy(REPO / "params.yaml", path)
    before = yaml.safe_load(path.read_text())
    with modify_yaml(str(path)) as data:   # what `dvc exp run -S train.epochs=2` does to the file
        data["train"]["epochs"] = 2
    after = load_yaml(str(path))           # DVC's reader: raises "YAML file structure is corrupted" if broken
    assert after["train"]["epochs"] == 2
    assert yaml.safe_load(path.read_text()) == {**before, "train": {**before["train"], "epochs": 2}}
