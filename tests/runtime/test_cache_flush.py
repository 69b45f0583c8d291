"""Cold-cache timing: ``ingot_time_function_flushed`` / ``time_evaluator(..., cache_flush=True)``.

Tests never assert times: they check that flushed timing runs the function the expected number of
times, leaves every argument's data intact, and fails with clear messages.
"""

import numpy as np
import pytest

import ingot.runtime as rt
from ingot.codegen.prelude import C_PRELUDE, emit_metadata_c
from ingot.codegen.toolchain import CompileOptions, compile_shared_library
from ingot.runtime.errors import ArgumentError, KernelError

# Warnings are errors: the prelude's timer must compile cleanly.
STRICT = CompileOptions(extra_flags=("-Wall", "-Wextra", "-Werror"))

# count(X: float32[n], Calls: int64[1], Out: float32[n]): Out = 2 X, Calls[0] += 1 per call.
_KERNELS = r"""
INGOT_EXPORT int32_t ingot_count(IngotValue* args, int32_t* type_codes, int32_t num_args,
                                 char* err, int32_t err_len) {
  int64_t n;
  INGOT_CHECK(ingot_check_num_args("count", num_args, 3, err, err_len));
  INGOT_CHECK(ingot_check_tensor("count", "X", args[0], type_codes[0], 1, kDLFloat, 32, 1, err, err_len));
  n = INGOT_TENSOR(args, 0)->shape[0];
  INGOT_CHECK(ingot_check_tensor("count", "Calls", args[1], type_codes[1], 1, kDLInt, 64, 1, err, err_len));
  INGOT_CHECK(ingot_check_tensor("count", "Out", args[2], type_codes[2], 1, kDLFloat, 32, 1, err, err_len));
  INGOT_CHECK(ingot_check_dim_equal("count", "Out", 0, INGOT_TENSOR(args, 2)->shape[0], "n", n, err, err_len));
  {
    const float* X = (const float*)ingot_tensor_data(INGOT_TENSOR(args, 0));
    int64_t* calls = (int64_t*)ingot_tensor_data(INGOT_TENSOR(args, 1));
    float* Out = (float*)ingot_tensor_data(INGOT_TENSOR(args, 2));
    #pragma omp parallel for
    for (int64_t i = 0; i < n; ++i) Out[i] = 2.0f * X[i];
    calls[0] += 1;
  }
  return INGOT_OK;
}
INGOT_EXPORT int32_t ingot_fail(IngotValue* args, int32_t* type_codes, int32_t num_args,
                                char* err, int32_t err_len) {
  (void)args; (void)type_codes; (void)num_args;
  return ingot_set_error(err, err_len, INGOT_ERR_RUNTIME, "fail: always fails");
}
"""
_METADATA = {
    "version": 1, "target": "c",
    "functions": {
        "count": {"symbol": "ingot_count", "params": [
            {"name": "X", "kind": "tensor", "dtype": "float32", "shape": ["n"]},
            {"name": "Calls", "kind": "tensor", "dtype": "int64", "shape": [1]},
            {"name": "Out", "kind": "tensor", "dtype": "float32", "shape": ["n"]}]},
        "fail": {"symbol": "ingot_fail", "params": [
            {"name": "X", "kind": "tensor", "dtype": "float32", "shape": [2]}]},
    },
}


@pytest.fixture(scope="module")
def mod(tmp_path_factory):
    src = C_PRELUDE + _KERNELS + emit_metadata_c(_METADATA)
    return rt.Module(compile_shared_library(src, STRICT, cache_dir=tmp_path_factory.mktemp("flush-cache")))


def _args(n=1 << 16):
    x = np.random.default_rng(0).uniform(-1, 1, n).astype("float32")
    return x, np.zeros(1, "int64"), np.empty(n, "float32")


@pytest.mark.parametrize("number,repeat,min_ms", [(1, 5, 0), (3, 4, 0)])
def test_flushed_timing_calls_and_data(mod, number, repeat, min_ms):
    x, calls, out = _args()
    x0 = x.copy()
    res = mod.time_evaluator("count", rt.cpu(0), number=number, repeat=repeat, min_repeat_ms=min_ms,
                             cache_flush=True)(x, calls, out)
    assert len(res.results) == repeat and all(r > 0 for r in res.results)
    assert calls[0] == 1 + number * repeat  # one warm-up call, then every timed call exactly once
    np.testing.assert_array_equal(x, x0)  # clflush writes back: no data is lost
    np.testing.assert_array_equal(out, 2 * x0)


def test_flushed_timing_min_repeat_ms_counts_timed_calls(mod):
    x, calls, out = _args(1 << 10)
    res = mod.time_evaluator("count", rt.cpu(0), number=1, repeat=2, min_repeat_ms=2, cache_flush=True)(x, calls, out)
    # each repeat runs calls until its *timed* calls add up to 2 ms (a repeat of k calls with mean t
    # lasted k t >= 2 ms), so the timed calls, however many per repeat, add up to at least 4 ms
    timed_calls = int(calls[0]) - 1
    assert len(res.results) == 2 and res.min > 0 and timed_calls >= 2
    assert max(res.results) * timed_calls >= 4e-3 * (1 - 1e-9)
    np.testing.assert_array_equal(out, 2 * x)


def test_function_time_keyword(mod):
    x, calls, out = _args(256)
    secs = mod["count"].time((x, calls, out), 2, 3, 0, cache_flush=True)
    assert len(secs) == 3 and calls[0] == 7
    warm = mod["count"].time((x, calls, out), 2, 3, 0)
    assert len(warm) == 3 and calls[0] == 14


def test_flushed_timing_errors(mod):
    x, calls, out = _args(8)
    with pytest.raises(ArgumentError, match="count: expects 3 arguments"):
        mod.time_evaluator("count", rt.cpu(0), cache_flush=True)(x, calls)
    with pytest.raises(ArgumentError, match="Calls"):
        mod.time_evaluator("count", rt.cpu(0), cache_flush=True)(x, np.zeros(1, "float32"), out)
    with pytest.raises(KernelError, match="fail: always fails"):
        mod.time_evaluator("fail", rt.cpu(0), cache_flush=True)(np.zeros(2, "float32"))
    with pytest.raises(rt.IngotRuntimeError, match="number and repeat"):
        mod.time_evaluator("count", rt.cpu(0), repeat=0, cache_flush=True)
    with pytest.raises(rt.IngotRuntimeError, match="cache_flush must be True, False or a list"):
        mod.time_evaluator("count", rt.cpu(0), cache_flush="yes")


def test_library_without_flushed_timer_fails_loudly(tmp_path):
    # A library built before ABI version 2: it has the warm timer but not the flushed one.
    src = r"""
    #include <stdint.h>
    const int32_t ingot_abi_version = 1;
    int32_t ingot_time_function(void) { return 0; }
    int32_t twice(void) { return 0; }
    """
    old = rt.Module(compile_shared_library(src, cache_dir=tmp_path))
    with pytest.raises(rt.IngotRuntimeError, match=r"ABI version 1.*needs 3.*rebuild"):
        old.time_evaluator("twice", rt.cpu(0), cache_flush=True)


@pytest.mark.parametrize("cache_flush", [True, [2]])
def test_abi2_flushed_timer_without_mask_is_refused(tmp_path, cache_flush):
    # ABI version 2 exported ingot_time_function_flushed without the flush mask: calling it with the
    # version-3 arguments would shift them, so the runtime refuses it before any call.
    src = r"""
    #include <stdint.h>
    const int32_t ingot_abi_version = 2;
    int32_t ingot_time_function(void) { return 0; }
    int32_t ingot_time_function_flushed(void) { return 0; }
    int32_t twice(void) { return 0; }
    """
    old = rt.Module(compile_shared_library(src, cache_dir=tmp_path))
    with pytest.raises(rt.IngotRuntimeError, match=r"ABI version 2.*no flush mask.*needs ABI version 3.*rebuild"):
        old.time_evaluator("twice", rt.cpu(0), cache_flush=cache_flush)
    old.time_evaluator("twice", rt.cpu(0), cache_flush=False)  # the warm timer is still there


@pytest.mark.parametrize("indices", [[2], [1, 2], [0, -1], [], (0, 1, 2)])
def test_flush_selected_arguments_calls_and_data(mod, indices):
    x, calls, out = _args()
    x0 = x.copy()
    res = mod.time_evaluator("count", rt.cpu(0), number=2, repeat=3, cache_flush=indices)(x, calls, out)
    assert len(res.results) == 3 and all(r > 0 for r in res.results)
    assert calls[0] == 1 + 2 * 3  # the counter itself may be flushed: clflush writes it back first
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(out, 2 * x0)


def test_flush_indices_are_checked(mod):
    # Python checks the indices against the signature before anything runs.
    from ingot.runtime.function import flush_indices

    assert flush_indices(True, 3) == [1, 2] and flush_indices((0, -1), 3) == [0, 2]
    fn = mod["count"]
    x, calls, out = _args(8)
    with pytest.raises(rt.IngotRuntimeError, match=r"cache_flush index 3 is out of range for count.*3 argument"):
        mod.time_evaluator("count", rt.cpu(0), cache_flush=[3])
    with pytest.raises(rt.IngotRuntimeError, match=r"cache_flush index -4 is out of range"):
        fn.time((x, calls, out), 1, 1, 0, cache_flush=[-4])
    with pytest.raises(rt.IngotRuntimeError, match=r"cache_flush index 'a' is not an integer"):
        mod.time_evaluator("count", rt.cpu(0), cache_flush=["a"])
    np.testing.assert_array_equal(calls, [0])  # nothing ran


_SCALAR_KERNEL = r"""
INGOT_EXPORT int32_t ingot_scale(IngotValue* args, int32_t* type_codes, int32_t num_args,
                                 char* err, int32_t err_len) {
  (void)args; (void)type_codes; (void)num_args; (void)err; (void)err_len;
  return INGOT_OK;
}
"""


def test_flushing_a_scalar_argument_names_it(tmp_path):
    meta = {"version": 1, "target": "c", "functions": {"scale": {"symbol": "ingot_scale", "params": [
        {"name": "X", "kind": "tensor", "dtype": "float32", "shape": [4]},
        {"name": "alpha", "kind": "scalar", "dtype": "float32"}]}}}
    lib = rt.Module(compile_shared_library(C_PRELUDE + _SCALAR_KERNEL + emit_metadata_c(meta), STRICT,
                                           cache_dir=tmp_path))
    with pytest.raises(rt.IngotRuntimeError, match=r"cache_flush index 1 names parameter 'alpha'.*only tensor"):
        lib.time_evaluator("scale", rt.cpu(0), cache_flush=[1])



def test_c_mask_selects_by_position(tmp_path):
    # A library without metadata: no Python signature check, so the C timer sees the mask itself.
    # It flushes exactly the selected positions: selecting the int argument is refused naming its
    # index, selecting only the tensor (or nothing) times fine.
    lib = rt.Module(compile_shared_library(C_PRELUDE + _SCALAR_KERNEL, STRICT, cache_dir=tmp_path))
    x = np.ones(4, "float32")
    with pytest.raises(rt.IngotRuntimeError, match=r"argument 1 is selected for flushing but is not a tensor"):
        lib.time_evaluator("ingot_scale", rt.cpu(0), cache_flush=[1])(x, 3)
    assert lib.time_evaluator("ingot_scale", rt.cpu(0), cache_flush=True)(x, 3).min >= 0  # TVM's: tensors only
    assert lib.time_evaluator("ingot_scale", rt.cpu(0), repeat=2, cache_flush=[0])(x, 3).min > 0
    assert lib.time_evaluator("ingot_scale", rt.cpu(0), repeat=2, cache_flush=[])(x, 3).min >= 0
    np.testing.assert_array_equal(x, np.ones(4, "float32"))
