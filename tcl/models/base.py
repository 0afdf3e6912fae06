"""What every cost model shares, and the registry that finds one by name.

A cost model is an `nn.Module` scoring programs (higher = faster) from one kind of input
(`input_kind`, see tcl.features.kinds). Adding one is a module with a `CostModel` subclass
decorated `@register_model("name")`, plus its import in tcl/models/__init__.py; `build_model`
and every stage then know it by that name (`train.models` in params.yaml).
"""

from __future__ import annotations

import io
from typing import Sequence

import numpy as np
import torch
import torch.nn as nn

from ..features.kinds import TOKENS
from ..registry import registrar

MODELS: dict[str, type[nn.Module]] = {}
register_model = registrar(MODELS, "cost model")

ACTIVATIONS = {"relu": nn.ReLU, "gelu": nn.GELU, "silu": nn.SiLU}


def param_count(module: nn.Module, trainable_only: bool = False) -> int:
    """Number of scalar parameters (what the papers compare models by)."""
    return sum(p.numel() for p in module.parameters() if p.requires_grad or not trainable_only)


def size_on_disk(module: nn.Module) -> int:
    """Bytes of the serialized state_dict (the paper's "0.35 MB" is this kind of number)."""
    buf = io.BytesIO()
    torch.save(module.state_dict(), buf)
    return buf.getbuffer().nbytes


class CostModel(nn.Module):
    """Base of every cost model: its input kind, size reporting, constructor arguments (`hparams`,
    saved in a bundle so that `build_model` rebuilds it), and an input-shape check."""

    name: str  # set by @register_model
    hparams: dict
    input_kind = TOKENS
    trains_by_gradient = True  # False: trained by its own `fit_ranker` (trees), not by the training loop

    def param_count(self, trainable_only: bool = False) -> int:
        return param_count(self, trainable_only)

    def size_on_disk(self) -> int:
        return size_on_disk(self)

    def _check_input(self, x: torch.Tensor, ndim: int = 3) -> None:
        if x.dim() != ndim or x.shape[-1] != self.feat_dim:
            want = "(batch, seq_len, feat_dim)" if ndim == 3 else "(batch, feat_dim)"
            raise ValueError(f"{type(self).__name__} expects {want} with feat_dim="
                             f"{self.feat_dim}, got shape {tuple(x.shape)}")


def mlp(dims: Sequence[int], activation: str, final_activation: bool) -> nn.Sequential:
    """Stack of Linear layers dims[0] -> ... -> dims[-1] with activations between them."""
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {sorted(ACTIVATIONS)}, got {activation!r}")
    layers: list[nn.Module] = []
    for i, (d_in, d_out) in enumerate(zip(dims[:-1], dims[1:])):
        layers.append(nn.Linear(d_in, d_out))
        if final_activation or i < len(dims) - 2:
            layers.append(ACTIVATIONS[activation]())
    return nn.Sequential(*layers)


def build_model(name: str, feat_dim: int, seq_len: int | None, seed: int | None = None, **hparams) -> nn.Module:
    """Instantiate a registered cost model; unknown hyperparameters raise TypeError.

    With `seed`, the initial weights depend on it alone, not on what the process drew
    from torch's generator before (a rerun in one process must train the same model).
    """
    try:
        cls = MODELS[name]
    except KeyError:
        raise ValueError(f"unknown model {name!r}; choose one of {sorted(MODELS)}") from None
    if seed is None:
        return cls(feat_dim=feat_dim, seq_len=seq_len, **hparams)
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        return cls(feat_dim=feat_dim, seq_len=seq_len, **hparams)


@torch.no_grad()
def predict(model: torch.nn.Module, x: np.ndarray, batch_size: int = 4096) -> np.ndarray:
    """Scores for `x` (higher = faster), in eval mode, batched, on the model's device."""
    model.eval()
    dev = next(model.parameters(), torch.zeros(0)).device  # trees (XGBPerStore) have no parameters
    out = [model(torch.from_numpy(np.ascontiguousarray(x[i:i + batch_size], dtype=np.float32)).to(dev)).reshape(-1)
           for i in range(0, len(x), batch_size)]
    return torch.cat(out).cpu().numpy().astype(np.float64) if out else np.zeros(0)
