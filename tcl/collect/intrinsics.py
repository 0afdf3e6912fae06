"""Import TVM's tensor intrinsics in seconds instead of minutes.

`tvm.s_tir.tensor_intrin` parses ~250 TVMScript functions at import. Each
`@T.prim_func` calls `inspect.stack()`, which resolves every frame's module by
scanning all of `sys.modules` once per frame: 25-40 s per process here with TVM
alone, 180 s once Prefect and MLflow are loaded. The parser only reads each
frame's locals and its current source line, so while the intrinsics load,
`inspect.stack` is swapped for one that reads that line straight from `linecache`.
"""

from __future__ import annotations

import inspect
import linecache
import sys


def _light_stack(context: int = 1) -> list[inspect.FrameInfo]:
    """`inspect.stack()` without module resolution: frame, file, line, function, that one source line."""
    frames = []
    frame = sys._getframe(1)
    while frame is not None:
        code = frame.f_code
        line = linecache.getline(code.co_filename, frame.f_lineno, frame.f_globals)
        frames.append(inspect.FrameInfo(frame, code.co_filename, frame.f_lineno, code.co_name,
                                        [line] if line and context > 0 else None, 0 if line else None,
                                        positions=None))
        frame = frame.f_back
    return frames


def load_tensor_intrinsics() -> None:
    """Register TVM's tensor intrinsics (what MetaSchedule's schedule rules look up by name)."""
    if "tvm.s_tir.tensor_intrin" in sys.modules:
        return
    original = inspect.stack
    inspect.stack = _light_stack
    try:
        import tvm.s_tir.tensor_intrin  # noqa: F401
    finally:
        inspect.stack = original
