"""ingot.build end to end: TE / TVMScript / scheduled functions → lowering → C → numpy check."""
import numpy as np
import pytest

import ingot
from ingot import te, tir

pytestmark = pytest.mark.compiler


def test_te_matmul_relu_and_symbolic_elementwise():
    A = te.placeholder((64, 32), name="A")
    B = te.placeholder((32, 48), name="B")
    k = te.reduce_axis((0, 32), name="k")
    C = te.compute((64, 48), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    D = te.compute((64, 48), lambda i, j: tir.max(C[i, j], tir.const(0.0, "float32")), name="D")
    n = te.var("n")
    X = te.placeholder((n, 4), name="X")
    Y = te.compute((n, 4), lambda i, j: X[i, j] * 2.0 + 1.0, name="Y")
    mod = ingot.IRModule({
        "mm": te.create_prim_func([A, B, D]).with_attr("global_symbol", "mm"),
        "ew": te.create_prim_func([X, Y]).with_attr("global_symbol", "ew"),
    })
    lib = ingot.build(mod, "llvm")
    a, b = np.random.rand(64, 32).astype("float32"), np.random.rand(32, 48).astype("float32")
    d = np.zeros((64, 48), "float32")
    lib["mm"](a, b, d)
    np.testing.assert_allclose(d, np.maximum(a @ b, 0), rtol=1e-5)
    x = np.random.rand(7, 4).astype("float32")
    y = np.zeros_like(x)
    lib["ew"](x, y)
    np.testing.assert_allclose(y, x * 2 + 1)
    with pytest.raises(ingot.runtime.ArgumentError, match="n = 7"):
        lib["ew"](x, np.zeros((6, 4), "float32"))


def test_scheduled_parallel_vectorized_sigmoid():
    Schedule = tir.Schedule
    A = te.placeholder((256, 64), name="A")
    B = te.compute((256, 64), lambda i, j: tir.sigmoid(A[i, j]) * 2.0, name="B")
    sch = Schedule(te.create_prim_func([A, B]))
    i, j = sch.get_loops(sch.get_block("B"))
    _, ji = sch.split(j, [None, 16])
    sch.parallel(i)
    sch.vectorize(ji)
    lib = ingot.build(sch.mod, "llvm -num-cores=2")
    a = np.random.rand(256, 64).astype("float32")
    b = np.zeros_like(a)
    lib["main"](a, b)
    np.testing.assert_allclose(b, 2 / (1 + np.exp(-a)), rtol=1e-6)
    src = lib.get_source()
    assert "_par0(" in src  # the parallel body outlined (a nest this small runs on the calling thread)
    assert lib.get_num_threads() == 2


def test_tvmscript_matmul():
    from ingot.script import tir as T
    @T.prim_func
    def mm(A: T.Buffer((16, 8), "float32"), B: T.Buffer((8, 4), "float32"), C: T.Buffer((16, 4), "float32")):
        T.func_attr({"global_symbol": "main", "tir.noalias": True})
        for i, j, k in T.grid(16, 4, 8):
            with T.block("C"):
                vi, vj, vk = T.axis.remap("SSR", [i, j, k])
                with T.init():
                    C[vi, vj] = T.float32(0)
                C[vi, vj] = C[vi, vj] + A[vi, vk] * B[vk, vj]
    lib = ingot.build(mm)
    a, b = np.random.rand(16, 8).astype("float32"), np.random.rand(8, 4).astype("float32")
    c = np.zeros((16, 4), "float32")
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)
