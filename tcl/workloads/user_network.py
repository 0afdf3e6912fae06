"""The network a tuning run works on: a built-in name, a user's `torch.export` program, or an ONNX file.

A user exports their model once (`torch.export.save(torch.export.export(model, inputs),
"net.pt2")`); the file carries the graph, the weights and the example inputs, so the
tuned build can be checked against the original on the same inputs. An `.onnx` file is
checked against ONNX Runtime on seeded inputs of its declared shapes (onnx_network.py).

A file that cannot be tuned, whatever is wrong with it (damaged, mislabelled, another
format, a graph TVM cannot import), is one `NetworkFileError` naming the file, raised
before any tuning starts; tests/test_fuzz_networks.py holds the loaders to that.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from .inputs import base_network, split_instance
from .networks import NETWORKS, build_network
from .relax_import import exported_to_relax, to_relax
from .settings import WorkloadSettings


class NetworkFileError(ValueError):
    """A `--network` spec or file that cannot be tuned; the message names the file and why."""


@dataclass
class Network:
    name: str
    reference: Callable  # the original model: outputs to compare with, eager latency to beat
    inputs: tuple
    relax_mod: Any  # tvm.IRModule
    reference_kind: str = "PyTorch eager"


def load_network(spec: str, shapes: WorkloadSettings = WorkloadSettings()) -> Network:
    """`spec` is a built-in network name (built at `shapes`), a built-in network at one instance size
    (`r3d18@4x96`, `bert_base@64`: what a video network needs) or a path to a `.pt2` or `.onnx` file;
    a clear error otherwise."""
    network, size = split_instance(spec) if base_network(spec) in NETWORKS else (spec, None)
    if network in NETWORKS:
        model, inputs = build_network(network, batch=shapes.batch, image_size=shapes.image_size,
                                      seq_len=shapes.seq_len, size=size)
        return Network(spec, model, inputs, to_relax(model, inputs))
    path = Path(spec)
    if path.suffix not in (".pt2", ".onnx"):
        raise NetworkFileError(f"network '{spec}': not a built-in network ({', '.join(sorted(NETWORKS))}), "
                               "not a torch.export file (.pt2) and not an ONNX file (.onnx)")
    if not path.is_file():
        raise NetworkFileError(f"network file {path} does not exist")
    if path.suffix == ".onnx":
        from .onnx_network import load_onnx

        return Network(path.stem, *load_onnx(path), reference_kind="ONNX Runtime")
    return Network(path.stem, *_load_exported(path))


def _load_exported(path: Path) -> tuple[Callable, tuple, Any]:
    import torch

    try:
        exported = torch.export.load(str(path))
    except Exception as exc:  # torch raises many types for a damaged archive; name the file
        raise NetworkFileError(f"{path}: cannot be read as a torch.export program: {exc}") from exc
    example = exported.example_inputs
    args, kwargs = example if isinstance(example, tuple) and len(example) == 2 else (None, None)
    if kwargs or not isinstance(args, tuple) or not args or not all(isinstance(a, torch.Tensor) for a in args):
        raise NetworkFileError(f"{path}: the program must carry positional example tensors (export it with "
                               "torch.export.export(model, (x,)) and save that)")
    try:  # the reference must run on its own inputs, or nothing can be checked against it
        module = exported.module()
        with torch.no_grad():
            module(*args)
    except Exception as exc:
        raise NetworkFileError(f"{path}: the exported program does not run on its example inputs: {exc}") from exc
    try:
        relax_mod = exported_to_relax(exported)
    except Exception as exc:  # an operator or a graph TVM's importer cannot take: say which file
        raise NetworkFileError(f"{path}: TVM's PyTorch importer cannot translate it: {exc}") from exc
    return module, tuple(args), relax_mod
