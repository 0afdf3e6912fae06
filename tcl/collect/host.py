"""Which platforms this machine measures, and what to declare when it is a CPU the registry lacks.

`make collect` runs wherever it is started: on a CPU whose platforms are declared (a `host`
that matches /proc/cpuinfo) it measures them; on a new CPU it stops with a message that names
the CPU and gives `platforms:` entries to paste, with the specs this machine can tell (caches
from sysfs, clock from /proc/cpuinfo, memory from /proc/meminfo, SIMD width from the ISA
flags, LLVM's name for the CPU). What the machine cannot tell (memory channels and
bandwidth) is left for a person, as 0 with a comment, since a wrong spec is a wrong feature.
"""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from ..platforms import host_mismatch, load_platforms, this_cpu


class NewMachine(RuntimeError):
    """This CPU has no platform to measure: the message says what to add to params.yaml."""


def host_platforms(params: dict[str, Any], cpu: dict[str, Any] | None = None) -> tuple[list[str], list[str]]:
    """(platforms of `collect.platforms` this CPU measures, declared ones it could but that
    `collect.platforms` leaves out). Only CPU platforms with a `host` count: a host-less entry
    (`local-1c`) would file labels from any machine under one name."""
    cpu = cpu or this_cpu()
    collected = list((params.get("collect") or {}).get("platforms") or [])
    here, unlisted = [], []
    for name, p in load_platforms(params).items():
        if p.kind != "cpu" or not p.host or p.rpc_key or host_mismatch(p, cpu):
            continue
        (here if name in collected else unlisted).append(name)
    return sorted(here, key=collected.index), sorted(unlisted)


def require_host_platforms(params: dict[str, Any], cpu: dict[str, Any] | None = None) -> list[str]:
    """The platforms to measure here, or NewMachine with what to declare."""
    cpu = cpu or this_cpu()
    here, unlisted = host_platforms(params, cpu)
    if here:
        return here
    who = f"{cpu['name'] or 'this CPU'} ({cpu['vendor']}, family {cpu['family']} model {cpu['model']})"
    if unlisted:
        raise NewMachine(f"{who} matches the declared platforms {unlisted}, but collect.platforms does not list "
                         f"them: add them to collect.platforms in params.yaml, then run `make collect` again")
    raise NewMachine(f"{who} matches no platform in params.yaml, so nothing it measures could be filed. "
                     "Declare it: add these entries under `platforms:` (check the values marked FILL IN), "
                     "add their names to collect.platforms (and validate.platforms), then run `make collect` "
                     "again:\n\n" + suggest_platforms(cpu))


def _cache_kb(level: int, kind: str, root: Path = Path("/sys/devices/system/cpu/cpu0/cache")) -> int | None:
    for d in sorted(root.glob("index*")):
        try:
            if int((d / "level").read_text()) == level and (d / "type").read_text().strip() in kind:
                size = (d / "size").read_text().strip()
                num = int(re.sub(r"\D", "", size))
                return num * 1024 if size.upper().endswith("M") else num
        except (OSError, ValueError):
            continue
    return None


def _ghz(cpuinfo: str = "/proc/cpuinfo") -> float | None:
    try:
        m = re.search(r"^cpu MHz\s*:\s*([\d.]+)", Path(cpuinfo).read_text(), re.M)
    except OSError:
        return None
    return round(float(m[1]) / 1000, 2) if m else None


def _mem_gb(meminfo: str = "/proc/meminfo") -> int | None:
    try:
        m = re.search(r"^MemTotal:\s*(\d+) kB", Path(meminfo).read_text(), re.M)
    except OSError:
        return None
    return round(int(m[1]) / 2**20) if m else None


# ISA extensions that tell CPU generations apart: /proc/cpuinfo's flag -> LLVM's feature.
ISA_FEATURES = {"avx2": "avx2", "avx512f": "avx512f", "avx512_vnni": "avx512vnni", "avx512_bf16": "avx512bf16",
                "avx512_fp16": "avx512fp16", "amx_tile": "amx-tile", "amx_fp16": "amx-fp16"}
# LLVM CPUs a vendor's server parts are named by, newest first.
LLVM_CPUS = {"GenuineIntel": ["graniterapids", "sapphirerapids", "cooperlake", "icelake-server", "cascadelake",
                              "skylake-avx512", "haswell"],
             "AuthenticAMD": ["znver5", "znver4", "znver3", "znver2", "znver1"]}


def llvm_cpu() -> str | None:
    """LLVM's name for this CPU (`znver4`, `skylake-avx512`), as TVM's LLVM reports it."""
    import tvm

    f = tvm.get_global_func("target.llvm_get_system_cpu", True)
    return str(f()) if f is not None else None


def llvm_features(mcpu: str) -> set[str]:
    """Which of ISA_FEATURES LLVM turns on for `-mcpu=mcpu`."""
    import tvm
    from tvm.target import codegen

    target = tvm.target.Target({"kind": "llvm", "mcpu": mcpu})
    return {f for f in ISA_FEATURES.values() if codegen.llvm_cpu_has_features(f, target)}


def choose_llvm_cpu(cpu: dict[str, Any], host_name: str | None) -> str | None:
    """LLVM's name for this CPU, checked against the ISA the kernel reports.

    LLVM names the CPU from CPUID's family and model, which a hypervisor may not pass through: a
    Granite Rapids guest that reads as model 167 is a Rocket Lake to LLVM, without the AMX and
    AVX512-FP16 the kernel lists. When LLVM's name does not match the reported extensions, take the
    vendor's newest CPU that needs none the kernel lacks and has the most of them.
    """
    have = {llvm for flag, llvm in ISA_FEATURES.items() if flag in cpu["flags"]}
    names = LLVM_CPUS.get(cpu["vendor"], []) + ([host_name] if host_name else [])
    features = {name: llvm_features(name) for name in names}
    if host_name and features[host_name] == have:
        return host_name
    fitting = [(len(features[name]), -i, name) for i, name in enumerate(names) if features[name] <= have]
    return max(fitting)[2] if fitting else host_name


def suggest_platforms(cpu: dict[str, Any], mcpu: str | None = None) -> str:
    """YAML for a new CPU's platforms: its own ISA (1 thread) and, with AVX-512, an AVX2 variant."""
    mcpu = mcpu or choose_llvm_cpu(cpu, llvm_cpu()) or "generic"
    vendor = {"AuthenticAMD": "amd", "GenuineIntel": "intel"}.get(cpu["vendor"], "cpu")
    stem = f"{vendor}-f{cpu['family']}m{cpu['model']}"
    flags = cpu["flags"]
    simd = 64 if "avx512f" in flags else 32 if "avx2" in flags else 16
    isa = "avx512" if simd == 64 else "avx2" if simd == 32 else "sse4"
    need = {64: "avx512f", 32: "avx2", 16: "sse4_2"}
    ghz = _ghz() or 0
    caches = (f"l1_kb: {_cache_kb(1, 'Data') or 0}, l2_kb: {_cache_kb(2, 'Unified') or 0}, "
              f"l3_kb: {_cache_kb(3, 'Unified') or 0}")
    variants = [(isa, mcpu, simd)] + ([("avx2", "haswell", 32)] if simd == 64 else [])
    out = [f"  # {cpu['name']} (family {cpu['family']} model {cpu['model']}), {os.cpu_count()} logical CPUs. FILL IN:"
           " mem_channels and mem_bandwidth_gbs from the datasheet; turbo_ghz is the nominal clock read here."]
    for tag, cpu_name, width in variants:
        out += [f"  {stem}-{tag}-1c:",
                "    kind: cpu",
                f"    description: \"{cpu['name']} (family {cpu['family']} model {cpu['model']}), "
                f"LLVM -mcpu={cpu_name}, 1 thread\"",
                f"    host: {{vendor: {cpu['vendor']}, family: {cpu['family']}, model: {cpu['model']}, "
                f"flags: [{need[width]}]}}",
                f"    target: {{kind: llvm, mcpu: {cpu_name}, num-cores: 1}}",
                f"    specs: {{cores: 1, threads: 1, turbo_ghz: {ghz}, boost_ghz: {ghz}, {caches}, mem_channels: 0, "
                f"mem_capacity_gb: {_mem_gb() or 0}, mem_bandwidth_gbs: 0, simd_bytes: {width}}}"]
    return "\n".join(out) + "\n"


def main() -> int:
    """`python -m tcl.collect.host`: this machine's platforms, or what to declare (exit 2)."""
    import sys

    from ..config import load_params

    try:
        print("this machine measures", ", ".join(require_host_platforms(load_params())))
    except NewMachine as e:
        print(e, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
