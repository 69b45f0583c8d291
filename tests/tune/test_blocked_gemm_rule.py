"""`BlockedGemm`: the tunable cache-blocked GEMM branches of the default space, built by
blocked.py's public builder (no timing asserts)."""

import numpy as np

from ingot.testing.kernels import matmul_func  # noqa: E402

import ingot  # noqa: E402
from ingot.ops.schedule import schedule_blocks  # noqa: E402
from ingot.target import Target  # noqa: E402
from ingot.tir.schedule import Schedule  # noqa: E402
from ingot.tune.mutator import MutateTileSize  # noqa: E402
from ingot.tune.schedule_rule.blocked_gemm import MARK, SEEDED, BlockedGemm  # noqa: E402
from ingot.tune.tune_context import TuneContext  # noqa: E402

#: The design spaces are the ones of an AVX-512 CPU (32 registers, 48 KiB L1d: the tiles these tests
#: spell out); the schedules are built and run for the host (16-lane code runs on an AVX2 host too).
TARGET = "llvm -mcpu=sapphirerapids -num-cores=2"
HOST = "llvm -num-cores=2"
N = 256   # the smallest size the blocked rule takes (blocked.is_large_gemm)


def _ctx(seed=0, shape=(N, N, N)):
    ctx = TuneContext(matmul_func(*shape), TARGET, seed=seed)
    spaces = ctx.generate_design_space()
    ctx.search_strategy.pre_tuning(ctx, spaces, None, None)
    return ctx, spaces


def _annotated(sch, key):
    return any(i.kind.name == "annotate" and len(i.inputs) >= 2 and i.inputs[1] == key for i in sch.trace.insts)


def _branch(sch):
    """The "<order> <MR>x<NVEC>" value of the block's BlockedGemm annotation."""
    return next(i.inputs[2] for i in sch.trace.insts if i.kind.name == "annotate" and i.inputs[1] == MARK)


def _tiles(sch):
    """The sample_perfect_tile decisions of a trace, in order: [(ic, ir), (kc, ko, ki)]."""
    return [tuple(sch.trace.decisions[i]) for i in sch.trace.insts if i.kind.name == "sample_perfect_tile"]


def _nest(sch, block):
    """(extent, kind) of the loops from the root to ``block``."""
    return [(int(sch.get(lp).extent), sch.get(lp).kind) for lp in sch.get_loops(sch.get_block(block))]


def _check(sch, a, b):
    lib = ingot.build(sch.mod, target=HOST)
    c = np.zeros((a.shape[0], b.shape[1]), "float32")
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-3)


def test_space_has_seeded_panel_branch_and_other_orders():
    _, spaces = _ctx()
    blocked = [s for s in spaces if _annotated(s, MARK)]
    tiled = [s for s in spaces if "meta_schedule.tiling_structure" in str(s.trace)]
    assert tiled
    # panel order for each fitting (MR, NVEC) tile (default first) + block + slice orders
    rule = BlockedGemm()
    assert len(blocked) == len(rule._fitting_tiles(_info(), Target(TARGET).cpu, (8, 2))) + 2
    seeded = [s for s in blocked if _annotated(s, SEEDED)]
    assert len(seeded) == 1
    branches = [_branch(s) for s in blocked]
    assert branches[0] == "panel 8x2" and _branch(seeded[0]) == "panel 8x2"
    assert branches[-2:] == ["block 8x2", "slice 8x2"]
    # the default's decisions: MC = 128 = 16 x MR rows, one 256-deep slice of 64 x 4 unrolled steps
    assert _tiles(seeded[0]) == [(2, 16), (1, 64, 4)]
    for s in blocked:
        assert len(_tiles(s)) == 2   # the row blocks and the k split are decisions
    # a small matmul gets no blocked branch (the register-tiled rules are as fast there): only
    # SmallGemm's "small <MR>x<NVEC>" branches carry the mark
    small = TuneContext(matmul_func(64, 64, 64), TARGET).generate_design_space()
    assert all(_branch(s).startswith("small ") for s in small if _annotated(s, MARK))


def _info():
    from ingot.ops.schedule.analysis import analyze_block

    sch = Schedule(matmul_func(N, N, N))
    name = next(b for b in sch.state.blocks("main") if b != "root")
    return analyze_block(sch, sch.get_block(name))


def test_seeded_branch_is_the_default_loop_nest():
    # two k slices (K = 1024, KC = 512): the seeded branch is the default's nest, loop for loop
    shape = (128, 128, 1024)
    _, spaces = _ctx(shape=shape)
    seeded = next(s for s in spaces if _annotated(s, SEEDED))
    default = schedule_blocks(Schedule(matmul_func(*shape)), Target(TARGET))
    name = next(b for b in default.state.blocks("main") if b not in ("root",) and not b.endswith(("_global", "_init")))
    assert _nest(seeded, name) == _nest(default, name)
    assert sorted(seeded.state.blocks("main")) == sorted(default.state.blocks("main"))


def test_seed_samples_and_mutants_replay_and_match_numpy():
    ctx, _ = _ctx(seed=1)
    st = ctx.search_strategy
    rng = np.random.default_rng(0)
    a, b = rng.random((N, N), dtype="float32"), rng.random((N, N), dtype="float32")
    # the first round measures the default schedule and the seeded blocked branch as generated
    first = st.take_fixed_candidates()
    assert len(first) == 2 and any(SEEDED in str(c.sch.trace) for c in first)
    seeded = next(c for c in first if SEEDED in str(c.sch.trace))
    # mutating the seeded branch's tile decisions gives new, valid panel-order schedules
    mutants, seen = [], {tuple(_tiles(seeded.sch))}
    trace = seeded.sch.trace.simplified(remove_postproc=True)
    for s in range(12):
        child = st.replay(MutateTileSize().apply(trace, np.random.default_rng(s)))
        if child is not None and tuple(_tiles(child.sch)) not in seen:
            seen.add(tuple(_tiles(child.sch)))
            mutants.append(child)
    assert len(mutants) >= 2
    samples = [c for c in st.sample_random(12, set()) if _annotated(c.sch, MARK)][:1]
    assert samples
    for cand in first + mutants[:2] + samples:
        _check(cand.sch, a, b)


def test_seeded_branch_fuses_the_epilogue_without_nested_parallel():
    from ingot import ops, te

    A, B = te.placeholder((N, N), name="A"), te.placeholder((N, N), name="B")
    bias = te.placeholder((N,), name="bias")
    C = ops.relu(ops.add(ops.matmul(A, B), bias))
    ctx = TuneContext(te.create_prim_func([A, B, bias, C]), TARGET, seed=0)
    ctx.search_strategy.pre_tuning(ctx, ctx.generate_design_space(), None, None)
    seeded = next(c for c in ctx.search_strategy.take_fixed_candidates() if SEEDED in str(c.sch.trace))
    text = seeded.sch.mod["main"].script()
    assert text.count("T.parallel") == 1   # the consumers run inside the panel loop's region
    rng = np.random.default_rng(0)
    a, b, bb = (rng.standard_normal(s).astype("float32") for s in ((N, N), (N, N), (N,)))
    out = np.zeros((N, N), "float32")
    ingot.build(seeded.sch.mod, target=HOST)["main"](a, b, bb, out)
    np.testing.assert_allclose(out, np.maximum(a @ b + bb, 0), rtol=1e-4, atol=1e-3)
