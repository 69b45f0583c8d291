"""``ingot.compile(mod)`` with a graph IRModule (TVM's ``tvm.compile`` / ``relax.build``)."""
import numpy as np
import pytest

import ingot
from ingot import graph as G
from ingot.ir.error import IngotError


def _mlp_module():
    bb = G.BlockBuilder()
    x = G.Var("x", G.TensorStructInfo((2, 3), "float32"))
    w = G.const(np.arange(12, dtype="float32").reshape(3, 4) / 10)
    with bb.function("main", [x]):
        with bb.dataflow():
            y = bb.emit(G.op.relu(bb.emit(G.op.matmul(x, w))))
            out = bb.emit_output(y)
        bb.emit_func_output(out)
    return bb.get(), w.data


def test_compile_accepts_a_graph_module():
    mod, w = _mlp_module()
    package = ingot.compile(mod, target="llvm")
    assert [i.name for i in package.inputs] == ["x"]
    x = np.random.default_rng(0).standard_normal((2, 3)).astype("float32")
    (out,) = ingot.run(package, {"x": x}).values()
    np.testing.assert_allclose(out, np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)


def test_a_module_without_graph_main_names_ingot_build_and_stays_short():
    from ingot import te

    A = te.placeholder((4,), name="A")
    mod = ingot.IRModule({"main": te.create_prim_func([A, te.compute((4,), lambda i: A[i] + 1.0, name="B")])})
    with pytest.raises(IngotError, match=r"ingot.build\(mod, target\)") as info:
        ingot.compile(mod, target="llvm")
    assert "T.prim_func" not in str(info.value) and len(str(info.value)) < 400


def test_load_refuses_other_objects_without_printing_them():
    from ingot.frontend import ModelLoadError

    with pytest.raises(ModelLoadError, match="ingot.compile") as info:
        ingot.load(object())
    assert "object at 0x" not in str(info.value)
