"""`BlockedGemm`: the tunable cache-blocked GEMM branches of the default space (no timing asserts)."""
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(__file__))
from tune_workloads import matmul_func  # noqa: E402

import ingot  # noqa: E402
from ingot.tune.mutator import MutateTileSize  # noqa: E402
from ingot.tune.schedule_rule.blocked_gemm import MARK, SEEDED  # noqa: E402
from ingot.tune.tune_context import TuneContext  # noqa: E402

TARGET = "llvm -num-cores=2"
N = 256   # the smallest size the blocked rule takes (blocked.is_large_gemm)


def _ctx(seed=0):
    ctx = TuneContext(matmul_func(N, N, N), TARGET, seed=seed)
    spaces = ctx.generate_design_space()
    ctx.search_strategy.pre_tuning(ctx, spaces, None, None)
    return ctx, spaces


def _is_blocked(sch):
    return any(i.kind.name == "annotate" and len(i.inputs) >= 2 and i.inputs[1] == MARK for i in sch.trace.insts)


def _check(sch, a, b):
    lib = ingot.build(sch.mod, target=TARGET)
    c = np.zeros((N, N), "float32")
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)


def test_space_has_blocked_branches_beside_multi_level_tiling():
    _, spaces = _ctx()
    blocked = [s for s in spaces if _is_blocked(s)]
    tiled = [s for s in spaces if "meta_schedule.tiling_structure" in str(s.trace)]
    assert len(blocked) >= 2 and tiled
    # tile sizes are decisions: the row blocks and the k split of every blocked branch
    for s in blocked:
        assert sum(i.kind.name == "sample_perfect_tile" for i in s.trace.insts) == 2
    # a small matmul gets no blocked branch (the register-tiled rules are as fast there)
    small = TuneContext(matmul_func(64, 64, 64), TARGET).generate_design_space()
    assert not any(_is_blocked(s) for s in small)


def test_blocked_samples_mutants_and_seed_are_correct():
    ctx, _ = _ctx(seed=1)
    st = ctx.search_strategy
    rng = np.random.default_rng(0)
    a, b = rng.random((N, N), dtype="float32"), rng.random((N, N), dtype="float32")
    # the first round measures the default schedule and the seeded blocked branch as generated
    first = st.take_fixed_candidates()
    assert len(first) == 2 and any(SEEDED in str(c.sch.trace) for c in first)
    samples = [c for c in st.sample_random(12, set()) if _is_blocked(c.sch)][:2]
    assert samples
    mutants = []
    for c in samples:
        trace = MutateTileSize().apply(c.sch.trace.simplified(remove_postproc=True), np.random.default_rng(3))
        child = st.replay(trace)
        if child is not None:
            mutants.append(child)
    assert mutants
    for cand in first + samples + mutants[:1]:
        _check(cand.sch, a, b)
