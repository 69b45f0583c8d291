"""The lowering pipeline's fast paths change nothing but time: GC paused only while passes run,
VectorizeLoop's stride shortcut agrees with the analyzer, visitor dispatch tables live on the class."""
import gc

import pytest

from ingot.driver.lower import lower
from ingot.ir import Var, decl_buffer
from ingot.ir.functor import Visitor, collect_vars
from ingot.ir.transform import PassContext
from ingot.tir import BufferStore, For, ForKind, PrimFunc
from ingot.tir.transform import prim_func_pass
from ingot.tir.transform.vectorize import vectorize_loop


def _func():
    A = decl_buffer((64,), "float32", "A")
    i = Var("i")
    return PrimFunc([A], For(i, 0, 8, ForKind.VECTORIZED, BufferStore(A, A[i] * 2.0, [i])))


@pytest.mark.parametrize("enabled", [True, False])
def test_lower_restores_the_gc_state(enabled):
    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        seen = []
        probe = prim_func_pass(lambda f, m, c: seen.append(gc.isenabled()) or f, name="Probe")
        with PassContext(config={"tir.add_lower_pass": [(1, probe)]}):
            lower(_func())
        assert seen == [False]  # paused while the passes run
        assert gc.isenabled() == enabled
    finally:
        gc.enable() if was else gc.disable()


def test_lower_restores_gc_after_a_failing_pass():
    def fail(f, m, c):
        raise RuntimeError("boom")

    assert gc.isenabled()
    with PassContext(config={"tir.add_lower_pass": [(1, prim_func_pass(fail, name="Fail"))]}):
        with pytest.raises(Exception, match="boom"):
            lower(_func())
    assert gc.isenabled()


@pytest.mark.parametrize("index", [
    lambda i, j: j * 16 + i,             # linear: the stride is read off the sum form
    lambda i, j: j * 16 + i * 2,         # strided store: stays a loop either way
    lambda i, j: (j * 8 + i) % 64,       # the variable inside an atom: the analyzer decides
    lambda i, j: i * j + i,              # a non-constant stride
    lambda i, j: j * 16 + 3,             # no use of the loop variable (stride 0)
])
def test_vectorize_stride_shortcut_agrees_with_the_analyzer(index, monkeypatch):
    from ingot.ir import structural_equal
    from ingot.tir.transform import vectorize

    A = decl_buffer((64,), "float32", "A")
    i, j = Var("i"), Var("j")
    loop = For(j, 0, 4, ForKind.SERIAL, For(i, 0, 8, ForKind.VECTORIZED, BufferStore(A, A[i] + 1.0, [index(i, j)])))
    fast = vectorize_loop(loop)
    monkeypatch.setattr(vectorize._Vectorizer, "_linear_stride", lambda self, index: None)
    assert structural_equal(fast, vectorize_loop(loop))


def test_visitor_dispatch_table_lives_on_the_class():
    i, j = Var("i"), Var("j")
    for _ in range(3):
        class Local(Visitor):
            pass

        Local().visit(i + j)
        assert "_visit_dispatch" in Local.__dict__
    assert not hasattr(Visitor, "_dispatch_tables")
    assert [v.name for v in collect_vars(i * j + i)] == ["i", "j"]
