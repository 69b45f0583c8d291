"""What an ONNX model needs from Ingot, said before compiling (``ingot inspect model.onnx``).

Note: `inspect_model` reads the model without the checker's veto (a model the checker rejects is
still described; the checker's message is kept) and answers four questions:

1. *Which ops will not import, and why.* An op type with no converter (and no expandable ONNX
   function body) is unsupported outright. An op that has a converter may still need one of its
   inputs known at import time (Reshape's ``shape``, Slice's ``starts``, TopK's ``K``, ...); a
   small data-flow pass marks which tensors are static the way the importer folds them
   (initializers, ``Constant``, ``Shape``/``Size`` and anything computed only from those), so a
   run-time value in such a slot is reported with the node and the input's role — as a *run-time
   input* (``runtime_inputs``, not unsupported) when the converter takes it at run time
   (`ingot.frontend.onnx.ops_dynamic`: Reshape's shape, Slice's bounds, TopK's K, ...), as
   unsupported otherwise. Last, unless
   ``try_import=False``, the model is imported once and the first conversion error (an
   unsupported attribute, say) is reported with its node.
2. *Which data types are not supported* (complex, ...), where they occur (string tensors are: the
   executor holds them, `ingot.graph.op.string`).
3. *Which inputs are dynamic*: dims given as symbols (``dim_param``) or left unknown.
4. Opset, IR version, producer, op histogram and parameter count.

Example:
    >>> from onnx import helper, TensorProto
    >>> vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, ["batch", 8])
    >>> g = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "g", [vi("x")], [vi("y")])
    >>> report = inspect_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
    >>> report.opset, report.op_counts, report.supported
    (17, {'Relu': 1}, True)
    >>> report.dynamic_inputs
    {'x': {0: 'batch'}}
"""
from __future__ import annotations

import collections
import dataclasses
from typing import Any

from ..errors import FrontendError, UnsupportedOpsError
from .importer import graph_inputs, load_model, model_opset

#: Element types Ingot imports, compiles and stores natively.
SUPPORTED_DTYPES = frozenset({"bool", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                              "float16", "bfloat16", "float32", "float64",
                              # emulated: bit patterns in bytes, exact conversions (`ingot.ops.lowp`)
                              "float8e4m3fn", "float8e4m3fnuz", "float8e5m2", "float8e5m2fnuz", "float4e2m1",
                              "float8e8m0",
                              # one a byte, ml_dtypes' layout; the C backend wraps them (`ingot.codegen.c.types`)
                              "int4", "uint4", "int2", "uint2",
                              # values the executor holds, computed on by its builtins (`ingot.graph.op.string`)
                              "string"})

# op type → (first opset it applies to, {input position: role}): inputs the converter needs at import time.
_NEEDS_CONSTANT: dict[str, tuple[int, dict[int, str]]] = {
    "Reshape": (5, {1: "shape"}), "Expand": (8, {1: "shape"}), "Tile": (6, {1: "repeats"}),
    "Slice": (10, {1: "starts", 2: "ends", 3: "axes", 4: "steps"}), "Split": (13, {1: "split"}),
    "Squeeze": (13, {1: "axes"}), "Unsqueeze": (13, {1: "axes"}), "Pad": (11, {1: "pads", 2: "constant_value",
                                                                              3: "axes"}),
    "Range": (11, {0: "start", 1: "limit", 2: "delta"}), "OneHot": (9, {1: "depth", 2: "values"}),
    "Trilu": (14, {1: "k"}), "ConstantOfShape": (9, {0: "shape"}), "TopK": (10, {1: "K"}),
    "Upsample": (9, {1: "scales"}), "Resize": (11, {2: "scales", 3: "sizes"}),
    "MaxUnpool": (9, {2: "output_shape"}), "ReduceSum": (13, {1: "axes"}),
    **{op: (18, {1: "axes"}) for op in ("ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1", "ReduceL2",
                                        "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare")},
    "AffineGrid": (20, {1: "size"}), "Col2Im": (18, {1: "image_shape", 2: "block_shape"}),
    "DFT": (17, {1: "dft_length", 2: "axis"}), "STFT": (17, {1: "frame_step", 3: "frame_length"}),
    "HannWindow": (17, {0: "size"}), "HammingWindow": (17, {0: "size"}), "BlackmanWindow": (17, {0: "size"}),
    "MelWeightMatrix": (17, {0: "num_mel_bins", 1: "dft_length", 2: "sample_rate", 3: "lower_edge_hertz",
                             4: "upper_edge_hertz"}),
}

# (op type, input position) the importer also takes when computed at run time (ops_dynamic).
_RUNTIME_OK = {("Reshape", 1), ("Expand", 1), ("Tile", 1), ("ConstantOfShape", 0), ("TopK", 1),
               *(("Slice", k) for k in (1, 2, 3, 4)), *(("Pad", k) for k in (1, 2, 3)),
               *(("Range", k) for k in (0, 1, 2)), ("Squeeze", 1), ("Unsqueeze", 1),
               *((op, 1) for op in ("ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceL1",
                                    "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare"))}

# Why an op type without a converter is missing, when there is more to say than "no converter".
_WHY_MISSING = {
    # If/Loop/Scan and the other sequence/optional ops convert (ops_control.py); SequenceMap's body is not.
    "SequenceMap": "SequenceMap (a body mapped over a sequence) is not supported; sequences are import-time values",
}


@dataclasses.dataclass(frozen=True)
class TensorInfo:
    """A graph input or output: ``shape`` entries are ints, dim names, or None (unknown); ``shape`` is
    None when the model gives no shape at all."""

    name: str
    shape: "tuple | None"
    dtype: str

    @property
    def dynamic_axes(self) -> dict:
        """axis → symbol (``"?"`` for an unnamed unknown dim) of the dims not fixed in the model."""
        if self.shape is None:
            return {}
        return {k: (d if d is not None else "?") for k, d in enumerate(self.shape) if not isinstance(d, int)}


@dataclasses.dataclass(frozen=True)
class UnsupportedNode:
    """One node the importer cannot convert: its op type, node name and the reason."""

    op_type: str
    node: str
    reason: str


@dataclasses.dataclass(frozen=True)
class RuntimeInput:
    """A shape-like input (``role``: Reshape's ``shape``, TopK's ``K``, ...) that the model computes at
    run time and the importer takes as a run-time value (`ingot.graph.runtime_shape`)."""

    op_type: str
    node: str
    role: str
    input: str


@dataclasses.dataclass(frozen=True)
class ModelReport:
    """The result of `inspect_model` (see the module note). ``supported`` is True when nothing in the
    report stops an import (no unsupported node or data type)."""

    source: str
    ir_version: int
    opset: int
    opset_imports: dict
    producer: str
    inputs: tuple
    outputs: tuple
    op_counts: dict
    subgraph_op_counts: dict
    unsupported: tuple
    unsupported_dtypes: dict
    num_params: int
    param_bytes: int
    checker_error: "str | None" = None
    #: Inputs the importer takes as values known only at run time (`RuntimeInput`s): supported,
    #: but the compiled model runs on the executor's interpreter rather than the one-call AOT entry.
    runtime_inputs: tuple = ()

    @property
    def supported(self) -> bool:
        return not self.unsupported and not self.unsupported_dtypes

    @property
    def unsupported_ops(self) -> dict:
        """op type → node names of the unsupported nodes."""
        out: dict = {}
        for u in self.unsupported:
            out.setdefault(u.op_type, []).append(u.node)
        return out

    @property
    def dynamic_inputs(self) -> dict:
        """input name → {axis: symbol} for the inputs with dims not fixed in the model."""
        return {i.name: i.dynamic_axes for i in self.inputs if i.dynamic_axes or i.shape is None}

    def to_dict(self) -> dict:
        """A JSON-ready dict (``ingot inspect --json``)."""
        d = dataclasses.asdict(self)
        d["supported"] = self.supported
        d["dynamic_inputs"] = {k: {str(a): s for a, s in v.items()} for k, v in self.dynamic_inputs.items()}
        return d

    def summary(self) -> str:
        """Plain-text lines: the verdict, unsupported ops with reasons, dtypes, dynamic inputs.

        Example:
            >>> r = ModelReport("m.onnx", 8, 17, {"": 17}, "", (), (), {"Loop": 1}, {},
            ...                 (UnsupportedNode("Loop", "l0", "control flow"),), {}, 0, 0)
            >>> print(r.summary())
            unsupported: Loop (1 node): control flow [l0]
            dynamic inputs: none
        """
        lines = []
        by_reason: dict = collections.OrderedDict()
        for u in self.unsupported:
            by_reason.setdefault((u.op_type, u.reason), []).append(u.node or "<unnamed>")
        for (op, reason), nodes in by_reason.items():
            shown = ", ".join(nodes[:3]) + (", ..." if len(nodes) > 3 else "")
            lines.append(f"unsupported: {op} ({len(nodes)} node{'s' if len(nodes) != 1 else ''}): {reason} [{shown}]")
        for dt, where in self.unsupported_dtypes.items():
            shown = ", ".join(where[:3]) + (", ..." if len(where) > 3 else "")
            lines.append(f"unsupported data type: {dt} ({shown})")
        if not lines:
            lines.append("all operators are supported, and all data types")
        dyn = self.dynamic_inputs
        if dyn:
            parts = [f"{name} {'(no shape)' if not axes else ', '.join(f'axis {a}={s}' for a, s in axes.items())}"
                     for name, axes in dyn.items()]
            lines.append("dynamic inputs: " + "; ".join(parts))
        else:
            lines.append("dynamic inputs: none")
        if self.runtime_inputs:
            shown = "; ".join(f"{r.op_type} {r.node!r} {r.role} ({r.input!r})" for r in self.runtime_inputs[:5])
            more = f"; ... ({len(self.runtime_inputs)} in all)" if len(self.runtime_inputs) > 5 else ""
            lines.append(f"run-time values (sizes bound as the model runs): {shown}{more}")
        if self.checker_error:
            lines.append(f"onnx checker: {self.checker_error}")
        return "\n".join(lines)


def inspect_model(model_or_path: Any, *, try_import: bool = True) -> ModelReport:
    """Describe an ONNX model (path, bytes or ``ModelProto``) without compiling it: opset and IR
    version, op counts, unsupported ops with reasons, unsupported data types, dynamic inputs.
    ``try_import=False`` skips the trial import (which finds attribute-level problems). A file that
    is not an ONNX model raises `ModelLoadError` naming it.

    Example:
        >>> from onnx import helper, TensorProto
        >>> vi = lambda n: helper.make_tensor_value_info(n, TensorProto.FLOAT, [2, 3])
        >>> t = helper.make_tensor_value_info("t", TensorProto.INT64, [2])
        >>> g = helper.make_graph([helper.make_node("Reshape", ["x", "t"], ["y"], name="r0")], "g", [vi("x"), t],
        ...                       [vi("y")])
        >>> r = inspect_model(helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]))
        >>> r.supported, r.runtime_inputs
        (True, (RuntimeInput(op_type='Reshape', node='r0', role='shape', input='t'),))
    """
    import onnx

    model, source = load_model(model_or_path, check=False)
    checker_error = None
    try:
        onnx.checker.check_model(model)
    except Exception as exc:  # described anyway: the report says what the checker said
        msg = str(exc).strip().splitlines()
        checker_error = msg[0] if msg else type(exc).__name__
    opset = model_opset(model)
    graph = model.graph
    counts = collections.Counter(_label(n) for n in graph.node)
    sub_counts = collections.Counter(_label(n) for n in _subgraph_nodes(graph))
    runtime: list = []
    unsupported = _missing_converters(model, opset) + _runtime_constants(graph, opset, runtime)
    bad_dtypes = _unsupported_dtypes(graph)
    if try_import and not unsupported and not bad_dtypes:
        unsupported += _trial_import(model, source)
    num, nbytes = 0, 0
    for init in graph.initializer:
        count = 1
        for d in init.dims:
            count *= int(d)
        num += count
        nbytes += count * _itemsize(init.data_type)
    return ModelReport(
        source=source, ir_version=int(model.ir_version), opset=opset,
        opset_imports={imp.domain or "": int(imp.version) for imp in model.opset_import},
        producer=" ".join(p for p in (model.producer_name, model.producer_version) if p),
        inputs=tuple(_tensor_info(i) for i in graph_inputs(model)),
        outputs=tuple(_tensor_info(o) for o in graph.output),
        op_counts=dict(counts.most_common()), subgraph_op_counts=dict(sub_counts.most_common()),
        unsupported=tuple(unsupported),
        unsupported_dtypes=bad_dtypes, num_params=num, param_bytes=nbytes,
        checker_error=checker_error, runtime_inputs=tuple(runtime))


def _label(node: Any) -> str:
    return node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"


def _subgraph_nodes(graph: Any) -> list:
    out = []
    for node in graph.node:
        for a in node.attribute:
            subs = [a.g] if a.HasField("g") else list(a.graphs)
            for g in subs:
                out.extend(g.node)
                out.extend(_subgraph_nodes(g))
    return out


def _missing_converters(model: Any, opset: int) -> list:
    from .importer import find_unsupported

    out = []
    for key, names in find_unsupported(model, opset).items():
        domain = key.rpartition(".")[0]
        if domain == "ai.onnx.ml":
            from .importer import supported_ops

            known = [k.partition(":")[2] for k in supported_ops() if k.startswith("ai.onnx.ml:")]
            reason = f"no converter in ai.onnx.ml (Ingot converts {', '.join(known)})"
        elif domain:
            reason = f"custom domain {domain!r}: Ingot imports the default ONNX domain and ai.onnx.ml only"
        else:
            hint = _WHY_MISSING.get(key)
            reason = f"no converter at opset {opset}" + (f" ({hint})" if hint else "")
        out.extend(UnsupportedNode(key, n, reason) for n in names)
    return out


def _runtime_constants(graph: Any, opset: int, runtime: list) -> list:
    """Nodes whose converter needs an input at import time that the model computes at run time; the
    inputs the importer takes at run time instead are appended to ``runtime``."""
    static = {t.name for t in graph.initializer}
    inputs = {i.name for i in graph.input} - static
    out = []
    for node in graph.node:
        if node.domain not in ("", "ai.onnx"):
            continue
        rule = _NEEDS_CONSTANT.get(node.op_type)
        if rule is not None and opset >= rule[0]:
            for pos, role in rule[1].items():
                name = node.input[pos] if pos < len(node.input) else ""
                if name and name not in static and (node.op_type, pos) in _RUNTIME_OK:
                    runtime.append(RuntimeInput(node.op_type, node.name or (node.output[0] if node.output else ""),
                                                role, name))
                elif name and name not in static:
                    source = "a graph input" if name in inputs else "computed at run time"
                    out.append(UnsupportedNode(
                        node.op_type, node.name or (node.output[0] if node.output else ""),
                        f"its {role!r} input (input {pos}, {name!r}) is {source}; the importer needs it known at "
                        f"import time (a constant or initializer, or computed from shapes only): fold it, or "
                        f"pass it as const_inputs / fix the input shapes"))
        # What the importer folds: Constant, Shape and Size always; any node whose inputs all are.
        if node.op_type in ("Constant", "Shape", "Size") or all(not n or n in static for n in node.input):
            if not any(a.HasField("g") or a.graphs for a in node.attribute):
                static.update(o for o in node.output if o)
    return out


def _trial_import(model: Any, source: str) -> list:
    from ..errors import ConversionError
    from .importer import from_onnx

    try:
        from_onnx(model, checked=True, source=source)
    except ConversionError as exc:
        first = str(exc).strip().splitlines()[0]
        _, sep, message = first.partition("): ")  # drop "cannot convert node 'n' (Op)": the report names them
        return [UnsupportedNode(exc.op_type, exc.node_name, message if sep else first)]
    except UnsupportedOpsError as exc:
        return [UnsupportedNode(op, n, "no converter") for op, names in exc.ops.items() for n in names]
    except FrontendError as exc:
        return [UnsupportedNode("<model>", "", str(exc).strip().splitlines()[0])]
    except Exception as exc:  # a bug in a converter: still a report, not a crash
        return [UnsupportedNode("<model>", "", f"import failed: {type(exc).__name__}: {str(exc)[:200]}")]
    return []


def _dtype_name(elem_type: int) -> str:
    from onnx import TensorProto

    try:
        name = TensorProto.DataType.Name(elem_type).lower()
    except ValueError:
        return f"onnx-type-{elem_type}"
    return {"float": "float32", "double": "float64"}.get(name, name)


def _tensor_info(info: Any) -> TensorInfo:
    t = info.type
    kind = t.WhichOneof("value")
    if kind != "tensor_type":
        return TensorInfo(info.name, None, (kind or "unknown").replace("_type", ""))
    tt = t.tensor_type
    shape = None
    if tt.HasField("shape"):
        shape = tuple(int(d.dim_value) if d.HasField("dim_value") else (d.dim_param or None) for d in tt.shape.dim)
    return TensorInfo(info.name, shape, _dtype_name(tt.elem_type))


def _unsupported_dtypes(graph: Any) -> dict:
    found: dict = {}

    def note(dtype: str, where: str) -> None:
        if dtype not in SUPPORTED_DTYPES and dtype != "undefined":
            found.setdefault(dtype, []).append(where)

    for vi in list(graph.input) + list(graph.output) + list(graph.value_info):
        info = _tensor_info(vi)
        note(info.dtype, repr(vi.name))
    for init in graph.initializer:
        note(_dtype_name(init.data_type), repr(init.name))
    for node in graph.node:
        name = node.name or (node.output[0] if node.output else node.op_type)
        for a in node.attribute:
            if a.name in ("to", "dtype", "output_dtype") and a.type == a.INT:
                note(_dtype_name(a.i), f"{node.op_type} {name!r}")
            elif a.HasField("t"):
                note(_dtype_name(a.t.data_type), f"{node.op_type} {name!r}")
    return found


def _itemsize(elem_type: int) -> int:
    from onnx import helper

    try:
        return int(helper.tensor_dtype_to_np_dtype(elem_type).itemsize)
    except Exception:
        return 4
