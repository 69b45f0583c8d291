"""StaticCaller: the cached-signature fast path of Function calls (DESIGN.md "Executor overhead").

Every test checks numbers against numpy, and that an argument that does not match the cached
signature, even right after fast-path calls, still gets the full path's error naming the parameter.
"""

import threading

import numpy as np
import pytest

from ingot import runtime as rt
from ingot.runtime import ArgumentError, Module
from ingot.runtime.function import StaticCaller

rng = np.random.default_rng(3)


@pytest.fixture(scope="module")
def mod(lib_path):
    return Module(lib_path)


def _f32(*shape):
    return rng.standard_normal(shape).astype("float32")


def test_static_caller_only_for_static_tensor_signatures(mod):
    assert isinstance(mod["add"].static_caller(), StaticCaller)
    assert mod["axpy"].static_caller() is None  # symbolic n and a scalar among the tensors
    assert mod["fill"].static_caller() is None
    assert mod["add"].static_caller().num_inputs == 2  # C is marked as output
    assert [s for s, _ in mod["add"].static_caller().output_specs] == [(4, 8)]


def test_repeated_calls_with_new_inputs_are_correct(mod):
    call = mod["add"].static_caller()
    kept = []
    for _ in range(40):  # more than one output slab's worth of calls
        a, b = _f32(4, 8), _f32(4, 8)
        (c,) = call.run(a, b)
        assert c.shape == (4, 8) and c.dtype == np.float32 and c.ctypes.data % 64 == 0
        kept.append((a, b, c))
    # Results are never reused: every kept output still holds its own sum.
    for a, b, c in kept:
        np.testing.assert_allclose(c, a + b, rtol=1e-6)
    # NDArray arguments and caller-provided outputs take the fast path too.
    a, b, out = rt.array(_f32(4, 8)), _f32(4, 8), rt.empty((4, 8), "float32")
    call(a, b, out)
    np.testing.assert_allclose(out.numpy(), a.numpy() + b, rtol=1e-6)
    c = np.empty((4, 8), "float32")
    call(b, b, c)
    np.testing.assert_allclose(c, 2 * b, rtol=1e-6)


def test_wrong_arguments_after_fast_calls_raise_clear_errors(mod):
    call = mod["add"].static_caller()
    a = _f32(4, 8)
    call.run(a, a)
    with pytest.raises(ArgumentError, match="argument 'B' expects dtype float32, got float64"):
        call.run(a, a.astype("float64"))
    with pytest.raises(ArgumentError, match="argument 'A' dimension 1 expects 8, got 7"):
        call.run(_f32(4, 7), a)
    with pytest.raises(ArgumentError, match="argument 'A' expects ndim 2"):
        call.run(_f32(32), a)
    with pytest.raises(ArgumentError, match="'A' must be a contiguous"):
        call.run(_f32(8, 4).T, a)
    with pytest.raises(ArgumentError, match="expects 3 arguments, got 2"):
        call.run(a)
    with pytest.raises(ArgumentError, match="argument 'A' expects a tensor"):
        call.run("x", a)
    with pytest.raises(ArgumentError, match="argument 'C' is an output but"):
        ro = np.zeros((4, 8), "float32")
        ro.flags.writeable = False
        call(a, a, ro)
    with pytest.raises(ArgumentError, match="argument 'B' expects dtype float32, got float64"):
        call(a, rt.array(a, dtype="float64"), np.zeros((4, 8), "float32"))
    # ... and the fast path still works afterwards.
    (c,) = call.run(a, 2 * a)
    np.testing.assert_allclose(c, 3 * a, rtol=1e-6)


def test_inputs_the_fast_path_declines_still_run(mod):
    call = mod["add"].static_caller()
    a = _f32(4, 8)
    ro = a.copy()
    ro.flags.writeable = False  # read-only inputs are fine: the full path takes them
    (c,) = call.run(ro, a)
    np.testing.assert_allclose(c, 2 * a, rtol=1e-6)
    big_endian = a.astype(">f4")
    with pytest.raises(ArgumentError, match="'A' expects dtype float32"):
        call.run(big_endian, a)


def test_concurrent_calls_from_threads_are_correct(mod):
    call = mod["add"].static_caller()
    errors = []

    def work(seed):
        r = np.random.default_rng(seed)
        try:
            for _ in range(300):
                a = r.standard_normal((4, 8)).astype("float32")
                (c,) = call.run(a, a)
                np.testing.assert_allclose(c, 2 * a, rtol=1e-6)
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_tensor_parameters_are_never_bound(mod):
    assert mod["add"].static_caller(np.zeros((4, 8), "float32")) is None
    assert mod["add"].static_caller(1, 2, 3, 4) is None  # more values than parameters
