"""Default schedules keep numbers: each workload is built unscheduled and default-scheduled and
both are compared with numpy; the rule each block got is checked where it matters."""
from __future__ import annotations

import numpy as np
import pytest

import ingot
from ingot import ops, te, tir
from ingot.ops.schedule import analyze_block, choose_mr, choose_nr, default_schedule, schedule_blocks
from ingot.target import Target
from ingot.tir.schedule import Schedule

pytestmark = pytest.mark.compiler

TARGET = "llvm -num-cores=2"
RNG = np.random.default_rng(0)


def _rand(*shape):
    return RNG.standard_normal(shape).astype("float32")


def _run(func, args, out_shapes):
    lib = ingot.build(func, TARGET)
    outs = [np.zeros(s, "float32") for s in out_shapes]
    lib["main"](*args, *outs)
    return outs


def _check(tensors, args, reference, rtol=1e-4, atol=1e-4, expect=None, target=TARGET):
    """Build unscheduled and default-scheduled (for ``target``; built for the host); both must give
    ``reference``. ``expect``: block name -> rule name the driver must have picked."""
    func = te.create_prim_func(tensors)
    out_shapes = [tuple(int(d) for d in t.shape) for t in tensors[len(args):]]
    log: list = []
    sch = schedule_blocks(Schedule(func), Target(target), log=log)
    scheduled = sch.mod["main"]
    for f in (func, scheduled):
        (out,) = _run(f, args, out_shapes)
        np.testing.assert_allclose(out, reference, rtol=rtol, atol=atol)
    picked = {name: rule for name, rule, _ in log}
    for name, rule in (expect or {}).items():
        assert picked.get(name) == rule, f"block {name}: expected {rule}, log: {log}"
    return scheduled, log


def test_matmul_gets_the_register_tiled_micro_kernel():
    A, B = te.placeholder((64, 48), name="A"), te.placeholder((48, 96), name="B")
    C = ops.matmul(A, B)
    a, b = _rand(64, 48), _rand(48, 96)
    f, _ = _check([A, B, C], [a, b], a @ b, expect={C.op.name: "gemm_rule"})
    text = f.script()
    lanes = Target(TARGET).vector_lanes("float32")
    assert 'scope="local"' in text and f"T.vectorized({lanes})" in text and "T.parallel" in text


def test_dense_bias_relu_epilogue_is_fused():
    x, w, bias = te.placeholder((16, 64), name="x"), te.placeholder((32, 64), name="w"), te.placeholder((32,), name="b")
    y = ops.relu(ops.nn.dense(x, w, bias))
    xa, wa, ba = _rand(16, 64), _rand(32, 64), _rand(32)
    f, log = _check([x, w, bias, y], [xa, wa, ba], np.maximum(xa @ wa.T + ba, 0), expect={"T_dense": "gemm_rule"})
    # the bias and relu blocks were moved under the tile loop: the driver never saw them at the root
    assert [name for name, _, _ in log] == ["T_dense"]
    lowered = ingot.lower(f).script()
    assert "T.Ramp" in lowered


def test_batch_matmul():
    a_t, b_t = te.placeholder((3, 24, 40), name="a"), te.placeholder((3, 40, 32), name="b")
    c_t = ops.batch_matmul(a_t, b_t)
    a, b = _rand(3, 24, 40), _rand(3, 40, 32)
    _check([a_t, b_t, c_t], [a, b], a @ b, expect={c_t.op.name: "gemm_rule"})


def _conv_ref(x, w, stride, pad, groups):
    n, c, h, wd = x.shape
    o, cg, kh, kw = w.shape
    xp = np.pad(x, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = (h + 2 * pad - kh) // stride + 1, (wd + 2 * pad - kw) // stride + 1
    out = np.zeros((n, o, oh, ow), "float32")
    opg = o // groups
    for oc in range(o):
        g = oc // opg
        for dy in range(kh):
            for dx in range(kw):
                patch = xp[:, g * cg:(g + 1) * cg, dy:dy + stride * oh:stride, dx:dx + stride * ow:stride]
                out[:, oc] += np.einsum("nchw,c->nhw", patch, w[oc, :, dy, dx])
    return out


@pytest.mark.parametrize("stride,pad,groups", [(1, 1, 1), (2, 1, 1), (1, 0, 1), (1, 1, 8)])
def test_conv2d_nchw(stride, pad, groups):
    c_in, c_out = 8, 16 if groups == 1 else 8
    x = te.placeholder((1, c_in, 18, 18), name="x")
    w = te.placeholder((c_out, c_in // groups, 3, 3), name="w")
    y = ops.nn.conv2d_nchw(x, w, strides=stride, padding=pad, groups=groups)
    xa, wa = _rand(1, c_in, 18, 18), _rand(c_out, c_in // groups, 3, 3)
    # channels (16) vectorize without predicates; grouped convs read the input per channel: gemm_rule
    # (with 16 lanes: an 8-lane CPU vectorizes the 16-wide output rows themselves, gemm_rule)
    rule = "conv_oc_rule" if groups == 1 else "gemm_rule"
    _check([x, w, y], [xa, wa], _conv_ref(xa, wa, stride, pad, groups), rtol=1e-4, atol=1e-3,
           expect={"conv2d_nchw": rule}, target="llvm -mcpu=skylake-avx512 -num-cores=2")
    _check([x, w, y], [xa, wa], _conv_ref(xa, wa, stride, pad, groups), rtol=1e-4, atol=1e-3)


def test_softmax_and_layernorm():
    x = te.placeholder((6, 40), name="x")
    xa = _rand(6, 40)
    e = np.exp(xa - xa.max(1, keepdims=True))
    _check([x, ops.nn.softmax(x)], [xa], e / e.sum(1, keepdims=True), rtol=1e-5, atol=1e-6)
    g, b = te.placeholder((40,), name="g"), te.placeholder((40,), name="b")
    ga, ba = _rand(40), _rand(40)
    mu, var = xa.mean(1, keepdims=True), xa.var(1, keepdims=True)
    _check([x, g, b, ops.nn.layer_norm(x, g, b)], [xa, ga, ba], (xa - mu) / np.sqrt(var + 1e-5) * ga + ba,
           rtol=1e-4, atol=1e-4)


def test_reductions_rows_and_columns():
    x = te.placeholder((12, 48), name="x")
    xa = _rand(12, 48)
    _check([x, ops.sum(x, axis=1)], [xa], xa.sum(1), rtol=1e-5, atol=1e-5)
    _, log = _check([x, ops.max_reduce(x, axis=0)], [xa], xa.max(0))
    assert log[0][1] == "reduction_rule"
    _check([x, ops.mean(x, axis=0)], [xa], xa.mean(0), rtol=1e-5, atol=1e-5)


def test_elementwise_with_broadcasting():
    a, b = te.placeholder((5, 7, 33), name="a"), te.placeholder((7, 1), name="b")
    out = ops.relu(ops.add(ops.multiply(a, b), 1.0))
    aa, ba = _rand(5, 7, 33), _rand(7, 1)
    f, log = _check([a, b, out], [aa, ba], np.maximum(aa * ba + 1.0, 0))
    assert [rule for _, rule, _ in log] == ["inline_injective", "inline_injective", "elementwise_rule"]
    assert "T.parallel" in f.script() and "T.vectorized" in f.script()


def test_injective_chain_is_inlined_into_one_pass():
    # BERT's bias + exact GELU + head split: 7 stages, one parallel vectorized loop nest after.
    x, b = te.placeholder((8, 64), name="x"), te.placeholder((64,), name="b")
    y = ops.add(x, b)
    e = te.compute((8, 64), lambda i, j: tir.erf(y[i, j] / 1.4142135), name="E")
    g = ops.multiply(ops.multiply(y, ops.add(e, 1.0)), 0.5)
    out = ops.transpose(ops.reshape(g, (8, 4, 16)), (1, 0, 2))
    xa, ba = _rand(8, 64), _rand(64)
    ya = (xa + ba).astype("float64")
    from math import erf
    ref = (0.5 * ya * (1 + np.vectorize(erf)(ya / np.sqrt(2)))).reshape(8, 4, 16).transpose(1, 0, 2)
    f, log = _check([x, b, out], [xa, ba], ref, rtol=1e-5, atol=1e-5)
    assert [r for _, r, _ in log].count("inline_injective") == 6
    assert f.script().count("T.block(") == 1 and "T.vectorized" in f.script()


def test_chains_after_a_gemm_or_reduction_are_left_to_their_rule():
    # The matmul's epilogue (bias -> residual -> relu, as ResNet's conv kernels) and softmax's
    # stages keep their own rules (not inlined up front).
    A, B = te.placeholder((64, 48), name="A"), te.placeholder((48, 96), name="B")
    out = ops.relu(ops.add(ops.add(ops.matmul(A, B), 1.0), 2.0))
    a, b = _rand(64, 48), _rand(48, 96)
    _, log = _check([A, B, out], [a, b], np.maximum(a @ b + 3.0, 0), expect={"T_matmul": "gemm_rule"})
    assert all(rule != "inline_injective" for _, rule, _ in log)
    x = te.placeholder((6, 40), name="x")
    xa = _rand(6, 40)
    e = np.exp(0.5 * xa - (0.5 * xa).max(1, keepdims=True))
    _, log = _check([x, ops.nn.softmax(ops.multiply(x, 0.5))], [xa], e / e.sum(1, keepdims=True),
                    rtol=1e-5, atol=1e-6)
    assert [name for name, rule, _ in log if rule == "inline_injective"] == []


def test_symbolic_batch_still_works():
    n = te.var("n")
    A, B = te.placeholder((n, 32), name="A"), te.placeholder((32, 48), name="B")
    C = ops.matmul(A, B)
    D = ops.relu(C)
    func = te.create_prim_func([A, B, D])
    scheduled = default_schedule(func, TARGET)
    lib, ref_lib = ingot.build(scheduled, TARGET), ingot.build(func, TARGET)
    for rows in (1, 5, 17):
        a, b = _rand(rows, 32), _rand(32, 48)
        out, ref = np.zeros((rows, 48), "float32"), np.zeros((rows, 48), "float32")
        lib["main"](a, b, out)
        ref_lib["main"](a, b, ref)
        np.testing.assert_allclose(out, np.maximum(a @ b, 0), rtol=1e-4, atol=1e-4)
        np.testing.assert_allclose(out, ref, rtol=1e-4, atol=1e-4)


def test_default_schedule_accepts_modules_and_lowered_functions():
    A = te.placeholder((8, 64), name="A")
    B = te.compute((8, 64), lambda i, j: A[i, j] * 2.0, name="B")
    mod = ingot.IRModule({"main": te.create_prim_func([A, B])})
    out = default_schedule(mod, TARGET)
    assert isinstance(out, ingot.IRModule) and "T.vectorized" in out["main"].script()
    lowered = ingot.lower(mod)["main"]
    assert default_schedule(lowered, TARGET) is lowered
    with pytest.raises(TypeError, match="PrimFunc or IRModule"):
        default_schedule("main", TARGET)


def test_analysis_and_tile_choices():
    A, B = te.placeholder((8, 4), name="A"), te.placeholder((4, 16), name="B")
    C = ops.matmul(A, B)
    sch = Schedule(te.create_prim_func([A, B, C]))
    info = analyze_block(sch, sch.get_block(C.op.name))
    assert (info.kind, info.i_index, info.j_index) == ("gemm", 0, 1)
    avx512, avx2 = Target("llvm -mcpu=skylake-avx512").cpu, Target("llvm -mcpu=haswell").cpu
    assert choose_mr(1024, 2, avx512) == 8 and choose_mr(1, 2, avx512) == 1 and choose_mr(None, 1, avx512) == 4
    # 16 registers: a 2-vector tile has at most 6 rows (12 accumulators + 2 operands + broadcast)
    assert choose_mr(1024, 2, avx2) == 4 and choose_mr(96, 2, avx2) == 6 and avx2.fits_registers(6, 2)
    assert choose_nr(1024, 16) == (2, 16) and choose_nr(56, 16) == (1, 8) and choose_nr(28, 16) == (1, 4) and choose_nr(7, 16) == (1, 1)
    E = te.compute((8, 16), lambda i, j: tir.exp(C[i, j]), name="E")
    sch = Schedule(te.create_prim_func([A, B, E]))
    assert analyze_block(sch, sch.get_block("E")).kind == "elementwise"
