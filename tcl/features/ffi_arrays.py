"""TVM FFI Arrays read element by element: iterating one from Python asks for its length before every
element, three times slower than indexing. The handles are resolved on first use, because importing
tvm_ffi costs ~1 s and the modules that read arrays are imported where no array is read."""

from __future__ import annotations

_HANDLES: tuple | None = None


def handles() -> tuple:
    """(ArrayGetItem, ArraySize) of tvm_ffi."""
    global _HANDLES
    if _HANDLES is None:
        from tvm_ffi import _ffi_api

        _HANDLES = (_ffi_api.ArrayGetItem, _ffi_api.ArraySize)
    return _HANDLES


def items(array) -> list:
    """An FFI Array's elements as a list."""
    get, size = handles()
    return [get(array, i) for i in range(size(array))]
