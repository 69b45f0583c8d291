"""fp32 GEMM C = A @ B: a hand-written Ingot schedule beside numpy/OpenBLAS, 1 and 2 threads.

The schedule (`gemm_schedule`) is written with Ingot's schedule primitives only — no C:

* B is packed at the TE level into panels ``B_pack[N/NR, K, NR]`` (contiguous NR-wide rows, so the
  micro-kernel streams one panel linearly); the packing loop is parallel and vectorized;
* i is tiled MC (cache block of A rows, parallel) × MR (register rows), j is tiled NR = 2 vectors;
* the accumulators are a ``"local"`` `cache_write` tile moved under the tile loop with
  `reverse_compute_at` and initialized by `decompose_reduction`: MR × 2 zmm registers;
* the inner k loop is split by ``KU`` and unrolled, the MR rows and the 2 vectors unrolled, the
  16 lanes vectorized (AVX-512 FMA with a broadcast A element).

``--check`` builds 512^3 and 1024^3, compares with numpy and checks the assembly (FMA on zmm, no
stack traffic in the micro-kernel loop) without timing anything.

Since the cache-blocked default rule exists, the timed kernel is the *default schedule* of a plain
``ops.matmul`` (`default_gemm`, see ingot/ops/schedule/blocked.py: one parallel loop over the
32-wide column panels of B, each packed by the thread that reads it, A read in place, k slices of
512 accumulated in C); ``--schedule hand`` times the hand-written schedule below instead.

``--transformer`` times BERT-base's dense layers instead (batch 1, sequence 128: M = 128,
K x N = 768 x 768 / 768 x 3072 / 3072 x 768) with the weight pre-packed as the graph's
PackWeights pass does (``dense_packed_weight``, ``[N/32, K, 32]`` panels), beside PyTorch's
``linear`` on the same threads.

Every mode takes ``--target`` (default ``llvm``: the host; ``"llvm -mcpu=haswell"`` times the AVX2
code path on any AVX2 or AVX-512 host): tiles, the assembly check and the FMA peak are that CPU's.

Usage:
    python benchmarks/gemm.py                  # the table (run on a quiet machine)
    python benchmarks/gemm.py --check          # correctness + assembly only (square + transformer shapes)
    python benchmarks/gemm.py --transformer    # M = 128 dense layers with pre-packed weights
    python benchmarks/gemm.py --sweep          # blocked_gemm_rule points (MR x NVEC, MC, KC, KU, order)
                                               #   vs the default, 1 and 2 threads, interleaved
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import ingot  # noqa: E402
from ingot import te  # noqa: E402
from ingot.tir.schedule import Schedule  # noqa: E402

#: The CPU target the benchmark builds for (``--target``; "-num-cores=N" is added per run).
TARGET = "llvm"
MR, LANES, NVEC, MC, KU = 8, 16, 2, 64, 4   # the hand schedule's tile; main() fits MR/NVEC/LANES to TARGET
NR = LANES * NVEC


def set_target(target: str) -> None:
    """Build for ``target``: the hand schedule's register tile becomes that CPU's default tile.

    Example:
        >>> set_target("llvm -mcpu=haswell"); (LANES, MR, NVEC)   # doctest: +SKIP
        (8, 4, 2)
    """
    from ingot.ops.schedule.blocked import default_gemm_tile
    from ingot.target import Target

    global TARGET, MR, LANES, NVEC, NR
    TARGET = target
    cpu = Target(target).cpu
    LANES = cpu.lanes("float32")
    MR, NVEC = default_gemm_tile(1024, cpu)
    NR = LANES * NVEC


def target_for(threads: int) -> str:
    """`TARGET` with ``threads`` cores."""
    return f"{TARGET} -num-cores={threads}"


def gemm_func(n: int, m: int, k: int):
    """TE definition of C[n, m] = A[n, k] @ B[k, m] with B packed into [m/NR, k, NR] panels."""
    A = te.placeholder((n, k), name="A")
    B = te.placeholder((k, m), name="B")
    Bp = te.compute((m // NR, k, NR), lambda jo, kk, ji: B[kk, jo * NR + ji], name="B_pack")
    r = te.reduce_axis((0, k), name="k")
    C = te.compute((n, m), lambda i, j: te.sum(A[i, r] * Bp[j // NR, r, j % NR], axis=r), name="C")
    return te.create_prim_func([A, B, C])


def gemm_schedule(n: int, m: int, k: int) -> Schedule:
    """The hand-written schedule (module docstring). Needs n % MC == 0, m % NR == 0, k % KU == 0.

    Example:
        >>> sch = gemm_schedule(128, 64, 32)
        >>> print(sch.trace)  # doctest: +SKIP
    """
    assert n % MC == 0 and m % NR == 0 and k % KU == 0, "sizes must be multiples of the tiles"
    sch = Schedule(gemm_func(n, m, k), seed=0)
    # Step 1. packing: parallel over panels, 2 vectors per packed row.
    pack = sch.get_block("B_pack")
    jo, kk, ji = sch.get_loops(pack)
    sch.parallel(jo)
    _, ji_v = sch.split(ji, [None, LANES])
    sch.vectorize(ji_v)
    # Step 2. tiles: i -> (ic, ir, ii), j -> (jo, jn, jl), k -> (ko, ki).
    c = sch.get_block("C")
    i, j, kr = sch.get_loops(c)
    ic, ir, ii = sch.split(i, [None, MC // MR, MR])
    jo, jn, jl = sch.split(j, [None, NVEC, LANES])
    ko, ki = sch.split(kr, [None, KU])
    sch.reorder(ic, jo, ir, ko, ki, ii, jn, jl)
    sch.parallel(ic)
    sch.unroll(ki)
    sch.unroll(ii)
    sch.unroll(jn)
    sch.vectorize(jl)
    # Step 3. register accumulators: a local MR x NR tile, written back after the k loop.
    wb = sch.cache_write(c, 0, "local")
    sch.reverse_compute_at(wb, ir)
    _, v = sch.split(sch.get_loops(wb)[-1], [None, LANES])
    sch.vectorize(v)
    sch.decompose_reduction(c, ko)
    return sch


def default_gemm(n: int, threads: int) -> Schedule:
    """The default schedule (`ingot.ops.schedule`) of a plain ``ops.matmul``: for large sizes
    the cache-blocked rule (`blocked_gemm_rule`: parallel NR-column panels of B packed per
    thread, KC = 512 slices accumulated in C), the register-tiled `gemm_rule` otherwise."""
    from ingot import ops
    from ingot.ops.schedule import schedule_blocks
    from ingot.target import Target

    A, B = te.placeholder((n, n), name="A"), te.placeholder((n, n), name="B")
    return schedule_blocks(Schedule(te.create_prim_func([A, B, ops.matmul(A, B)])), Target(target_for(threads)))


SCHEDULE = "default"


def build(n: int, threads: int):
    sch = default_gemm(n, threads) if SCHEDULE == "default" else gemm_schedule(n, n, n)
    return sch, ingot.build(sch.mod, target_for(threads))


TRANSFORMER_SHAPES = [(128, 768, 768), (128, 768, 3072), (128, 3072, 768)]


def transformer_dense(m: int, k: int, n: int, threads: int, gelu: bool = False):
    """(schedule, module, pack) of ``x[1, m, k] @ w[n, k].T`` reading the weight pre-packed into
    ``[n/P, k, P]`` panels (PackWeights' layout), scheduled by the default rules; with ``gelu``,
    ``gelu(x @ w.T + b)`` (the FFN's first layer, the bias a third argument)."""
    from ingot import ops
    from ingot.graph.transform.pack_weights import default_panel
    from ingot.ops import packed
    from ingot.ops.schedule import schedule_blocks
    from ingot.target import Target

    target = target_for(threads)
    panel, lanes = default_panel(target)
    p = panel if n % panel == 0 else lanes
    x = te.placeholder((1, m, k), name="x")
    w = te.placeholder((n // p, k, p), name="w")
    if gelu:
        b = te.placeholder((n,), name="b")
        tensors = [x, w, b, ops.gelu(packed.dense_packed_weight(x, w, b))]
    else:
        tensors = [x, w, packed.dense_packed_weight(x, w)]
    sch = schedule_blocks(Schedule(te.create_prim_func(tensors)), Target(target))
    return sch, ingot.build(sch.mod, target), (lambda wt: packed.pack_dense_weight(wt, p))


def check_transformer(threads: int = 2) -> None:
    rng = np.random.default_rng(0)
    for m, k, n in TRANSFORMER_SHAPES[:1]:
        sch, lib, pack = transformer_dense(m, k, n, threads)
        x, w = rng.random((1, m, k), dtype="float32"), rng.random((n, k), dtype="float32")
        y = np.zeros((1, m, n), "float32")
        lib["main"](x, pack(w), y)
        np.testing.assert_allclose(y, x @ w.T, rtol=1e-4)
        copies = [b for b in sch.state.blocks("main") if b.endswith("_global")]
        rep = micro_kernel_report(sch)
        print(f"dense {m}x{k}x{n} (pre-packed weight) matches numpy; per-call copies={copies}; "
              f"micro-kernel loop: {json.dumps(rep)}")
        assert "w_global" not in copies, "the pre-packed weight was packed again"
        assert rep["stack"] == 0 and rep["vector"] >= MR * NVEC, rep


def transformer_table(threads: int) -> None:
    from common import banner, ingot_median_seconds, load_average, markdown_table, median_seconds

    banner(f"BERT-base dense layers (M = 128, pre-packed weights, {threads} threads): Ingot vs PyTorch")
    try:
        import torch

        torch.set_num_threads(threads)
    except ImportError:
        torch = None
    rng = np.random.default_rng(0)
    rows = []
    for (m, k, n), gelu in [(s, False) for s in TRANSFORMER_SHAPES] + [(TRANSFORMER_SHAPES[1], True)]:
        _, lib, pack = transformer_dense(m, k, n, threads, gelu)
        x, w = rng.random((1, m, k), dtype="float32"), rng.random((n, k), dtype="float32") / 16
        b = rng.random(n, dtype="float32")
        y = np.zeros((1, m, n), "float32")
        wp = pack(w)
        args = (x, wp, b, y) if gelu else (x, wp, y)
        lib["main"](*args)
        ref = x @ w.T
        if gelu:
            import math

            ref = (ref + b) * 0.5 * (1 + np.vectorize(math.erf)((ref + b) / np.sqrt(2)))
        np.testing.assert_allclose(y, ref, rtol=1e-3, atol=1e-3)
        g = 2 * m * k * n / 1e9
        t = ingot_median_seconds(lib, "main", args, repeat=9, min_repeat_ms=50)
        tt = None
        if torch is not None:
            tx, tw, tb = torch.from_numpy(x), torch.from_numpy(w), torch.from_numpy(b)

            def ref_fn(tx=tx, tw=tw, tb=tb, gelu=gelu):
                f = torch.nn.functional
                return f.gelu(f.linear(tx, tw, tb)) if gelu else f.linear(tx, tw)

            with torch.no_grad():
                tt = median_seconds(ref_fn, repeat=9, min_seconds=0.05)
        rows.append([f"{m}x{k}x{n}" + (" +bias+gelu" if gelu else ""), f"{g / t:.1f}",
                     "-" if tt is None else f"{g / tt:.1f}", "-" if tt is None else f"{tt / t:.2f}"])
    print(markdown_table(["M x K x N", "Ingot GFLOP/s", "PyTorch GFLOP/s", "Ingot / PyTorch"], rows))
    print(f"load average after: {load_average()}")


def micro_kernel_report(sch: Schedule) -> dict:
    """Assembly facts of the micro-kernel (`ingot.codegen.build.hot_loop_report`): the innermost
    loop holding the most FMAs — its FMAs, how many use the target's full-width registers
    (``vector``), its stack accesses (spills/reloads; 0 means the accumulators stay in registers),
    vector stores, instructions."""
    from ingot.codegen.build import hot_loop_report, module_assembly
    from ingot.target import Target

    return hot_loop_report(module_assembly(ingot.lower(sch.mod), target_for(2)), Target(TARGET).cpu.vector_bits)


def numpy_gflops(n: int, threads: int, coretype: "str | None") -> float:
    """GFLOP/s of numpy's matmul in a fresh process (thread count / core type fixed at load)."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS=str(threads), OMP_NUM_THREADS=str(threads))
    env.pop("OPENBLAS_CORETYPE", None)
    if coretype:
        env["OPENBLAS_CORETYPE"] = coretype
    code = (
        "import sys, numpy as np; sys.path.insert(0, %r); from common import median_seconds; n=%d; "
        "a=np.random.rand(n,n).astype('float32'); b=np.random.rand(n,n).astype('float32'); c=np.empty_like(a); "
        "print(2*n**3/median_seconds(lambda: np.matmul(a,b,out=c), repeat=9, min_seconds=0.1)/1e9)"
        % (os.path.dirname(os.path.abspath(__file__)), n)
    )
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    return float(out.stdout.strip().splitlines()[-1])


def check(n: int = 512) -> None:
    sch, lib = build(n, 2)
    rng = np.random.default_rng(0)
    a = rng.random((n, n), dtype="float32")
    b = rng.random((n, n), dtype="float32")
    c = np.zeros((n, n), "float32")
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4)
    rep = micro_kernel_report(sch)
    print(f"{n}^3 matches numpy; micro-kernel loop: {json.dumps(rep)}")
    assert rep["vector"] >= MR * NVEC, f"expected the MR x NVEC FMAs on full-width registers of {TARGET}"
    assert rep["instructions"] < 160, "C reloaded/stored inside the k loop (restrict lost?)"
    assert rep["stack"] == 0, "accumulators spilled to the stack in the micro-kernel loop"


# --sweep: points of blocked_gemm_rule's space (keyword arguments; {} = the default), timed
# against each other. Shapes: M x K x N of C[M, N] = A[M, K] @ B[K, N].
SWEEP_SHAPES = [(1024, 1024, 1024), (512, 512, 512), (2048, 2048, 2048), (768, 768, 768), (128, 768, 3072)]
SWEEP_POINTS = [{}, dict(mr=4, nvec=4), dict(mr=4, nvec=4, mc=64), dict(mr=4, nvec=4, kc=256),
                dict(mr=4, nvec=4, ku=8), dict(mc=64), dict(mc=256), dict(kc=256), dict(ku=8), dict(ku=2),
                dict(mr=16, nvec=1), dict(mr=8, nvec=3), dict(mr=6, nvec=4, mc=96), dict(mr=12, nvec=2, mc=96),
                dict(mr=4, nvec=2), dict(mr=6, nvec=2, mc=96), dict(mr=3, nvec=3, mc=96), dict(mr=2, nvec=4),
                dict(order="block"), dict(order="slice")]   # points whose tiles do not divide a shape are skipped


def blocked_point(m: int, k: int, n: int, threads: int, **kw):
    """``ingot.build`` of a plain matmul scheduled by `blocked_gemm_rule` with keyword arguments
    ``kw`` (mr, nvec, mc, kc, ku, order, ...); raises ScheduleError when the tiles do not fit.

    Example:
        >>> lib = blocked_point(512, 512, 512, 1, mr=4, nvec=4)  # doctest: +SKIP
    """
    from ingot import ops
    from ingot.ops.schedule.analysis import analyze_block
    from ingot.ops.schedule.blocked import blocked_gemm_rule
    from ingot.target import Target

    cpu = Target(target_for(threads)).cpu
    if "mr" in kw and not cpu.fits_registers(kw["mr"], kw.get("nvec", 2)):
        raise ValueError(f"tile {kw['mr']} x {kw.get('nvec', 2)} does not fit {cpu.name}'s registers")
    A, B = te.placeholder((m, k), name="A"), te.placeholder((k, n), name="B")
    C = ops.matmul(A, B)
    sch = Schedule(te.create_prim_func([A, B, C]))
    blocked_gemm_rule(sch, C.op.name, analyze_block(sch, sch.get_block(C.op.name)), cpu, **kw)
    return ingot.build(sch.mod, target_for(threads))


def sweep(shapes, points, threads_list, rounds: int) -> None:
    """Time ``points`` of the blocked GEMM space per shape and thread count: all points
    interleaved (A, B, C, A, B, C ...) for ``rounds`` rounds of 3 calls, MIN per point — thread
    CPU time on 1 thread (robust to preemption on a shared machine), wall time on 2. Prints a
    Markdown table (GFLOP/s and the ratio to the default point) and the load average."""
    import time

    from common import banner, load_average, markdown_table

    banner("blocked_gemm_rule points (min over interleaved rounds)")
    rows = []
    for m, k, n in shapes:
        rng = np.random.default_rng(0)
        a, b = rng.random((m, k), dtype="float32"), rng.random((k, n), dtype="float32")
        for threads in threads_list:
            libs = []
            for kw in points:
                try:
                    lib = blocked_point(m, k, n, threads, **kw)
                except Exception as err:  # tiles that do not divide the sizes: no row
                    print(f"  {m}x{k}x{n} {kw}: skipped ({type(err).__name__})", flush=True)
                    continue
                c = np.zeros((m, n), "float32")
                lib["main"](a, b, c)
                np.testing.assert_allclose(c, a @ b, rtol=1e-3, atol=1e-2)
                libs.append([kw, lib["main"], c, float("inf")])
            clock = time.thread_time if threads == 1 else time.perf_counter
            for _ in range(rounds):
                for entry in libs:
                    for _ in range(3):
                        t0 = clock()
                        entry[1](a, b, entry[2])
                        entry[3] = min(entry[3], clock() - t0)
            base = next((e[3] for e in libs if not e[0]), None)
            for kw, _, _, t in libs:
                g = 2 * m * n * k / t / 1e9
                label = ", ".join(f"{key}={val}" for key, val in kw.items()) or "default"
                rows.append([f"{m}x{k}x{n}", threads, label, f"{g:.1f}", f"{base / t:.2f}" if base else "-"])
                print(f"  {m}x{k}x{n} {threads}T {label}: {g:.1f} GFLOP/s", flush=True)
    print(markdown_table(["M x K x N", "threads", "point", "GFLOP/s", "/ default"], rows))
    print(f"load average after: {load_average()}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--check", action="store_true", help="correctness and assembly only (no timing)")
    parser.add_argument("--sizes", type=int, nargs="*", default=[512, 1024, 2048])
    parser.add_argument("--transformer", action="store_true",
                        help="time the M = 128 dense layers of BERT-base with pre-packed weights")
    parser.add_argument("--threads", type=int, default=2, help="threads for --transformer")
    parser.add_argument("--schedule", choices=["default", "hand"], default="default",
                        help="default: ingot.ops.schedule (blocked GEMM rule); hand: gemm_schedule (no KC blocking)")
    parser.add_argument("--sweep", action="store_true",
                        help="time points of blocked_gemm_rule's space (MR x NVEC, MC, KC, KU, order) vs the default")
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds for --sweep")
    parser.add_argument("--target", default="llvm",
                        help='CPU target, e.g. "llvm -mcpu=haswell" (AVX2 code on any AVX2/AVX-512 host)')
    args = parser.parse_args()
    set_target(args.target)
    if args.sweep:
        shapes = [(n, n, n) for n in args.sizes] if "--sizes" in sys.argv else SWEEP_SHAPES
        sweep(shapes, SWEEP_POINTS, (1, 2), args.rounds)
        return
    global SCHEDULE
    SCHEDULE = args.schedule
    if args.check:
        check()      # 512^3: one k slice (epilogue per tile)
        check(1024)  # two k slices (C accumulated across them)
        check_transformer()
        return
    if args.transformer:
        transformer_table(args.threads)
        return
    from common import banner, ingot_median_seconds, load_average, markdown_table
    from peak_fma import peak_gflops

    from ingot.target import Target

    banner("fp32 GEMM: Ingot schedule vs numpy/OpenBLAS")
    check()
    from ingot.cpu_model import host_cpu

    print(f"host: {host_cpu().describe()}; target: {TARGET} ({Target(TARGET).cpu.isa})")
    peaks = {t: peak_gflops(t, target=TARGET) for t in (1, 2)}
    rows = []
    for n in args.sizes:
        rng = np.random.default_rng(0)
        a = rng.random((n, n), dtype="float32")
        b = rng.random((n, n), dtype="float32")
        c = np.zeros((n, n), "float32")
        for threads in (1, 2):
            _, lib = build(n, threads)
            lib["main"](a, b, c)
            np.testing.assert_allclose(c, a @ b, rtol=1e-3)
            t = ingot_median_seconds(lib, "main", (a, b, c), repeat=9, min_repeat_ms=100)
            g = 2 * n**3 / t / 1e9
            np_default = numpy_gflops(n, threads, None)
            # OpenBLAS's AVX-512 kernels only where the host has AVX-512 (elsewhere: SIGILL)
            np_skx = numpy_gflops(n, threads, "SkylakeX") if host_cpu().has("avx512f") else float("nan")
            best = max(np_default, np_skx) if np_skx == np_skx else np_default
            rows.append([n, threads, f"{g:.1f}", f"{g / peaks[threads]:.2f}", f"{np_default:.1f}",
                         f"{np_skx:.1f}", f"{g / best:.2f}"])
            print(f"  {n} x {threads} thread(s): {g:.1f} GFLOP/s", flush=True)
    print()
    print(f"peak FMA of {TARGET}: {peaks[1]:.1f} GFLOP/s (1 thread), {peaks[2]:.1f} (2 threads)")
    print(markdown_table(["n", "threads", "Ingot GFLOP/s", "of peak", "numpy default", "numpy SkylakeX",
                          "Ingot / best numpy"], rows))
    print(f"load average after: {load_average()}")


if __name__ == "__main__":
    main()
