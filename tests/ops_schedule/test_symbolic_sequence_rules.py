"""A run-time sequence length (#17): GEMMs whose rows are (seq, batch) tokens keep the cache-blocked
rule of the constant model (`blocked_gemm_rule` fuses the run-time row axes into one row loop planned
as `rules.PLANNED_ROWS`, the last register tile guarded), and a BERT-like encoder exported with a
dynamic batch and sequence matches ONNX Runtime from one build at several lengths, tails included."""
from __future__ import annotations

import numpy as np
import pytest

import ingot
from ingot.testing.c_source import first_loop_body

TARGET = "llvm -num-cores=2"


def _token_dense(rows):
    """``C[rows..., n] = sum_k A[rows..., k] * W[k, n]`` with K = 512, N = 256 (a large GEMM at 128 rows)."""
    from ingot import te

    a = te.placeholder((*rows, 512), name="A")
    w = te.placeholder((512, 256), name="W")
    k = te.reduce_axis((0, 512), name="k")
    c = te.compute((*rows, 256), lambda *ix: te.sum(a[(*ix[:-1], k)] * w[k, ix[-1]], axis=k), name="C")
    return te.create_prim_func([a, w, c])


def _rules(func):
    from ingot.ops.schedule.default import schedule_blocks
    from ingot.target import Target
    from ingot.tir.schedule import Schedule

    log: list = []
    sch = schedule_blocks(Schedule(func), Target(TARGET), log=log)
    return {blk: rule for blk, rule, _ in log}, sch


def test_token_rows_of_runtime_length_keep_blocked_gemm_and_match_numpy():
    from ingot.ir.expr import Var

    seq, batch = Var("seq", "int64"), Var("batch", "int64")
    static_rules, _ = _rules(_token_dense((128,)))  # the constant export's flattened 128 tokens
    dyn_rules, sch = _rules(_token_dense((seq, batch)))
    assert static_rules["C"] == "blocked_gemm_rule"
    assert dyn_rules["C"] == static_rules["C"]
    lib = ingot.build(sch.mod, TARGET)
    rng = np.random.default_rng(0)
    w = rng.standard_normal((512, 256)).astype("float32")
    for s, b in ((13, 1), (5, 2), (8, 3)):  # 13 and 5 * 2 rows leave a tail tile
        a = rng.standard_normal((s, b, 512)).astype("float32")
        out = np.full((s, b, 256), np.nan, "float32")
        lib["main"](a, w, out)
        np.testing.assert_allclose(out, a @ w, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("unswitch", [True, False])
def test_token_gemm_main_branch_has_no_row_guard_in_the_k_loop(unswitch):
    # UnswitchRuntimeGuards: the row guard of the last register tile leaves the k loop; the main
    # branch is the static micro-kernel, the tail keeps its guards; numpy agrees with and without tail
    from ingot.ir.expr import Var
    from ingot.ir.transform import PassContext

    seq, batch = Var("seq", "int64"), Var("batch", "int64")
    _, sch = _rules(_token_dense((seq, batch)))
    with PassContext(config={"tir.disable_unswitch": not unswitch}):
        lib = ingot.build(sch.mod, TARGET)
    k_loop = first_loop_body(lib.get_source(), "k_0")  # the main branch's k loop is printed first
    assert ("if (" in k_loop) != unswitch
    rng = np.random.default_rng(0)
    w = rng.standard_normal((512, 256)).astype("float32")
    for rows in (13, 16, 5):
        a = rng.standard_normal((rows, 1, 512)).astype("float32")
        out = np.full((rows, 1, 256), np.nan, "float32")
        lib["main"](a, w, out)
        np.testing.assert_allclose(out, a @ w, rtol=1e-4, atol=1e-3)


def test_attention_scores_over_runtime_sequence_match_numpy():
    # Q.K^T of (batch, heads, seq, d): rows and columns of run-time length; the j loop stays a plain
    # loop (no per-lane guard) and the row tail is guarded per row
    from ingot import te
    from ingot.ir.expr import Var

    batch, seq = Var("batch", "int64"), Var("seq", "int64")
    q = te.placeholder((batch, 4, seq, 16), name="q")
    kt = te.placeholder((batch, 4, 16, seq), name="kt")
    r = te.reduce_axis((0, 16), name="r")
    s = te.compute((batch, 4, seq, seq), lambda b, h, i, j: te.sum(q[b, h, i, r] * kt[b, h, r, j], axis=r), name="S")
    rules, sch = _rules(te.create_prim_func([q, kt, s]))
    assert rules["S"] == "gemm_rule"
    lib = ingot.build(sch.mod, TARGET)
    rng = np.random.default_rng(0)
    for b, n in ((1, 13), (2, 5), (1, 16)):
        qv = rng.standard_normal((b, 4, n, 16)).astype("float32")
        kv = rng.standard_normal((b, 4, 16, n)).astype("float32")
        out = np.full((b, 4, n, n), np.nan, "float32")
        lib["main"](qv, kv, out)
        np.testing.assert_allclose(out, qv @ kv, rtol=1e-4, atol=1e-4)


def test_lone_runtime_row_axis_stays_a_batch():
    # rows = a lone run-time axis are a batch: planned as 1, not as a sequence (no blocked GEMM)
    from ingot.ir.expr import Var

    rules, _ = _rules(_token_dense((Var("batch", "int64"),)))
    assert rules["C"] != "blocked_gemm_rule"


def test_bert_like_encoder_with_dynamic_batch_and_sequence_matches_onnxruntime(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")  # the dynamo exporter's dependency
    ort = pytest.importorskip("onnxruntime")
    from ingot.testing.architectures import build

    module, x = build("bert", "small")
    torch.backends.mha.set_fastpath_enabled(False)  # the fused attention path has no ONNX export
    path = str(tmp_path / "bert_dyn.onnx")
    example = np.concatenate([x, x]).repeat(2, axis=1)  # batch 2, seq 16: nothing specializes to 1
    shapes = ({0: torch.export.Dim("batch", min=1, max=64), 1: torch.export.Dim("seq", min=2, max=512)},)
    with torch.no_grad():
        torch.onnx.export(module, (torch.from_numpy(example),), path, input_names=["data"], dynamo=True,
                          dynamic_shapes=shapes, external_data=False)
    package = ingot.compile(ingot.load(path), target=TARGET)
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    rng = np.random.default_rng(1)
    for batch in (1, 2):
        for seq in (5, 8, 13):
            data = rng.standard_normal((batch, seq, x.shape[-1])).astype("float32")
            expected = session.run(None, {"data": data})[0]
            got = next(iter(ingot.run(package, {"data": data}).values()))
            np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4, err_msg=f"batch {batch}, seq {seq}")
