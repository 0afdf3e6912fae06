"""PyTorch -> torch.export -> Relax, and the Relax passes that make MetaSchedule tasks.

`from_exported_program` (keep_params_as_input=False, its default) turns weights into
Relax constants, so every extracted task sees concrete shapes. As a deployed network
would be (and as TVM's old Relay flow and ONNX export do), BatchNorm after a conv is
folded into the conv's weights and bias, so a layer is one `conv2d_add[_relu]` task;
any other BatchNorm is decomposed into elementwise ops that fuse with their producer.

`fuse_for_tuning` repeats the fusion sequence of TVM 0.27's `relax_integration.compile_relax`
(library dispatch, LegalizeOps, AnnotateTIROpPattern, FoldConstant, FuseOps, FuseTIR):
`extract_tasks` itself does none of this (on an unfused module it finds no tasks), and
using the same sequence keeps the task keys equal to the ones `compile_relax` looks up.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # importing TVM costs seconds; only the functions below need it
    import torch
    import tvm

__all__ = ["to_relax", "exported_to_relax", "fuse_for_tuning", "fold_conv_bn"]


def fold_conv_bn(model: "torch.nn.Module") -> "torch.nn.Module":
    """A copy of `model` (eval mode) with each Conv2d -> BatchNorm2d pair inside a
    `nn.Sequential` merged into one biased Conv2d; the BatchNorm becomes Identity."""
    import copy

    from torch import nn
    from torch.nn.utils.fusion import fuse_conv_bn_eval

    model = copy.deepcopy(model).eval()
    for seq in [m for m in model.modules() if isinstance(m, nn.Sequential)]:
        names = list(seq._modules)
        for first, second in zip(names, names[1:]):
            conv, bn = seq._modules[first], seq._modules[second]
            if (isinstance(conv, nn.Conv2d) and isinstance(bn, nn.BatchNorm2d)
                    and bn.track_running_stats and conv.out_channels == bn.num_features):
                seq._modules[first] = fuse_conv_bn_eval(conv, bn)
                seq._modules[second] = nn.Identity()
    return model


def to_relax(model: "torch.nn.Module", example_inputs: tuple["torch.Tensor", ...],
             *, fold_batch_norm: bool = True) -> "tvm.IRModule":
    """Export `model` on `example_inputs` and import it as a Relax module with bound weights.

    BatchNorm folding works on a copy: the caller's weights are left as they are.
    """
    import torch

    if not isinstance(example_inputs, tuple):
        raise TypeError(f"example_inputs must be a tuple of tensors, got {type(example_inputs).__name__}")
    model = fold_conv_bn(model) if fold_batch_norm else model.eval()
    with torch.no_grad():
        try:
            exported = torch.export.export(model, example_inputs)
        except Exception as exc:  # surface which model failed, keep the torch error as cause
            raise RuntimeError(f"torch.export failed for {type(model).__name__}: {exc}") from exc
    return exported_to_relax(exported)


def exported_to_relax(exported: "torch.export.ExportedProgram") -> "tvm.IRModule":
    """A torch.export program (ours, or a user's .pt2) as a Relax module with bound weights."""
    from tvm.relax.frontend.torch import from_exported_program

    return for_inference(from_exported_program(exported, keep_params_as_input=False))


def for_inference(mod: "tvm.IRModule") -> "tvm.IRModule":
    """An imported Relax module made ready to fuse: training-only ops decomposed.

    Remaining batch_norm -> elementwise ops; then the (out, mean, var) tuple it leaves is
    dropped, which would otherwise keep the next op (e.g. ReLU) from fusing into the same task.
    """
    from tvm import relax

    for p in (relax.transform.DecomposeOpsForInference(), relax.transform.CanonicalizeBindings(),
              relax.transform.DeadCodeElimination()):
        mod = p(mod)
    return mod


def fuse_for_tuning(mod: "tvm.IRModule", target: "tvm.target.Target") -> "tvm.IRModule":
    """Lower a high-level Relax module to fused TIR functions, the unit MetaSchedule tunes."""
    import tvm
    from tvm import relax
    from tvm.relax import pipeline

    try:
        dispatch = list(pipeline.library_dispatch_passes(target))
    except (ValueError, AttributeError):  # targets without a registered dispatcher
        dispatch = []
    seq = tvm.transform.Sequential([
        *dispatch,
        relax.transform.LegalizeOps(),
        relax.transform.AnnotateTIROpPattern(),
        relax.transform.FoldConstant(),
        relax.transform.FuseOps(),
        relax.transform.FuseTIR(),
    ])
    with target, tvm.transform.PassContext(opt_level=3):
        return seq(mod)
