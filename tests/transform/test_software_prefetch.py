"""InjectSoftwarePrefetch: the ``software_prefetch`` loop annotation becomes one prefetch per cache
line of the next iteration's region, guarded, in the C as ``__builtin_prefetch``; numbers unchanged."""
from __future__ import annotations

import numpy as np
import pytest

import ingot
from ingot import te, tir
from ingot.ir.expr import Call
from ingot.ir.functor import post_order_visit
from ingot.tir.transform.software_prefetch import prefetch


def _sum_rows(annotation):
    A = te.placeholder((4, 3, 64), "float32", "A")
    k = te.reduce_axis((0, 64), "k")
    B = te.compute((4, 3), lambda i, j: te.sum(A[i, j, k], axis=k), name="B")
    sch = tir.Schedule(te.create_prim_func([A, B]))
    i = sch.get_loops(sch.get_block("B"))[0]
    sch.annotate(i, "software_prefetch", annotation)
    return sch


def test_prefetch_lines_of_the_next_iteration_and_same_numbers():
    sch = _sum_rows(["A", 2])
    calls = []
    post_order_visit(ingot.lower(sch.mod)["main"].body,
                     lambda n: calls.append(n) if isinstance(n, Call) and n.op == "prefetch" else None)
    assert len(calls) == 1 and [int(a.value) for a in calls[0].args[1:]] == [0, 2]
    lib = ingot.build(sch.mod, target="c")
    src = lib.get_source()
    assert "__builtin_prefetch" in src and "if (" in src  # guarded: no prefetch past the last row
    a = np.random.default_rng(0).random((4, 3, 64), dtype=np.float32)
    b = np.zeros((4, 3), "float32")
    lib["main"](a, b)
    np.testing.assert_allclose(b, a.sum(-1), rtol=1e-5)


def test_prefetch_loop_counts_cache_lines():
    text = str(ingot.lower(_sum_rows("A").mod))
    # the next row: 3 x 64 floats = 3 x 4 lines of 16 floats
    assert "T.grid(3, 4)" in text and "pf2 * 16 + 192" in text


def test_errors_name_the_buffer_and_loop():
    with pytest.raises(ValueError, match="'Z'.*does not read"):
        ingot.lower(_sum_rows("Z").mod)
    with pytest.raises(ValueError, match="locality"):
        ingot.lower(_sum_rows(["A", 7]).mod)
    with pytest.raises(TypeError, match="BufferLoad"):
        prefetch(1)
