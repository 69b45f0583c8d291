"""LocalBuilder (process pool) and LocalRunner (one child, crash/hang/wrong-result handling)."""

import numpy as np
import pytest

from ingot.testing.kernels import add_func, matmul_func  # noqa: E402

from ingot.codegen.prelude import C_PRELUDE, emit_metadata_c  # noqa: E402
from ingot.codegen.toolchain import compile_shared_library  # noqa: E402
from ingot.tune.builder import BuilderInput, LocalBuilder  # noqa: E402
from ingot.tune.database import ArgInfo  # noqa: E402
from ingot.tune.runner import LocalRunner, RunnerConfig, RunnerInput  # noqa: E402

# main(A: float32[16], B: float32[16]) with a body that varies: B = A + 1 (good), a NULL
# dereference (crash), an endless loop (hang), B = A + 2 (wrong result).
_KERNEL = r"""
INGOT_EXPORT int32_t ingot_main(IngotValue* args, int32_t* type_codes, int32_t num_args,
                                char* err, int32_t err_len) {
  INGOT_CHECK(ingot_check_num_args("main", num_args, 2, err, err_len));
  INGOT_CHECK(ingot_check_tensor("main", "A", args[0], type_codes[0], 1, kDLFloat, 32, 1, err, err_len));
  INGOT_CHECK(ingot_check_tensor("main", "B", args[1], type_codes[1], 1, kDLFloat, 32, 1, err, err_len));
  {
    const float* A = (const float*)ingot_tensor_data(INGOT_TENSOR(args, 0));
    float* B = (float*)ingot_tensor_data(INGOT_TENSOR(args, 1));
    volatile float* volatile nowhere = 0;
    (void)nowhere;
    BODY
  }
  return INGOT_OK;
}
"""
_BODIES = {
    "good": "for (int i = 0; i < 16; ++i) B[i] = A[i] + 1.0f;",
    "crash": "B[0] = *nowhere;",
    "hang": "for (;;) { B[0] += 1.0f; }",
    "wrong": "for (int i = 0; i < 16; ++i) B[i] = A[i] + 2.0f;",
}
_METADATA = {
    "version": 1, "target": "llvm",
    "functions": {"main": {"symbol": "ingot_main", "params": [
        {"name": "A", "kind": "tensor", "dtype": "float32", "shape": [16]},
        {"name": "B", "kind": "tensor", "dtype": "float32", "shape": [16], "output": True}]}},
}
ARGS = [ArgInfo("float32", (16,)), ArgInfo("float32", (16,))]


def _lib(kind, cache):
    src = C_PRELUDE + _KERNEL.replace("BODY", _BODIES[kind]) + emit_metadata_c(dict(_METADATA, source_included=False))
    return compile_shared_library(src, cache_dir=cache)


@pytest.fixture(scope="module")
def libs(tmp_path_factory):
    cache = tmp_path_factory.mktemp("kcache")
    return {k: _lib(k, cache) for k in _BODIES}


def test_runner_records_crash_hang_and_wrong_result_then_continues(libs):
    runner = LocalRunner(RunnerConfig(number=2, repeat=2, min_repeat_ms=0, timeout_s=3))
    try:
        inputs = [RunnerInput(libs[k], ARGS, libs["good"], "toy") for k in ("good", "crash", "good", "hang", "wrong", "good")]
        results = runner.run(inputs)
    finally:
        runner.shutdown()
    ok = [r.ok for r in results]
    assert ok == [True, False, True, False, False, True]
    assert "crashed" in results[1].error_msg and "SIGSEGV" in results[1].error_msg
    assert "timed out" in results[3].error_msg
    assert results[4].error_msg.startswith("WrongResult")
    assert len(results[0].run_secs) == 2 and all(s > 0 for s in results[0].run_secs)
    assert runner.restarts == 2


def test_builder_pool_builds_and_reports_errors(kernel_cache):
    with LocalBuilder(max_workers=2, cache_dir=kernel_cache) as builder:
        results = builder.build([BuilderInput(matmul_func(16, 16, 16), "llvm -num-cores=1"),
                                 BuilderInput("not a module", "llvm"),
                                 BuilderInput(add_func(), "llvm -num-cores=1")])
        assert results[0].ok and results[2].ok
        assert not results[1].ok and "BuildError" in results[1].error_msg
        # The pool is reused, and an identical candidate hits the compile cache.
        again = builder.build([BuilderInput(matmul_func(16, 16, 16), "llvm -num-cores=1")])
        assert again[0].artifact_path == results[0].artifact_path
        assert builder.pools_started == 1
    from ingot.runtime.module import Module

    lib = Module(results[0].artifact_path)
    a, b = np.random.rand(16, 16).astype("float32"), np.random.rand(16, 16).astype("float32")
    c = np.zeros((16, 16), "float32")
    lib["main"](a, b, c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-5)


def test_runner_checks_built_candidate_against_reference(kernel_cache):
    from ingot import te

    with LocalBuilder(max_workers=1, cache_dir=kernel_cache) as builder:
        ref, cand = builder.build([BuilderInput(add_func(16), "llvm"), BuilderInput(add_func(16), "llvm")])
        A = te.placeholder((16,), "float32", name="A")
        wrong = te.create_prim_func([A, te.compute((16,), lambda i: A[i] * 3.0, name="B")])
        [bad] = builder.build([BuilderInput(wrong, "llvm")])
    with LocalRunner(RunnerConfig(number=1, min_repeat_ms=0)) as runner:
        good, wrong_res = runner.run([RunnerInput(cand.artifact_path, ARGS, ref.artifact_path, "add16"),
                                      RunnerInput(bad.artifact_path, ARGS, ref.artifact_path, "add16")])
    assert good.ok and not wrong_res.ok and "WrongResult" in wrong_res.error_msg
