"""PaCM (Pruner's pattern-aware cost model): its dataflow rows and the model's two branches.

The rows come from real MetaSchedule schedules of a matmul, analysed without building them; training
on measured programs and the bundle at tuning time are in test_baselines.py (they share its records).
"""

from __future__ import annotations

import numpy as np
import pytest
import torch

from test_psa import _matmul

L1_MOVED = 8 + 1   # columns 8-11: bytes moved into registers, L1, L2, L3
L1_TILE = 12 + 1   # columns 12-15: the tile kept in each


def _rows(mod, platform):
    from tcl.features.dataflow import block_rows, platform_levels
    from tcl.features.loop_nest import loop_nest

    return block_rows(loop_nest(mod), platform_levels(platform))


def test_a_block_per_access_loads_first_then_the_store(host_platform):
    from tcl.features.dataflow import DATAFLOW_DIM

    rows = _rows(_matmul(64, 16), host_platform)
    # C = 0 (one store) and C += A * B (loads A, B, then C's store): 1 + 3 blocks
    assert rows.shape == (4, DATAFLOW_DIM) and np.isfinite(rows).all()
    assert rows[:, 0].tolist() == [1.0, 0.0, 0.0, 1.0]   # is_store
    assert rows[0, 22] == 0.0 and rows[-1, 22] == 1.0    # program order


def test_a_tile_that_overflows_l1_moves_more_bytes_into_l1(host_platform):
    assert host_platform.specs["l1_kb"] == 32  # 16x16 tiles take 3 KiB, 128x128 ones 192 KiB
    fits, overflows = (_rows(_matmul(256, t), host_platform) for t in (16, 128))
    loads = slice(1, 3)  # A and B of the update statement
    assert (overflows[loads, L1_MOVED] > fits[loads, L1_MOVED]).all()
    # the same program with an L1 it fits in moves less into L1
    import dataclasses

    roomy = dataclasses.replace(host_platform, specs={**host_platform.specs, "l1_kb": 512})
    assert (_rows(_matmul(256, 128), roomy)[loads, L1_MOVED] < overflows[loads, L1_MOVED]).all()


def test_pack_types_rows_and_the_model_ignores_padding(host_platform):
    from tcl.features.dataflow import BLOCK_ROW, PACKED_DIM, STORE_ROW, pack
    from tcl.features.per_store import FEATURE_DIM
    from tcl.models import build_model

    rng = np.random.default_rng(0)
    stores = [rng.random((2, FEATURE_DIM), np.float32) + 0.1, rng.random((1, FEATURE_DIM), np.float32) + 0.1]
    blocks = [_rows(_matmul(64, 16), host_platform), _rows(_matmul(64, 32, vector=8), host_platform)]
    narrow, wide = pack(stores, blocks, 2, 4), pack(stores, blocks, 3, 9)
    assert narrow.shape == (2, 6, PACKED_DIM)
    assert narrow[0, :, -1].tolist() == [STORE_ROW] * 2 + [BLOCK_ROW] * 4
    assert narrow[1, :, -1].tolist() == [STORE_ROW, 0.0] + [BLOCK_ROW] * 4
    model = build_model("pacm", feat_dim=PACKED_DIM, seq_len=9, seed=0, hidden=32)
    model.eval()
    with torch.no_grad():
        a, b = model(torch.from_numpy(narrow)), model(torch.from_numpy(wide))
        torch.testing.assert_close(a, b)  # more padding rows, the same scores
        # both branches count: another block or another store changes the score
        moved = narrow.copy()
        moved[0, 3, :8] += 1.0
        assert model(torch.from_numpy(moved))[0] != a[0]
        no_blocks = pack(stores, [None, None], 2, 4)
        assert torch.isfinite(model(torch.from_numpy(no_blocks))).all()
        assert (model(torch.from_numpy(no_blocks)) != a).all()


def test_a_gpu_platform_is_refused_by_name(host_platform):
    import dataclasses

    from tcl.features.dataflow import platform_levels

    with pytest.raises(ValueError, match="'a100'.*gpu"):
        platform_levels(dataclasses.replace(host_platform, name="a100", kind="gpu"))


def test_block_rows_refuse_levels_other_than_a_cores_four(host_platform):
    from tcl.features.dataflow import block_rows, platform_levels
    from tcl.features.loop_nest import loop_nest

    with pytest.raises(ValueError, match="registers.*l1.*l2.*l3"):
        block_rows(loop_nest(_matmul(64, 16)), platform_levels(host_platform)[:2])


def test_a_featurizer_file_of_other_features_is_refused_naming_the_file(tmp_path, host_platform):
    """A bundle trained on other features must not score candidates (its inputs would mean something else)."""
    import json

    from tcl.features.dataflow import PacmFeaturizer, platform_levels
    from tcl.features.per_store import PerStoreFeaturizer

    for featurizer in (PacmFeaturizer(4, 8, platform_levels(host_platform)), PerStoreFeaturizer(3)):
        path = featurizer.save(tmp_path / featurizer.file_name)
        assert type(featurizer).load(path).feature_shape == featurizer.feature_shape
        info = json.loads(path.read_text())
        info["extractor"] = {**info["extractor"], "buffers_per_store": 7}
        path.write_text(json.dumps(info))
        with pytest.raises(ValueError, match=f"{featurizer.file_name}: trained on features made by"):
            type(featurizer).load(path)
        path.write_text(json.dumps({**info, "format": "other"}))
        with pytest.raises(ValueError, match="not a tcl-"):
            type(featurizer).load(path)
