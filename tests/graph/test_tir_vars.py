"""call_tir ``tir_vars``: symbolic sizes that kernels take as scalar parameters (TVM Relax's third
``call_tir`` argument) — attached by LegalizeOps / FuseTIR / call_te, printed, planned, evaluated by
the executor, passed by the AOT entry when constant."""
import numpy as np
import pytest


from ingot import graph as G, te  # noqa: E402
from ingot.graph.op.base import call_tir_vars  # noqa: E402
from ingot.graph.plan import ConstantTable, compile_plan, is_aot_compatible  # noqa: E402
from ingot.graph.te_bridge import call_tir_scalars, create_prim_func, placeholder_for  # noqa: E402
from ingot.ir import Var as SymVar  # noqa: E402
from ingot.ir import structural_equal  # noqa: E402
from ingot.ir.error import IRError  # noqa: E402

rng = np.random.default_rng(5)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def _reshape_module():
    """main(x: (n, 6, 4)) = reshape(relu(linear(reshape(x, (6n, 4)), w, b)), (n, 6, 4)); ``n``
    appears in the middle only as ``n * 6``, so the kernels on (6n, 4) take ``n`` as a scalar."""
    n = SymVar("n", "int64")
    x = G.Var("x", G.TensorStructInfo((n, 6, 4), "float32"))
    w = G.Var("w", G.TensorStructInfo((4, 4), "float32"))
    b = G.Var("b", G.TensorStructInfo((4,), "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x, w, b]):
        with bb.dataflow():
            flat = bb.emit(G.op.reshape(x, (n * 6, 4)))
            y = bb.emit(G.op.linear(flat, w, b))
            z = bb.emit(G.op.relu(y))
            gv = bb.emit_output(G.op.reshape(z, (n, 6, 4)))
        bb.emit_func_output(gv)
    return bb.get(), n


def _ref(x, w, b):
    return np.maximum(x.reshape(-1, 4) @ w.T + b, 0).reshape(x.shape)


def test_legalize_attaches_tir_vars_printed_and_planned():
    mod, n = _reshape_module()
    mod = G.transform.LegalizeOps()(mod)
    calls = [bnd.value for bnd in mod["main"].body.blocks[0].bindings]
    # The reshapes see n as a whole dim of their input/output (no scalar); linear/relu on (6n, 4) take n.
    assert [len(call_tir_vars(c)) for c in calls] == [0, 1, 1, 0]
    add = calls[1]
    assert call_tir_vars(add)[0] is n  # the graph's own Var, not a copy
    prim = mod[add.args[0].name_hint]
    assert [p.name for p in prim.params if isinstance(p, SymVar)] == ["n"]
    assert "tir_vars=R.shape([n])" in mod.script()
    plan = compile_plan(mod["main"], "main", ConstantTable())
    scalars = [s.get("scalars") for s in plan["steps"]]
    assert scalars[1] == [{"var": "n"}] and scalars[2] == [{"var": "n"}]
    assert not is_aot_compatible(plan)


@pytest.mark.parametrize("pipeline", ["legalize", "default"])
def test_symbolic_scalars_run_for_several_batches(pipeline):
    mod, _ = _reshape_module()
    ex = G.build(mod, "llvm", pipeline=G.transform.LegalizeOps() if pipeline == "legalize" else "default")
    if pipeline == "default":
        # FuseTIR: the fused linear+relu kernel keeps the scalar parameter and its call the tir_vars.
        fused = [s for s in ex.plans["main"]["steps"] if "scalars" in s]
        assert [s["func"] for s in fused] == ["fused_linear_relu"] and fused[0]["scalars"] == [{"var": "n"}]
    run = G.Executor(ex)["main"]
    w = rng.standard_normal((4, 4)).astype("float32")
    b = rng.standard_normal(4).astype("float32")
    for batch in (1, 3):
        x = rng.standard_normal((batch, 6, 4)).astype("float32")
        np.testing.assert_allclose(run(x, w, b).numpy(), _ref(x, w, b), rtol=1e-5, atol=1e-6)


def _scale_kernel():
    """y[i] = x[i] * m with ``m`` a scalar parameter (not a dimension of any buffer)."""
    m = te.var("m", "int64")
    x = te.placeholder((4,), name="x")
    y = te.compute((4,), lambda i: x[i] * m.astype("float32"), name="y")
    return create_prim_func([x], [y], "scale"), m


def test_explicit_constant_tir_vars_run_on_aot_and_interpreter():
    func, _ = _scale_kernel()
    x = G.Var("x", G.TensorStructInfo((4,), "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        gv = bb.add_func(func, "scale")
        out = bb.emit(G.op.call_tir(gv, [x], G.TensorStructInfo((4,), "float32"), tir_vars=G.ShapeExpr([3])))
        bb.emit_func_output(out)
    mod = bb.get()
    assert "tir_vars=R.shape([3])" in mod.script()
    ex = G.build(mod, "llvm")
    assert "main" in ex.aot and ex.plans["main"]["steps"][0]["scalars"] == [3]
    data = rng.standard_normal(4).astype("float32")
    for use_aot in (True, False):
        np.testing.assert_allclose(G.Executor(ex, use_aot=use_aot)["main"](data).numpy(), data * 3, rtol=1e-6)


def test_call_te_attaches_tir_vars():
    from ingot import ops

    n = SymVar("n", "int64")
    x = G.Var("x", G.TensorStructInfo((n * 2, 3), "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        y = bb.emit_te(ops.elemwise.relu, x)
        bb.emit_func_output(y)
    call = bb.get()["main"].body.blocks[0].bindings[0].value
    assert len(call_tir_vars(call)) == 1 and call_tir_vars(call)[0] is n


def test_scalars_matched_through_shapes_and_unknown_var_error():
    # A PrimFunc built on other Var objects: its scalar is found through the buffer shapes.
    k = SymVar("k", "int64")
    xk = placeholder_for(G.TensorStructInfo((k * 6, 4), "float32"), "x")
    yk = te.compute((k * 6, 4), lambda i, j: xk[i, j] + 1.0, name="y")
    func = create_prim_func([xk], [yk], "inc")
    batch = SymVar("batch", "int64")
    got = call_tir_scalars(func, [G.TensorStructInfo((batch * 6, 4), "float32")] * 2)
    assert len(got) == 1 and structural_equal(got[0], batch)
    # A scalar no shape determines needs explicit tir_vars.
    scale, _ = _scale_kernel()
    with pytest.raises(IRError, match="scalar parameter 'm'.*tir_vars"):
        call_tir_scalars(scale, [G.TensorStructInfo((4,), "float32")] * 2)
    with pytest.raises(IRError, match="tir_vars must be"):
        G.op.call_tir("f", [G.Var("x", G.TensorStructInfo((4,), "float32"))], G.TensorStructInfo((4,), "float32"),
                      tir_vars="n")
