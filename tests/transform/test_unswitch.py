"""UnswitchRuntimeGuards (#17): guards on run-time sizes are hoisted out of a tile's loops and the tile
is duplicated (unguarded main branch, guarded tail); constant-shape guards are left alone; results
match numpy with the pass on and off."""
from __future__ import annotations

import numpy as np
import pytest

import ingot
from ingot.ir import Var, decl_buffer
from ingot.ir.transform import PassContext
from ingot.tir import BufferStore, For, ForKind, IfThenElse, PrimFunc
from ingot.testing.c_source import first_loop_body
from ingot.tir.transform.unswitch import DISABLE_CONFIG, unswitch_runtime_guards

TARGET = "llvm -num-cores=2"


def _ifs(stmt) -> list:
    found = []
    ingot.ir.functor.post_order_visit(stmt, lambda n: found.append(n) if isinstance(n, IfThenElse) else None)
    return found


def _loops(stmt, name: str) -> list:
    found = []
    ingot.ir.functor.post_order_visit(
        stmt, lambda n: found.append(n) if isinstance(n, For) and n.loop_var.name == name else None)
    return found


def _tiled_row_sum(n):
    """``B[r] = sum_k A[r, k]`` over rows tiled by 4 (``r = i0 * 4 + i1``, last tile guarded by ``r < n``),
    k serial between the tile loop and the row loop, as blocked_gemm_rule lays out a register tile."""
    A = decl_buffer((n, 8), "float32", "A")
    B = decl_buffer((n,), "float32", "B")
    i0, k, i1, i1b = Var("i0"), Var("k"), Var("i1"), Var("i1b")
    rows = (n + 3) // 4
    init = For(i1b, 0, 4, ForKind.UNROLLED,
               IfThenElse(i0 * 4 + i1b < n, BufferStore(B, 0.0, [i0 * 4 + i1b])))
    row = i0 * 4 + i1
    update = For(k, 0, 8, ForKind.SERIAL, For(i1, 0, 4, ForKind.UNROLLED, IfThenElse(
        row < n, BufferStore(B, B[row] + A[row, k], [row]))))
    body = For(i0, 0, rows, ForKind.SERIAL, ingot.tir.SeqStmt([init, update]))
    return PrimFunc([A, B], body).with_attr("global_symbol", "main")


def test_guard_on_runtime_size_is_hoisted_out_of_the_tile():
    n = Var("n")
    func = unswitch_runtime_guards(_tiled_row_sum(n))
    tile = func.body.body  # the body of i0
    assert isinstance(tile, IfThenElse)
    assert str(tile.condition) == "i0 * 4 + 3 < n"
    assert not _ifs(tile.then_case)  # the main branch: the micro-kernel without guards
    assert len(_ifs(tile.else_case)) == 2  # the tail: init and update guards as before
    assert len(_loops(tile.then_case, "k")) == 1 and len(_loops(tile.else_case, "k")) == 1


def test_constant_shape_guard_is_left_alone():
    func = _tiled_row_sum(13)
    assert unswitch_runtime_guards(func) is func


@pytest.mark.parametrize("disable", [False, True])
def test_unswitched_tile_matches_numpy_with_and_without_a_tail(disable):
    n = Var("n", "int64")
    with PassContext(config={DISABLE_CONFIG: disable}):
        lib = ingot.build(ingot.lower(_tiled_row_sum(n)), TARGET)
    src = lib.get_source()
    # the first k loop printed is the main branch's (the tail's follows in the else)
    assert ("if (" in first_loop_body(src, "k")) == disable
    rng = np.random.default_rng(0)
    for rows in (13, 16, 5, 1):
        a = rng.standard_normal((rows, 8)).astype("float32")
        out = np.full(rows, np.nan, "float32")
        lib["main"](a, out)
        np.testing.assert_allclose(out, a.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_guard_without_an_inner_loop_is_not_duplicated():
    # `for i: if i < n: B[i] = 0`: no loop for the guard to leave, duplicating would gain nothing
    n = Var("n")
    B = decl_buffer((n,), "float32", "B")
    i = Var("i")
    func = PrimFunc([B], For(i, 0, n + 1, ForKind.SERIAL, IfThenElse(i < n, BufferStore(B, 0.0, [i]))))
    assert unswitch_runtime_guards(func) is func


def test_guard_reading_memory_is_not_hoisted():
    # a data-dependent guard (a load) is not a run-time size: it may change inside the loops
    n = Var("n")
    A = decl_buffer((n,), "int32", "A")
    B = decl_buffer((n,), "float32", "B")
    i0, i1 = Var("i0"), Var("i1")
    guard = IfThenElse(A[i0 * 4 + i1] < n, BufferStore(B, 0.0, [i0 * 4 + i1]))
    func = PrimFunc([A, B], For(i0, 0, n // 4, ForKind.SERIAL, For(i1, 0, 4, ForKind.UNROLLED, guard)))
    assert unswitch_runtime_guards(func) is func
