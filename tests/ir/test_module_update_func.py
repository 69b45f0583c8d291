"""TVM's in-place ``mod.update_func(gv, f)`` / ``mod[gv] = f`` fail loudly on Ingot's immutable IRModule."""
import pytest

from ingot import te
from ingot.ir import IRModule
from ingot.ir.module import ImmutableModuleError


def _module():
    A = te.placeholder((4,), name="A")
    f = te.create_prim_func([A, te.compute((4,), lambda i: A[i] + 1, name="B")])
    return IRModule({"main": f}), f


def test_update_func_raises_and_names_with_function():
    mod, f = _module()
    with pytest.raises(ImmutableModuleError, match=r"mod = mod.with_function\('main', f\)"):
        mod.update_func(mod.get_global_var("main"), f)
    with pytest.raises(TypeError, match="immutable"):
        mod["other"] = f
    assert mod.function_names == ["main"]


def test_with_function_returns_the_new_module():
    mod, f = _module()
    new = mod.with_function("other", f)
    assert new.function_names == ["main", "other"] and mod.function_names == ["main"]
