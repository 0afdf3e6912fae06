"""A user's ONNX model as a tuning workload: TVM's ONNX importer for the graph, ONNX Runtime
as the reference the tuned build is checked and timed against.

An ONNX file has no example inputs, so they are drawn from the graph's declared inputs
(seeded: float inputs standard normal, integer inputs 0/1, which any embedding table
accepts). Every input needs a fixed shape: MetaSchedule tunes one shape per kernel. Whatever
is wrong with a file is one `NetworkFileError` naming it (see user_network.py).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from .user_network import NetworkFileError

# ONNX TensorProto element types we can feed (the others are rare as graph inputs).
INPUT_DTYPES = {1: np.float32, 10: np.float16, 11: np.float64, 6: np.int32, 7: np.int64, 9: np.bool_}
# Elements of one example input drawn from the declared shape (2**28: 1 GiB of float32). A damaged
# or mistyped dim would otherwise make the loader allocate whatever it declares.
MAX_INPUT_ELEMENTS = 2 ** 28


class OnnxRuntimeReference:
    """Callable like the PyTorch reference: torch tensors in, a tuple of torch tensors out.

    The session is made on first use with torch's current thread count, which is what
    `reference_latency_ms` sets to the platform's threads before timing.
    """

    def __init__(self, path: Path, input_names: list[str]):
        self.path, self.input_names, self._session = path, input_names, None

    def __call__(self, *inputs):
        import onnxruntime as ort
        import torch

        if self._session is None:
            options = ort.SessionOptions()
            options.intra_op_num_threads = torch.get_num_threads()
            options.inter_op_num_threads = 1
            self._session = ort.InferenceSession(str(self.path), options, providers=["CPUExecutionProvider"])
        outs = self._session.run(None, {n: x.numpy() for n, x in zip(self.input_names, inputs)})
        return tuple(torch.from_numpy(np.asarray(o)) for o in outs)


def example_inputs(model, path: Path, seed: int = 0) -> tuple[list[str], tuple]:
    """(input names, torch tensors) for the graph inputs that are not weights; NetworkFileError naming the
    input."""
    import torch

    weights = {init.name for init in model.graph.initializer}
    rng = np.random.default_rng(seed)
    names, tensors = [], []
    for inp in model.graph.input:
        if inp.name in weights:
            continue
        ttype = inp.type.tensor_type
        dims = [d.dim_value if d.HasField("dim_value") else (d.dim_param or "?") for d in ttype.shape.dim]
        if not all(isinstance(d, int) and d > 0 for d in dims):
            raise NetworkFileError(f"{path}: input '{inp.name}' has shape {dims}; export the model with "
                                   "fixed input shapes (MetaSchedule tunes one shape per kernel)")
        if np.prod(dims, dtype=object) > MAX_INPUT_ELEMENTS:
            raise NetworkFileError(f"{path}: input '{inp.name}' has shape {dims}, more than "
                                   f"{MAX_INPUT_ELEMENTS} elements")
        dtype = INPUT_DTYPES.get(ttype.elem_type)
        if dtype is None:
            raise NetworkFileError(f"{path}: input '{inp.name}' has ONNX element type {ttype.elem_type}, "
                                   f"not one of {sorted(INPUT_DTYPES)}")
        if np.issubdtype(dtype, np.floating):
            value = rng.standard_normal(dims).astype(dtype)
        else:
            value = rng.integers(0, 2, dims).astype(dtype)
        names.append(inp.name)
        tensors.append(torch.from_numpy(value))
    if not names:
        raise NetworkFileError(f"{path}: the graph has no inputs besides its weights")
    return names, tuple(tensors)


def load_onnx(path: Path) -> tuple[OnnxRuntimeReference, tuple, Any]:
    """(ONNX Runtime reference, example inputs, Relax module with bound weights) of an ONNX file."""
    import onnx
    from tvm.relax.frontend.onnx import from_onnx

    from .relax_import import for_inference

    try:
        model = onnx.load(str(path))
        onnx.checker.check_model(model)
    except Exception as exc:  # onnx raises DecodeError, ValidationError, ...: name the file
        raise NetworkFileError(f"{path}: cannot be read as an ONNX model: {exc}") from exc
    names, inputs = example_inputs(model, path)
    # The reference must run on these inputs, or nothing can be checked against it. A session of
    # its own: the one kept is made later, with the threads `reference_latency_ms` sets for timing.
    try:
        OnnxRuntimeReference(path, names)(*inputs)
    except Exception as exc:
        raise NetworkFileError(f"{path}: ONNX Runtime cannot run it on inputs of its declared shapes: "
                               f"{exc}") from exc
    try:
        mod = for_inference(from_onnx(model, keep_params_in_input=False))
    except Exception as exc:  # an operator TVM's importer lacks: say which file
        raise NetworkFileError(f"{path}: TVM's ONNX importer cannot translate it: {exc}") from exc
    return OnnxRuntimeReference(path, names), inputs, mod
