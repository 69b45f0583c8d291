"""Memory plans of run-time-shape plans (issue #17): the first call with a binding of the symbolic dims
plans every intermediate those dims size, later calls with the same binding reuse the plan and its
arena, other bindings get their own (a bounded cache), data-sized values stay per call, outputs never
alias an arena, and concurrent callers with different batches get their single-call results."""
from __future__ import annotations

import threading

import numpy as np
import pytest

import ingot
from ingot import graph as G
from ingot.graph.plan import check_memory_plan, plan_bound_memory, result_aliases, value_lifetimes
from ingot.ir import Var as SymVar

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")
rng = np.random.default_rng(17)
W1 = rng.standard_normal((16, 8)).astype("float32") * 0.3
W2 = rng.standard_normal((16, 16)).astype("float32") * 0.3


def _mlp_module():
    """main(x: (batch, 8)) = mean(relu(relu(x W1^T) W2^T + relu(x W1^T)), axis 1): a residual keeps
    two intermediates alive at once; every size is a multiple of the symbolic batch."""
    batch = SymVar("batch", "int64")
    x = G.Var("x", G.TensorStructInfo((batch, 8), "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            a = bb.emit(G.op.relu(bb.emit(G.op.matmul(x, G.const(W1.T.copy())))))
            b = bb.emit(G.op.add(bb.emit(G.op.matmul(a, G.const(W2.T.copy()))), a))
            gv = bb.emit_output(G.op.mean(bb.emit(G.op.relu(b)), axis=(1,)))
        bb.emit_func_output(gv)
    return bb.get()


def _reference(x):
    a = np.maximum(x @ W1.T, 0)
    return np.maximum(a @ W2.T + a, 0).mean(axis=1)


@pytest.fixture(scope="module")
def mlp_ex():
    ex = G.build(_mlp_module(), "llvm -num-cores=2")
    assert ex.plans["main"]["memory"] is None and "main" not in ex.aot  # a run-time plan
    return ex


def _batch(b, seed=0):
    return np.random.default_rng(seed + b).standard_normal((b, 8)).astype("float32")


def test_batches_1_3_1_2_match_numpy_and_reuse_the_plan_of_a_repeated_binding(mlp_ex):
    vm = G.Executor(mlp_ex, ingot.cpu())
    per_call = G.Executor(mlp_ex, ingot.cpu(), max_bindings=0)
    for b in (1, 3, 1, 2):
        x = _batch(b)
        got = vm["main"](x).numpy()
        np.testing.assert_allclose(got, _reference(x), rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(got, per_call["main"](x).numpy())  # planned == allocated per call
    stats = vm.memory_stats("main")
    assert stats["static"] is False and stats["plans_made"] == 3  # batch 1 planned once, used twice
    by_batch = {s["binding"]["batch"]: s for s in stats["bindings"]}
    assert [s["binding"] for s in stats["bindings"]] == [{"batch": 3}, {"batch": 1}, {"batch": 2}]  # LRU order
    assert by_batch[1]["calls"] == 2 and by_batch[3]["calls"] == 1 and by_batch[1]["arenas"] == 1
    assert all(s["planned"] > 0 for s in stats["bindings"])
    # the arena grows with the batch (every intermediate is batch x 16 floats here)
    assert by_batch[1]["workspace_bytes"] < by_batch[2]["workspace_bytes"] < by_batch[3]["workspace_bytes"]
    assert per_call.memory_stats("main") == {"static": False, "plans_made": 0, "bindings": []}


def test_the_binding_cache_is_bounded_and_replans_an_evicted_binding(mlp_ex):
    vm = G.Executor(mlp_ex, ingot.cpu(), max_bindings=2)
    for b in (1, 2, 3):
        vm["main"](_batch(b))
    stats = vm.memory_stats()
    assert [s["binding"]["batch"] for s in stats["bindings"]] == [2, 3] and stats["plans_made"] == 3
    x = _batch(1, seed=5)
    np.testing.assert_allclose(vm["main"](x).numpy(), _reference(x), rtol=1e-5, atol=1e-6)
    assert vm.memory_stats()["plans_made"] == 4


def test_outputs_never_alias_the_arena(mlp_ex):
    vm = G.Executor(mlp_ex, ingot.cpu())
    a, b = _batch(3, seed=1), _batch(3, seed=2)
    out_a = vm["main"](a).numpy()
    kept = out_a.copy()
    vm["main"](b)  # same binding: same arena
    np.testing.assert_array_equal(out_a, kept)


def test_concurrent_callers_with_different_batches_get_single_call_results(mlp_ex):
    vm = G.Executor(mlp_ex, ingot.cpu())
    main = vm["main"]
    inputs = [_batch(b, seed=10 * k) for k, b in enumerate((1, 3, 2, 1, 4, 3))]
    expected = [main(x).numpy().copy() for x in inputs]
    threads, start, bad, errors = 4, threading.Barrier(4), [], []

    def worker(t):
        try:
            start.wait()
            order = inputs[t:] + inputs[:t]
            want = expected[t:] + expected[:t]
            for _ in range(4):
                for x, e in zip(order, want):
                    if not np.array_equal(main(x).numpy(), e):
                        bad.append((t, x.shape))
        except BaseException as e:  # noqa: BLE001 - reported by the test
            errors.append(e)

    pool = [threading.Thread(target=worker, args=(t,)) for t in range(threads)]
    for th in pool:
        th.start()
    for th in pool:
        th.join()
    assert not errors, errors
    assert not bad, f"{len(bad)} concurrent calls differ from single calls: {bad[:5]}"
    stats = vm.memory_stats()
    assert stats["plans_made"] >= 4 and {s["binding"]["batch"] for s in stats["bindings"]} == {1, 2, 3, 4}


def _concrete(plan, env, memory):
    """``plan`` with the symbolic shapes of its planned values evaluated under ``env`` and ``memory``
    as its static plan, for `check_memory_plan`."""
    from ingot.graph.plan import eval_dim_json

    values = [dict(v, shape=[eval_dim_json(d, env) for d in v["shape"]]) if str(i) in memory["offsets"] else v
              for i, v in enumerate(plan["values"])]
    return dict(plan, values=values, memory=memory)


@pytest.mark.parametrize("batch", [1, 5])
def test_a_binding_plan_is_sound(mlp_ex, batch):
    plan = mlp_ex.plans["main"]
    memory = plan_bound_memory(plan, {"batch": batch})
    assert memory is not None and memory["offsets"]
    check_memory_plan(_concrete(plan, {"batch": batch}, memory))


def test_data_sized_values_and_views_into_the_result_are_not_planned():
    n = {"var": "n"}
    plan = {"steps": [{"op": "call_tir", "args": [["input", 0]], "outs": [0]},
                      {"op": "builtin", "func": "nonzero", "args": [["value", 0]], "outs": [1]},
                      {"op": "call_tir", "args": [["value", 1]], "outs": [2]},
                      {"op": "call_tir", "args": [["value", 2]], "outs": [3]},
                      {"op": "call_packed", "func": "f", "args": [["value", 3]], "out": 4}],
            "values": [{"shape": [n, 4], "dtype": "float32", "step": 0},
                       {"shape": [2, {"var": "rt0"}], "dtype": "int64", "step": 1},
                       {"shape": [{"var": "rt0"}], "dtype": "float32", "step": 2},
                       {"shape": [n], "dtype": "float32", "step": 3},
                       {"shape": None, "dtype": None, "step": 4}],
            "output": ["value", 4], "inputs": []}
    memory = plan_bound_memory(plan, {"n": 3})
    # 0: planned; 1: a builtin's own array; 2: sized by the data (rt0); 3: the packed call may return it
    assert list(memory["offsets"]) == ["0"]
    assert result_aliases(plan) == {3, 4}
    assert value_lifetimes(plan)[0] == (0, 2)  # as long as the builtin's result (read at step 2)


def test_an_argument_of_a_builtin_lives_as_long_as_the_builtin_result():
    plan = {"steps": [{"op": "call_tir", "args": [], "outs": [0]},
                      {"op": "builtin", "args": [["value", 0]], "outs": [1]},
                      {"op": "call_tir", "args": [], "outs": [2]},
                      {"op": "call_tir", "args": [["value", 1], ["value", 2]], "outs": [3]}],
            "values": [{"shape": [4], "dtype": "float32", "step": k} for k in range(4)],
            "output": ["value", 3], "inputs": []}
    live = value_lifetimes(plan)
    assert live[0] == (0, 3)  # the builtin may return a view of value 0, read at step 3
    memory = plan_bound_memory(plan, {})
    assert memory["offsets"]["0"] != memory["offsets"]["2"]  # so value 2 cannot take its place


@pytest.mark.slow
def test_a_dynamo_exported_dynamic_batch_model_matches_onnxruntime(tmp_path):
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnxscript")  # the dynamo exporter's dependency
    ort = pytest.importorskip("onnxruntime")

    from ingot.testing.architectures import TinyConvNet

    torch.manual_seed(0)
    path = str(tmp_path / "dyn.onnx")
    example = np.random.default_rng(0).standard_normal((2, 3, 16, 16)).astype("float32")
    with torch.no_grad():
        torch.onnx.export(TinyConvNet().eval(), (torch.from_numpy(example),), path, input_names=["data"], dynamo=True,
                          dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=64)},), external_data=False)
    package = ingot.compile(ingot.load(path), target="llvm -num-cores=2")
    session = ort.InferenceSession(path, providers=["CPUExecutionProvider"])
    vm = G.Executor(package.executable, ingot.cpu())
    for b in (1, 3, 1, 2):
        x = np.random.default_rng(b).standard_normal((b, 3, 16, 16)).astype("float32")
        np.testing.assert_allclose(vm["main"](x).numpy(), session.run(None, {"data": x})[0], rtol=1e-4, atol=1e-5)
    stats = vm.memory_stats()
    assert stats["plans_made"] == 3 and {s["binding"]["batch"]: s["calls"] for s in stats["bindings"]}[1] == 2
