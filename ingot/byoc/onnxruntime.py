"""The ``onnxruntime`` backend: regions run as ONNX models in an ONNX Runtime ``InferenceSession``.

Note: two uses.
  * **Fallback.** ``ingot.compile(model, fallback="onnxruntime")`` imports the model with
    ``keep_unsupported=True``: every ONNX node Ingot cannot convert stays whole as an ``onnx_node``
    call (`ingot.graph.op.opaque`, typed by ONNX shape inference). `partition_fallback` makes regions
    of exactly those calls (adjacent ones merged, never a cycle); the rest of the model compiles
    natively. `fallback_report` names the ops that fell back.
  * **Offload.** ``byoc=["onnxruntime"]`` also takes the native ops this module can write as ONNX
    (`_EMIT`: linear, matmul, elementwise arithmetic, activations, softmax, transposes, static
    reshapes), like any BYOC backend.

The codegen writes each region as an ONNX model with the ``onnx`` helper API: the region's
parameters (its constants lifted to trailing parameters by the build, so weights stay in the
package's one weights blob) become graph inputs, each ``onnx_node`` call puts its stored
``NodeProto`` back (a node with several used outputs once), each native op its ONNX spelling. The
runtime module (`OnnxRuntimeModule`) saves itself as that serialized model (the thread count in its
``metadata_props``) and loads from it in a fresh process; it needs ``onnxruntime`` there, and says
so (``pip install onnxruntime``, or Ingot's ``onnx`` extra) when it is missing. It has no C entry:
plans that call it run on the executor's interpreter.

Example:
    >>> from ingot import graph as G
    >>> import ingot.byoc
    >>> x = G.Var("x", G.TensorStructInfo((2, 8), "float32"))
    >>> bb = G.BlockBuilder()
    >>> with bb.function("main", [x]):
    ...     bb.emit_func_output(bb.emit(G.op.sigmoid(bb.emit(G.op.relu(x)))))
    >>> mod = ingot.byoc.partition(bb.get(), ["onnxruntime"])
    >>> mod["onnxruntime_main_0"].attrs["Compiler"]
    'onnxruntime'
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ingot.graph.expr import Call, Constant, Function, Tuple
from ingot.graph.external import Pattern
from ingot.ir import IRModule
from ingot.ir.error import IngotError, IRError

from .base import Backend, RuntimeModule, register_backend

NAME = "onnxruntime"
#: ONNX default-domain opset of regions without ``onnx_node`` calls (the native ops' spellings
#: below are valid from opset 13 on).
DEFAULT_OPSET = 17
_MIN_NATIVE_OPSET = 13
_THREADS_KEY = "ingot.intra_op_num_threads"

INSTALL_HINT = "pip install onnxruntime (or Ingot's onnx extra: pip install 'ingot[onnx]')"


class OnnxRuntimeMissingError(IngotError, ImportError):
    """``onnxruntime`` (or ``onnx``, to build a region) is not installed; the message says what to install.

    Example:
        >>> str(OnnxRuntimeMissingError("onnxruntime", "loading region ort_main_0")).split(";")[0]
        "loading region ort_main_0 needs the Python package 'onnxruntime', which is not installed"
    """

    def __init__(self, package: str, what: str):
        hint = INSTALL_HINT if package == "onnxruntime" else "pip install onnx (or Ingot's onnx extra: pip install 'ingot[onnx]')"
        super().__init__(f"{what} needs the Python package {package!r}, which is not installed; {hint}")


def _import_onnxruntime(what: str) -> Any:
    try:
        import onnxruntime
    except ImportError:
        raise OnnxRuntimeMissingError("onnxruntime", what) from None
    return onnxruntime


def _import_onnx(what: str) -> Any:
    try:
        import onnx
    except ImportError:
        raise OnnxRuntimeMissingError("onnx", what) from None
    return onnx


# -- the runtime module ---------------------------------------------------------------------------


class OnnxRuntimeModule(RuntimeModule):
    """One region: an ONNX model (bytes) run by an ``onnxruntime.InferenceSession``.

    ``run(*inputs, *outputs)`` feeds the region's inputs (graph inputs in order) and writes the
    session's outputs in place. ``save_to_bytes()`` is the serialized ONNX model.

    Example:
        >>> from onnx import helper, TensorProto
        >>> vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [3])
        >>> g = helper.make_graph([helper.make_node("Neg", ["a"], ["b"])], "g", [vi("a")], [vi("b")])
        >>> m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)], ir_version=8)
        >>> mod = OnnxRuntimeModule(m.SerializeToString(), num_threads=1)
        >>> out = np.empty(3, "float32"); mod.run(np.arange(3, dtype="float32"), out); out
        array([-0., -1., -2.], dtype=float32)
    """

    def __init__(self, model: bytes, num_threads: int = 0, name: str = "<region>"):
        ort = _import_onnxruntime(f"the onnxruntime BYOC region {name}")
        self.model = bytes(model)
        self.name = name
        self.num_threads = int(num_threads)
        opts = ort.SessionOptions()
        opts.intra_op_num_threads = self.num_threads
        opts.inter_op_num_threads = 1
        opts.log_severity_level = 3
        try:
            self.session = ort.InferenceSession(self.model, sess_options=opts, providers=["CPUExecutionProvider"])
        except Exception as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise IRError(f"onnxruntime region {name}: ONNX Runtime {ort.__version__} refuses the region's model: "
                          f"{first}") from None
        self.input_names = [i.name for i in self.session.get_inputs()]
        self.output_names = [o.name for o in self.session.get_outputs()]

    def run(self, *arrays: Any) -> None:
        n = len(self.input_names)
        if len(arrays) != n + len(self.output_names):
            raise IRError(f"onnxruntime region {self.name}: expected {n} inputs and {len(self.output_names)} "
                          f"outputs, got {len(arrays)} arrays")
        results = self.session.run(self.output_names, dict(zip(self.input_names, arrays[:n])))
        for out, r in zip(arrays[n:], results):
            out[...] = r

    def save_to_bytes(self) -> bytes:
        return self.model

    @classmethod
    def load_from_bytes(cls, data: bytes) -> "OnnxRuntimeModule":
        ort = _import_onnxruntime("loading an exported onnxruntime BYOC region")  # fail before parsing
        del ort
        threads, name = 0, "<loaded region>"
        try:
            import onnx

            proto = onnx.load_from_string(bytes(data))
            meta = {p.key: p.value for p in proto.metadata_props}
            threads, name = int(meta.get(_THREADS_KEY, 0)), proto.graph.name or name
        except ImportError:  # onnx is optional at run time: the session's default thread count
            pass
        return cls(data, threads, name)


# -- region → ONNX model --------------------------------------------------------------------------


def _dims(shape: Any) -> "list | None":
    return None if shape is None else [d if isinstance(d, int) else str(d) for d in shape]


def _elem(dtype: Any) -> int:
    from onnx import helper

    return helper.np_dtype_to_tensor_dtype(np.dtype(str(dtype)))


class _RegionWriter:
    """Builds the ONNX graph of one region; one small function per native op (`_EMIT`)."""

    def __init__(self, func: Function, symbol: str):
        self.func, self.symbol = func, symbol
        self.names: dict = {}   # id(var) -> ONNX tensor name
        self.nodes: list = []
        self.inits: list = []
        self.opaque: dict = {}  # (node bytes, input names) -> output names of the emitted node
        self.opsets: dict = {}
        self.counter = 0

    def fresh(self, hint: str) -> str:
        self.counter += 1
        return f"{hint}_{self.counter}"

    def name(self, e: Any) -> str:
        if isinstance(e, Constant):  # the build lifts constants; a module built by hand may keep some
            from onnx import numpy_helper

            n = self.fresh("const")
            self.inits.append(numpy_helper.from_array(np.array(e.data, order="C"), n))
            return n
        try:
            return self.names[id(e)]
        except KeyError:
            raise IRError(f"onnxruntime codegen ({self.symbol}): `{e}` is not a parameter or a value of the region") \
                from None

    def node(self, op: str, inputs: list, outputs: "list | None" = None, **attrs: Any) -> str:
        from onnx import helper

        outputs = outputs or [self.fresh(op.lower())]
        self.nodes.append(helper.make_node(op, inputs, outputs, name=self.fresh(op), **attrs))
        return outputs[0]

    def const(self, array: np.ndarray) -> str:
        from onnx import numpy_helper

        n = self.fresh("c")
        self.inits.append(numpy_helper.from_array(np.array(array, order="C"), n))
        return n

    def opaque_call(self, call: Call) -> str:
        import onnx

        a = call.attrs
        ins = [self.name(x) for x in call.args]
        key = (a["node"], tuple(ins))
        if key not in self.opaque:
            node = onnx.NodeProto()
            node.ParseFromString(a["node"])
            it = iter(ins)
            renamed = [next(it) if n else "" for n in node.input]
            outs = [self.fresh(f"{a['op_type']}_out{k}") if o else "" for k, o in enumerate(node.output)]
            del node.input[:], node.output[:]
            node.input.extend(renamed)
            node.output.extend(outs)
            node.name = self.fresh(a["node_name"] or a["op_type"])
            self.nodes.append(node)
            self.opaque[key] = outs
            domain = str(a["domain"])
            version = int(a["domain_version"]) if domain else int(a["opset"])
            if self.opsets.get(domain, version) != version:
                raise IRError(f"onnxruntime codegen ({self.symbol}): ONNX nodes of opsets {self.opsets[domain]} and "
                              f"{version} of domain {domain or 'ai.onnx'!r} in one region")
            self.opsets[domain] = version
        return self.opaque[key][int(a["output_index"])]

    def write(self, num_threads: int) -> bytes:
        onnx = _import_onnx(f"the onnxruntime BYOC codegen ({self.symbol})")
        from onnx import helper

        func = self.func
        inputs = []
        for k, p in enumerate(func.params):
            self.names[id(p)] = n = f"in{k}"
            s = p.struct_info
            inputs.append(helper.make_tensor_value_info(n, _elem(s.dtype), _dims(s.shape)))
        for b in (x for blk in func.body.blocks for x in blk.bindings):
            v = b.value
            if isinstance(v, Call) and getattr(v.op, "name", None) == "onnx_node":
                self.names[id(b.var)] = self.opaque_call(v)
            elif isinstance(v, Call) and getattr(v.op, "name", None) in _EMIT:
                self.names[id(b.var)] = _EMIT[v.op.name](self, v)
            else:
                raise IRError(f"onnxruntime codegen ({self.symbol}): cannot write `{b.var.name_hint} = {v}` as ONNX; "
                              f"the backend takes onnx_node calls and {sorted(_EMIT)}")
        if self.opsets.get("", DEFAULT_OPSET) < _MIN_NATIVE_OPSET and len(self.opaque) < len(self.nodes):
            raise IRError(f"onnxruntime codegen ({self.symbol}): the region mixes ONNX nodes of opset "
                          f"{self.opsets['']} with native ops (written for opset >= {_MIN_NATIVE_OPSET}); partition the "
                          f"onnx_node calls alone (ingot.byoc.onnxruntime.partition_fallback)")
        self.opsets.setdefault("", DEFAULT_OPSET)
        body = func.body.body
        outs = list(body.fields) if isinstance(body, Tuple) else [body]
        outputs, used = [], set(self.names[id(p)] for p in func.params)
        for k, o in enumerate(outs):
            n = self.name(o)
            if n in used:  # an ONNX graph output is a distinct name, never an input
                n = self.node("Identity", [n], [f"out{k}"])
            used.add(n)
            s = o.struct_info
            outputs.append(helper.make_tensor_value_info(n, _elem(s.dtype), _dims(s.shape)))
        graph = helper.make_graph(self.nodes, self.symbol, inputs, outputs, self.inits)
        imports = [helper.make_opsetid(d, v) for d, v in sorted(self.opsets.items())]
        model = helper.make_model(graph, opset_imports=imports, producer_name="ingot")
        model.ir_version = helper.find_min_ir_version_for(imports, ignore_unknown=True)
        helper.set_model_props(model, {_THREADS_KEY: str(int(num_threads))})
        try:
            onnx.checker.check_model(model)
        except Exception as exc:
            if "No Op registered" not in str(exc) and "not a registered function/op" not in str(exc):
                raise IRError(f"onnxruntime codegen ({self.symbol}): the region's ONNX model fails the checker: "
                              f"{str(exc).strip().splitlines()[0]}") from None
        return model.SerializeToString()


# -- native ops as ONNX (one small function per op) ------------------------------------------------


def _cast_to(w: _RegionWriter, name: str, call: Call, dtype: Any) -> str:
    out_dtype = str(call.struct_info.dtype)
    return name if out_dtype == str(dtype) else w.node("Cast", [name], to=_elem(out_dtype))


def _linear(w: _RegionWriter, call: Call) -> str:
    x, wt = w.name(call.args[0]), w.name(call.args[1])
    y = w.node("MatMul", [x, w.node("Transpose", [wt], perm=[1, 0])])
    if len(call.args) == 3:
        y = w.node("Add", [y, w.name(call.args[2])])
    return _cast_to(w, y, call, call.args[0].struct_info.dtype)


def _matmul(w: _RegionWriter, call: Call) -> str:
    y = w.node("MatMul", [w.name(call.args[0]), w.name(call.args[1])])
    return _cast_to(w, y, call, call.args[0].struct_info.dtype)


def _simple(onnx_op: str) -> Callable[[_RegionWriter, Call], str]:
    def emit(w: _RegionWriter, call: Call) -> str:
        return w.node(onnx_op, [w.name(a) for a in call.args])

    return emit


def _softmax(onnx_op: str) -> Callable[[_RegionWriter, Call], str]:
    def emit(w: _RegionWriter, call: Call) -> str:
        return w.node(onnx_op, [w.name(call.args[0])], axis=int(call.attrs["axis"]))

    return emit


def _permute_dims(w: _RegionWriter, call: Call) -> str:
    axes = call.attrs["axes"]
    rank = len(call.struct_info.shape)
    perm = list(axes) if axes is not None else list(range(rank))[::-1]
    return w.node("Transpose", [w.name(call.args[0])], perm=[int(a) for a in perm])


def _reshape(w: _RegionWriter, call: Call) -> str:
    shape = np.array([int(d) for d in call.struct_info.shape], "int64")
    return w.node("Reshape", [w.name(call.args[0]), w.const(shape)])


_EMIT: "dict[str, Callable[[_RegionWriter, Call], str]]" = {
    "linear": _linear, "matmul": _matmul,
    "add": _simple("Add"), "subtract": _simple("Sub"), "multiply": _simple("Mul"), "divide": _simple("Div"),
    "relu": _simple("Relu"), "sigmoid": _simple("Sigmoid"), "tanh": _simple("Tanh"), "exp": _simple("Exp"),
    "erf": _simple("Erf"), "sqrt": _simple("Sqrt"), "negative": _simple("Neg"), "abs": _simple("Abs"),
    "softmax": _softmax("Softmax"), "log_softmax": _softmax("LogSoftmax"),
    "permute_dims": _permute_dims, "reshape": _reshape,
}

_FLOATS = ("float32", "float64")
_NUMERIC = _FLOATS + ("int32", "int64")


def _dtypes_in(allowed: tuple) -> Callable[[Call], "str | None"]:
    def check(call: Call) -> "str | None":
        for s in [a.struct_info for a in call.args] + [call.struct_info]:
            if str(getattr(s, "dtype", None)) not in allowed:
                return f"ONNX Runtime's CPU kernels for this op take {'/'.join(allowed)}, got {getattr(s, 'dtype', s)}"
        return None

    return check


def _check_reshape(call: Call) -> "str | None":
    shape = call.struct_info.shape
    if shape is None or not all(isinstance(d, int) for d in shape):
        return f"only reshapes to a static shape, got {shape}"
    return _dtypes_in(_NUMERIC)(call)


# -- fallback: the onnx_node calls alone -----------------------------------------------------------


def _graph_functions(mod: IRModule) -> list:
    return [(n, f) for n, f in mod.functions.items()
            if isinstance(f, Function) and not f.attrs.get("Primitive") and not f.attrs.get("Compiler")]


def fallback_report(mod: IRModule) -> "list[dict]":
    """One row per ``onnx_node`` call in ``mod``'s graph functions: the ONNX ops Ingot cannot compile.

    Rows have the keys of `ingot.graph.transform.partition_report` (``function``, ``binding``, ``op``,
    ``target``, ``accepted``, ``reason``) plus ``onnx_op`` and ``node`` (the ONNX node's name).

    Example:
        >>> fallback_report(IRModule({}))
        []
    """
    rows = []
    for fname, func in _graph_functions(mod):
        for i, b in enumerate(x for blk in func.body.blocks for x in blk.bindings):
            v = b.value
            if isinstance(v, Call) and getattr(v.op, "name", None) == "onnx_node":
                a = v.attrs
                op = f"{a['domain']}.{a['op_type']}" if a["domain"] else str(a["op_type"])
                rows.append({"function": fname, "index": i, "binding": b.var.name_hint, "op": "onnx_node",
                             "onnx_op": op, "node": str(a["node_name"]), "target": NAME, "accepted": True,
                             "pattern": f"{NAME}.onnx_node",
                             "reason": f"fallback: Ingot cannot compile ONNX {op} (node {a['node_name']!r})"})
    return rows


def partition_fallback(mod: IRModule) -> IRModule:
    """Outline the ``onnx_node`` calls of ``mod`` (and only those) into ``onnxruntime`` regions.

    Adjacent calls merge into one region unless that would make a cycle (`MergeCompilerRegions`);
    everything else stays for Ingot's own build.

    Example:
        >>> from ingot import graph as G
        >>> from onnx import helper
        >>> x = G.Var("x", G.TensorStructInfo((2, 3, 3), "float32"))
        >>> node = helper.make_node("Det", ["in0"], ["out0"]).SerializeToString()
        >>> bb = G.BlockBuilder()
        >>> with bb.function("main", [x]):
        ...     d = bb.emit(G.op.onnx_node(x, node=node, op_type="Det", opset=17, shape=(2,), dtype="float32"))
        ...     bb.emit_func_output(bb.emit(G.op.exp(d)))
        >>> sorted(partition_fallback(bb.get()).function_names)
        ['main', 'onnxruntime_main_0']
    """
    from ingot.graph.transform import MergeCompilerRegions, PartitionGraph
    from ingot.graph.transform.partition_graph import ANNOTATIONS

    for fname, func in _graph_functions(mod):
        marks = tuple((i, NAME) for i, b in enumerate(x for blk in func.body.blocks for x in blk.bindings)
                      if isinstance(b.value, Call) and getattr(b.value.op, "name", None) == "onnx_node")
        mod = mod.with_function(fname, func.with_attr(ANNOTATIONS, marks))
    return PartitionGraph()(MergeCompilerRegions()(mod))


def has_opaque(func: Any) -> bool:
    """Whether a graph function holds ``onnx_node`` calls (then only ONNX Runtime can run it).

    Example:
        >>> has_opaque(None)
        False
    """
    if not isinstance(func, Function):
        return False
    return any(isinstance(b.value, Call) and getattr(b.value.op, "name", None) == "onnx_node"
               for blk in func.body.blocks for b in blk.bindings)


# -- the backend -----------------------------------------------------------------------------------


class OnnxRuntimeBackend(Backend):
    """``onnx_node`` calls (ops Ingot cannot compile) and the native ops of `_EMIT`, run by ONNX Runtime.

    Example:
        >>> sorted(p.op for p in OnnxRuntimeBackend().patterns())[:3]
        ['abs', 'add', 'divide']
    """

    name = NAME

    def patterns(self) -> list:
        floats, numeric = _dtypes_in(_FLOATS), _dtypes_in(_NUMERIC)
        table = [Pattern(f"{NAME}.onnx_node", "onnx_node")]
        for op in ("linear", "matmul", "relu", "sigmoid", "tanh", "exp", "erf", "sqrt", "softmax", "log_softmax"):
            table.append(Pattern(f"{NAME}.{op}", op, floats))
        for op in ("add", "subtract", "multiply", "divide", "negative", "abs", "permute_dims"):
            table.append(Pattern(f"{NAME}.{op}", op, numeric))
        table.append(Pattern(f"{NAME}.reshape", "reshape", _check_reshape))
        return table

    def codegen(self, func: Function, target: Any) -> OnnxRuntimeModule:
        from ingot.runtime.threads import num_threads_for_target
        from ingot.target import as_target

        symbol = str(func.attrs["global_symbol"])
        threads = num_threads_for_target(as_target(target))
        model = _RegionWriter(func, symbol).write(threads)
        return OnnxRuntimeModule(model, threads, symbol)


register_backend(OnnxRuntimeBackend)
