"""Hardware platform registry: TVM target + the hardware-spec fields of TCL's Table 1.

The spec vector is what the TCL feature's extra "hardware row" is made of, so a
platform is both a place to measure and an input to the cost model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# TCL Table 1, in a fixed order: the hardware row of the feature matrix follows this order.
CPU_SPEC_FIELDS = (
    "cores", "threads", "turbo_ghz", "boost_ghz", "l1_kb", "l2_kb", "l3_kb",
    "mem_channels", "mem_capacity_gb", "mem_bandwidth_gbs", "simd_bytes",
)
GPU_SPEC_FIELDS = (
    "cuda_cores", "base_clock_mhz", "boost_clock_mhz", "memory_clock_mhz", "memory_gb",
    "memory_bus_bits", "memory_bandwidth_gbs", "fp64_tflops", "fp32_tflops", "fp16_tflops",
    "int8_tops", "int4_tops",
)
SPEC_FIELDS = {"cpu": CPU_SPEC_FIELDS, "gpu": GPU_SPEC_FIELDS}


@dataclass(frozen=True)
class Platform:
    """One measurable hardware platform."""

    name: str
    kind: str  # "cpu" | "gpu"
    target: dict[str, Any]
    specs: dict[str, float]
    description: str = ""

    @property
    def spec_vector(self) -> list[float]:
        """Table-1 values in the canonical order of this platform's kind."""
        return [float(self.specs[f]) for f in SPEC_FIELDS[self.kind]]

    @property
    def threads(self) -> int:
        return int(self.specs.get("threads", self.specs.get("cores", 1)))

    def tvm_target(self):
        """The TVM Target (0.27 takes JSON dicts; the old CLI string form is rejected)."""
        import tvm  # deferred: importing TVM costs ~2 s

        return tvm.target.Target(dict(self.target))

    @property
    def target_json(self) -> str:
        import json

        return json.dumps(self.target, sort_keys=True)


def require_device(platform: Platform) -> None:
    """Fail early, by name, when a platform cannot be measured on this machine."""
    if platform.kind == "gpu":
        import tvm

        if not tvm.cuda(0).exist:
            raise RuntimeError(f"platform '{platform.name}' needs a CUDA device and this machine has none "
                               "(tvm.cuda(0).exist is False); run this stage on a CUDA machine")


def _parse_platform(name: str, entry: dict[str, Any]) -> Platform:
    where = f"params.yaml: platforms.{name}"
    for key in ("kind", "target", "specs"):
        if key not in entry:
            raise ValueError(f"{where}: missing field '{key}'")
    kind = entry["kind"]
    if kind not in SPEC_FIELDS:
        raise ValueError(f"{where}.kind: '{kind}' is not one of {sorted(SPEC_FIELDS)}")
    target = entry["target"]
    if not isinstance(target, dict) or "kind" not in target:
        raise ValueError(f"{where}.target: expected a mapping with a 'kind' (TVM 0.27 JSON target)")
    specs = entry["specs"]
    missing = [f for f in SPEC_FIELDS[kind] if f not in specs]
    if missing:
        raise ValueError(f"{where}.specs: missing Table-1 fields {missing}")
    bad = [f for f in SPEC_FIELDS[kind] if not isinstance(specs[f], (int, float))]
    if bad:
        raise ValueError(f"{where}.specs: fields {bad} must be numbers")
    return Platform(name=name, kind=kind, target=dict(target), specs=dict(specs),
                    description=entry.get("description", ""))


def load_platforms(params: dict[str, Any]) -> dict[str, Platform]:
    """All platforms declared under `platforms:` in params, by name."""
    entries = params.get("platforms") or {}
    return {name: _parse_platform(name, entry) for name, entry in entries.items()}


def get_platform(params: dict[str, Any], name: str) -> Platform:
    platforms = load_platforms(params)
    if name not in platforms:
        raise KeyError(f"unknown platform '{name}'; params.yaml declares {sorted(platforms)}")
    return platforms[name]
