"""params.yaml is checked whole when a flow loads it: every section's settings object is strict about
unknown keys, and `tune.cost_models` / `train.models` name things that exist."""

from __future__ import annotations

import copy
from pathlib import Path

import pytest
import yaml

from flows._params import check_params, load_checked_params
from tcl.config import load_params
from tcl.sampling.settings import SamplingSettings
from tcl.train.loop import TrainConfig

FLOWS = Path(__file__).resolve().parents[1] / "flows"


@pytest.fixture(scope="module")
def params():
    return load_params()


def test_the_repository_params_pass(params):
    check_params(params)


def _with(params, dotted: str, value):
    out = copy.deepcopy(params)
    *path, key = dotted.split(".")
    node = out
    for part in path:
        node = node.setdefault(part, {})
    node[key] = value
    return out


@pytest.mark.parametrize("dotted", ["train.epochz", "train.eval.bootstrapp", "sampling.ratee", "transfer.orderr",
                                    "tune.search.populationn", "tune.online.stepz", "tune.draft.verifyy",
                                    "tune.guard.windoww", "tune.controller.windoww", "compute.workerz", "tune.trails",
                                    "validate.max_failed_shares", "tracking.experiments", "registry.prefx",
                                    "split.holdout",
                                    "collect.pool_sise", "collect.runner.repeats", "collect.runner.rpc.trackr",
                                    "collect.builder.timeout", "retest.fractions", "workloads.image_sise",
                                    "ingest.tenset_dirr", "tuning_ingest.sourcess", "features.cpu.rowz",
                                    "features.hardware_scale", "deploy.timezon", "deploy.pipeline.crons",
                                    "deploy.retries.measur", "gpu_collect.pool_sise"])
def test_an_unknown_key_in_any_checked_section_fails_naming_it(params, dotted):
    bad = _with(params, dotted, 1)
    with pytest.raises(ValueError, match=dotted.split(".")[-1]):
        check_params(bad)


@pytest.mark.parametrize("dotted, value, message", [
    ("retest.fraction", 0, r"retest.fraction.*\(0, 1\]"), ("workloads.image_size", -1, "positive integers"),
    ("ingest.tenset_dir", "some/dir", "ingest.platform: required"),
    ("collect.runner", "fast", "collect.runner: expected a mapping")])
def test_a_bad_value_fails_at_load_naming_the_field(params, dotted, value, message):
    with pytest.raises(ValueError, match=message):
        check_params(_with(params, dotted, value))


def test_retest_may_override_what_collect_sets(params):
    check_params(_with(params, "retest.batch_size", 4))


def test_a_collection_of_its_own_overrides_collect_and_has_its_own_store(params):
    from tcl.collect.settings import overlaid

    gpu, store = overlaid(params, "gpu_collect")
    assert store == params["gpu_collect"]["store"] != "data/records"
    assert gpu["collect"]["source"] == params["gpu_collect"]["source"] != params["collect"]["source"]
    assert gpu["collect"]["runner"] == params["collect"]["runner"]  # what it does not set comes from collect
    assert "store" not in gpu["collect"]
    with pytest.raises(ValueError, match="own store"):
        overlaid(_with(params, "gpu_collect.store", ""), "gpu_collect")
    with pytest.raises(ValueError, match="no collection section 'retest'"):
        overlaid(params, "retest")


def test_a_built_in_network_is_built_at_the_workloads_shapes(params):
    from tcl.workloads import load_network
    from tcl.workloads.settings import WorkloadSettings

    shapes = WorkloadSettings.from_params(_with(params, "workloads.image_size", 24))
    assert tuple(load_network("tiny_cnn", shapes).inputs[0].shape) == (1, 3, 24, 24)


def test_a_network_named_at_one_instance_size_is_built_at_that_size(params):
    """`r3d18@4x96` is how a video network (which has no default size) is tuned; `tiny_cnn@20` beats the
    workloads section; a size of the wrong kind names the instance."""
    from tcl.workloads import load_network
    from tcl.workloads.settings import WorkloadSettings

    shapes = WorkloadSettings.from_params(_with(params, "workloads.image_size", 24))
    net = load_network("tiny_cnn@20", shapes)
    assert (net.name, tuple(net.inputs[0].shape)) == ("tiny_cnn@20", (1, 3, 20, 20))
    with pytest.raises(ValueError, match=r"'m5@4x96'.*positive integer"):
        load_network("m5@4x96", shapes)
    with pytest.raises(ValueError, match=r"'r3d18@96'.*frames"):
        load_network("r3d18@96", shapes)

def test_a_misspelled_cost_model_fails_at_load_listing_the_valid_names(params, tmp_path):
    path = tmp_path / "params.yaml"
    path.write_text(yaml.safe_dump(_with(params, "tune.cost_models", ["xgb", "tlc+moa"])))
    with pytest.raises(ValueError, match=r"tlc\+moa.*'xgb', 'random'.*tcl"):
        load_checked_params(path)
    with pytest.raises(ValueError, match=r"train.models.*\['tlc'\].*tcl"):
        check_params(_with(params, "train.models", ["tcl", "tlc"]))


def test_train_config_reads_the_section_and_takes_overrides(params):
    p = _with(_with(params, "train.lr", 0.01), "seed", 7)
    cfg = TrainConfig.from_params(p)
    assert (cfg.lr, cfg.seed, cfg.epochs, cfg.batch_size) == (0.01, 7, params["train"]["epochs"],
                                                              params["train"]["batch_size"])
    assert TrainConfig.from_params(p, epochs=3, seed=None).epochs == 3 and TrainConfig.from_params(p).seed == 7
    with pytest.raises(ValueError, match="train.loss='hinge'"):
        TrainConfig.from_params(_with(params, "train.loss", "hinge"))


def test_one_models_recipe_overrides_the_shared_optimizer_settings_for_that_model_only(params):
    p = _with(_with(params, "train.lr", 0.01), "train.optimizer_by_model", {"tcl_stores": {"lr": 3e-4, "batch_size": 64}})
    mine, other = TrainConfig.from_params(p, "tcl_stores"), TrainConfig.from_params(p, "tenset_mlp")
    assert (mine.lr, mine.batch_size, mine.epochs) == (3e-4, 64, params["train"]["epochs"])
    assert (other.lr, other.batch_size) == (0.01, params["train"]["batch_size"])
    assert TrainConfig.from_params(p, "tcl_stores", lr=0.5).lr == 0.5  # a caller's keyword still wins
    with pytest.raises(ValueError, match=r"train.optimizer_by_model.tcl_stores.*n_layer"):
        TrainConfig.from_params(_with(params, "train.optimizer_by_model", {"tcl_stores": {"n_layer": 3}}))


def test_a_registered_variant_takes_its_own_hyperparameters_else_its_classs():
    """One rule for the joint model's constructor arguments (the train_joint stage and the rebuilt MLflow run)."""
    from tcl.train.loop import model_hparams

    params = {"train": {"hparams": {"tcl_stores": {"layers": 3}, "tcl_stores_joint": {"layers": 1}}}}
    assert model_hparams(params, "tcl_stores_joint", "tcl_stores") == {"layers": 1}
    assert model_hparams({"train": {"hparams": {"tcl_stores": {"layers": 3}}}}, "tcl_stores_joint", "tcl_stores") == {
        "layers": 3}
    assert model_hparams(params, "mlp_joint", "mlp") == {} and model_hparams(params, "tcl_stores_joint") == {"layers": 1}


def test_sampling_mode_applies_only_to_the_listed_platforms(params):
    s = SamplingSettings.from_params(_with(_with(params, "sampling.platforms", ["a"]), "sampling.mode", "active"))
    assert (s.mode_for("a"), s.mode_for("b")) == ("active", "all")
    with pytest.raises(ValueError, match="sampling.mode='online'"):
        SamplingSettings.from_params(_with(params, "sampling.mode", "online"))


def test_every_flow_loads_params_through_the_checked_loader():
    direct = [p.name for p in FLOWS.glob("*.py") if p.name != "_params.py" and "load_params(" in p.read_text()]
    assert not direct, f"flows reading params.yaml unchecked: {direct}"
    assert (FLOWS / "train.py").read_text().count("load_checked_params(") == 1


def test_command_line_overrides_set_existing_keys_only(params):
    """A benchmark's `--set KEY=VALUE`: YAML values on existing dotted keys; a typo fails naming the key."""
    from tcl.config import apply_overrides

    out = apply_overrides(copy.deepcopy(params), ["tune.draft.verify=128", "tune.draft.enabled=true",
                                                  "collect.runner.cpus=[0]"])
    assert out["tune"]["draft"]["verify"] == 128 and out["tune"]["draft"]["enabled"] is True
    assert out["collect"]["runner"]["cpus"] == [0] and params["tune"]["draft"]["verify"] != 128
    with pytest.raises(ValueError, match="no key 'tune.draft.verfy'.*verify"):
        apply_overrides(copy.deepcopy(params), ["tune.draft.verfy=128"])
    with pytest.raises(ValueError, match="no section 'tune.drfat'"):
        apply_overrides(copy.deepcopy(params), ["tune.drfat.verify=1"])
    with pytest.raises(ValueError, match="KEY=VALUE"):
        apply_overrides(copy.deepcopy(params), ["tune.draft.verify"])
