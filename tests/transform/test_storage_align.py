"""`Schedule.storage_align` in lowering: the annotated intermediate buffer is flattened with padded
strides (TVM's contract: the aligned stride is the smallest s >= the compact one with
s % factor == offset), also after `CompactBufferAllocation` shrinks it, and the numbers are unchanged."""
from __future__ import annotations

import numpy as np
import pytest

import ingot
from ingot import te
from ingot.ir.functor import Visitor
from ingot.tir.schedule import Schedule
from ingot.tir.transform.storage_align import aligned_strides, dim_aligns_by_name

pytestmark = pytest.mark.compiler


def _two_stage(n=8, m=64):
    a = te.placeholder((n, m), name="A")
    b = te.compute((n, m), lambda i, j: a[i, j] * 2.0, name="B")
    c = te.compute((n, m), lambda i, j: b[i, j] + 1.0, name="C")
    return Schedule(te.create_prim_func([a, c]))


def _allocations(mod):
    found = {}

    class _Collect(Visitor):
        def visit_Allocate(self, node):
            found[node.buffer.name] = node.buffer
            self.generic_visit(node)

    _Collect().visit(mod["main"].body)
    return found


def _run(sch, n=8, m=64):
    lib = ingot.build(sch.mod, "llvm")
    a = np.random.default_rng(0).standard_normal((n, m)).astype("float32")
    c = np.zeros_like(a)
    lib["main"](a, c)
    np.testing.assert_allclose(c, a * 2.0 + 1.0, rtol=1e-6)
    return lib


@pytest.mark.parametrize("shape,aligns,expected", [
    ((16, 784, 64), {0: (1024, 16)}, (50192, 64, 1)),   # Winograd F(2,3) planes: 4 KiB apart -> +64 B
    ((4, 8), {0: (32, 1)}, (33, 1)),
    ((3, 5, 7), {1: (8, 0)}, (40, 8, 1)),               # the outer stride builds on the padded one
    ((4, 8), {1: (4, 2)}, (16, 2)),                     # innermost stride padded too, as TVM does
    ((4, 32), {0: (32, 0)}, None),                      # already aligned: stays compact
])
def test_aligned_strides(shape, aligns, expected):
    assert aligned_strides(shape, aligns) == expected


def test_storage_align_pads_the_flattened_buffer():
    sch = _two_stage()
    sch.storage_align(sch.get_block("B"), 0, axis=0, factor=32, offset=1)
    lowered = ingot.lower(sch.mod)
    b = _allocations(lowered)["B"]
    assert int(b.shape[0]) == 7 * 65 + 64          # rows 65 floats apart: (n - 1) * 65 + m
    assert "buffer_dim_align" not in lowered["main"].attrs
    assert "65" in ingot.build(sch.mod, "llvm").get_source()
    _run(sch)


def test_storage_align_applies_to_the_compacted_buffer():
    # B computed per row of C: compaction shrinks it to (1, 64), then the alignment of axis 1's
    # stride (innermost, TVM semantics) is applied to that shape.
    sch = _two_stage()
    b, c = sch.get_block("B"), sch.get_block("C")
    sch.compute_at(b, sch.get_loops(c)[0])
    sch.storage_align(b, 0, axis=0, factor=128, offset=3)
    lowered = ingot.lower(sch.mod)
    alloc = _allocations(lowered)["B"]
    assert int(alloc.shape[0]) == 64  # one row: the row stride never shows
    _run(sch)
    sch2 = _two_stage()
    i0, i1 = sch2.split(sch2.get_loops(sch2.get_block("C"))[0], [None, 4])
    sch2.compute_at(sch2.get_block("B"), i0)
    sch2.storage_align(sch2.get_block("B"), 0, axis=0, factor=128, offset=3)
    alloc = _allocations(ingot.lower(sch2.mod))["B"]
    assert int(alloc.shape[0]) == 3 * 131 + 64  # 4 rows of the compacted (4, 64) buffer, 131 apart
    _run(sch2)


def test_dim_aligns_by_name_and_unaligned_functions_unchanged():
    assert dim_aligns_by_name((("V", 0, 1024, 16), ("V", 1, 8, 0))) == {"V": {0: (1024, 16), 1: (8, 0)}}
    sch = _two_stage()
    assert int(_allocations(ingot.lower(sch.mod))["B"].shape[0]) == 8 * 64
