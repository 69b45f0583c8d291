"""Shared graphs of the BYOC tests."""
import pytest

from ingot import graph as G


def T(shape, dtype="float32"):
    return G.TensorStructInfo(shape, dtype)


@pytest.fixture()
def two_regions_graph():
    """Two regions that would wait for each other if merged (see test_byoc_partition)."""
    # B = {b1, b2, b3} forms first; then a2 = a1 + b2 must not join a1's region: A = {a1, a2} would
    # need B's b2 while B needs s = sigmoid(a1) from A (each region convex, the pair a cycle).
    x, w = G.Var("x", T((4, 16))), G.Var("w", T((16, 16)))
    bb = G.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            a1 = bb.emit(G.op.linear(x, w))
            s = bb.emit(G.op.sigmoid(a1))
            b1 = bb.emit(G.op.linear(s, w))
            b2 = bb.emit(G.op.linear(x, w))
            b3 = bb.emit(G.op.add(b1, b2))
            a2 = bb.emit(G.op.add(a1, b2))
            out = bb.emit_output(G.op.multiply(a2, b3))
        bb.emit_func_output(out)
    return bb.get()
