"""Mamba (selective SSM) block in plain PyTorch, interchangeable with mamba_ssm's.

Why it exists: `mamba_ssm` only runs fast with its CUDA kernels; on a CPU it falls back
to a slow reference scan (and cannot even be imported without a stub). This block has
exactly the parameter names and shapes of `mamba_ssm.modules.mamba_simple.Mamba`, so a
state_dict trained with either loads into the other, and its scan is vectorized for the
short schedule sequences (26-41 rows) that cost models see.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.util
import math
import sys
import types
from typing import Iterator

import torch
import torch.nn as nn
import torch.nn.functional as F

BACKENDS = ("auto", "torch", "mamba_ssm")
_STUB_FLAG = "__tcl_cpu_stub__"


def selective_scan(
    u: torch.Tensor,
    delta: torch.Tensor,
    A: torch.Tensor,
    B: torch.Tensor,
    C: torch.Tensor,
    D: torch.Tensor | None = None,
    z: torch.Tensor | None = None,
) -> torch.Tensor:
    """Selective scan h_t = exp(delta_t*A) h_{t-1} + delta_t*B_t*u_t, y_t = C_t.h_t + D*u_t.

    Layout matches the block: u, delta, z: (batch, L, d); A: (d, n); B, C: (batch, L, n);
    D: (d,). `delta` is already positive (softplus applied). Output (batch, L, d), gated
    by silu(z) if given.

    Why this shape of loop: for L <= 64 a plain recurrence over time whose every step
    touches only (batch, d, n) tensors (small enough to stay in cache) was ~3x faster
    on CPU than building the full (batch, L, d, n) discretization up front, and 5-30x
    faster than log-depth (Hillis-Steele) or cumsum-in-log-space scans; it is also exact,
    so autograd gives the true gradient. Inputs are unbound along time once, because
    indexing x[:, t] in a loop makes autograd allocate a full-size zero tensor per step.
    """
    steps = u.shape[1]
    delta_t = delta.transpose(0, 1).unbind(0)  # L x (b, d)
    du_t = (delta * u).transpose(0, 1).unbind(0)  # L x (b, d)
    B_t = B.transpose(0, 1).unsqueeze(2).unbind(0)  # L x (b, 1, n)
    C_t = C.transpose(0, 1).unsqueeze(-1).unbind(0)  # L x (b, n, 1)
    h = None
    ys = []
    for t in range(steps):
        x = du_t[t].unsqueeze(-1) * B_t[t]  # delta_t * B_t * u_t: (b, d, n)
        h = x if h is None else torch.addcmul(x, torch.exp(delta_t[t].unsqueeze(-1) * A), h)
        ys.append(torch.bmm(h, C_t[t]).squeeze(-1))  # C_t . h_t: (b, d)
    y = torch.stack(ys, dim=1)
    if D is not None:
        y = y + u * D
    if z is not None:
        y = y * F.silu(z)
    return y


class MambaBlock(nn.Module):
    """Pure-PyTorch Mamba mixer; same constructor, parameters and math as mamba_ssm's Mamba.

    Parameters are created (and randomly initialised) in the same order as mamba_ssm
    does, so the same torch seed gives the same weights in both backends.
    """

    def __init__(
        self,
        d_model: int,
        d_state: int = 16,
        d_conv: int = 4,
        expand: int = 2,
        dt_rank: int | str = "auto",
        dt_min: float = 0.001,
        dt_max: float = 0.1,
        dt_init: str = "random",
        dt_scale: float = 1.0,
        dt_init_floor: float = 1e-4,
        conv_bias: bool = True,
        bias: bool = False,
        device=None,
        dtype=None,
    ):
        super().__init__()
        kw = {"device": device, "dtype": dtype}
        self.d_model = d_model
        self.d_state = d_state
        self.d_conv = d_conv
        self.expand = expand
        self.d_inner = int(expand * d_model)
        self.dt_rank = math.ceil(d_model / 16) if dt_rank == "auto" else int(dt_rank)

        self.in_proj = nn.Linear(d_model, self.d_inner * 2, bias=bias, **kw)
        self.conv1d = nn.Conv1d(
            self.d_inner, self.d_inner, kernel_size=d_conv, groups=self.d_inner,
            padding=d_conv - 1, bias=conv_bias, **kw,
        )
        self.x_proj = nn.Linear(self.d_inner, self.dt_rank + 2 * d_state, bias=False, **kw)
        self.dt_proj = nn.Linear(self.dt_rank, self.d_inner, bias=True, **kw)

        # dt init keeps the step size in [dt_min, dt_max] at the start (Mamba paper, §3.6).
        std = self.dt_rank ** -0.5 * dt_scale
        if dt_init == "constant":
            nn.init.constant_(self.dt_proj.weight, std)
        elif dt_init == "random":
            nn.init.uniform_(self.dt_proj.weight, -std, std)
        else:
            raise ValueError(f"dt_init must be 'random' or 'constant', got {dt_init!r}")
        dt = torch.exp(
            torch.rand(self.d_inner, device=device, dtype=dtype)
            * (math.log(dt_max) - math.log(dt_min)) + math.log(dt_min)
        ).clamp(min=dt_init_floor)
        with torch.no_grad():
            self.dt_proj.bias.copy_(dt + torch.log(-torch.expm1(-dt)))  # softplus^-1(dt)
        self.dt_proj.bias._no_reinit = True

        # S4D-real init: A = -(1..n) per channel, stored as log for positivity.
        A = torch.arange(1, d_state + 1, dtype=torch.float32, device=device).repeat(self.d_inner, 1)
        self.A_log = nn.Parameter(torch.log(A))
        self.A_log._no_weight_decay = True
        self.D = nn.Parameter(torch.ones(self.d_inner, device=device))
        self.D._no_weight_decay = True
        self.out_proj = nn.Linear(self.d_inner, d_model, bias=bias, **kw)

    def forward(self, hidden_states: torch.Tensor) -> torch.Tensor:
        """(batch, L, d_model) -> (batch, L, d_model)."""
        seqlen = hidden_states.shape[1]
        x, z = self.in_proj(hidden_states).chunk(2, dim=-1)
        x = self.conv1d(x.transpose(1, 2))[..., :seqlen].transpose(1, 2)  # causal depthwise
        x = F.silu(x)
        dt, B, C = torch.split(self.x_proj(x), [self.dt_rank, self.d_state, self.d_state], dim=-1)
        delta = F.softplus(self.dt_proj(dt))
        A = -torch.exp(self.A_log.float())
        y = selective_scan(x, delta, A, B, C, self.D.float(), z)
        return self.out_proj(y)


def _stub_module() -> types.ModuleType:
    """A placeholder `selective_scan_cuda` that fails loudly only when a kernel is called."""
    mod = types.ModuleType("selective_scan_cuda")
    setattr(mod, _STUB_FLAG, True)

    def __getattr__(name: str):
        raise AttributeError(
            f"selective_scan_cuda.{name}: mamba_ssm's CUDA kernels are not built here (tcl put a "
            "CPU stub in sys.modules). Use tcl's MambaBlock, or wrap the call in "
            "mamba_ssm_reference_scan() to run mamba_ssm's slow reference scan."
        )

    mod.__getattr__ = __getattr__
    return mod


def import_mamba_ssm():
    """Return `mamba_ssm.modules.mamba_simple.Mamba`, or None when mamba_ssm is not installed.

    mamba_ssm imports the compiled `selective_scan_cuda` at module level; when that
    extension is missing (CPU build) a stub is registered first so the import succeeds.
    A real extension is never shadowed; the stub is removed again if the import fails.
    """
    if importlib.util.find_spec("mamba_ssm") is None:
        return None
    added_stub = False
    if "selective_scan_cuda" not in sys.modules:
        try:
            importlib.import_module("selective_scan_cuda")
        except ImportError:
            sys.modules["selective_scan_cuda"] = _stub_module()
            added_stub = True
    try:
        from mamba_ssm.modules.mamba_simple import Mamba
    except ImportError:
        if added_stub:
            sys.modules.pop("selective_scan_cuda", None)
        return None
    return Mamba


def fused_kernels_available() -> bool:
    """True when CUDA is usable and mamba_ssm's compiled selective-scan kernel is real."""
    if not torch.cuda.is_available() or import_mamba_ssm() is None:
        return False
    return not getattr(sys.modules.get("selective_scan_cuda"), _STUB_FLAG, False)


@contextlib.contextmanager
def mamba_ssm_reference_scan() -> Iterator[None]:
    """Temporarily route mamba_ssm's Mamba through its pure-PyTorch `selective_scan_ref`.

    Needed to run mamba_ssm's module on a machine without its kernels (e.g. to check
    that our block matches it). Call with use_fast_path=False modules.
    """
    if import_mamba_ssm() is None:
        raise ImportError("mamba_ssm is not installed")
    simple = importlib.import_module("mamba_ssm.modules.mamba_simple")
    ops = importlib.import_module("mamba_ssm.ops.selective_scan_interface")
    original = simple.selective_scan_fn
    simple.selective_scan_fn = ops.selective_scan_ref
    try:
        yield
    finally:
        simple.selective_scan_fn = original


def make_mamba(d_model: int, d_state: int = 16, d_conv: int = 4, expand: int = 2,
               backend: str = "auto", **kwargs) -> nn.Module:
    """Build a Mamba mixer: mamba_ssm's fused one on CUDA when possible, else ours.

    backend: "auto" (fused if CUDA + kernels, otherwise MambaBlock), "torch" (always
    MambaBlock), "mamba_ssm" (always mamba_ssm's class; on CPU it only runs inside
    `mamba_ssm_reference_scan()`). Both expose identical state_dict keys.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
    args = dict(d_model=d_model, d_state=d_state, d_conv=d_conv, expand=expand, **kwargs)
    if backend == "torch" or (backend == "auto" and not fused_kernels_available()):
        return MambaBlock(**args)
    mamba_cls = import_mamba_ssm()
    if mamba_cls is None:
        raise ImportError("backend='mamba_ssm' requested but mamba_ssm is not installed")
    return mamba_cls(**args)
