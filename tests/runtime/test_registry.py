import numpy as np
import pytest

from ingot import runtime as rt
from ingot.runtime import (
    NDArray,
    get_global_func,
    list_global_func_names,
    register_func,
    remove_global_func,
)


@pytest.fixture(autouse=True)
def _cleanup():
    yield
    for name in list_global_func_names():
        if name.startswith("test."):
            remove_global_func(name)


def test_register_decorator_and_call():
    seen = []

    @register_func("test.linear")
    def linear(x, w, out):
        seen.append((type(x), type(w), type(out)))
        out.numpy()[:] = x.numpy() @ w.numpy()

    x, w = np.ones((2, 3), "float32"), np.ones((3, 4), "float32")
    out = np.zeros((2, 4), "float32")
    get_global_func("test.linear")(x, rt.array(w), out)
    assert seen == [(NDArray, NDArray, NDArray)]  # registered functions receive NDArrays
    np.testing.assert_array_equal(out, np.full((2, 4), 3.0))
    assert "test.linear" in list_global_func_names()
    assert linear.__name__ == "linear"  # the decorator returns the function itself


def test_register_plain_call_and_scalars():
    register_func("test.add", lambda a, b: a + b)
    assert get_global_func("test.add")(2, 3) == 5


def test_register_by_function_name():
    @register_func
    def test_by_name_func():
        return 1

    assert get_global_func("test_by_name_func")() == 1
    remove_global_func("test_by_name_func")


def test_duplicate_needs_override():
    register_func("test.dup", lambda: 1)
    with pytest.raises(rt.IngotRuntimeError, match="already registered.*override=True"):
        register_func("test.dup", lambda: 2)
    register_func("test.dup", lambda: 2, override=True)
    assert get_global_func("test.dup")() == 2


def test_missing_function():
    register_func("test.relu", lambda x: x)
    assert get_global_func("test.nothing", allow_missing=True) is None
    with pytest.raises(KeyError, match="no global function named 'test.rel'.*did you mean 'test.relu'"):
        get_global_func("test.rel")


@pytest.mark.compiler
def test_registered_function_called_from_c(cache_dir):
    """A kernel calls a registered Python function through the packed C ABI (call_packed)."""
    from ingot.codegen.prelude import C_PRELUDE
    from ingot.codegen.toolchain import compile_shared_library

    src = C_PRELUDE + r"""
    INGOT_EXPORT int32_t call_it(IngotValue* args, int32_t* codes, int32_t n, char* err, int32_t len) {
      union { void* p; IngotPackedFunc f; } u;
      INGOT_CHECK(ingot_check_num_args("call_it", n, 3, err, len));
      u.p = args[0].v_handle;
      return u.f(args + 1, codes + 1, 2, err, len);
    }
    """
    mod = rt.Module(compile_shared_library(src))

    @register_func("test.fill")
    def fill(x, value):
        assert isinstance(x, NDArray)
        x.numpy()[:] = value

    pf = get_global_func("test.fill")
    x = np.zeros(4, "float32")
    mod["call_it"](pf.as_c_function(), x, 2.5)
    assert x.tolist() == [2.5] * 4

    @register_func("test.boom")
    def boom(x, value):
        raise ValueError("bad value")

    with pytest.raises(rt.KernelError, match="test.boom: ValueError: bad value"):
        mod["call_it"](get_global_func("test.boom").as_c_function(), x, 1.0)
