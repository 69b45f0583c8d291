"""Winograd F(m, 3) convolution: the transform matrices, the compile-time weight transform, the
kernel under the default schedule (numbers vs PyTorch, each stage scheduled by its own rule), and
PackWeights choosing it in a graph (numbers vs numpy, `graph.winograd` turning it off)."""
from __future__ import annotations

import numpy as np
import pytest

import ingot
from ingot import graph as G
from ingot import ops, te
from ingot.graph.transform import PackWeights
from ingot.ops import winograd as W
from ingot.ops.schedule import winograd as WS
from ingot.target import Target

from .schedule_testutil import TARGET, kernel_loop, run, schedule

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.compiler

RNG = np.random.default_rng(11)


def _rand(*shape, scale=1.0):
    return (RNG.standard_normal(shape) * scale).astype("float32")


def _torch_conv(x_nhwc, w_hwio, pad):
    with torch.no_grad():
        y = torch.nn.functional.conv2d(torch.from_numpy(x_nhwc).permute(0, 3, 1, 2),
                                       torch.from_numpy(w_hwio).permute(3, 2, 0, 1), padding=pad)
    return y.permute(0, 2, 3, 1).numpy()


@pytest.mark.parametrize("m", [2, 4])
def test_matrices_compute_the_correlation(m):
    at, g, bt = W.winograd_matrices(m)
    for _ in range(5):
        d, w = RNG.standard_normal(m + 2), RNG.standard_normal(3)
        np.testing.assert_allclose(at @ ((g @ w) * (bt @ d)), np.correlate(d, w, "valid"), rtol=1e-12, atol=1e-12)


def test_weight_transform_round_trips_and_checks_its_input():
    w = _rand(3, 3, 8, 32)
    u = W.transform_weight(w, 4, 16)
    assert u.shape == (36, 2, 8, 16) and u.dtype == np.float32
    np.testing.assert_allclose(W.untransform_weight(u), w, rtol=1e-5, atol=1e-5)
    with pytest.raises(ValueError, match="3x3 kernel"):
        W.transform_weight(_rand(5, 5, 8, 32), 4, 16)
    with pytest.raises(ValueError, match="not supported"):
        W.transform_weight(w, 6, 16)
    with pytest.raises(ValueError, match="panel width"):
        W.transform_weight(_rand(3, 3, 8, 24), 4, 16)


# (batch, size, in channels, out channels, tile, padding): whole tiles, a cropped last tile (9, 13),
# a valid conv (padding 0), a batch of 2; from 14 tiles per row (28, 29) the kernel runs per tile row
# (`winograd_tile_rows`), with a cropped last tile row/column and a batch of 2 at 29.
CASES = [(1, 8, 16, 32, 2, 1), (1, 9, 16, 16, 4, 1), (2, 13, 16, 32, 2, 1), (1, 10, 16, 16, 2, 0),
         (1, 28, 16, 32, 2, 1), (2, 29, 16, 16, 2, 1)]


@pytest.mark.parametrize("n,hw,c,o,m,pad", CASES)
def test_kernel_matches_pytorch_with_fused_epilogue(n, hw, c, o, m, pad):
    x, w, b = _rand(n, hw, hw, c), _rand(3, 3, c, o, scale=0.2), _rand(o)
    u = W.transform_weight(w, m, 16)
    X, U, B = te.placeholder(x.shape, name="x"), te.placeholder(u.shape, name="u"), te.placeholder((o,), name="b")
    conv = W.conv2d_nhwc_winograd(X, U, padding=pad)
    R = te.placeholder(tuple(int(d) for d in conv.shape), name="res")
    r = _rand(*R.shape)
    sch, picked = schedule([X, U, B, R, ops.relu(ops.add(ops.add(conv, B), R))])
    if -(-(hw + 2 * pad - 2) // m) >= WS.MIN_ROW_TILES:
        assert all(picked[f"winograd_{s}"] == "winograd_tile_rows" for s in ("input", "gemm", "output"))
        assert picked["conv2d_nhwc_winograd"] == "winograd_tile_rows"
    else:
        assert picked["winograd_input"] == "winograd_input" and picked["winograd_output"] == "winograd_output"
        assert picked["winograd_gemm"] is not None and picked["conv2d_nhwc_winograd"] == "winograd_epilogue"
    out = run(sch, [x, u, b, r], tuple(R.shape))
    expected = np.maximum(_torch_conv(x, w, pad) + b + r, 0)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())



@pytest.mark.parametrize("hw,min_row_tiles,expect", [(8, 1, "winograd_tile_rows"), (28, 10 ** 9, "winograd_epilogue")])
def test_schedule_policy_moves_the_tile_row_threshold(hw, min_row_tiles, expect):
    # WinogradSchedulePolicy (pass config): 4 tiles per row take tile rows under min_row_tiles=1, 14 do
    # not under a huge threshold; either schedule computes the same conv.
    from ingot.ir.transform import PassContext

    x, w, b = _rand(1, hw, hw, 16), _rand(3, 3, 16, 16, scale=0.2), _rand(16)
    u = W.transform_weight(w, 2, 16)
    X, U, B = te.placeholder(x.shape, name="x"), te.placeholder(u.shape, name="u"), te.placeholder((16,), name="b")
    policy = WS.WinogradSchedulePolicy(min_row_tiles=min_row_tiles)
    with PassContext(config={WS.WINOGRAD_POLICY_CONFIG: policy}):
        sch, picked = schedule([X, U, B, ops.relu(ops.add(W.conv2d_nhwc_winograd(X, U, padding=1), B))])
    assert picked["conv2d_nhwc_winograd"] == expect
    out = run(sch, [x, u, b], (1, hw, hw, 16))
    expected = np.maximum(_torch_conv(x, w, 1) + b, 0)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())

def test_kernel_rejects_what_it_cannot_compute():
    x = te.placeholder((1, 8, 8, 16), name="x")
    with pytest.raises(ValueError, match="α², O/P, 16, P"):
        W.conv2d_nhwc_winograd(x, te.placeholder((36, 1, 8, 16), name="u"))
    with pytest.raises(ValueError, match="not supported"):
        W.conv2d_nhwc_winograd(x, te.placeholder((64, 1, 16, 16), name="u"))


def test_choose_tile():
    assert W.choose_tile((56, 56), 64, 64, 16) == 4
    assert W.choose_tile((14, 14), 256, 256, 16) == 2
    assert W.choose_tile((7, 7), 512, 512, 16) is None
    assert W.choose_tile((56, 56), 3, 64, 16) is None      # channels not whole vectors
    assert W.choose_tile((56, 56), 16, 16, 16) is None     # too few channels to pay for the transforms


def _conv_graph(x_shape, w, stride=1):
    x = G.Var("x", G.TensorStructInfo(x_shape, "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit(G.op.conv2d(x, G.const(w), strides=stride, padding=1, data_layout="NHWC", kernel_layout="HWIO"))
        bb.emit_func_output(bb.emit(G.op.relu(y)))
    return bb.get()


def _ops(mod):
    return [b.value.op.name for b in mod["main"].body.blocks[0].bindings if hasattr(b.value.op, "name")]


def test_pack_weights_chooses_winograd_and_the_graph_runs():
    w = _rand(3, 3, 32, 32, scale=0.1)
    mod = _conv_graph((1, 14, 14, 32), w)
    assert "conv2d_nhwc_winograd" in _ops(PackWeights(panel=32, lanes=16)(mod))
    assert "conv2d_nhwc_packed_weight" in _ops(PackWeights(panel=32, lanes=16, winograd=False)(mod))
    # Stride 2 and small maps stay direct.
    assert "conv2d_nhwc_winograd" not in _ops(PackWeights(panel=32, lanes=16)(_conv_graph((1, 28, 28, 32), w, 2)))
    assert "conv2d_nhwc_winograd" not in _ops(PackWeights(panel=32, lanes=16)(_conv_graph((1, 7, 7, 32), w)))
    with ingot.transform.PassContext(config={"graph.winograd": False}):
        assert "conv2d_nhwc_winograd" not in _ops(PackWeights(panel=32, lanes=16)(mod))

    x = _rand(1, 14, 14, 32)
    exe = G.build(mod, "llvm -num-cores=2")
    assert "conv2d_nhwc_winograd" in str(exe.mod)
    expected = np.maximum(_torch_conv(x, w, 1), 0)
    np.testing.assert_allclose(G.Executor(exe)["main"](x).numpy(), expected, rtol=1e-4, atol=1e-5)


def test_tile_rows_keep_the_stage_buffers_per_row_and_log_no_type_errors():
    # 28x28 F(2,3): 14 tiles per row -> per-row V/M (aligned planes), the padded α×α tile per
    # (tile, channel vector) on the stack (CompactBufferAllocation sinks it through the row loop).
    x, u = te.placeholder((1, 28, 28, 16), name="x"), te.placeholder((16, 1, 16, 16), name="u")
    sch, picked = schedule([x, u, W.conv2d_nhwc_winograd(x, u)])
    assert picked["winograd_input"] == "winograd_tile_rows"
    sizes = {}

    class _Allocs(ingot.ir.functor.Visitor):
        def visit_Allocate(self, node):
            sizes[node.buffer.name] = int(node.buffer.shape[0])
            self.generic_visit(node)

    _Allocs().visit(ingot.lower(sch.mod)["main"].body)
    assert sizes["pad_temp"] == 4 * 4 * Target(TARGET).vector_lanes("float32")  # one channel vector
    # 16 planes of 14 tiles x 16 channels (224 floats), padded to 1040 (= 16 mod 1024: 4K aliasing).
    assert sizes["winograd_input"] == sizes["winograd_gemm"] == 15 * 1040 + 224
    # The stage-by-stage path (7 tiles per row) tries gemv_rule without the epilogue keyword.
    x = te.placeholder((1, 14, 14, 16), name="x")
    log: list = []
    from ingot.ops.schedule.default import schedule_blocks
    from ingot.tir.schedule import Schedule
    schedule_blocks(Schedule(te.create_prim_func([x, u, W.conv2d_nhwc_winograd(x, u)])), Target("llvm"), log=log)
    assert not any("unexpected keyword" in e for _, _, errs in log for e in errs or ())


def test_workspace_pool_off_switch_gives_the_same_numbers():
    # benchmarks/winograd.py measures kernels with the C prelude's workspace pool off by defining
    # INGOT_WS_POOL_MIN before the prelude; the stage-by-stage V/M here (16 x 64 tiles x 32 channels,
    # 128 KiB) are pooled blocks by default. Both builds, called repeatedly, match PyTorch.
    from ingot.codegen import build as B
    from ingot.codegen.toolchain import compile_shared_library
    from ingot.runtime.module import Module
    from ingot.target import as_target

    x, w = _rand(1, 14, 14, 32), _rand(3, 3, 32, 32, scale=0.2)
    u = W.transform_weight(w, 2, 16)
    X, U = te.placeholder(x.shape, name="x"), te.placeholder(u.shape, name="u")
    sch, picked = schedule([X, U, W.conv2d_nhwc_winograd(X, U)])
    assert picked["winograd_input"] == "winograd_input"  # stage by stage: whole-image V and M
    target = as_target("llvm -num-cores=2")
    code = B.generate_c(B._as_module(ingot.lower(sch.mod)), target).code
    assert "#ifndef INGOT_WS_POOL_MIN" in code
    expected = _torch_conv(x, w, 1)
    for source in (code, "#define INGOT_WS_POOL_MIN ((size_t)-1)\n" + code):
        lib = Module(compile_shared_library(source, B._options_for_source(target, source)), source=source)
        for _ in range(3):  # the second and third calls reuse (pool on) or re-allocate (off) V and M
            out = np.zeros(expected.shape, "float32")
            lib["main"](x, u, out)
            np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


@pytest.mark.parametrize("hw,m,separable", [(9, 4, False), (9, 4, True), (28, 2, False), (28, 4, True)])
def test_one_pass_and_separable_transforms_match_pytorch(hw, m, separable):
    # WinogradSchedulePolicy.separable forces either form of the transforms (the A/B switch of
    # benchmarks/winograd.py --transforms), stage by stage (9x9) and per tile row (28x28, F(2, 3)).
    from ingot.ir.transform import PassContext

    x, w, b = _rand(1, hw, hw, 16), _rand(3, 3, 16, 16, scale=0.2), _rand(16)
    u = W.transform_weight(w, m, 16)
    X, U, B = te.placeholder(x.shape, name="x"), te.placeholder(u.shape, name="u"), te.placeholder((16,), name="b")
    with PassContext(config={WS.WINOGRAD_POLICY_CONFIG: WS.WinogradSchedulePolicy(separable=separable)}):
        sch, picked = schedule([X, U, B, ops.relu(ops.add(W.conv2d_nhwc_winograd(X, U, padding=1), B))])
    rows = ("winograd_input_rows", "winograd_output_rows")
    if separable:
        assert not any(name in picked for name in rows)  # scheduled with their transforms
        assert all(name in sch.mod["main"].script() for name in rows)
    else:
        assert all(picked[name] == "winograd_one_pass" for name in rows)  # inlined
    out = run(sch, [x, u, b], (1, hw, hw, 16))
    expected = np.maximum(_torch_conv(x, w, 1) + b, 0)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-4 * np.abs(expected).max())


def _transform_loops(sch, target):
    """``{"input": report, "output": report}``: `hot_loop_report` of the functions that hold the
    input and the output transform (stage by stage, each stage is its own parallel function)."""
    import re

    from ingot.codegen import build as B
    from ingot.target import as_target

    lowered = ingot.lower(sch.mod)
    code = B.generate_c(B._as_module(lowered), as_target(target)).code
    params: dict = {}
    for f, p in re.findall(r"int32_t (ingot_kernel_main_par\d+)\(([^)]*)\)", code):
        params.setdefault(f, p)  # the definition, not the source text embedded in the module
    owner = {"input": next(f for f, p in params.items() if " x," in p and "winograd_input" in p),
             "output": next(f for f, p in params.items() if "winograd_gemm" in p and "winograd_output" in p)}
    functions, name = {}, None
    for line in B.module_assembly(lowered, target).splitlines():
        label = re.match(r"^([A-Za-z_][\w.]*):$", line)
        if label:
            name = label.group(1).split(".")[0]
        functions.setdefault(name, []).append(line)
    bits = Target(target).cpu.vector_bits
    return {stage: B.hot_loop_report("\n".join(functions[f]), bits) for stage, f in owner.items()}


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell -num-cores=2", "llvm -mcpu=sapphirerapids -num-cores=2"])
def test_separable_transforms_do_not_spill(target):
    # F(4, 3): the one-pass input transform keeps 36 partial sums live, more than AVX2's 16 and
    # AVX-512's 32 registers, and spilled (haswell: 164 vector stack accesses in its loop). The
    # two passes keep α values in and out: what is left on the stack is the local tiles, by design
    # (the padded α×α input tile read once, the first pass's α×α tile written and read once; the
    # output's α×m tile written and read once), so that traffic bounds the count. Compiled for the
    # target whatever the host (assembly only).
    alpha, m = 6, 4
    x, u = te.placeholder((1, 16, 16, 32), name="x"), te.placeholder((alpha * alpha, 2, 32, 16), name="u")
    sch, picked = schedule([x, u, W.conv2d_nhwc_winograd(x, u)], target)
    assert picked["winograd_input"] == "winograd_input"  # stage by stage: one function per stage
    loops = _transform_loops(sch, target)
    assert loops["input"]["fma"] > 0 and loops["output"]["fma"] > 0
    assert loops["input"]["vector_stack"] <= 3 * alpha * alpha, loops
    assert loops["output"]["vector_stack"] <= 2 * alpha * m, loops
    if Target(target).cpu.vector_registers == 16:
        # The bound does catch spills: the one-pass form exceeds it on AVX2.
        from ingot.ir.transform import PassContext

        with PassContext(config={WS.WINOGRAD_POLICY_CONFIG: WS.WinogradSchedulePolicy(separable=False)}):
            one_pass, _ = schedule([x, u, W.conv2d_nhwc_winograd(x, u)], target)
        assert _transform_loops(one_pass, target)["input"]["vector_stack"] > 3 * alpha * alpha


@pytest.mark.parametrize("target", ["llvm -mcpu=haswell -num-cores=2", "llvm -mcpu=sapphirerapids -num-cores=2"])
def test_separable_transforms_do_not_spill_in_tile_rows(target):
    # The tile-row schedule (forced at 16x16): the whole kernel is one function, its hottest loop is
    # the input transform's (the most FMAs); the same bound as stage by stage (haswell one-pass: 210).
    from ingot.ir.transform import PassContext

    alpha = 6
    x, u = te.placeholder((1, 16, 16, 32), name="x"), te.placeholder((alpha * alpha, 2, 32, 16), name="u")
    loops = {}
    for separable in (False, True):
        policy = WS.WinogradSchedulePolicy(min_row_tiles=1, separable=separable)
        with PassContext(config={WS.WINOGRAD_POLICY_CONFIG: policy}):
            sch, picked = schedule([x, u, W.conv2d_nhwc_winograd(x, u)], target)
        assert picked["winograd_input"] == "winograd_tile_rows"
        loops[separable] = kernel_loop(sch, target)
    assert loops[True]["fma"] > 0 and loops[True]["vector_stack"] <= 3 * alpha * alpha, loops
    if Target(target).cpu.vector_registers == 16:
        assert loops[False]["vector_stack"] > 3 * alpha * alpha, loops
