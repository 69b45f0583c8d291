"""pad, broadcast_to/expand, unsqueeze, cumsum, full/zeros/ones/arange: compiled (TE computes,
no constant folding) vs numpy, with broadcasting and a symbolic dimension."""
import numpy as np
import pytest


from ingot import graph as G  # noqa: E402
from ingot.graph.op_registry import get_op_def  # noqa: E402
from ingot.ir import Var as PVar  # noqa: E402

rng = np.random.default_rng(11)
pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")


def T(shape, dtype="float32"):
    return G.TensorStructInfo(shape, dtype)


def run(make, inputs, shapes=None):
    """Build ``main(*params) = make(*params)`` with LegalizeOps only (the TE path), run it."""
    params = [G.Var(f"p{i}", T(s if shapes is None else shapes[i], str(a.dtype))) for i, (a, s) in
              enumerate(zip(inputs, [a.shape for a in inputs]))]
    bb = G.BlockBuilder()
    with bb.function("main", params):
        with bb.dataflow():
            gv = bb.emit_output(make(*params))
        bb.emit_func_output(gv)
    ex = G.build(bb.get(), "llvm", pipeline=G.transform.LegalizeOps())
    return G.Executor(ex)["main"](*inputs).numpy()


def test_pad_and_symbolic_pad():
    x = rng.standard_normal((2, 3)).astype("float32")
    np.testing.assert_allclose(run(lambda p: G.op.pad(p, [(1, 2), (0, 1)], 0.5), [x]),
                               np.pad(x, [(1, 2), (0, 1)], constant_values=0.5), rtol=1e-6)
    n = PVar("n", "int64")
    for rows in (1, 4):
        y = rng.standard_normal((rows, 3)).astype("float32")
        np.testing.assert_allclose(run(lambda p: G.op.pad(p, [(1, 1), (2, 0)]), [y], shapes=[(n, 3)]),
                                   np.pad(y, [(1, 1), (2, 0)]), rtol=1e-6)


def test_broadcast_to_expand_unsqueeze():
    x = rng.standard_normal((3, 1)).astype("float32")
    np.testing.assert_allclose(run(lambda p: G.op.broadcast_to(p, (2, 3, 4)), [x]), np.broadcast_to(x, (2, 3, 4)))
    np.testing.assert_allclose(run(lambda p: G.op.expand(p, (3, 5)), [x]), np.broadcast_to(x, (3, 5)))
    np.testing.assert_allclose(run(lambda p: G.op.unsqueeze(p, 1), [x]), x[:, None])
    with pytest.raises(Exception, match="broadcast"):
        G.op.broadcast_to(G.Var("x", T((3, 2))), (3, 4))


@pytest.mark.parametrize("rows", [1, 5])
def test_symbolic_dim_that_is_1_at_run_time_broadcasts_against_a_constant(rows):
    # x: (n, 1) broadcast to (5, 4), and x + y with y: (5, 1): the kernel reads x's row at
    # select(n == 1, 0, i), so n = 1 broadcasts like numpy and n = 5 reads row i.
    n = PVar("n", "int64")
    x = rng.standard_normal((rows, 1)).astype("float32")
    np.testing.assert_allclose(run(lambda p: G.op.broadcast_to(p, (5, 4)), [x], shapes=[(n, 1)]),
                               np.broadcast_to(x, (5, 4)))
    y = rng.standard_normal((5, 1)).astype("float32")
    np.testing.assert_allclose(run(lambda a, b: G.op.add(a, b), [x, y], shapes=[(n, 1), (5, 1)]), x + y, rtol=1e-6)
    z = rng.standard_normal((1, 3)).astype("float32")
    np.testing.assert_allclose(run(lambda a, b: G.op.multiply(a, b), [z, x], shapes=[(1, 3), (n, 1)]), z * x,
                               rtol=1e-6)


@pytest.mark.parametrize("axis, exclusive", [(0, False), (1, False), (-1, True)])
def test_cumsum(axis, exclusive):
    x = rng.standard_normal((4, 6)).astype("float32")
    want = np.cumsum(x, axis=axis) - (x if exclusive else 0)
    np.testing.assert_allclose(run(lambda p: G.op.cumsum(p, axis, exclusive), [x]), want, rtol=1e-5, atol=1e-5)


def test_creation_ops_compiled_and_folded():
    x = rng.standard_normal((2, 3)).astype("float32")
    np.testing.assert_allclose(run(lambda p: G.op.full((2, 3), 1.5), [x]), np.full((2, 3), 1.5, "float32"))
    np.testing.assert_array_equal(run(lambda p: G.op.arange(1, 10, 3), [x]), np.arange(1, 10, 3))
    np.testing.assert_array_equal(run(lambda p: G.op.arange(2.0, 3.0, 0.25, "float32"), [x]),
                                  np.arange(2.0, 3.0, 0.25).astype("float32"))
    for op, ref in [(G.op.zeros, np.zeros), (G.op.ones, np.ones)]:
        np.testing.assert_array_equal(get_op_def("full").numpy([], op((2, 2)).attrs), ref((2, 2), "float32"))
    # With the default pipeline the creation op is folded into a constant.
    p = G.Var("p", T((2, 3)))
    bb = G.BlockBuilder()
    with bb.function("main", [p]):
        with bb.dataflow():
            gv = bb.emit_output(G.op.add(p, bb.emit(G.op.ones((2, 3)))))
        bb.emit_func_output(gv)
    ex = G.build(bb.get(), "llvm")
    np.testing.assert_allclose(G.Executor(ex)["main"](x).numpy(), x + 1)
