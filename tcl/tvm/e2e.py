"""Compile a tuned network, check it against its reference (PyTorch eager, or ONNX Runtime for
an ONNX file), time both on this machine, and save the compiled library (what a user deploys:
`tvm.runtime.load_module` + `relax.VirtualMachine`)."""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class EndToEnd:
    tvm_latency_ms: float
    reference_latency_ms: float
    max_abs_diff: float
    library: str = ""  # the exported shared library, when one was asked for
    reference: str = "PyTorch eager"  # what reference_latency_ms timed


def reference_latency_ms(model, inputs, threads: int, repeats: int = 20) -> float:
    """The reference's median latency with the platform's thread count (the user's alternative).

    The thread count is set through torch; the ONNX Runtime reference reads it from there."""
    import torch

    torch.set_num_threads(threads)
    with torch.no_grad():
        model(*inputs)  # warm-up
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            model(*inputs)
            times.append(time.perf_counter() - t0)
    return float(np.median(times) * 1e3)


def first_tensor(out):
    """The first tensor of a (possibly nested) tuple of outputs: importers and exported graphs wrap them."""
    while not hasattr(out, "numpy"):
        out = out[0]
    return out


def compile_and_check(database, relax_mod, platform, model, inputs, reference_ms: float,
                      repeats: int = 20, library_path: str | None = None,
                      reference: str = "PyTorch eager") -> EndToEnd:
    """Build `relax_mod` with the tuned `database`, compare outputs with `model(*inputs)`, time it;
    the compiled library goes to `library_path` when given."""
    import torch
    from tvm.s_tir import meta_schedule as ms

    executable = ms.relax_integration.compile_relax(database, relax_mod, platform.tvm_target(), params=None)
    if library_path:
        executable.export_library(str(library_path))
    network = CompiledNetwork(executable, platform, inputs)
    with torch.no_grad():
        expected = first_tensor(model(*inputs))
    diff = float(np.max(np.abs(network.run().numpy() - expected.numpy())))
    return EndToEnd(tvm_latency_ms=network.latency_ms(repeats), reference_latency_ms=reference_ms,
                    max_abs_diff=diff, library=str(library_path or ""), reference=reference)


class CompiledNetwork:
    """A compiled network (an executable, or a library loaded back as a user deploys it) on the
    platform's device, with its inputs there: run it, time it."""

    def __init__(self, module, platform, inputs):
        import tvm
        from tvm import relax

        self.device = platform.tvm_device()
        self.vm = relax.VirtualMachine(module, self.device)
        self.inputs = [tvm.runtime.tensor(x.numpy(), self.device) for x in inputs]

    @classmethod
    def load(cls, library: str, platform, inputs) -> "CompiledNetwork":
        import tvm

        return cls(tvm.runtime.load_module(str(library)), platform, inputs)

    def run(self):
        return first_tensor(self.vm["main"](*self.inputs))

    def latency_ms(self, repeats: int = 20) -> float:
        """Median latency of `main` (5 runs per repeat)."""
        timer = self.vm.time_evaluator("main", self.device, number=5, repeat=repeats)
        return float(np.median(timer(*self.inputs).results) * 1e3)
