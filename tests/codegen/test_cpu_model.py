"""The CPU model in the target: named CPUs, the host from /proc/cpuinfo-style flags and sysfs caches,
and code compiled for a named CPU (not for the host) that runs wherever that ISA runs."""
from __future__ import annotations

import numpy as np
import pytest

import ingot
from ingot import te
from ingot.codegen.build import compile_options_for, module_assembly
from ingot.codegen.toolchain import ToolchainError, march_flags
from ingot.cpu_model import NAMED_CPUS, cpu_from_flags, host_can_run, host_cpu, named_cpu
from ingot.target import Target, TargetError

# name -> (ISA, vector bits, registers, FMA units)
EXPECTED = {
    "x86-64-v2": ("sse", 128, 16, 0), "x86-64-v3": ("avx2", 256, 16, 2), "x86-64-v4": ("avx512", 512, 32, 2),
    "haswell": ("avx2", 256, 16, 2), "skylake-avx512": ("avx512", 512, 32, 2),
    "icelake-server": ("avx512", 512, 32, 2), "sapphirerapids": ("avx512", 512, 32, 2),
    "znver3": ("avx2", 256, 16, 2), "znver4": ("avx512", 512, 32, 1), "znver5": ("avx512", 512, 32, 2),
}


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_named_cpus(name):
    cpu = named_cpu(name)
    assert (cpu.isa, cpu.vector_bits, cpu.vector_registers, cpu.fma_units) == EXPECTED[name]
    assert cpu.l1d_bytes >= 32 * 1024 and cpu.l2_bytes >= cpu.l1d_bytes and cpu.l3_bytes >= cpu.l2_bytes
    assert Target(f"llvm -mcpu={name}").vector_width_bits == cpu.vector_bits


def test_features_of_the_newer_isas():
    assert named_cpu("sapphirerapids").has("amx-tile") and named_cpu("sapphirerapids").has("avx512bf16")
    assert named_cpu("icelake-server").has("avx512vnni") and not named_cpu("icelake-server").has("avx512bf16")
    assert named_cpu("znver4").has("avx512bf16") and not named_cpu("znver3").has("avx512f")
    assert not named_cpu("x86-64-v2").has("avx")
    assert all(c.has("sse4.2") for c in NAMED_CPUS.values())


def test_host_model_from_flags_and_caches():
    zen3 = cpu_from_flags({"sse4_2", "avx", "avx2", "fma"}, {1: 32 << 10, 2: 512 << 10, 3: 32 << 20},
                          vendor="AuthenticAMD")
    assert (zen3.isa, zen3.vector_registers, zen3.l1d_bytes, zen3.l2_bytes, zen3.march) == \
        ("avx2", 16, 32 << 10, 512 << 10, "native")
    assert zen3.mtune == "haswell"  # gcc's znver tuning folds a tile's reused loads into its FMAs
    zen4 = cpu_from_flags({"avx2", "fma", "avx512f", "avx512bw", "avx512vl"}, {}, vendor="AuthenticAMD")
    assert zen4.fma_units == 1  # 512-bit FMAs on two 256-bit pipes
    xeon = cpu_from_flags({"avx2", "fma", "avx512f", "avx512_vnni", "amx_tile"}, {1: 48 << 10}, vendor="GenuineIntel")
    assert xeon.fma_units == 2 and xeon.has("avx512vnni") and xeon.has("amx-tile") and xeon.l1d_bytes == 48 << 10
    host = host_cpu()
    assert host.march == "native" and host.cores >= 1 and host.isa in ("avx512", "avx2", "avx", "sse")


def test_target_cpu_options():
    cpu = Target("llvm -mcpu=skylake-avx512 -num-cores=3").cpu
    assert (cpu.cores, cpu.lanes("float32"), cpu.accumulator_registers) == (3, 16, 24)
    assert Target("llvm -mcpu=skylake-avx512 -vector-width=256").cpu.lanes("float32") == 8
    no512 = Target("llvm -mcpu=skylake-avx512 -mattr=-avx512f").cpu
    assert (no512.isa, no512.vector_bits, no512.vector_registers) == ("avx2", 256, 16)
    with pytest.raises(TargetError, match="unknown CPU 'pentium9'"):
        _ = Target("llvm -mcpu=pentium9").cpu
    with pytest.raises(TargetError, match="not a CPU target"):
        _ = Target("cuda").cpu


def test_a_named_cpu_compiles_for_that_cpu():
    assert compile_options_for("llvm -mcpu=haswell").march == "haswell"
    assert compile_options_for("llvm").march == "native"
    assert compile_options_for("llvm -mcpu=znver3").mtune == "haswell"
    assert compile_options_for("llvm -mcpu=sapphirerapids").mtune is None
    # -mtune replaces the CPU's tuning (the Zen fold A/B), and an unknown name is refused up front
    assert compile_options_for("llvm -mcpu=znver3 -mtune=znver3").mtune == "znver3"
    assert compile_options_for("llvm -mcpu=haswell -mtune=generic").march == "haswell"
    with pytest.raises(ToolchainError, match="does not know -mtune=pentium9"):
        compile_options_for("llvm -mtune=pentium9")
    march, extra = march_flags(named_cpu("znver5"))
    # the installed gcc may predate znver5: then a known AVX-512 CPU plus the vector features it lacks
    znver5 = named_cpu("znver5")
    assert march == "znver5" or (march in znver5.march_fallbacks and extra
                                 and {f"-m{f}" for f in znver5.features - named_cpu(march).features} <= set(extra))


def _vector_add():
    a = te.placeholder((4096,), name="a")
    b = te.placeholder((4096,), name="b")
    c = te.compute((4096,), lambda i: a[i] * b[i] + 1.0, name="c")
    return te.create_prim_func([a, b, c])


@pytest.mark.compiler
@pytest.mark.parametrize("target", ["llvm -mcpu=haswell -num-cores=1", "llvm -mcpu=x86-64-v2 -num-cores=1",
                                    "llvm -mcpu=skylake-avx512 -num-cores=1"])
def test_code_for_a_named_cpu_uses_its_isa_and_runs_where_it_can(target):
    from ingot.ops.schedule import default_schedule

    func = default_schedule(_vector_add(), target)
    asm = module_assembly(ingot.lower(ingot.IRModule({"main": func})), target)
    cpu = Target(target).cpu
    assert ("%zmm" in asm) == (cpu.isa == "avx512"), target   # AVX2 code never touches zmm
    assert ("%ymm" in asm) == (cpu.isa == "avx2") or cpu.isa == "avx512", target
    if host_can_run(cpu):
        x, y = np.random.rand(4096).astype("float32"), np.random.rand(4096).astype("float32")
        out = np.empty_like(x)
        ingot.build(func, target)["main"](x, y, out)
        np.testing.assert_allclose(out, x * y + 1.0, rtol=1e-6)
