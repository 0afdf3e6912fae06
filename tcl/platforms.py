"""Hardware platform registry: TVM target + the hardware-spec fields of TCL's Table 1.

The spec vector is what the TCL feature's extra "hardware row" is made of, so a
platform is both a place to measure and an input to the cost model.
"""

from __future__ import annotations

import math
import re
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


@dataclass(frozen=True)
class PlatformKind:
    """What a platform's kind decides, in one table: its Table-1 fields and the device it runs on."""

    spec_fields: tuple[str, ...]
    device: str        # TVM's device type ("cpu", "cuda")
    device_label: str  # as messages name it


KINDS = {"cpu": PlatformKind(CPU_SPEC_FIELDS, "cpu", "CPU"), "gpu": PlatformKind(GPU_SPEC_FIELDS, "cuda", "CUDA")}
SPEC_FIELDS = {kind: k.spec_fields for kind, k in KINDS.items()}


@dataclass(frozen=True)
class Platform:
    """One measurable hardware platform."""

    name: str
    kind: str  # "cpu" | "gpu"
    target: dict[str, Any]
    specs: dict[str, float]
    description: str = ""
    host: dict[str, Any] | None = None  # the CPU it must be measured on (None: any machine)
    rpc_key: str | None = None  # the RPC tracker key of the board that measures it (collect.runner.mode: rpc)

    @property
    def spec_vector(self) -> list[float]:
        """Table-1 values in the canonical order of this platform's kind."""
        return [float(self.specs[f]) for f in SPEC_FIELDS[self.kind]]

    @property
    def threads(self) -> int:
        return int(self.specs.get("threads", self.specs.get("cores", 1)))

    @property
    def isa_class(self) -> tuple:
        """What two platforms must share for one's programs to teach the other's ranking: the kind, the
        vector width (simd_bytes; the CUDA arch on a GPU) and the threads a program runs on."""
        width = self.specs.get("simd_bytes") if self.kind == "cpu" else self.target.get("arch")
        return self.kind, width, self.threads

    def tvm_device(self):
        """The TVM device programs of this platform run on (device 0 of its kind's type)."""
        import tvm

        return tvm.device(KINDS[self.kind].device, 0)

    def tvm_target(self):
        """The TVM Target (0.27 takes JSON dicts; the old CLI string form is rejected)."""
        import tvm  # deferred: importing TVM costs ~2 s

        return tvm.target.Target(dict(self.target))

    @property
    def target_json(self) -> str:
        import json

        return json.dumps(self.target, sort_keys=True)


def this_cpu(cpuinfo: str = "/proc/cpuinfo") -> dict[str, Any]:
    """The machine's CPU as /proc/cpuinfo describes its first core: vendor, family, model, name, flags."""
    fields: dict[str, str] = {}
    try:
        text = open(cpuinfo).read()
    except OSError:
        return {"vendor": "", "family": -1, "model": -1, "name": "", "flags": set()}
    for line in text.split("\n\n", 1)[0].splitlines():
        key, _, value = line.partition(":")
        fields[key.strip()] = value.strip()
    return {"vendor": fields.get("vendor_id", ""), "family": int(fields.get("cpu family", -1)),
            "model": int(fields.get("model", -1)), "name": fields.get("model name", ""),
            "flags": set(fields.get("flags", "").split())}


def host_mismatch(platform: Platform, cpu: dict[str, Any] | None = None) -> str | None:
    """Why `platform` cannot be measured on this CPU, or None when it can.

    A platform's `host` pins it to one CPU (vendor, family, optional model) and the ISA
    flags its target needs: labels measured on another CPU under its name would be wrong
    labels (the cloud machines behind this project change from session to session).
    """
    if platform.kind != "cpu" or not platform.host:
        return None
    cpu = cpu or this_cpu()
    want = platform.host
    for key in ("vendor", "family", "model"):
        if key in want and want[key] != cpu[key]:
            return (f"platform '{platform.name}' is measured on a {key} {want[key]!r} CPU and this one is "
                    f"{cpu[key]!r} ({cpu['name']}, family {cpu['family']} model {cpu['model']})")
    missing = sorted(set(want.get("flags", [])) - cpu["flags"])
    if missing:
        return f"platform '{platform.name}' needs CPU flags {missing} that this CPU ({cpu['name']}) lacks"
    return None


def unmeasurable(platform: Platform) -> str | None:
    """Why this machine cannot time `platform` (no device of its kind, or another CPU), or None."""
    if not platform.tvm_device().exist:
        kind = KINDS[platform.kind]
        return (f"platform '{platform.name}' needs a {kind.device_label} device and this machine has "
                f"none (tvm.device({kind.device!r}, 0).exist is False); run this stage on a "
                f"{kind.device_label} machine")
    return host_mismatch(platform)


def require_device(platform: Platform) -> None:
    """Fail early, by name, when a platform cannot be measured on this machine."""
    reason = unmeasurable(platform)
    if reason:
        raise RuntimeError(reason)


def _is_spec_number(value: Any) -> bool:
    """A Table-1 value: a finite, non-negative int or float (YAML's true/.nan/.inf are not)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value)) and value >= 0
    except OverflowError:  # an integer beyond float range
        return False


# What each `host` field must be, and how to say it.
_HOST_FIELDS = {
    "vendor": (lambda v: isinstance(v, str), "a string"),
    "family": (lambda v: type(v) is int, "an integer"),
    "model": (lambda v: type(v) is int, "an integer"),
    "flags": (lambda v: isinstance(v, list) and all(isinstance(f, str) for f in v), "a list of flag names"),
}


def _parse_host(where: str, host: Any) -> dict[str, Any] | None:
    if host is None:
        return None
    if not isinstance(host, dict) or set(host) - set(_HOST_FIELDS):
        raise ValueError(f"{where}.host: expected a mapping of vendor, family, model, flags")
    for key, value in host.items():
        ok, what = _HOST_FIELDS[key]
        if not ok(value):
            raise ValueError(f"{where}.host.{key}: expected {what}, got {value!r:.40}")
    return dict(host) or None


# A tracker key travels inside TVM's "server:<key>" and "<key> -timeout=<s>" strings: no ':' or spaces.
_RPC_KEY = re.compile(r"^[A-Za-z0-9._-]+$")


def _parse_rpc(where: str, rpc: Any) -> str | None:
    """The tracker key of `rpc: {key: <key>}`, or None when the platform has no `rpc` field."""
    if rpc is None:
        return None
    if not isinstance(rpc, dict) or set(rpc) != {"key"}:
        raise ValueError(f"{where}.rpc: expected a mapping with one field, key (the RPC tracker key its "
                         f"board's server registers under), got {rpc!r:.60}")
    key = rpc["key"]
    if not isinstance(key, str) or not _RPC_KEY.match(key):
        raise ValueError(f"{where}.rpc.key: expected a tracker key of letters, digits, '.', '_' or '-', "
                         f"got {key!r:.40}")
    return key


def _parse_platform(name: str, entry: Any) -> Platform:
    where = f"params.yaml: platforms.{name}"
    if not isinstance(entry, dict):
        raise ValueError(f"{where}: expected a mapping of kind, target, specs, got {type(entry).__name__}")
    for key in ("kind", "target", "specs"):
        if key not in entry:
            raise ValueError(f"{where}: missing field '{key}'")
    kind = entry["kind"]
    if not isinstance(kind, str) or kind not in SPEC_FIELDS:
        raise ValueError(f"{where}.kind: {kind!r:.40} is not one of {sorted(SPEC_FIELDS)}")
    target = entry["target"]
    if not isinstance(target, dict) or not isinstance(target.get("kind"), str):
        raise ValueError(f"{where}.target: expected a mapping with a 'kind' (TVM 0.27 JSON target)")
    specs = entry["specs"]
    if not isinstance(specs, dict):
        raise ValueError(f"{where}.specs: expected a mapping of Table-1 fields, got {type(specs).__name__}")
    missing = [f for f in SPEC_FIELDS[kind] if f not in specs]
    if missing:
        raise ValueError(f"{where}.specs: missing Table-1 fields {missing}")
    bad = [f for f in SPEC_FIELDS[kind] if not _is_spec_number(specs[f])]
    if bad:
        raise ValueError(f"{where}.specs: fields {bad} must be finite non-negative numbers")
    description = entry.get("description")
    if description is None:  # `description:` left empty
        description = ""
    if not isinstance(description, str):
        raise ValueError(f"{where}.description: expected a string, got {type(description).__name__}")
    return Platform(name=name, kind=kind, target=dict(target), specs=dict(specs),
                    description=description, host=_parse_host(where, entry.get("host")),
                    rpc_key=_parse_rpc(where, entry.get("rpc")))


def load_platforms(params: dict[str, Any]) -> dict[str, Platform]:
    """All platforms declared under `platforms:` in params, by name."""
    entries = params.get("platforms")
    if entries is None:
        return {}
    if not isinstance(entries, dict):
        raise ValueError(f"params.yaml: platforms: expected a mapping of name -> platform, "
                         f"got {type(entries).__name__}")
    return {name: _parse_platform(name, entry) for name, entry in entries.items()}


def get_platform(params: dict[str, Any], name: str) -> Platform:
    platforms = load_platforms(params)
    if name not in platforms:
        raise KeyError(f"unknown platform '{name}'; params.yaml declares {sorted(platforms)}")
    return platforms[name]
