"""Kernels with a run-time (int64) batch vectorize as their static twins do (issue #17).

The batch variable of a dynamically exported model is int64; its loop mixes with the int32 tile
loops, and flattening writes indices such as ``(int64)(i + 8) + batch_offset``. VectorizeLoop then
found no constant stride and left every vector loop of the micro-kernel, its init and its epilogue a
scalar ``#pragma omp simd`` loop (MobileNetV2's 1x1 convs ran 2-3x their static twin's time).
`widen_index` pushes widening casts to the leaves so the stride is seen."""
from __future__ import annotations

import numpy as np
import pytest

import ingot
from ingot import ops, te
from ingot.ir import Var
from ingot.ir import expr as E
from ingot.ir.buffer import decl_buffer
from ingot.ir.functor import post_order_visit
from ingot.ops import packed
from ingot.ops.schedule import schedule_blocks
from ingot.target import Target
from ingot.tir.schedule import Schedule
from ingot.tir.stmt import BufferStore, For, ForKind, IfThenElse
from ingot.tir.transform.vectorize import vectorize_loop
from ingot.tir.transform.widen import widen_index

TARGET = "llvm -num-cores=2"
RNG = np.random.default_rng(17)


def test_widen_index_pushes_casts_to_the_leaves():
    i, j = Var("i", "int32"), Var("j", "int32")
    e = widen_index(E.Cast("int64", (i + 8) * 7 + j))
    assert isinstance(e, E.Add) and str(e.dtype) == "int64"
    casts = []
    post_order_visit(e, lambda n: casts.append(n.value) if isinstance(n, E.Cast) else None)
    assert {id(v) for v in casts} == {id(i), id(j)}  # only the variables are cast
    # a narrowing cast is not exact: kept as it is
    k = Var("k", "int64")
    narrow = E.Cast("int32", k + 1)
    assert widen_index(narrow) is narrow


def test_int64_index_with_a_cast_loop_variable_vectorizes():
    n = Var("batch", "int64")
    a, b = decl_buffer((n * 64,), "float32", "A"), decl_buffer((n * 64,), "float32", "B")
    i = Var("i", "int32")
    idx = n * 8 + E.Cast("int64", i + 8)
    out = vectorize_loop(For(i, 0, 8, ForKind.VECTORIZED, BufferStore(b, a[idx] * 2.0, [idx])))
    assert isinstance(out, BufferStore), out  # one vector store, no loop left
    assert str(out.value.dtype) == "float32x8"
    assert isinstance(out.indices[0], E.Ramp)


def _conv_layer(n, c, hw, o, k, s, panel=16):
    """clip(conv2d_nhwc_packed_weight(x, w) + bias, 0, 6), MobileNetV2's expand/project form."""
    x = te.placeholder((n, hw, hw, c), name="x")
    w = te.placeholder((o // panel, k, k, c, panel), name="w")
    b = te.placeholder((o,), name="bias")
    conv = packed.conv2d_nhwc_packed_weight(x, w, strides=s, padding=k // 2)
    return [x, w, b, ops.clip(ops.add(conv, b), 0.0, 6.0)]


def _vector_loops_left(sch) -> int:
    kinds = []
    post_order_visit(ingot.lower(sch.mod)["main"].body,
                     lambda s: kinds.append(s.kind) if isinstance(s, For) else None)
    return sum(kind == ForKind.VECTORIZED for kind in kinds)


def _guards(sch) -> list:
    conds = []
    post_order_visit(ingot.lower(sch.mod)["main"].body,
                     lambda s: conds.append(str(s.condition)) if isinstance(s, IfThenElse) else None)
    return conds


def _reference(xa, wa, ba, s, k):
    import torch

    x = torch.from_numpy(xa).permute(0, 3, 1, 2)
    w = torch.from_numpy(wa).permute(3, 2, 0, 1)
    with torch.no_grad():
        y = torch.nn.functional.conv2d(x, w, stride=s, padding=k // 2).permute(0, 2, 3, 1).numpy()
    return np.clip(y + ba, 0.0, 6.0)


# name, in channels, size, out channels, kernel, stride
LAYERS = [("1x1 project", 96, 14, 32, 1, 1), ("1x1 expand", 16, 14, 96, 1, 1), ("3x3 stride2", 16, 15, 32, 3, 2)]


@pytest.mark.compiler
@pytest.mark.parametrize("name,c,hw,o,k,s", LAYERS, ids=[layer[0] for layer in LAYERS])
def test_symbolic_batch_conv_vectorizes_like_static_and_matches(name, c, hw, o, k, s):
    pytest.importorskip("torch")
    target = Target(TARGET)
    static = schedule_blocks(Schedule(te.create_prim_func(_conv_layer(1, c, hw, o, k, s))), target)
    dynamic = schedule_blocks(Schedule(te.create_prim_func(_conv_layer(Var("batch", "int64"), c, hw, o, k, s))),
                              target)
    # the vector loops became vector statements as in the static twin (a gather, e.g. a strided pad
    # copy, stays a loop in both); before the fix the 1x1 convs' dynamic kernels kept 20-40 loops
    assert _vector_loops_left(dynamic) == _vector_loops_left(static)
    # the epilogue's `n < batch` guard (reverse_compute_at under the run-time batch loop over n) holds
    # for every n of that loop: Simplify drops it, as the static twin has none
    assert len(_guards(dynamic)) == len(_guards(static)), _guards(dynamic)
    lib = ingot.build(dynamic.mod, TARGET)
    oh = (hw + 2 * (k // 2) - k) // s + 1
    wa, ba = RNG.standard_normal((k, k, c, o)).astype("float32"), RNG.standard_normal(o).astype("float32")
    wp = packed.pack_conv2d_nhwc_weight(wa, 16)
    for batch in (1, 2, 5):
        xa = RNG.standard_normal((batch, hw, hw, c)).astype("float32")
        out = np.zeros((batch, oh, oh, o), "float32")
        lib["main"](xa, wp, ba, out)
        np.testing.assert_allclose(out, _reference(xa, wa, ba, s, k), rtol=1e-4, atol=1e-4)


def _store_divisions(sch, buffer_name: str) -> int:
    """``//`` and ``%`` in the lowered indices of the stores to ``buffer_name``."""
    count = [0]

    def visit(node):
        if isinstance(node, BufferStore) and node.buffer.name == buffer_name:
            post_order_visit(node.indices, lambda e: count.__setitem__(
                0, count[0] + isinstance(e, (E.FloorDiv, E.FloorMod))))

    post_order_visit(ingot.lower(sch.mod)["main"].body, visit)
    return count[0]


@pytest.mark.compiler
def test_symbolic_batch_transpose_index_simplifies_like_static():
    # NCHW -> NHWC of a 3-channel image (a model's first kernel): the fused (w, c) loop is split, so
    # the store index is (x // 3) * 3 + x % 3; with the batch int64 the terms sat under casts and
    # stayed a division and a modulo per element instead of x
    def layer(n):
        x = te.placeholder((n, 3, 20, 20), name="x")
        return [x, ops.transpose(x, (0, 2, 3, 1))]

    target = Target(TARGET)
    static = schedule_blocks(Schedule(te.create_prim_func(layer(1))), target)
    dynamic = schedule_blocks(Schedule(te.create_prim_func(layer(Var("batch", "int64")))), target)
    out_name = te.create_prim_func(layer(1)).buffer_params[-1].name
    assert _store_divisions(dynamic, out_name) == _store_divisions(static, out_name)
    lib = ingot.build(dynamic.mod, TARGET)
    for batch in (1, 3):
        xa = RNG.standard_normal((batch, 3, 20, 20)).astype("float32")
        out = np.zeros((batch, 20, 20, 3), "float32")
        lib["main"](xa, out)
        np.testing.assert_array_equal(out, xa.transpose(0, 2, 3, 1))
