"""Peak fp32 FMA throughput per ISA: the ceiling every GEMM figure is quoted against.

For each vector ISA the host can run (AVX-512 through ``-mcpu=x86-64-v4``, AVX2 through
``-mcpu=haswell``; or the ``--target`` given), runs a chain-free FMA loop whose independent
accumulators are sized to that ISA's register file (`ingot.cpu_model.CpuModel`: all registers but
the two operands — 30 zmm, 14 ymm — enough to cover the FMA latency on every pipe without a spill),
on 1 and on 2 threads, and prints GFLOP/s. The loop's assembly is checked: every FMA on the ISA's
full-width registers, no stack access.

Usage:
    python benchmarks/peak_fma.py [--target "llvm -mcpu=haswell"] [--threads 1,2]
"""
from __future__ import annotations

import argparse
import ctypes
import os
import statistics
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

C_SOURCE = r"""
#include <immintrin.h>
#include <omp.h>
#include <time.h>
#if LANES == 16
typedef __m512 vec;
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define SET1 _mm512_set1_ps
#define ADD _mm512_add_ps
#define REDUCE(v) _mm512_reduce_add_ps(v)
#else
typedef __m256 vec;
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define SET1 _mm256_set1_ps
#define ADD _mm256_add_ps
static float REDUCE(__m256 v) { float t[8]; _mm256_storeu_ps(t, v); float s = 0; for (int i = 0; i < 8; ++i) s += t[i]; return s; }
#endif

int lanes(void) { return LANES; }
int accumulators(void) { return ACC; }

/* Returns seconds; each thread performs iters * ACC FMAs of LANES lanes. */
double run(long iters, int threads, float* sink) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  #pragma omp parallel num_threads(threads)
  {
    vec acc[ACC];
    vec a = SET1(1.0000001f), b = SET1(0.9999999f);
    for (int k = 0; k < ACC; ++k) acc[k] = SET1((float)k);
    for (long it = 0; it < iters; ++it) {
      #pragma GCC unroll 32
      for (int k = 0; k < ACC; ++k) acc[k] = FMA(acc[k], a, b);
    }
    vec s = acc[0];
    for (int k = 1; k < ACC; ++k) s = ADD(s, acc[k]);
    sink[omp_get_thread_num()] = REDUCE(s);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  return (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec);
}
"""

#: One target per vector ISA, widest first.
ISA_TARGETS = ("llvm -mcpu=x86-64-v4", "llvm -mcpu=haswell")


def build(target: str) -> ctypes.CDLL:
    """The FMA loop compiled for ``target`` (its ``-march``, accumulators from its register file).

    Example:
        >>> build("llvm -mcpu=haswell").accumulators()   # doctest: +SKIP
        14
    """
    from ingot.codegen.build import hot_loop_report
    from ingot.codegen.toolchain import march_flags
    from ingot.target import Target

    cpu = Target(target).cpu
    acc = cpu.vector_registers - 2  # the two operand vectors a, b stay in registers too
    march, extra = march_flags(cpu)
    workdir = tempfile.mkdtemp(prefix="ingot-peak-")
    src, lib = os.path.join(workdir, "peak.c"), os.path.join(workdir, "peak.so")
    with open(src, "w") as f:
        f.write(C_SOURCE)
    flags = ["-O3", f"-march={march}", *extra, "-fopenmp", f"-DLANES={cpu.lanes('float32')}", f"-DACC={acc}"]
    subprocess.run(["gcc", *flags, "-shared", "-fPIC", src, "-o", lib], check=True)
    asm = subprocess.run(["gcc", *flags, "-S", "-o", "-", src], check=True, capture_output=True, text=True).stdout
    report = hot_loop_report(asm, cpu.vector_bits)
    if report["vector"] < acc or report["stack"]:
        raise SystemExit(f"{target}: expected {acc} FMAs on {cpu.vector_bits}-bit registers and no stack "
                         f"access in the loop, got {report}")
    dll = ctypes.CDLL(lib)
    dll.run.restype = ctypes.c_double
    dll.run.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
    return dll


_DLLS: dict = {}


def peak_gflops(threads: int, repeats: int = 7, iters: int = 20_000_000, target: str = "llvm") -> float:
    """Median GFLOP/s of the FMA loop for ``target`` on ``threads`` threads.

    Example:
        >>> peak_gflops(1, target="llvm -mcpu=haswell") > 0   # doctest: +SKIP
        True
    """
    if target not in _DLLS:
        _DLLS[target] = build(target)
    dll = _DLLS[target]
    sink = (ctypes.c_float * 64)()
    flops = 2.0 * iters * dll.accumulators() * dll.lanes() * threads
    dll.run(iters // 10, threads, sink)  # warm up, let the clock settle
    times = [dll.run(iters, threads, sink) for _ in range(repeats)]
    return flops / statistics.median(times) / 1e9


def runnable_isa_targets() -> "list[str]":
    """The targets of `ISA_TARGETS` whose code this host runs.

    Example:
        >>> "llvm -mcpu=haswell" in runnable_isa_targets()   # doctest: +SKIP
        True
    """
    from ingot.cpu_model import host_can_run
    from ingot.target import Target

    return [t for t in ISA_TARGETS if host_can_run(Target(t).cpu)]


def main(argv=None) -> int:
    from ingot.cpu_model import host_cpu

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--target", action="append", help="a CPU target (repeatable); default: every ISA the host runs")
    p.add_argument("--threads", default="1,2")
    args = p.parse_args(argv)
    print(f"host: {host_cpu().describe()}")
    for target in args.target or runnable_isa_targets():
        dll = _DLLS.setdefault(target, build(target))
        for threads in (int(t) for t in args.threads.split(",")):
            print(f"{target:24s} {dll.lanes():2d} lanes x {dll.accumulators()} accumulators, {threads} thread(s): "
                  f"{peak_gflops(threads, target=target):7.1f} GFLOP/s (median of 7)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
