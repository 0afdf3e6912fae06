"""docs/extending.md's recipes, done through the public registries only: a toy cost model and a
toy sampler, added by a newcomer's few lines, are found by name, trained, saved in a bundle,
loaded back and used by the sampling rounds."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from tcl.features.kinds import PER_STORE
from tcl.features.per_store import PerStoreFeaturizer
from tcl.models import MODELS, CostModel, build_model, register_model
from tcl.models.metrics import pairwise_accuracy
from tcl.sampling.base import SAMPLERS, Pool, Sampler, make_sampler, register_sampler
from tcl.models.bundle import ModelBundle
from tcl.train.loop import TrainConfig, fit
from tcl.models.base import predict


@pytest.fixture
def toy_model():
    @register_model("toy_linear")
    class ToyLinear(CostModel):
        """Sum over stores, one linear layer: the smallest per-store model."""

        input_kind = PER_STORE

        def __init__(self, feat_dim: int, seq_len: int | None = None, bias: bool = True):
            super().__init__()
            self.hparams = dict(feat_dim=feat_dim, seq_len=seq_len, bias=bias)
            self.feat_dim, self.seq_len = feat_dim, seq_len
            self.linear = torch.nn.Linear(feat_dim, 1, bias=bias)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self._check_input(x)
            return self.linear(x.sum(dim=1)).squeeze(-1)

    yield ToyLinear
    del MODELS["toy_linear"]


@pytest.fixture
def toy_sampler():
    @register_sampler("lowest_index")
    class LowestIndex(Sampler):
        """Picks the unlabelled programs with the lowest pool index."""

        uses_model = False

        def _select(self, pool: Pool, budget: int) -> np.ndarray:
            return pool.candidates[:budget]

    yield LowestIndex
    del SAMPLERS["lowest_index"]


def _ranking_data(seed: int = 0):
    """(N, 3 stores, 164) PerStoreFeature-shaped inputs whose speed falls with feature 0's sum, in 10 tasks."""
    rng = np.random.default_rng(seed)
    x = np.zeros((400, 3, 164), np.float32)
    x[:, :, :8] = rng.random((400, 3, 8))
    latency = x[:, :, 0].sum(axis=1) + 0.01 * rng.random(400)
    groups = np.repeat(np.arange(10), 40)
    labels = np.zeros(400, np.float32)
    for g in range(10):
        rows = groups == g
        labels[rows] = latency[rows].min() / latency[rows]
    return x, labels, groups


def test_a_new_cost_model_is_built_trained_bundled_and_loaded_by_its_name(toy_model, tmp_path):
    x, labels, groups = _ranking_data()
    model = build_model("toy_linear", feat_dim=164, seq_len=3, seed=0)
    assert isinstance(model, toy_model) and model.name == "toy_linear"
    fit(model, x, labels, groups, TrainConfig(epochs=200, batch_size=400, lr=0.05, seed=0))
    scores = predict(model, x)
    assert pairwise_accuracy(scores, labels, groups) > 0.85
    assert pairwise_accuracy(-scores, labels, groups) < 0.15  # the check sees a sign flip

    bundle = ModelBundle("toy_linear", model, PerStoreFeaturizer(3), "local-1c", [1.0], {})
    loaded = ModelBundle.load(bundle.save(tmp_path / "bundle"))
    assert isinstance(loaded.model, toy_model) and isinstance(loaded.featurizer, PerStoreFeaturizer)
    np.testing.assert_allclose(predict(loaded.model, x), scores, rtol=1e-6)


def test_registries_refuse_a_taken_name_and_list_the_known_ones(toy_model):
    with pytest.raises(ValueError, match="already registered"):
        register_model("toy_linear")(type("Other", (CostModel,), {}))
    with pytest.raises(ValueError, match="toy_linear"):
        build_model("toy_lineer", feat_dim=8, seq_len=3)


def test_a_new_sampler_is_made_by_its_name_and_picks_by_its_rule(toy_sampler):
    sampler = make_sampler("lowest_index")
    labelled = np.zeros(20, bool)
    labelled[[0, 3]] = True
    pool = Pool(op_type=np.array(["conv"] * 20), task=np.arange(20) % 4, scores=np.zeros(20), labelled=labelled)
    np.testing.assert_array_equal(np.sort(sampler.select(pool, 3)), [1, 2, 4])
    with pytest.raises(ValueError, match="lowest_index"):
        make_sampler("lowest_indx")


def test_a_new_network_is_built_by_name_and_its_tasks_extracted():
    """docs/extending.md "A network": a module and its name -> class entry; the catalog's task extraction
    finds its operators by the name alone."""
    from tcl.workloads.networks import NETWORKS, build_network
    from tcl.workloads.tasks import extract_tasks

    class ToyNet(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Conv2d(3, 8, 3, padding=1)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return torch.relu(self.conv(x)).mean(dim=(2, 3))

    NETWORKS["toy_net"] = ToyNet  # the FAMILIES entry of the recipe, which NETWORKS takes in on import
    try:
        model, (x,) = build_network("toy_net", batch=1, image_size=8)
        assert isinstance(model, ToyNet) and tuple(model(x).shape) == (1, 8)
        tasks = extract_tasks("toy_net", {"kind": "llvm", "num-cores": 1}, image_size=8)
        assert "conv2d" in {t.op_type for t in tasks}, [t.name for t in tasks]
    finally:
        del NETWORKS["toy_net"]


def test_a_new_machine_is_declared_from_the_suggested_entries_and_measures_them():
    """docs/extending.md "A platform": paste what `make collect` suggests, list the names in the foreach
    lists (params fail to load until both agree), and this CPU now measures those platforms."""
    import yaml

    from flows._params import check_params
    from tcl.collect.host import NewMachine, require_host_platforms
    from tcl.config import check_platform_lists, load_params
    from tcl.platforms import get_platform, this_cpu

    cpu = {**this_cpu(), "family": 4343, "model": 9, "name": "Newcomer CPU"}
    params = load_params()
    with pytest.raises(NewMachine) as e:
        require_host_platforms(params, cpu)
    entries = yaml.safe_load(str(e.value).split("\n\n", 1)[1])
    params["platforms"].update(entries)
    params["collect"]["platforms"] += list(entries)
    with pytest.raises(ValueError, match="validate.platforms .* missing"):
        check_platform_lists(params)
    params["validate"]["platforms"] += list(entries)
    check_params(params)
    assert require_host_platforms(params, cpu) == list(entries)
    assert all(len(get_platform(params, n).spec_vector) > 0 for n in entries)
