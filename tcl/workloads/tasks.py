"""MetaSchedule task extraction with the metadata the pipeline needs per task.

A task is one fused TIR function. Its weight (how often the network calls it) weights
top-k metrics and tuning budgets; its operator type drives RDU's per-type budgets;
its key (structural hash of the dispatched module) joins tasks to measured records.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from .networks import build_network
from .relax_import import fuse_for_tuning, to_relax

if TYPE_CHECKING:
    import tvm

__all__ = ["OP_TYPES", "Task", "classify_op_type", "extract_tasks", "task_from_extracted"]

OP_TYPES = (
    "conv2d", "depthwise_conv2d", "group_conv2d", "dense", "pool",
    "softmax", "layer_norm", "reduction", "elementwise", "other",
    "conv1d", "conv3d", "conv2d_transpose",
)

_NORM_NAMES = ("layer_norm", "rms_norm", "group_norm", "instance_norm", "batch_norm")
_DENSE_ANCHORS = ("matmul", "dense", "batch_matmul")


@dataclass(frozen=True)
class Task:
    """One tuning task of one network."""

    network: str
    name: str          # TVM's task name, e.g. "fused_conv2d1_add1_relu1"
    key: str           # structural hash (hex) of `mod`; equal for equal TIR across networks
    weight: int        # occurrences of this task in the network
    op_type: str       # one of OP_TYPES
    flops: float       # estimated FLOPs of one call
    mod: Any = field(repr=False, compare=False)  # tvm.IRModule: the dispatched TIR module

    @property
    def weighted_flops(self) -> float:
        """FLOPs the task contributes to one network inference."""
        return self.weight * self.flops


def _reduce_extents(block) -> list[int]:
    from tvm.tirx import IterVar

    return [int(iv.dom.extent) for iv in block.iter_vars if iv.iter_type == IterVar.CommReduce]


def classify_op_type(task_name: str, mod: "tvm.IRModule") -> str:
    """Operator type of a task, one of OP_TYPES.

    The anchor block (the reduction block with the most FLOPs, as MetaSchedule uses it)
    names the compute: `conv2d_nchw`, `group_conv2d_nchw`, `conv1d_ncw`, `conv3d_ncdhw`, `matmul`,
    `pool_max`, ... (a transposed conv's anchor is `compute`: its task name says what it is).
    A grouped conv whose groups see one input channel each is depthwise. Fused tasks
    without a reduction are elementwise (TVM's elementwise/broadcast/injective patterns);
    `layer_norm` stands for any normalization op that stays a task of its own.
    """
    from tvm.s_tir.analysis import find_anchor_sblock
    from tvm.tirx import PrimFunc

    name = task_name.lower()
    anchor = find_anchor_sblock(mod)
    anchor_name = anchor.name_hint.lower() if anchor is not None else ""
    both = f"{name} {anchor_name}"
    if "conv2d_transpose" in both:  # TOPI names its anchor block just `compute`
        return "conv2d_transpose"
    if "conv1d" in both or "conv3d" in both:
        return "conv1d" if "conv1d" in both else "conv3d"
    if "depthwise" in both:
        return "depthwise_conv2d"
    if "conv" in anchor_name or (anchor is None and "conv2d" in name):
        if "group" in anchor_name:
            extents = _reduce_extents(anchor)
            return "depthwise_conv2d" if extents and extents[0] == 1 else "group_conv2d"
        return "conv2d"
    if any(k in anchor_name for k in _DENSE_ANCHORS) or (anchor is None and "matmul" in name):
        return "dense"
    if "pool" in both:
        return "pool"
    if "softmax" in both:
        return "softmax"
    if any(k in name for k in _NORM_NAMES):
        return "layer_norm"
    if anchor is not None:
        return "reduction"
    if any(isinstance(f, PrimFunc) for f in mod.functions.values()):
        return "elementwise"
    return "other"


def _flops(mod: "tvm.IRModule") -> float:
    from tvm.s_tir.analysis import estimate_tir_flops

    return float(estimate_tir_flops(mod))


def task_from_extracted(network: str, extracted: Any) -> Task:
    """Wrap one `ms.ExtractedTask` (its first dispatched module) as a Task."""
    from tvm.s_tir.meta_schedule.utils import shash2hex

    if not extracted.dispatched:
        raise ValueError(f"{network}: task '{extracted.task_name}' has no dispatched module")
    mod = extracted.dispatched[0]
    weight = int(extracted.weight)
    if weight < 1:
        raise ValueError(f"{network}: task '{extracted.task_name}' has weight {weight} < 1")
    return Task(network=network, name=str(extracted.task_name), key=shash2hex(mod),
                weight=weight, op_type=classify_op_type(str(extracted.task_name), mod),
                flops=_flops(mod), mod=mod)


def extract_tasks(network: str, target: "tvm.target.Target", *, batch: int = 1,
                  image_size: int = 32, seq_len: int = 16, size=None) -> list[Task]:
    """All tuning tasks of a registered network on `target`, heaviest (weight x FLOPs) first.

    `size`, when given, is the instance size in the network's input kind (see `inputs.py`) and
    replaces image_size/seq_len. Ties are broken by task name then key, so the order is the same
    on every run.
    """
    import tvm
    from tvm.s_tir import meta_schedule as ms

    if not isinstance(target, tvm.target.Target):
        target = tvm.target.Target(target)
    model, inputs = build_network(network, batch=batch, image_size=image_size, seq_len=seq_len, size=size)
    mod = fuse_for_tuning(to_relax(model, inputs), target)
    extracted = ms.relax_integration.extract_tasks(mod, target)
    if not extracted:
        raise RuntimeError(f"{network}: MetaSchedule extracted no tasks on {target}")
    tasks = [task_from_extracted(network, t) for t in extracted]
    return sorted(tasks, key=lambda t: (-t.weighted_flops, t.name, t.key))
