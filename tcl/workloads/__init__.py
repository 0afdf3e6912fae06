"""Workloads: PyTorch networks -> torch.export -> Relax -> MetaSchedule tasks with weights and op types."""

from .networks import BERT_VOCAB, NETWORKS, build_network, is_image_network
from .relax_import import fold_conv_bn, fuse_for_tuning, to_relax
from .tasks import OP_TYPES, Task, classify_op_type, extract_tasks, task_from_extracted
from .user_network import Network, load_network

__all__ = [
    "BERT_VOCAB", "NETWORKS", "Network", "OP_TYPES", "Task", "load_network", "build_network", "classify_op_type",
    "extract_tasks", "fold_conv_bn", "fuse_for_tuning", "is_image_network", "task_from_extracted",
    "to_relax",
]
