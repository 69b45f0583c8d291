"""ONNX LSTM / GRU / RNN (ingot/frontend/onnx/ops_rnn.py) against ONNX Runtime: directions, layouts,
initial states, biases, peepholes, linear_before_reset, clip, activations, sequence_lens. Each case is
imported both ways (the time-loop kernel, and ``unroll_rnn=True``) and evaluated with the ops' numpy
references (fast); the same cases compiled check the time-loop kernel itself (`ingot.ops.recurrent`);
a run-time sequence length is compiled once and run at several lengths; a 2-layer bidirectional LSTM
stack (a CRNN's) goes through the compiler both ways."""
from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from ingot.frontend.errors import ConversionError  # noqa: E402
from ingot.frontend.onnx import from_onnx  # noqa: E402
from ingot.frontend.reference import evaluate  # noqa: E402

F = TensorProto.FLOAT
GATES = {"LSTM": 4, "GRU": 3, "RNN": 1}
T, B, I, H = 4, 2, 3, 5


def _layer(op, prefix, x, *, direction="forward", layout=0, bias=True, init_h=False, init_c=False, peep=False,
           seq_lens=None, runtime=(), outputs=("Y", "Y_h", "Y_c"), input_size=I, hidden=H, rng=None, **attrs):
    """One recurrent node with random weights: ``(nodes, initializers, extra graph inputs as (name, array))``."""
    rng = rng or np.random.default_rng(0)
    d = 2 if direction == "bidirectional" else 1
    g = GATES[op]
    arrays = {
        "W": rng.uniform(-0.5, 0.5, (d, g * hidden, input_size)),
        "R": rng.uniform(-0.5, 0.5, (d, g * hidden, hidden)),
        "B": rng.uniform(-0.5, 0.5, (d, 2 * g * hidden)) if bias else None,
        "sequence_lens": None if seq_lens is None else np.asarray(seq_lens, np.int32),
        "initial_h": rng.uniform(-1, 1, (d, B, hidden)) if init_h else None,
        "initial_c": rng.uniform(-1, 1, (d, B, hidden)) if init_c else None,
        "P": rng.uniform(-0.5, 0.5, (d, 3 * hidden)) if peep else None,
    }
    order = ["W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"][:{"LSTM": 7, "GRU": 6, "RNN": 6}[op]]
    inputs, inits, extra = [x], [], []
    for key in order:
        value = arrays[key]
        if value is None:
            inputs.append("")
            continue
        value = value if key == "sequence_lens" else value.astype(np.float32)
        if layout and key in ("initial_h", "initial_c"):
            value = np.ascontiguousarray(value.transpose(1, 0, 2))  # batchwise: (B, D, H)
        name = f"{prefix}_{key}"
        inputs.append(name)
        if key in runtime:
            extra.append((name, value))
        else:
            inits.append(numpy_helper.from_array(value, name))
    while inputs[-1] == "":
        inputs.pop()
    outs = [f"{prefix}_{o}" if o in outputs else "" for o in ("Y", "Y_h", "Y_c")[:3 if op == "LSTM" else 2]]
    while outs[-1] == "":
        outs.pop()
    node = helper.make_node(op, inputs, outs, hidden_size=hidden, direction=direction, layout=layout, **attrs)
    return [node], inits, extra


def _model(nodes, inits, inputs, outputs, opset=14, batch_dim=None):
    """``batch_dim``: a name that replaces the batch size (axis 1 of X) in the declared input shape."""
    vi = [helper.make_tensor_value_info(n, TensorProto.INT32 if a.dtype == np.int32 else F,
                                        [a.shape[0], batch_dim, *a.shape[2:]] if batch_dim and n == "X" else a.shape)
          for n, a in inputs]
    # Outputs: Y is 4-D, Y_h and Y_c 3-D (sizes left symbolic).
    vo = [helper.make_tensor_value_info(n, F, [f"{n}_{k}" for k in range(4 if n.endswith("_Y") else 3)])
          for n in outputs]
    graph = helper.make_graph(nodes, "g", vi, vo, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _ort(model, feeds):
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _ingot(model, feeds, compiled=False, unroll=False):
    mod, _ = from_onnx(model, unroll_rnn=unroll)
    arrays = list(feeds.values())
    if compiled:
        import ingot
        from ingot import graph as G

        out = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"](*arrays)
        return [o.numpy() for o in (out if isinstance(out, tuple) else [out])]
    out = evaluate(mod, arrays)
    return [np.asarray(o) for o in (out if isinstance(out, (tuple, list)) else [out])]


def _batchwise(array, name):
    """A layout-0 array (T, D, B, H) / (D, B, H) / (T, B, I) in layout 1."""
    if array.ndim == 4:
        return array.transpose(2, 0, 1, 3)
    return array.transpose(1, 0, 2) if name.split("_", 1)[-1] in ("X", "Y_h", "Y_c", "initial_h", "initial_c") \
        else array


def _check(op, compiled=False, layout=0, outputs=None, rng_seed=0, unroll=False, **kw):
    rng = np.random.default_rng(rng_seed)
    x = rng.uniform(-1, 1, (T, B, I)).astype(np.float32)
    nodes, inits, extra = _layer(op, "l", "X", rng=rng, **kw)
    outputs = [f"l_{o}" for o in outputs] if outputs else [o for o in nodes[0].output if o]
    feeds = {"X": x, **dict(extra)}
    expected = _ort(_model(nodes, inits, list(feeds.items()), outputs), feeds)
    if layout:
        # ONNX Runtime has no batchwise layout: the same layer with layout 0 on transposed inputs gives
        # the expected values, transposed back.
        rng = np.random.default_rng(rng_seed)
        rng.uniform(-1, 1, (T, B, I))
        nodes, inits, extra = _layer(op, "l", "X", rng=rng, layout=1, **kw)
        feeds = {name: np.ascontiguousarray(_batchwise(value, name)) for name, value in feeds.items()}
        expected = [_batchwise(e, name) for e, name in zip(expected, outputs)]
    model = _model(nodes, inits, list(feeds.items()), outputs)
    actual = _ingot(model, feeds, compiled, unroll)
    assert len(actual) == len(expected)
    for name, e, a in zip(outputs, expected, actual):
        assert a.shape == e.shape, name
        np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5, err_msg=name)


CASES = [
    # op, keyword arguments of _layer
    ("LSTM", {}),
    ("LSTM", {"direction": "reverse", "init_h": True, "init_c": True}),
    ("LSTM", {"direction": "bidirectional", "init_h": True, "init_c": True, "peep": True}),
    ("LSTM", {"direction": "bidirectional", "layout": 1, "bias": False, "init_h": True}),
    ("LSTM", {"peep": True, "init_c": True, "clip": 0.4}),
    ("LSTM", {"input_forget": 1, "init_h": True, "init_c": True}),
    ("LSTM", {"direction": "bidirectional", "seq_lens": [4, 2], "init_h": True, "init_c": True, "peep": True}),
    ("LSTM", {"activations": ["HardSigmoid", "LeakyRelu", "Softsign"], "activation_alpha": [0.3, 0.05],
              "activation_beta": [0.4]}),
    ("GRU", {}),
    ("GRU", {"direction": "reverse", "init_h": True, "linear_before_reset": 1}),
    ("GRU", {"direction": "bidirectional", "layout": 1, "init_h": True}),
    ("GRU", {"direction": "bidirectional", "linear_before_reset": 1, "bias": False, "clip": 0.5}),
    ("GRU", {"direction": "bidirectional", "seq_lens": [3, 1], "init_h": True, "linear_before_reset": 1}),
    ("GRU", {"activations": ["Relu", "Tanh"], "init_h": True}),
    ("RNN", {}),
    ("RNN", {"direction": "reverse", "init_h": True, "layout": 1}),
    ("RNN", {"direction": "bidirectional", "bias": False, "activations": ["Relu", "Sigmoid"]}),
    ("RNN", {"seq_lens": [0, 3], "direction": "bidirectional", "init_h": True}),
]


@pytest.mark.parametrize("op,kw", CASES, ids=[f"{op}-{k}" for k, (op, _) in enumerate(CASES)])
def test_matches_onnxruntime(op, kw):
    _check(op, **kw)                 # the recurrence op (its numpy reference)
    _check(op, unroll=True, **kw)    # unrolled over the steps


@pytest.mark.compiler
@pytest.mark.parametrize("op,kw", CASES, ids=[f"{op}-{k}" for k, (op, _) in enumerate(CASES)])
def test_time_loop_kernel_matches_onnxruntime(op, kw):
    _check(op, compiled=True, **kw)


def test_output_subsets():
    for unroll in (False, True):
        _check("LSTM", direction="bidirectional", outputs=("Y_c",), init_c=True, unroll=unroll)
        _check("LSTM", outputs=("Y",), unroll=unroll)
        _check("GRU", direction="reverse", outputs=("Y_h",), unroll=unroll)


def test_runtime_weights_and_sequence_lens():
    # W, R, B, P, the states and sequence_lens as graph inputs (ONNX's node tests feed them so).
    _check("LSTM", direction="bidirectional", init_h=True, init_c=True, peep=True, seq_lens=[3, 4],
           runtime=("W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"))
    _check("GRU", direction="bidirectional", init_h=True, seq_lens=[2, 4], linear_before_reset=1,
           runtime=("W", "R", "B", "sequence_lens"))
    _check("LSTM", direction="reverse", init_c=True, seq_lens=[1, 4], unroll=True,
           runtime=("W", "R", "sequence_lens", "initial_c"))


@pytest.mark.compiler
def test_runtime_weights_and_sequence_lens_compiled():
    _check("LSTM", compiled=True, direction="bidirectional", init_h=True, init_c=True, peep=True, seq_lens=[3, 0],
           runtime=("W", "R", "B", "sequence_lens", "initial_h", "initial_c", "P"))
    _check("GRU", compiled=True, direction="bidirectional", init_h=True, seq_lens=[2, 4], linear_before_reset=1,
           runtime=("W", "R", "B", "sequence_lens"))
    # hidden 16: R^T in the kernel's panels, packed at import (a constant R) or by graph ops (a run-time R).
    _check("LSTM", compiled=True, hidden=16, direction="bidirectional", seq_lens=[3, 1], peep=True)
    _check("GRU", compiled=True, hidden=16, direction="bidirectional", init_h=True, runtime=("W", "R"))


def _crnn_model(batch_dim=None):
    """A CRNN-style head: (T, B, I) features → 2 stacked bidirectional LSTMs → per-step features
    (``batch_dim``: the batch size declared symbolic, as exporters with a dynamic batch axis do)."""
    rng = np.random.default_rng(1)
    n1, i1, _ = _layer("LSTM", "l1", "X", direction="bidirectional", outputs=("Y",), rng=rng)
    # Y (T, 2, B, H) → (T, B, 2H): the exporters' Transpose + Reshape between stacked layers.
    glue = [helper.make_node("Transpose", ["l1_Y"], ["l1_t"], perm=[0, 2, 1, 3]),
            helper.make_node("Reshape", ["l1_t", "shape"], ["l2_in"])]
    shape = numpy_helper.from_array(np.array([T, -1, 2 * H], np.int64), "shape")
    n2, i2, _ = _layer("LSTM", "l2", "l2_in", direction="bidirectional", outputs=("Y", "Y_h"), input_size=2 * H,
                       rng=rng)
    nodes, inits, outs = n1 + glue + n2, i1 + [shape] + i2, ["l2_Y", "l2_Y_h"]
    x = rng.uniform(-1, 1, (T, B, I)).astype(np.float32)
    return _model(nodes, inits, [("X", x)], outs, batch_dim=batch_dim), {"X": x}, outs


def test_stacked_bidirectional_lstm_reference():
    model, feeds, outs = _crnn_model()
    for unroll in (False, True):
        for name, e, a in zip(outs, _ort(model, feeds), _ingot(model, feeds, unroll=unroll)):
            np.testing.assert_allclose(a, e, rtol=1e-5, atol=1e-5, err_msg=name)


@pytest.mark.compiler
def test_stacked_bidirectional_lstm_compiled_with_a_symbolic_batch():
    import ingot
    from ingot import graph as G

    model, _, outs = _crnn_model(batch_dim="batch")
    for unroll in (False, True):
        mod, _ = from_onnx(model, unroll_rnn=unroll)
        run = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"]
        for batch in (B, 3):  # one build, run at two batch sizes
            x = np.random.default_rng(batch).uniform(-1, 1, (T, batch, I)).astype(np.float32)
            for name, e, a in zip(outs, _ort(model, {"X": x}), run(x)):
                np.testing.assert_allclose(a.numpy(), e, rtol=1e-5, atol=1e-5, err_msg=f"{name} unroll={unroll}")


def _dynamic_length_model(op, **kw):
    """One layer whose X is declared ``("seq", B, I)``: a sequence length known only at run time."""
    nodes, inits, extra = _layer(op, "l", "X", **kw)
    outputs = [o for o in nodes[0].output if o]
    vi = [helper.make_tensor_value_info("X", F, ["seq", B, I])] + \
        [helper.make_tensor_value_info(n, TensorProto.INT32 if a.dtype == np.int32 else F, a.shape) for n, a in extra]
    vo = [helper.make_tensor_value_info(n, F, [f"{n}_{k}" for k in range(4 if n.endswith("_Y") else 3)])
          for n in outputs]
    graph = helper.make_graph(nodes, "g", vi, vo, initializer=inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8), dict(extra)


@pytest.mark.compiler
@pytest.mark.parametrize("op,kw", [
    ("LSTM", {"direction": "bidirectional", "init_h": True, "init_c": True, "peep": True}),
    ("GRU", {"direction": "reverse", "seq_lens": [2, 6], "runtime": ("sequence_lens",), "init_h": True}),
    ("GRU", {"direction": "bidirectional", "linear_before_reset": 1, "clip": 0.7}),
    ("RNN", {"direction": "bidirectional", "layout": 0, "activations": ["Relu", "Tanh"], "init_h": True}),
], ids=["LSTM-bidirectional", "GRU-sequence_lens", "GRU-lbr", "RNN-bidirectional"])
def test_runtime_sequence_length_compiles_once(op, kw):
    """X's sequence length is a run-time dim: one build runs every length (issue #17)."""
    import ingot
    from ingot import graph as G

    model, extra = _dynamic_length_model(op, **kw)
    mod, _ = from_onnx(model)
    run = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"]
    for steps in (1, 3, 6):
        x = np.random.default_rng(steps).uniform(-1, 1, (steps, B, I)).astype(np.float32)
        feeds = {"X": x, **extra}
        if "sequence_lens" in str(extra):   # lengths within this run's sequence length
            feeds["l_sequence_lens"] = np.minimum(extra["l_sequence_lens"], steps).astype(np.int32)
        out = run(*feeds.values())
        out = out if isinstance(out, tuple) else (out,)
        for k, (e, a) in enumerate(zip(_ort(model, feeds), out)):
            np.testing.assert_allclose(a.numpy(), e, rtol=1e-5, atol=1e-5, err_msg=f"output {k}, T={steps}")


def test_unrolling_refuses_a_runtime_sequence_length_naming_the_node():
    model, _ = _dynamic_length_model("LSTM")
    with pytest.raises(ConversionError, match="sequence length.*shape_dict"):
        from_onnx(model, unroll_rnn=True)
    mod, _ = from_onnx(model, shape_dict={"X": [T, B, I]}, unroll_rnn=True)  # fixed with a static length
    assert mod["main"] is not None


@pytest.mark.compiler
def test_torch_crnn_with_a_dynamic_batch_compiles_once():
    """A CRNN as torch exports it with a dynamic batch: the zero ``initial_h``/``initial_c`` come from
    ``ConstantOfShape([layers * dirs, batch, H])`` over a symbolic batch (issue #17)."""
    torch = pytest.importorskip("torch")
    import io

    import ingot
    from ingot import graph as G

    class CRNN(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = torch.nn.Sequential(torch.nn.Conv2d(1, 4, 3, padding=1), torch.nn.ReLU(),
                                            torch.nn.MaxPool2d((2, 1)))
            self.lstm = torch.nn.LSTM(16, 8, num_layers=2, bidirectional=True)
            self.fc = torch.nn.Linear(16, 6)

        def forward(self, x):                          # (N, 1, 8, W)
            f = self.conv(x)                           # (N, 4, 4, W)
            f = f.reshape(f.shape[0], 16, f.shape[3]).permute(2, 0, 1)   # (W, N, 16): a sequence
            return self.fc(self.lstm(f)[0])

    torch.manual_seed(0)
    buf = io.BytesIO()
    with pytest.warns(UserWarning):  # torch's note on LSTMs exported with a dynamic batch
        torch.onnx.export(CRNN().eval(), (torch.randn(2, 1, 8, 5),), buf, input_names=["x"], output_names=["y"],
                          dynamic_axes={"x": {0: "batch"}, "y": {1: "batch"}}, dynamo=False, opset_version=17)
    model = onnx.load_from_string(buf.getvalue())
    assert "ConstantOfShape" in {n.op_type for n in model.graph.node}
    mod, _ = from_onnx(model)
    run = G.Executor(G.build(mod, "llvm"), ingot.cpu())["main"]   # one build ...
    for batch in (1, 3):                                           # ... run at two batch sizes
        x = np.random.default_rng(batch).standard_normal((batch, 1, 8, 5)).astype(np.float32)
        (expected,) = _ort(model, {"x": x})
        np.testing.assert_allclose(run(x).numpy(), expected, rtol=1e-5, atol=1e-5)


@pytest.mark.compiler
def test_a_long_aot_entry_is_compiled_at_o0_and_still_runs(monkeypatch):
    """An unrolled layer's AOT entry (thousands of calls) gets gcc's ``optimize("O0")``: gcc -O3's alias
    walking over its address-taken DLTensors dominated the build. Forced here on a small graph."""
    import ingot
    from ingot import graph as G
    from ingot.graph import aot

    plan = {"name": "main", "inputs": [{"name": "x", "shape": [4], "dtype": "float32"}], "steps": [],
            "values": [], "output": ["input", 0], "memory": {"offsets": {}, "workspace_bytes": 0}}
    assert 'optimize("O0")' not in aot.emit_aot_function(plan, "f", {}, [])   # short: gcc's -O3
    monkeypatch.setattr(aot, "AOT_O0_CHARS", 0)
    assert 'optimize("O0")' in aot.emit_aot_function(plan, "f", {}, [])
    x = G.Var("x", G.TensorStructInfo((4,), "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(G.op.exp(bb.emit(G.op.add(x, x)))))
    ex = G.build(bb.get(), "llvm")
    assert ex.aot, "the graph has an AOT entry"
    data = np.arange(4, dtype=np.float32)
    np.testing.assert_allclose(G.Executor(ex, ingot.cpu())["main"](data).numpy(), np.exp(2 * data), rtol=1e-6)


@pytest.mark.compiler
@pytest.mark.parametrize("target, panel, vector", [("llvm -mcpu=haswell -num-cores=2", 16, "float32x8"),
                                                   ("llvm -mcpu=sapphirerapids -num-cores=2", 32, "float32x16")])
def test_recurrence_register_tile_follows_the_target(target, panel, vector):
    # PackRecurrentWeights repacks R^T for the target's vector width (AVX2: panels of 16 float32 columns,
    # the importer's layout, unchanged; AVX-512: 32) and the kernel's tile follows the layout. The numbers
    # are checked against ONNX Runtime where the host runs the target's code; AVX-512 code elsewhere is
    # compiled and checked in the generated C only.
    import ingot
    from ingot import graph as G
    from ingot.codegen.build import generate_source
    from ingot.graph.transform import default_build_pipeline
    from ingot.target import Target
    from ingot.tir.function import PrimFunc

    rng = np.random.default_rng(3)
    x = rng.uniform(-1, 1, (T, B, I)).astype(np.float32)
    nodes, inits, _ = _layer("GRU", "l", "X", rng=rng, direction="bidirectional", hidden=32, init_h=False)
    outputs = [o for o in nodes[0].output if o]
    model = _model(nodes, inits, [("X", x)], outputs)
    mod, _ = from_onnx(model)
    lowered = default_build_pipeline(target)(mod)
    kernels = [f for f in lowered.functions.values() if isinstance(f, PrimFunc) and
               any(getattr(p, "name", "") == "rt" for p in f.params)]
    assert len(kernels) == 1
    rt = next(p for p in kernels[0].params if getattr(p, "name", "") == "rt")
    assert [int(d) for d in rt.shape] == [2, 3 * 32 // panel, 32, panel]
    assert vector in generate_source(kernels[0].with_attr("global_symbol", "rnn"), target).code
    if Target(target).vector_width_bits <= Target("llvm").vector_width_bits:
        out = G.Executor(G.build(mod, target), ingot.cpu())["main"](x)
        for a, e in zip(out, _ort(model, {"X": x})):
            np.testing.assert_allclose(a.numpy(), e, rtol=1e-5, atol=1e-5)
