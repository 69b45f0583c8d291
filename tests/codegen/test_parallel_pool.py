"""Parallel loops on the prelude's thread pool (`ingot_parallel_for`): the same numbers as one
thread and as OpenMP, any thread count, several callers at once, a forked child, failures inside
the loop body."""
from __future__ import annotations

import multiprocessing as mp
import threading

import numpy as np
import pytest

import ingot
from ingot import te
from ingot.codegen.c.printer import PARALLEL_RUNTIME_CONFIG
from ingot.ir.transform import PassContext
from ingot.ops.schedule import default_schedule

TARGET = "llvm -num-cores=2"
N = 384  # a parallel nest well above PARALLEL_MIN_STORES: it goes to the pool


def _matmul_func(n=N):
    a = te.placeholder((n, n), name="A")
    b = te.placeholder((n, n), name="B")
    k = te.reduce_axis((0, n), name="k")
    c = te.compute((n, n), lambda i, j: te.sum(a[i, k] * b[k, j], axis=k), name="C")
    return default_schedule(te.create_prim_func([a, b, c]), TARGET)


def _build(runtime="pool", n=N):
    with PassContext(config={PARALLEL_RUNTIME_CONFIG: runtime}):
        return ingot.build(_matmul_func(n), TARGET)


@pytest.fixture(scope="module")
def pooled():
    return _build("pool")


def _inputs(seed):
    rng = np.random.default_rng(seed)
    return rng.standard_normal((N, N)).astype("float32"), rng.standard_normal((N, N)).astype("float32")


def _call(lib, a, b):
    c = np.full((N, N), np.nan, "float32")
    lib["main"](a, b, c)
    return c


def test_pool_is_the_default_and_openmp_is_an_option(pooled):
    assert "ingot_parallel_for((int64_t)" in pooled.get_source()
    assert "#pragma omp parallel for" not in pooled.get_source()
    assert "#pragma omp parallel for" in _build("openmp").get_source()
    with pytest.raises(ingot.codegen.c.printer.CodegenError, match="'pool' or 'openmp'"):
        _build("tbb")


@pytest.mark.parametrize("threads", [1, 2, 3, 8])
def test_any_thread_count_gives_the_same_numbers(pooled, threads):
    a, b = _inputs(0)
    pooled.set_num_threads(threads)
    try:
        np.testing.assert_allclose(_call(pooled, a, b), a @ b, rtol=1e-4, atol=1e-3)
    finally:
        pooled.set_num_threads(2)


def test_callers_on_several_threads_get_their_own_results(pooled):
    # One caller owns the pool at a time; the others run their loop on their own thread.
    inputs = [_inputs(s) for s in range(4)]
    expected = [a @ b for a, b in inputs]
    wrong = []

    def worker(t):
        for _ in range(5):
            a, b = inputs[t]
            if not np.allclose(_call(pooled, a, b), expected[t], rtol=1e-4, atol=1e-3):
                wrong.append(t)

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert wrong == []


def _child(lib, queue):
    a, b = _inputs(1)
    queue.put(float(np.max(np.abs(_call(lib, a, b) - a @ b))))


def test_a_forked_child_starts_its_own_workers(pooled):
    a, b = _inputs(1)
    _call(pooled, a, b)  # the parent's workers exist now; the child must not wait for them
    ctx = mp.get_context("fork")
    queue = ctx.Queue()
    child = ctx.Process(target=_child, args=(pooled, queue))
    child.start()
    child.join(timeout=60)
    assert child.exitcode == 0
    assert queue.get(timeout=5) < 1e-2


def test_a_failure_inside_the_loop_body_reaches_the_caller():
    # An assertion on the data inside a pooled loop (2^18 stores): whichever thread hits it, the
    # kernel returns the failure and the runtime raises it; the next call works again.
    from ingot import tir
    from ingot.ir import Var, decl_buffer
    from ingot.runtime.errors import KernelError
    from ingot.tir import BufferStore, For, ForKind, PrimFunc

    rows, cols = 512, 512
    A = decl_buffer((rows, cols), "float32", "A")
    B = decl_buffer((rows, cols), "float32", "B")
    i, j = Var("i"), Var("j")
    body = For(j, 0, cols, ForKind.SERIAL,
               tir.AssertStmt(A[i, j] >= 0.0, "A must be non-negative", BufferStore(B, A[i, j] * 2.0, [i, j])))
    func = PrimFunc([A, B], For(i, 0, rows, ForKind.PARALLEL, body)).with_attr("global_symbol", "main")
    lib = ingot.build(func, TARGET)
    assert "ingot_parallel_for((int64_t)" in lib.get_source()
    a = np.ones((rows, cols), "float32")
    b = np.zeros_like(a)
    lib["main"](a, b)
    np.testing.assert_array_equal(b, 2 * a)
    a[rows - 1, 7] = -1.0  # in the last chunk: the worker's, when it runs
    with pytest.raises(KernelError, match="A must be non-negative"):
        lib["main"](a, b)
    a[rows - 1, 7] = 1.0
    lib["main"](a, b)
    np.testing.assert_array_equal(b, 2 * a)


def test_idle_workers_leave_and_come_back(pooled):
    # A library no longer called gives its threads back (a tuning run loads hundreds of libraries);
    # the next parallel loop starts a worker again.
    import os
    import time

    def threads():
        return len(os.listdir("/proc/self/task"))

    a, b = _inputs(2)
    _call(pooled, a, b)
    busy = threads()
    deadline = time.monotonic() + 10
    while threads() >= busy and time.monotonic() < deadline:
        time.sleep(0.25)
    assert threads() < busy
    np.testing.assert_allclose(_call(pooled, a, b), a @ b, rtol=1e-4, atol=1e-3)


_STRESS_C = r"""
#include <time.h>
typedef struct { _Atomic int32_t* hits; int64_t slow_every; } stress_ctx_t;

static int32_t stress_task(void* arg, int64_t i) {
  stress_ctx_t* ctx = (stress_ctx_t*)arg;
  if (ctx->slow_every > 0 && i % ctx->slow_every == 0) {
    struct timespec pause = {0, 200000};  /* 0.2 ms: a thread the OS took the core from */
    nanosleep(&pause, NULL);
  }
  atomic_fetch_add(&ctx->hits[i], 1);
  return 0;
}

/* Runs `rounds` loops of n tasks each on `threads` threads; every task adds 1 to its hits[i]. */
INGOT_EXPORT int32_t stress(int64_t n, int32_t threads, int32_t rounds, int32_t* hits, int64_t slow_every) {
  ingot_set_num_threads(threads);
  stress_ctx_t ctx = {(_Atomic int32_t*)hits, slow_every};
  int32_t fail = 0;
  for (int32_t r = 0; r < rounds; ++r) fail |= ingot_parallel_for(0, n, stress_task, &ctx);
  return fail;
}
"""


@pytest.fixture(scope="module")
def stress_lib():
    import ctypes

    from ingot.codegen.prelude import C_PRELUDE
    from ingot.codegen.toolchain import compile_shared_library

    lib = ctypes.CDLL(compile_shared_library(C_PRELUDE + _STRESS_C))
    lib.stress.argtypes = [ctypes.c_int64, ctypes.c_int32, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64]
    lib.stress.restype = ctypes.c_int32
    return lib


@pytest.mark.parametrize("threads", [2, 3, 8])
@pytest.mark.parametrize("slow_every", [0, 5])
def test_every_task_runs_once_while_threads_steal(stress_lib, threads, slow_every):
    # Slow tasks (every 5th sleeps, as if its thread lost the core) make the other threads steal from
    # the back of the slow thread's slot; whatever the interleaving, each index runs exactly once per loop.
    for n in (1, 2, 7, 64, 1000):
        rounds = 20 if slow_every else 200
        hits = np.zeros(n, "int32")
        assert stress_lib.stress(n, threads, rounds, hits.ctypes.data, slow_every) == 0
        np.testing.assert_array_equal(hits, np.full(n, rounds, "int32"), err_msg=f"n={n}")


def test_loops_of_different_team_sizes_follow_each_other(stress_lib):
    # A loop on 8 threads leaves workers whose last slot index is past the next loop's slots: they
    # must only steal from the 2-thread loop that follows, never count into a slot it does not have.
    for _ in range(30):
        for threads, n in ((8, 500), (2, 33), (5, 7), (1, 10)):
            hits = np.zeros(n, "int32")
            assert stress_lib.stress(n, threads, 3, hits.ctypes.data, 0) == 0
            np.testing.assert_array_equal(hits, np.full(n, 3, "int32"), err_msg=f"{threads} threads, n={n}")


# ------------------------------------------------------------------ adaptive team
_ADAPT_C = r"""
#include <time.h>
/* The thread that calls ingot_parallel_for; tasks run by a worker may sleep, as a thread whose core a
 * busy process took in the middle of a task. */
static _Thread_local int adapt_is_caller;
typedef struct { _Atomic int32_t* hits; int64_t worker_sleep_ns; } adapt_ctx_t;

static void adapt_spin(int64_t ns) {
  int64_t end = ingot_pool_now_ns() + ns;
  while (ingot_pool_now_ns() < end) {}
}

static int32_t adapt_task(void* arg, int64_t i) {
  adapt_ctx_t* ctx = (adapt_ctx_t*)arg;
  adapt_spin(20000); /* 20 us of work: the worker joins every loop */
  if (!adapt_is_caller && ctx->worker_sleep_ns > 0) {
    struct timespec pause = {0, (long)ctx->worker_sleep_ns};
    nanosleep(&pause, NULL);
  }
  atomic_fetch_add(&ctx->hits[i], 1);
  return 0;
}

/* `rounds` loops of n tasks on 2 threads, the worker's tasks sleeping in every `sleep_every`-th loop;
 * every task adds 1 to its hits[i]. */
INGOT_EXPORT int32_t adapt(int64_t n, int32_t rounds, int32_t* hits, int64_t worker_sleep_ns,
                           int32_t sleep_every) {
  adapt_is_caller = 1;
  ingot_set_num_threads(2);
  adapt_ctx_t ctx = {(_Atomic int32_t*)hits, 0};
  int32_t fail = 0;
  for (int32_t r = 0; r < rounds; ++r) {
    ctx.worker_sleep_ns = (sleep_every <= 1 || r % sleep_every == sleep_every - 1) ? worker_sleep_ns : 0;
    fail |= ingot_parallel_for(0, n, adapt_task, &ctx);
  }
  return fail;
}
"""


def _adapt_lib(tag):
    import ctypes

    from ingot.codegen.prelude import C_PRELUDE
    from ingot.codegen.toolchain import compile_shared_library

    # One library per test (its own pool and adaptive state): the tag makes the sources differ.
    lib = ctypes.CDLL(compile_shared_library(C_PRELUDE + f"/* {tag} */\n" + _ADAPT_C))
    lib.adapt.argtypes = [ctypes.c_int64, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int64, ctypes.c_int32]
    lib.adapt.restype = ctypes.c_int32
    lib.ingot_set_adaptive_team.argtypes = [ctypes.c_int32]
    lib.ingot_set_adaptive_team.restype = ctypes.c_int32
    lib.ingot_pool_counters.argtypes = [ctypes.c_void_p, ctypes.c_int32]
    lib.ingot_pool_counters.restype = ctypes.c_int32
    return lib


def _counters(lib):
    out = np.zeros(6, "int64")
    assert lib.ingot_pool_counters(out.ctypes.data, 6) == 6
    return dict(zip(("loops", "late", "capped", "probes", "late_wait_ns", "cap"), out.tolist()))


def _run_adapt(lib, rounds, worker_sleep_ns, n=64, sleep_every=1):
    hits = np.zeros(n, "int32")
    assert lib.adapt(n, rounds, hits.ctypes.data, worker_sleep_ns, sleep_every) == 0
    np.testing.assert_array_equal(hits, np.full(n, rounds, "int32"))


def test_late_joins_shrink_the_team_and_a_probe_restores_it():
    import time

    lib = _adapt_lib("shrink")
    # Step 1: a worker that loses 2 ms in each task (its core busy): joins are late, the team shrinks
    # to the caller alone, and later loops run without the worker (every task still runs once).
    _run_adapt(lib, 40, 2_000_000)
    c = _counters(lib)
    assert c["late"] >= 2 and c["cap"] == 1 and c["capped"] > 0, c
    # Step 2: the core is free again: after the hold a probe runs the full team, on time, and the cap goes.
    # (Others share a test machine: a probe may come back late and double the hold; wait it out.)
    deadline = time.monotonic() + 30
    while _counters(lib)["cap"] != 0 and time.monotonic() < deadline:
        _run_adapt(lib, 5, 0)
        time.sleep(0.005)
    c = _counters(lib)
    assert c["cap"] == 0 and c["probes"] >= 1, c


def test_a_late_join_now_and_then_keeps_a_team_that_pays_for_it():
    # The worker loses 1 ms in one loop of 40 (a worker that preempts a busy process for its short loops
    # and is caught now and then): each late join costs less than the team saves in the loops around
    # it (about half of each 1.3 ms loop), so the team stays whole.
    lib = _adapt_lib("pays")
    _run_adapt(lib, 160, 1_000_000, sleep_every=40)
    c = _counters(lib)
    assert c["late"] >= 1 and c["capped"] == 0 and c["cap"] == 0, c


def test_without_the_adaptive_team_every_loop_runs_on_the_full_team():
    lib = _adapt_lib("fixed")
    assert lib.ingot_set_adaptive_team(0) == 1  # on by default
    _run_adapt(lib, 30, 2_000_000)
    c = _counters(lib)
    assert c["capped"] == 0 and c["probes"] == 0 and c["cap"] == 0 and c["loops"] == 30, c
    assert c["late"] >= 2 and c["late_wait_ns"] > c["late"] * 200_000, c  # counted with the adaptive team off too
    assert lib.ingot_set_adaptive_team(1) == 0
    _run_adapt(lib, 30, 2_000_000)
    assert _counters(lib)["capped"] > 0


def test_module_switches_the_adaptive_team(pooled):
    a, b = _inputs(3)
    assert pooled.set_adaptive_team(False) is True
    try:
        before = pooled.pool_counters()
        np.testing.assert_allclose(_call(pooled, a, b), a @ b, rtol=1e-4, atol=1e-3)
        after = pooled.pool_counters()
        assert after["loops"] == before["loops"] + 1 and after["capped"] == before["capped"], (before, after)
    finally:
        assert pooled.set_adaptive_team(True) is False
    with pytest.raises(TypeError, match="True or False"):
        pooled.set_adaptive_team(1)


_TSAN_MAIN = r"""
int main(void) {
  static int32_t hits[1000];
  /* Stealing under every team size, with slow tasks, then the adaptive team shrinking and probing. */
  for (int32_t threads = 2; threads <= 8; threads *= 2) {
    for (int64_t n = 1; n <= 1000; n *= 7) {
      memset(hits, 0, sizeof(hits));
      if (stress(n, threads, 20, hits, 5) != 0) return 2;
      for (int64_t i = 0; i < n; ++i)
        if (hits[i] != 20) { printf("stress: hits[%ld] = %d\n", (long)i, hits[i]); return 3; }
    }
  }
  memset(hits, 0, sizeof(hits));
  if (adapt(64, 40, hits, 2000000, 1) != 0 || adapt(64, 200, hits, 0, 1) != 0) return 4;
  for (int i = 0; i < 64; ++i) if (hits[i] != 240) { printf("adapt: hits[%d] = %d\n", i, hits[i]); return 5; }
  printf("ok\n");
  return 0;
}
"""


def test_the_pool_is_free_of_data_races_under_thread_sanitizer(tmp_path):
    # ThreadSanitizer watches every memory access of the pool while tasks are stolen, teams change
    # size, and the adaptive team shrinks and probes; a race report (or a lost task) fails the test.
    import subprocess

    from ingot.codegen.prelude import C_PRELUDE
    from ingot.codegen.toolchain import find_compiler

    src = tmp_path / "pool_tsan.c"
    src.write_text(C_PRELUDE + _STRESS_C + _ADAPT_C + _TSAN_MAIN)
    exe = tmp_path / "pool_tsan"
    cc = find_compiler()
    built = subprocess.run(cc + ["-O1", "-g", "-fsanitize=thread", "-pthread", str(src), "-o", str(exe), "-lm"],
                           capture_output=True, text=True)
    if built.returncode != 0:
        pytest.skip(f"the compiler cannot build with -fsanitize=thread here: {built.stderr[-300:]}")
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=300,
                         env={"TSAN_OPTIONS": "halt_on_error=1 exitcode=66"})
    assert "ThreadSanitizer" not in run.stderr, run.stderr[-4000:]
    assert run.returncode == 0 and run.stdout.strip().endswith("ok"), (run.returncode, run.stdout, run.stderr[-2000:])
