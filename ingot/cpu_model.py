"""CPU models: what default schedules and the tuner need to know about an x86 CPU.

Note (why): a register tile that fits 32 zmm registers spills in 16 ymm registers, a weight slice
sized for a 48 KiB L1 thrashes a 32 KiB one, and a 16-lane vector loop compiled for an AVX2 CPU
runs as pairs of 8-lane instructions. So every default schedule reads these numbers from the
target's `CpuModel` instead of carrying the constants of the CPU it was first measured on:

* ``features``: ISA extensions (``avx2``, ``fma``, ``avx512f`` ...), as gcc spells them;
* ``vector_bits`` / ``vector_registers``: the widest SIMD register and how many of them there are;
* ``fma_units`` / ``fma_latency``: vector FMA pipes per core and their latency in cycles — a
  register tile needs ``fma_units * fma_latency`` independent accumulators to keep the pipes busy;
* ``l1d_bytes`` / ``l2_bytes`` / ``l3_bytes``: per-core data caches (L3: the whole socket);
* ``march``: what gcc's ``-march=`` gets (``native`` for the host); ``mtune``: a ``-mtune=`` that
  overrides the one ``-march`` implies, where gcc's own tuning for the CPU hurts register-tiled code.

Named CPUs (``-mcpu=haswell``, ``znver3``, ``sapphirerapids``, ``x86-64-v3`` ...) come from a table
of vendor data; the host is read from ``/proc/cpuinfo`` (flags) and sysfs (caches). A named CPU
compiles for exactly that CPU (gcc ``-march=<name>``, or its ISA level plus feature flags when the
installed gcc predates the name), so ``-mcpu=haswell`` code built on an AVX-512 host is AVX2 code
and runs on both.

Example:
    >>> cpu = named_cpu("znver3")
    >>> (cpu.vector_bits, cpu.vector_registers, cpu.lanes("float32"), cpu.min_accumulators)
    (256, 16, 8, 8)
    >>> named_cpu("skylake-avx512").has("avx512f"), named_cpu("haswell").has("avx512f")
    (True, False)
"""
from __future__ import annotations

import os
import re
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Iterable, Optional

__all__ = ["CpuModel", "named_cpu", "host_cpu", "NAMED_CPUS", "host_can_run"]

_KIB, _MIB = 1024, 1024 * 1024

# ISA levels (psABI x86-64-v2/v3/v4) as gcc feature names: each level includes the one before.
_V2 = ("sse4.2", "popcnt", "ssse3", "sse4.1")
_V3 = _V2 + ("avx", "avx2", "fma", "bmi2", "f16c", "movbe")
_V4 = _V3 + ("avx512f", "avx512bw", "avx512vl", "avx512dq", "avx512cd")


@dataclass(frozen=True)
class CpuModel:
    """One CPU, as schedules see it (module note). Build one with `named_cpu`, `host_cpu`, or
    `replace` for a variant (``cpu.with_cores(4)``).

    Example:
        >>> cpu = named_cpu("haswell").with_cores(2)
        >>> (cpu.cores, cpu.lanes("float32"), cpu.accumulator_registers, cpu.l1d_bytes)
        (2, 8, 12, 32768)
    """

    name: str
    features: frozenset
    vector_bits: int
    vector_registers: int
    fma_units: int = 2
    fma_latency: int = 4
    l1d_bytes: int = 32 * _KIB
    l2_bytes: int = 256 * _KIB
    l3_bytes: int = 8 * _MIB
    cores: int = 1
    march: str = "x86-64"
    #: gcc ``-march`` names to try when the installed gcc does not know ``march`` (oldest last).
    march_fallbacks: tuple = field(default=(), compare=False)
    #: gcc ``-mtune`` replacing the tuning ``march`` implies (None: keep it). See `ZEN_AVX2_MTUNE`.
    mtune: Optional[str] = None
    #: gcc tuning under which FMAs read a tile's reused operand vectors from memory (L1) instead of
    #: registers, for kernels whose tile fits the registers only that way (`fits_registers`'
    #: ``folded``); None where no such tuning is known to pay.
    fold_tune: Optional[str] = None

    def has(self, feature: str) -> bool:
        """Whether the CPU has ISA extension ``feature`` (gcc's spelling: ``avx2``, ``avx512f``).

        Example:
            >>> named_cpu("x86-64-v3").has("fma")
            True
        """
        return feature in self.features

    def lanes(self, dtype: object = "float32") -> int:
        """Elements of ``dtype`` in one vector register.

        Example:
            >>> named_cpu("icelake-server").lanes("float32"), named_cpu("haswell").lanes("int8")
            (16, 32)
        """
        from ingot.ir.dtype import DataType

        return max(1, self.vector_bits // max(8, DataType(dtype).bits))

    @property
    def isa(self) -> str:
        """The widest vector ISA: ``avx512``, ``avx2``, ``avx``, ``sse``.

        Example:
            >>> named_cpu("znver4").isa, named_cpu("x86-64-v2").isa
            ('avx512', 'sse')
        """
        if self.has("avx512f"):
            return "avx512"
        if self.has("avx2"):
            return "avx2"
        return "avx" if self.has("avx") else "sse"

    @property
    def accumulator_registers(self) -> int:
        """Vector registers a register tile may hold as accumulators: all of them but a quarter
        kept for the operand vectors and the broadcast of each step (32 → 24, 16 → 12).

        Example:
            >>> named_cpu("sapphirerapids").accumulator_registers
            24
        """
        return self.vector_registers - self.vector_registers // 4

    @property
    def min_accumulators(self) -> int:
        """Independent FMA chains needed to keep every FMA pipe busy (units × latency).

        Example:
            >>> named_cpu("skylake-avx512").min_accumulators
            8
        """
        return self.fma_units * self.fma_latency

    def fits_registers(self, rows: int, vectors: int, folded: bool = False) -> bool:
        """Whether a ``rows`` x ``vectors`` register tile fits without spills: its accumulators,
        one register per operand vector of a step (none when ``folded``: the FMAs read them from
        memory, see ``fold_tune``), and one for the broadcast row value — except with AVX-512, whose
        FMAs broadcast a memory operand themselves (``{1to16}``).

        Example:
            >>> named_cpu("haswell").fits_registers(6, 2), named_cpu("haswell").fits_registers(7, 2)
            (True, False)
            >>> named_cpu("skylake-avx512").fits_registers(7, 4), named_cpu("znver3").fits_registers(7, 2, folded=True)
            (True, True)
        """
        broadcast = 0 if self.has("avx512f") else 1
        operands = 0 if folded else vectors
        return rows * vectors + operands + broadcast <= self.vector_registers

    def peak_gflops(self, ghz: float, dtype: object = "float32", cores: Optional[int] = None) -> float:
        """FMA peak at ``ghz``: cores × units × lanes × 2 FLOP per cycle.

        Example:
            >>> round(named_cpu("znver3").peak_gflops(3.2, cores=1), 1)
            102.4
        """
        return (cores or self.cores) * self.fma_units * self.lanes(dtype) * 2 * ghz

    def with_cores(self, cores: int) -> "CpuModel":
        """The same CPU with ``cores`` threads for parallel loops."""
        return replace(self, cores=max(1, int(cores)))

    def describe(self) -> str:
        """One line for reports and BENCHMARKS.md.

        Example:
            >>> named_cpu("znver3").describe()
            'znver3 (avx2: 256-bit x 16 registers, 2 FMA units; L1d 32 KiB, L2 512 KiB, L3 32 MiB)'
        """
        return (f"{self.name} ({self.isa}: {self.vector_bits}-bit x {self.vector_registers} registers, "
                f"{self.fma_units} FMA units; L1d {self.l1d_bytes // _KIB} KiB, L2 {self.l2_bytes // _KIB} KiB, "
                f"L3 {self.l3_bytes // _MIB} MiB)")


#: gcc's tuning for AVX2 Zen cores (znver2/znver3) folds every reuse of a loaded vector into the
#: FMAs that use it (a memory operand each), so a register tile's weight vectors are loaded once per
#: row instead of once per step: twice the loads of the kernel, and the load ports, not the FMA
#: pipes, set its speed. Haswell's tuning keeps them in registers (BENCHMARKS.md, "Session 8").
#: A tile that fits the registers only with its operand vectors left in memory (a 7 x 2-vector conv
#: tile in 16 registers) gets the Zen tuning back for its loop nest (``fold_tune``).
ZEN_AVX2_MTUNE = "haswell"


def _cpu(name: str, features: Iterable[str], l1: int, l2: int, l3: int, *, fma_units: int = 2,
         fma_latency: int = 4, fallbacks: tuple = (), mtune: Optional[str] = None,
         fold_tune: Optional[str] = None) -> CpuModel:
    feats = frozenset(features)
    bits = 512 if "avx512f" in feats else 256 if "avx" in feats else 128
    regs = 32 if "avx512f" in feats else 16
    return CpuModel(name, feats, bits, regs, fma_units if "fma" in feats else 0, fma_latency,
                    l1 * _KIB, l2 * _KIB, l3 * _MIB, 1, name, fallbacks, mtune, fold_tune)


_AVX512_ICX = _V4 + ("avx512vnni", "avx512vbmi", "avx512vbmi2", "avx512bitalg", "avx512vpopcntdq", "avx512ifma")

#: Vendor data of the CPUs users name with ``-mcpu`` (per-core L1d/L2, L3 of a typical part).
#: FMA units count vector FMA pipes at the full vector width: Zen 4 runs 512-bit FMAs on two
#: 256-bit pipes (one 512-bit FMA per cycle); Zen 5 and Xeon Scalable have two 512-bit pipes.
NAMED_CPUS: dict = {c.name: c for c in (
    _cpu("x86-64-v2", _V2, 32, 256, 8),
    _cpu("x86-64-v3", _V3, 32, 256, 8),
    _cpu("x86-64-v4", _V4, 32, 1024, 16),
    _cpu("haswell", _V3, 32, 256, 8, fma_latency=5),
    _cpu("broadwell", _V3, 32, 256, 8),
    _cpu("skylake", _V3, 32, 256, 8),
    _cpu("alderlake", _V3 + ("avxvnni",), 48, 1280, 30),
    _cpu("skylake-avx512", _V4, 32, 1024, 32, fallbacks=("x86-64-v4",)),
    _cpu("cascadelake", _V4 + ("avx512vnni",), 32, 1024, 32, fallbacks=("skylake-avx512",)),
    _cpu("icelake-server", _AVX512_ICX, 48, 1280, 48, fallbacks=("skylake-avx512",)),
    _cpu("sapphirerapids", _AVX512_ICX + ("avx512bf16", "avx512fp16", "amx-tile", "amx-int8", "amx-bf16"),
         48, 2048, 105, fallbacks=("icelake-server",)),
    _cpu("znver2", _V3, 32, 512, 16, fma_latency=5, mtune=ZEN_AVX2_MTUNE, fold_tune="znver2"),
    _cpu("znver3", _V3, 32, 512, 32, mtune=ZEN_AVX2_MTUNE, fold_tune="znver3"),
    _cpu("znver4", _AVX512_ICX + ("avx512bf16",), 32, 1024, 32, fma_units=1, fallbacks=("icelake-server",)),
    _cpu("znver5", _AVX512_ICX + ("avx512bf16", "avx512vp2intersect", "avxvnni"), 48, 1024, 32,
         fallbacks=("znver4", "icelake-server")),
)}
NAMED_CPUS["core-avx2"] = replace(NAMED_CPUS["haswell"], name="core-avx2", march="core-avx2")


#: Other gcc ``-march`` names, by ISA level: their model is the level's with their own ``-march``.
_LEVEL_OF = {
    **dict.fromkeys(("cooperlake", "icelake-client", "tigerlake", "rocketlake", "emeraldrapids", "graniterapids",
                     "knl", "knm"), "x86-64-v4"),
    **dict.fromkeys(("raptorlake", "meteorlake", "arrowlake", "lunarlake", "znver1", "sandybridge", "ivybridge"),
                    "x86-64-v3"),
    **dict.fromkeys(("x86-64", "nehalem", "westmere"), "x86-64-v2"),
}


def named_cpu(name: str) -> CpuModel:
    """The model of a CPU named as gcc's ``-march`` (``haswell``, ``znver3``, ``x86-64-v4`` ...).
    ``native`` is the host (`host_cpu`). A gcc name without its own entry takes its ISA level's
    model (``tigerlake`` → ``x86-64-v4``'s, compiled with ``-march=tigerlake``).

    Example:
        >>> named_cpu("znver5").march_fallbacks
        ('znver4', 'icelake-server')
        >>> named_cpu("tigerlake").isa, named_cpu("tigerlake").march
        ('avx512', 'tigerlake')
    """
    if name == "native":
        return host_cpu()
    if name in NAMED_CPUS:
        return NAMED_CPUS[name]
    if name in _LEVEL_OF:
        level = NAMED_CPUS[_LEVEL_OF[name]]
        if name in ("sandybridge", "ivybridge"):  # AVX without AVX2/FMA
            level = replace(level, features=frozenset(_V2 + ("avx",)), fma_units=0)
        return replace(level, name=name, march=name, march_fallbacks=(level.march,))
    raise ValueError(f"unknown CPU {name!r} for -mcpu; known CPUs: {', '.join(sorted({*NAMED_CPUS, *_LEVEL_OF}))}, "
                     "or 'native' (the host)")


def _cpuinfo_flags() -> "set[str]":
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                if line.startswith("flags") or line.startswith("Features"):
                    return set(line.split(":", 1)[1].split())
    except OSError:
        pass
    return set()


def _gcc_feature_names(flags: "set[str]") -> "set[str]":
    """/proc/cpuinfo spells a few extensions differently from gcc (``sse4_2`` vs ``sse4.2``)."""
    renamed = {"sse4_1": "sse4.1", "sse4_2": "sse4.2", "avx512_vnni": "avx512vnni", "avx512_bf16": "avx512bf16",
               "avx512_fp16": "avx512fp16", "avx512_vbmi2": "avx512vbmi2", "avx512_bitalg": "avx512bitalg",
               "avx512_vpopcntdq": "avx512vpopcntdq", "avx_vnni": "avxvnni", "amx_tile": "amx-tile",
               "amx_int8": "amx-int8", "amx_bf16": "amx-bf16", "avx512_vp2intersect": "avx512vp2intersect"}
    return {renamed.get(f, f) for f in flags}


def _sysfs_caches(root: str = "/sys/devices/system/cpu/cpu0/cache") -> "dict[int, int]":
    """Cache level -> bytes of the data/unified caches of cpu0 (empty when sysfs has none)."""
    sizes: dict = {}
    try:
        entries = sorted(os.listdir(root))
    except OSError:
        return sizes
    for entry in entries:
        if not entry.startswith("index"):
            continue
        try:
            with open(os.path.join(root, entry, "level")) as f:
                level = int(f.read())
            with open(os.path.join(root, entry, "type")) as f:
                kind = f.read().strip()
            with open(os.path.join(root, entry, "size")) as f:
                size = f.read().strip()
        except (OSError, ValueError):
            continue
        match = re.fullmatch(r"(\d+)([KMG]?)", size)
        if kind == "Instruction" or match is None:
            continue
        sizes[level] = int(match.group(1)) * {"": 1, "K": _KIB, "M": _MIB, "G": 1024 * _MIB}[match.group(2)]
    return sizes


def cpu_from_flags(flags: "set[str]", caches: "dict[int, int]", name: str = "host", march: str = "native",
                   vendor: str = "") -> CpuModel:
    """A `CpuModel` from /proc/cpuinfo-style ``flags`` and ``{level: bytes}`` caches (missing
    levels take x86-64-v3's). AMD parts with AVX-512 before Zen 5 (``avx512f`` without
    ``avx512_vp2intersect``) run 512-bit FMAs on two 256-bit pipes: one 512-bit FMA unit.

    Example:
        >>> cpu = cpu_from_flags({"avx", "avx2", "fma", "sse4_2"}, {1: 32768, 2: 524288})
        >>> cpu.isa, cpu.vector_registers, cpu.l2_bytes
        ('avx2', 16, 524288)
    """
    feats = _gcc_feature_names(flags)
    base = NAMED_CPUS["x86-64-v3"]
    cpu = _cpu(name, feats, caches.get(1, base.l1d_bytes) // _KIB, caches.get(2, base.l2_bytes) // _KIB,
               max(1, caches.get(3, base.l3_bytes) // _MIB))
    if "amd" in vendor.lower() and "avx512f" in feats and "avx512vp2intersect" not in feats:
        cpu = replace(cpu, fma_units=1)
    if "amd" in vendor.lower() and "avx2" in feats and "avx512f" not in feats:
        cpu = replace(cpu, mtune=ZEN_AVX2_MTUNE, fold_tune="znver3")  # an AVX2 Zen core
    return replace(cpu, march=march)


@lru_cache(maxsize=1)
def host_cpu() -> CpuModel:
    """The CPU this process runs on (flags from ``/proc/cpuinfo``, caches from sysfs), with
    ``march="native"`` and ``cores`` = ``os.cpu_count()``.

    Example:
        >>> host_cpu().isa in ("avx512", "avx2", "avx", "sse")
        True
    """
    vendor = ""
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            vendor = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("vendor_id")), "")
    except OSError:
        pass
    cpu = cpu_from_flags(_cpuinfo_flags(), _sysfs_caches(), vendor=vendor)
    return cpu.with_cores(os.cpu_count() or 1)


def host_can_run(cpu: CpuModel) -> bool:
    """Whether code compiled for ``cpu`` runs on this host (every vector ISA feature present).

    Example:
        >>> host_can_run(named_cpu("x86-64-v2"))
        True
    """
    host = host_cpu()
    wanted = {f for f in cpu.features if f.startswith(("avx", "fma", "sse", "amx"))}
    return cpu.march == "native" or wanted <= host.features
