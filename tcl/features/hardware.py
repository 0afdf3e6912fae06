"""The hardware row of the TCL feature (TCL §5.1, Table 1).

A platform's spec vector (`Platform.spec_vector`: 11 CPU / 12 GPU fields) becomes
one extra row of the feature matrix, so one cost model can tell platforms apart
and carry knowledge from one to the next.

Normalization: `slog1p(x) / scale[field]`, with `scale[field]` the largest
`|slog1p|` of that field over the TRAINING platforms (1.0 where it is 0).
Why not per-field mean/std or min-max: training sees a handful of platforms and
many fields are constant across them (the ISA variants of one host share clocks
and caches), so std/range is 0 or tiny and any new platform - exactly what
continual learning feeds in - would land at huge values. Log scaling makes
ratios count (2 vs 4 cores like 16 vs 32), which is how specs scale, and a
platform bigger than the training ones just lands a little above 1.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np


def slog1p(x: np.ndarray) -> np.ndarray:
    """Signed log1p: keeps sign and zero, compresses magnitudes."""
    return np.sign(x) * np.log1p(np.abs(x))


def _as_matrix(spec_vectors: Any) -> np.ndarray:
    arr = np.asarray(spec_vectors, dtype=np.float64)
    if arr.ndim == 1:
        arr = arr[None, :]
    if arr.ndim != 2 or arr.shape[1] == 0:
        raise ValueError(f"spec vectors must be (n_fields,) or (n, n_fields), got shape {arr.shape}")
    if not np.all(np.isfinite(arr)):
        raise ValueError("spec vectors contain NaN/inf")
    return arr


class HardwareNormalizer:
    """Fits per-field scales on training platforms; turns spec vectors into rows."""

    def __init__(self, scale: Sequence[float] | None = None):
        self.scale = None if scale is None else np.asarray(scale, dtype=np.float64)

    @property
    def fitted(self) -> bool:
        return self.scale is not None

    @property
    def n_fields(self) -> int:
        if self.scale is None:
            raise RuntimeError("HardwareNormalizer is not fitted")
        return int(self.scale.shape[0])

    def fit(self, spec_vectors: Any) -> "HardwareNormalizer":
        """Learn the per-field scale from the training platforms' spec vectors."""
        arr = _as_matrix(spec_vectors)
        scale = np.abs(slog1p(arr)).max(axis=0)
        self.scale = np.where(scale > 0, scale, 1.0)
        return self

    def transform(self, spec_vectors: Any, cols: int, n: int | None = None) -> np.ndarray:
        """Rows (n, cols) float32: normalized specs, zero-padded / cropped to `cols`.

        One vector is broadcast to `n` rows (one per program of the batch).
        """
        arr = _as_matrix(spec_vectors)
        if arr.shape[1] != self.n_fields:
            raise ValueError(f"spec vector has {arr.shape[1]} fields, the normalizer was fitted on "
                             f"{self.n_fields} (CPU and GPU platforms need separate tokenizers)")
        normed = slog1p(arr) / self.scale
        if n is not None and arr.shape[0] == 1:
            normed = np.broadcast_to(normed, (n, normed.shape[1]))
        elif n is not None and arr.shape[0] != n:
            raise ValueError(f"got {arr.shape[0]} spec vectors for {n} programs")
        out = np.zeros((normed.shape[0], cols), dtype=np.float32)
        k = min(cols, normed.shape[1])
        out[:, :k] = normed[:, :k]
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"scale": None if self.scale is None else [float(s) for s in self.scale]}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "HardwareNormalizer":
        return cls(d.get("scale"))
