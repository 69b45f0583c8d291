"""Regression: the compiled node test ``test_attention_4d_gqa_attn_mask_expanded`` corrupted the heap
(``free(): corrupted unsorted chunks``).

Root cause (found with AddressSanitizer: ``heap-use-after-free ... WRITE in
ingot_kernel_expand_dims called from ingot_graph_main``): the harness runs
``G.Executor(ex, cpu())["main"](*inputs)``, which drops the Executor right after taking its AOT
runner. The runner held only the *address* of the Executor's planned workspace, so the workspace
array was freed and the AOT entry then wrote its intermediates into freed heap memory. Fixed in
``ingot/graph/executor.py`` (commit 95dd06b: the runner keeps the weights and workspace arrays
alive). These tests pin that down on the very case that crashed, plus a sanitizer run of it.
"""
from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

pytest.importorskip("onnx")
sys.path.insert(0, os.path.dirname(__file__))

import onnx_node_tests as harness  # noqa: E402

CASE = "test_attention_4d_gqa_attn_mask_expanded"


def _case():
    return next(c for c in harness.collect_cases() if c.name == CASE)


def _import(case):
    from ingot.frontend.onnx import from_onnx

    inputs = [harness._array(i) for i in case.data_sets[0][0]]
    names = [i.name for i in case.model.graph.input]
    mod, _ = from_onnx(case.model, shape_dict={n: list(v.shape) for n, v in zip(names, inputs)})
    return mod, inputs, [harness._array(e) for e in case.data_sets[0][1]]


@pytest.mark.compiler
def test_runner_outlives_a_dropped_executor_on_the_crashing_case():
    from ingot import graph as G
    import ingot

    case = _case()
    mod, inputs, expected = _import(case)
    ex = G.build(mod, "llvm")
    assert ex.plans["main"]["memory"]["workspace_bytes"] > 0  # the case does use a planned workspace
    run = G.Executor(ex, ingot.cpu())["main"]  # the Executor is dropped at once (as in the harness)
    gc.collect()
    # Fill the heap so a freed workspace would be reused (and overwritten) by these arrays.
    junk = [np.full(2048, 7.0, "float32") for _ in range(256)]
    for _ in range(3):
        out = run(*inputs)
        outs = list(out) if isinstance(out, tuple) else [out]
        for e, a in zip(expected, outs):
            np.testing.assert_allclose(a.numpy(), e, rtol=case.rtol, atol=max(case.atol, 1e-6))
    assert all((j == 7.0).all() for j in junk), "the kernels wrote into memory they do not own"


_SCRIPT = f"""
import sys
sys.path.insert(0, {os.path.dirname(os.path.abspath(__file__))!r})
import onnx_node_tests as h
r = h._run_by_name({CASE!r}, "compiled")
print("RESULT", r.status, r.detail)
"""


@pytest.mark.slow
@pytest.mark.compiler
def test_crashing_case_is_clean_under_address_sanitizer():
    """The whole compiled path (kernels + AOT entry) built with -fsanitize=address: no report."""
    gcc = shutil.which("gcc")
    if gcc is None:
        pytest.skip("needs gcc for -fsanitize=address")
    libasan = subprocess.run([gcc, "-print-file-name=libasan.so"], capture_output=True, text=True).stdout.strip()
    if not os.path.isabs(libasan) or not os.path.exists(libasan):
        pytest.skip("libasan is not installed")
    # The sanitizer flags are part of the compile command, hence of the kernel cache key: these
    # objects never mix with ordinary ones.
    env = {**os.environ, "CC": f"{gcc} -fsanitize=address -fno-omit-frame-pointer", "LD_PRELOAD": libasan,
           "ASAN_OPTIONS": "detect_leaks=0"}
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    env["PYTHONPATH"] = root + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, "-c", _SCRIPT], capture_output=True, text=True, env=env, timeout=600)
    assert "AddressSanitizer" not in proc.stderr, proc.stderr[-3000:]
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "RESULT pass" in proc.stdout, proc.stdout[-2000:]


@pytest.mark.compiler
def test_reduction_over_an_empty_axis_is_its_identity_not_garbage():
    """ReduceSum/ReduceProd over a zero-size axis: the kernel's loop is empty, so the init must not
    live inside it (it did: the output was whatever the allocator left there)."""
    from ingot import graph as G
    import ingot
    from onnx import TensorProto, helper

    from ingot.frontend.onnx import from_onnx

    for op, identity in (("ReduceSum", 0.0), ("ReduceProd", 1.0), ("ReduceSumSquare", 0.0)):
        axes = helper.make_tensor("axes", TensorProto.INT64, [1], [1])
        g = helper.make_graph([helper.make_node("Constant", [], ["a"], value=axes),
                               helper.make_node(op, ["x", "a"], ["y"], keepdims=1)], "g",
                              [helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 0, 4])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 1, 4])])
        mod, _ = from_onnx(helper.make_model(g, opset_imports=[helper.make_opsetid("", 18)]))
        run = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"]
        for _ in range(3):  # fresh output buffers each call: garbage would differ from the identity
            np.testing.assert_array_equal(run(np.zeros((3, 0, 4), "float32")).numpy(),
                                          np.full((3, 1, 4), identity, "float32"))
