"""Peak fp32 FMA throughput of this machine: the ceiling every GEMM figure is quoted against.

Runs a chain-free AVX-512 (or AVX2) FMA loop with enough independent accumulators to cover the FMA
latency on every pipe, on 1 and on 2 threads, and prints GFLOP/s.

Usage:
    python benchmarks/peak_fma.py
"""
from __future__ import annotations

import ctypes
import os
import statistics
import subprocess
import tempfile

C_SOURCE = r"""
#include <immintrin.h>
#include <omp.h>
#include <time.h>
#if defined(__AVX512F__)
typedef __m512 vec;
#define LANES 16
#define FMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define SET1 _mm512_set1_ps
#define ADD _mm512_add_ps
#define REDUCE(v) _mm512_reduce_add_ps(v)
#else
typedef __m256 vec;
#define LANES 8
#define FMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define SET1 _mm256_set1_ps
#define ADD _mm256_add_ps
static float REDUCE(__m256 v) { float t[8]; _mm256_storeu_ps(t, v); float s = 0; for (int i = 0; i < 8; ++i) s += t[i]; return s; }
#endif
#define ACC 16

int lanes(void) { return LANES; }

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
      #pragma GCC unroll 16
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


def build() -> ctypes.CDLL:
    workdir = tempfile.mkdtemp(prefix="ingot-peak-")
    src = os.path.join(workdir, "peak.c")
    lib = os.path.join(workdir, "peak.so")
    with open(src, "w") as f:
        f.write(C_SOURCE)
    subprocess.run(["gcc", "-O3", "-march=native", "-fopenmp", "-shared", "-fPIC", src, "-o", lib], check=True)
    dll = ctypes.CDLL(lib)
    dll.run.restype = ctypes.c_double
    dll.run.argtypes = [ctypes.c_long, ctypes.c_int, ctypes.POINTER(ctypes.c_float)]
    return dll


def peak_gflops(threads: int, repeats: int = 7, iters: int = 20_000_000) -> float:
    """Median GFLOP/s of the FMA loop on ``threads`` threads."""
    dll = build_cached()
    sink = (ctypes.c_float * 64)()
    flops = 2.0 * iters * 16 * dll.lanes() * threads
    dll.run(iters // 10, threads, sink)  # warm up, let the clock settle
    times = [dll.run(iters, threads, sink) for _ in range(repeats)]
    return flops / statistics.median(times) / 1e9


_DLL = None


def build_cached() -> ctypes.CDLL:
    global _DLL
    if _DLL is None:
        _DLL = build()
    return _DLL


def main() -> None:
    print(f"SIMD lanes (fp32): {build_cached().lanes()}")
    for threads in (1, 2):
        print(f"peak fp32 FMA, {threads} thread(s): {peak_gflops(threads):7.1f} GFLOP/s (median of 7)")


if __name__ == "__main__":
    main()
