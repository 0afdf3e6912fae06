"""Issue 28's network families: each builds deterministically, exports with torch.export, imports
into Relax and splits into MetaSchedule tasks of the op types the family is there for; the
catalog's instance sizes per input kind; tier 1 appends to the catalog without touching tier 0."""

from __future__ import annotations

import collections

import pytest
import torch

from tcl.collect.catalog import (CatalogTask, catalog_signature, extra_signature, instance_name,
                                 load_catalog, save_catalog, tier_pool_size, workload_instances)
from tcl.data.store import RecordStore
from tcl.workloads import build_network, extract_tasks
from tcl.workloads.families import FAMILIES, FAMILY_KINDS
from tcl.workloads.inputs import SIZE_KEYS, parse_size, size_label
from tcl.workloads.networks import input_kind

pytestmark = pytest.mark.filterwarnings("ignore:.*LeafSpec:FutureWarning")

# The smallest size of each family at which its structure is intact, and the op types it must bring.
SMALL = {
    "unet": (32, {"conv2d", "conv2d_transpose", "pool"}),
    "deeplab_v3": (32, {"conv2d"}),
    "yolo_tiny": (64, {"conv2d", "pool"}),
    "espcn": (16, {"conv2d", "elementwise"}),
    "mobilenet_v3": (32, {"depthwise_conv2d", "conv2d"}),
    "shufflenet_v2": (32, {"depthwise_conv2d", "elementwise"}),
    "convnext": (32, {"depthwise_conv2d", "dense", "layer_norm"}),
    "mlp_mixer": (32, {"dense", "layer_norm"}),
    "deit_tiny": (32, {"dense", "softmax", "layer_norm"}),
    "m5": (2000, {"conv1d", "pool"}),
    "wav2vec2": (2000, {"conv1d", "dense", "softmax"}),
    "whisper_enc": (40, {"conv1d", "dense", "softmax"}),
    "r3d18": ("2x16", {"conv3d"}),
    "r2plus1d18": ("2x16", {"conv3d"}),
    "llama": (8, {"dense", "softmax"}),
    "llama_decode": (8, {"dense", "softmax"}),
    "dlrm": (4, {"dense"}),
    "dcn_v2": (4, {"dense"}),
}


def test_every_family_has_a_small_size_here():
    assert set(SMALL) == set(FAMILIES)
    assert set(FAMILY_KINDS.values()) <= set(SIZE_KEYS)


@pytest.fixture(scope="module")
def target():
    import tvm

    return tvm.target.Target({"kind": "llvm", "num-cores": 1})


@pytest.mark.parametrize("name", sorted(FAMILIES))
def test_family_exports_imports_and_has_its_op_types(name, target):
    size, wanted = SMALL[name]
    model, inputs = build_network(name, batch=1, size=size)
    again, inputs2 = build_network(name, batch=1, size=size)
    assert all(torch.equal(a, b) for a, b in zip(inputs, inputs2))   # seeded inputs ...
    assert all(torch.equal(a, b) for a, b in zip(model.state_dict().values(), again.state_dict().values()))  # ... and weights
    with torch.no_grad():
        out = model(*inputs)
    assert all(torch.isfinite(o).all() for o in (out if isinstance(out, tuple) else (out,)))
    tasks = extract_tasks(name, target, batch=1, size=size)
    ops = collections.Counter(t.op_type for t in tasks)
    assert wanted <= set(ops), f"{name}: op types {dict(ops)} lack {wanted - set(ops)}"


def test_sizes_follow_the_input_kind():
    assert input_kind("resnet50") == "image" and input_kind("gpt2") == "tokens"
    assert input_kind("m5") == "audio" and input_kind("r3d18") == "video"
    assert input_kind("llama_decode") == "decode" and input_kind("dlrm") == "tabular"
    assert parse_size("video", "8x112") == (8, 112) and size_label((8, 112)) == "8x112"
    for kind, bad in (("video", "8"), ("video", "0x4"), ("audio", 0), ("image", True), ("tokens", "16")):
        with pytest.raises(ValueError, match=kind):
            parse_size(kind, bad)
    _, (clip,) = build_network("r3d18", batch=2, size="4x16")
    assert clip.shape == (2, 3, 4, 16, 16)
    _, (ids, k, v) = build_network("llama_decode", batch=1, size=8)
    assert ids.shape == (1, 1) and k.shape[3] == 8 and v.shape == k.shape
    with pytest.raises(ValueError, match="audio inputs: give its size"):
        build_network("m5", batch=1)
    cfg = {"networks": ["resnet18"], "image_sizes": [224], "seq_lens": [64],
           "extra_networks": ["m5", "r3d18", "llama"], "audio_lens": [8000], "clip_sizes": ["8x64"],
           "sizes_by_network": {"llama": [128, 32]}}
    assert [instance_name(n, s) for n, s in workload_instances(cfg, 1)] == [
        "m5@8000", "r3d18@8x64", "llama@128", "llama@32"]
    with pytest.raises(ValueError, match=r"collect.cache_lens or collect.sizes_by_network.llama_decode"):
        workload_instances({**cfg, "extra_networks": ["llama_decode"]}, 1)
    with pytest.raises(ValueError, match="in collect.networks already"):
        workload_instances({**cfg, "extra_networks": ["resnet18"]}, 1)
    assert tier_pool_size({"pool_size": 128, "extra_pool_size": 64}, 1) == 64
    assert tier_pool_size({"pool_size": 128}, 1) == 128 and tier_pool_size({"pool_size": 128}, 0) == 128


def test_tier_one_leaves_tier_zero_signature_and_rows_alone(tmp_path, target):
    from tvm.s_tir import meta_schedule as ms

    base = {"networks": ["tiny_cnn"], "image_sizes": [16], "seq_lens": [8], "tasks_per_network": 2,
            "sizes_by_network": {"vgg16": [64]}, "pool_size": 8}
    wide = {**base, "extra_networks": ["m5"], "audio_lens": [2000],
            "sizes_by_network": {"vgg16": [64], "m5": [2000]}}
    tj = '{"kind": "llvm"}'
    sig = catalog_signature(base, 1, tj)
    assert catalog_signature(wide, 1, tj) == sig   # tier-1 settings do not touch tier 0's signature
    assert catalog_signature({**base, "image_sizes": [32]}, 1, tj) != sig
    assert extra_signature(wide, 1, tj) != extra_signature({**wide, "sizes_by_network": {"m5": [4000]}}, 1, tj)
    store = RecordStore(tmp_path)
    t0 = extract_tasks("tiny_cnn", target, size=16)[:2]
    save_catalog(store, "p", [CatalogTask(t, {"tiny_cnn@16": 1}) for t in t0], sig)
    rows0 = (store.platform_dir("p") / "_tasks.jsonl").read_text()
    assert load_catalog(store, "p", sig, "") is not None
    assert load_catalog(store, "p", sig, extra_signature(wide, 1, tj)) is None   # tier 1 not extracted yet
    t1 = extract_tasks("m5", target, size=2000)[:2]
    extra = extra_signature(wide, 1, tj)
    save_catalog(store, "p", [CatalogTask(t, {"tiny_cnn@16": 1}) for t in t0]
                 + [CatalogTask(t, {"m5@2000": 1}, tier=1) for t in t1], sig, extra)
    text = (store.platform_dir("p") / "_tasks.jsonl").read_text()
    assert text.startswith(rows0)   # tier-0 rows byte for byte, tier-1 rows after them
    loaded = load_catalog(store, "p", sig, extra)
    assert [c.tier for c in loaded] == [0, 0, 1, 1]
    assert [c.task.key for c in loaded] == [t.key for t in t0 + t1]
    assert [c.task.key for c in load_catalog(store, "p", sig)] == [t.key for t in t0]   # tier 0 alone
    assert ms.utils.shash2hex(loaded[2].task.mod) == t1[0].key   # the saved workload reads back
