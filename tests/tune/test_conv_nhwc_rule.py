"""`NhwcConv`: the tunable register-tiled NHWC conv branches of the default space, built by
conv_nhwc.py's public builder (the fused conv + bias (+ residual) + relu kernels the graph hands
over; no timing asserts)."""

import numpy as np

from ingot.testing.kernels import matmul_func  # noqa: E402

import ingot  # noqa: E402
from ingot import ops, te  # noqa: E402
from ingot.ops import packed  # noqa: E402
from ingot.ops.schedule import schedule_blocks  # noqa: E402
from ingot.target import Target  # noqa: E402
from ingot.tir.schedule import Schedule  # noqa: E402
from ingot.tune.mutator import MutateTileSize  # noqa: E402
from ingot.tune.schedule_rule.conv_nhwc import MARK, SEEDED, NhwcConv  # noqa: E402
from ingot.tune.tune_context import TuneContext  # noqa: E402

#: The design spaces are the ones of an AVX-512 CPU (32 registers, 48 KiB L1d: the tiles these tests
#: spell out); the schedules are built and run for the host (16-lane code runs on an AVX2 host too).
TARGET = "llvm -mcpu=sapphirerapids -num-cores=2"
HOST = "llvm -num-cores=2"
PANEL = 32


def conv_func(c, hw, o, k, residual=True):
    """relu(conv2d_nhwc_packed_weight(x, w) + bias (+ res)), stride 1, same padding."""
    x = te.placeholder((1, hw, hw, c), name="x")
    w = te.placeholder((o // PANEL, k, k, c, PANEL), name="w")
    b = te.placeholder((o,), name="bias")
    conv = packed.conv2d_nhwc_packed_weight(x, w, strides=1, padding=k // 2)
    y = ops.add(conv, b)
    args = [x, w, b]
    if residual:
        r = te.placeholder(tuple(int(d) for d in conv.shape), name="res")
        y = ops.add(y, r)
        args.append(r)
    return te.create_prim_func(args + [ops.relu(y)])


def _reference(x, w, b, r, k):
    """numpy NHWC conv (HWIO weights) + bias + residual, relu."""
    p = k // 2
    xp = np.pad(x, ((0, 0), (p, p), (p, p), (0, 0)))
    hw = x.shape[1]
    y = np.zeros((1, hw, hw, w.shape[3]), "float64")
    for ky in range(k):
        for kx in range(k):
            y += np.einsum("nhwc,co->nhwo", xp[:, ky:ky + hw, kx:kx + hw, :], w[ky, kx])
    return np.maximum(y + b + r, 0).astype("float32")


def _ctx(func, seed=0):
    ctx = TuneContext(func, TARGET, seed=seed)
    spaces = ctx.generate_design_space()
    ctx.search_strategy.pre_tuning(ctx, spaces, None, None)
    return ctx, spaces


def _annotated(sch, key):
    return any(i.kind.name == "annotate" and len(i.inputs) >= 2 and i.inputs[1] == key for i in sch.trace.insts)


def _tiles(sch):
    return [tuple(sch.trace.decisions[i]) for i in sch.trace.insts if i.kind.name == "sample_perfect_tile"]


def _lowered(mod):
    return ingot.lower(mod).script()


def _check(sch, c, hw, o, k):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, hw, hw, c)).astype("float32")
    w = rng.standard_normal((k, k, c, o)).astype("float32")
    b = rng.standard_normal(o).astype("float32")
    r = rng.standard_normal((1, hw, hw, o)).astype("float32")
    out = np.zeros((1, hw, hw, o), "float32")
    ingot.build(sch.mod, target=HOST)["main"](x, packed.pack_conv2d_nhwc_weight(w, PANEL), b, r, out)
    np.testing.assert_allclose(out, _reference(x, w, b, r, k), rtol=1e-4, atol=1e-3)


def test_space_has_seeded_branches_and_the_default_is_one_of_them():
    # a big 3x3 panel (C = 160: sliced by 32 channels) and a small one (C = 16: whole reduction)
    for c, kc in ((160, 32), (16, 0)):
        func = conv_func(c, 14, 64, 3)
        _, spaces = _ctx(func)
        convs = [s for s in spaces if _annotated(s, MARK)]
        assert 2 <= len(convs) <= NhwcConv().max_branches
        assert all(_annotated(s, SEEDED) for s in convs)
        assert any("meta_schedule.tiling_structure" in str(s.trace) for s in spaces)  # MLT still there
        # the first branch is the rule-based default, decisions and all: it lowers to the same code
        default = schedule_blocks(Schedule(func), Target(TARGET))
        assert _lowered(convs[0].mod) == _lowered(default.mod)
        tiles = _tiles(convs[0])
        # OW -> (tiles, MR): 14 x 2 vectors when sliced, else 7 x 2; the channel split
        assert tiles == ([(1, 14), (c // kc, kc // 2, 2)] if kc else [(2, 7), (c // 4, 4)])
        # the other structures (the other loop order, the other slicing) are different programs
        assert len({_lowered(s.mod) for s in convs}) == len(convs)


def test_rule_leaves_non_convs_alone():
    ctx = TuneContext(matmul_func(64, 64, 64), TARGET)
    assert not any(_annotated(s, MARK) for s in ctx.generate_design_space())
    sch = Schedule(matmul_func(64, 64, 64))
    rule = NhwcConv()
    rule.initialize_with_tune_context(ctx)
    block = sch.get_block(next(b for b in sch.state.blocks("main") if b != "root"))
    assert rule.apply(sch, block) == [sch]


def test_seeds_mutants_and_samples_replay_and_match_numpy():
    c, hw, o, k = 64, 14, 64, 3
    ctx, _ = _ctx(conv_func(c, hw, o, k), seed=1)
    st = ctx.search_strategy
    # round 1 measures the default schedule and every seeded conv branch as generated
    first = st.take_fixed_candidates()
    seeded = [cand for cand in first if _annotated(cand.sch, SEEDED)]
    assert len(seeded) >= 2 and len(first) == len(seeded) + 1
    # mutating a seeded branch's tile decisions gives new, valid conv schedules
    mutants, seen = [], {tuple(_tiles(seeded[0].sch))}
    trace = seeded[0].sch.trace.simplified(remove_postproc=True)
    for s in range(16):
        child = st.replay(MutateTileSize().apply(trace, np.random.default_rng(s)))
        if child is not None and tuple(_tiles(child.sch)) not in seen:
            seen.add(tuple(_tiles(child.sch)))
            mutants.append(child)
    assert len(mutants) >= 2
    samples = [cand for cand in st.sample_random(12, set()) if _annotated(cand.sch, MARK)][:1]
    for cand in seeded[1:] + mutants[:2] + samples:
        _check(cand.sch, c, hw, o, k)


def test_model_conv_tasks_get_the_rule_with_the_default_seeded():
    # the fused conv + bias (+ residual) + relu kernels a small ResNet's build produces
    torch = __import__("pytest").importorskip("torch")
    from ingot.testing.architectures import ResNet

    from ingot.tune import extract_tasks

    model = ingot.load(ResNet(layers=(1,), base=8, classes=4).eval(), example_inputs=(torch.randn(1, 3, 32, 32),))
    convs = [t for t in extract_tasks(model, TARGET) if t.name.startswith("fused_conv2d")]
    assert len(convs) >= 3
    for task in convs:
        func = task.mod["main"]
        branches = [s for s in TuneContext(func, TARGET).generate_design_space() if _annotated(s, MARK)]
        assert branches, task.name
        default = schedule_blocks(Schedule(func), Target(TARGET))
        assert _lowered(branches[0].mod) == _lowered(default.mod), task.name
