"""The network a tuning run works on: a built-in name, a user's `torch.export` program, or an ONNX file.

A user exports their model once (`torch.export.save(torch.export.export(model, inputs),
"net.pt2")`); the file carries the graph, the weights and the example inputs, so the
tuned build can be checked against the original on the same inputs. An `.onnx` file is
checked against ONNX Runtime on seeded inputs of its declared shapes (onnx_network.py).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .networks import NETWORKS, build_network
from .relax_import import exported_to_relax, to_relax


@dataclass
class Network:
    name: str
    reference: Callable  # the original model: outputs to compare with, eager latency to beat
    inputs: tuple
    relax_mod: Any  # tvm.IRModule
    reference_kind: str = "PyTorch eager"


def load_network(spec: str, workload_cfg: dict[str, Any]) -> Network:
    """`spec` is a built-in network name or a path to a `.pt2` or `.onnx` file; a clear error otherwise."""
    if spec in NETWORKS:
        model, inputs = build_network(spec, batch=int(workload_cfg.get("batch", 1)),
                                      image_size=int(workload_cfg.get("image_size", 32)),
                                      seq_len=int(workload_cfg.get("seq_len", 16)))
        return Network(spec, model, inputs, to_relax(model, inputs))
    path = Path(spec)
    if path.suffix not in (".pt2", ".onnx"):
        raise ValueError(f"network '{spec}': not a built-in network ({', '.join(sorted(NETWORKS))}), "
                         "not a torch.export file (.pt2) and not an ONNX file (.onnx)")
    if not path.is_file():
        raise FileNotFoundError(f"network file {path} does not exist")
    if path.suffix == ".onnx":
        from .onnx_network import load_onnx

        return Network(path.stem, *load_onnx(path), reference_kind="ONNX Runtime")
    return Network(path.stem, *_load_exported(path))


def _load_exported(path: Path) -> tuple[Callable, tuple, Any]:
    import torch

    try:
        exported = torch.export.load(str(path))
    except Exception as exc:  # torch raises several types for a damaged archive; name the file
        raise ValueError(f"{path}: cannot be read as a torch.export program: {exc}") from exc
    args, kwargs = exported.example_inputs or ((), {})
    if kwargs or not args:
        raise ValueError(f"{path}: the program must carry positional example inputs (export it with "
                         "torch.export.export(model, (x,)) and save that)")
    return exported.module(), tuple(args), exported_to_relax(exported)
