"""The ONNX importer: an ONNX ``ModelProto`` → an `IRModule` with a graph function ``main``.

Note: the importer walks the nodes in topological order (ONNX guarantees it) and keeps, for each
tensor name, either a graph expression (a function parameter or a bound variable) or a *static*
value: a numpy array known at import time. Initializers, ``Constant`` nodes and everything computed
from them only are static, so shape subgraphs (``Shape → Gather → Concat → Reshape``) fold away
while importing. ``Shape`` of a tensor with symbolic dims gives a numpy *object* array whose entries
are ints or `ingot.ir.PrimExpr` dims; the shape ops (Gather, Concat, Slice, Unsqueeze, arithmetic)
evaluate on those arrays too, so a reshape to ``(batch, seq, 12, 64)`` stays symbolic instead of
failing. A node whose inputs are all static is evaluated with the operator's numpy reference
(`FoldConstant.try_fold`); only nodes that touch model inputs become bindings.

Identifiers from the model (tensor and node names) are data: they are used only as ``name_hint``
of the input variables and in error messages (quoted with ``repr``), never spliced into code.

Example:
    >>> import onnx
    >>> from onnx import helper, TensorProto
    >>> node = helper.make_node("Relu", ["x"], ["y"])
    >>> graph = helper.make_graph([node], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
    ...                           [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])])
    >>> mod, params = from_onnx(helper.make_model(graph))
    >>> print(mod["main"].ret_struct_info)
    R.Tensor((2, 3), dtype="float32")
"""
from __future__ import annotations

import collections
import os
from typing import Any, Callable, Mapping, Sequence

import numpy as np

from ingot import graph as G
from ingot.ir import PrimExpr
from ingot.ir import IRModule
from ingot.ir import Var as DimVar
from ingot.ir.error import IngotError

from ..errors import ConversionError, ModelLoadError, ShapeDictError, UnsupportedOpsError
from ..folding import FoldingContext
from .raw_tensors import initializer_view, raw_data_spans

# op type → sorted list of (since_version, converter). Filled by the ops_* modules via `register`.
# An op of another domain than the default one is keyed "domain:OpType" (`op_key`).
_CONVERTERS: dict[str, list[tuple[int, Callable]]] = collections.defaultdict(list)


def op_key(op_type: str, domain: str = "") -> str:
    """The converter table's key of ``op_type`` in ``domain``: the op type for the default domain,
    else ``"domain:OpType"``.

    Example:
        >>> op_key("Relu"), op_key("LabelEncoder", "ai.onnx.ml")
        ('Relu', 'ai.onnx.ml:LabelEncoder')
    """
    return op_type if domain in ("", "ai.onnx") else f"{domain}:{op_type}"


def register(op_type: str, since: int = 1, domain: str = "") -> Callable[[Callable], Callable]:
    """Register ``fn(ctx, node) -> value | list[value]`` as the converter of ``op_type`` (of
    ``domain``, default ONNX's own) for opsets ``>= since`` of that domain (the newest registration
    not newer than the model's opset is used).

    Example:
        >>> @register("MyIdentityDemo")
        ... def _identity(ctx, node):
        ...     return node.input(0)
    """

    def wrap(fn: Callable) -> Callable:
        entries = _CONVERTERS[op_key(op_type, domain)]
        entries.append((since, fn))
        entries.sort(key=lambda e: e[0])
        return fn

    return wrap


def get_converter(op_type: str, opset: int, domain: str = "") -> "Callable | None":
    """The converter of ``op_type`` (of ``domain``) at ``opset`` (that domain's version), or None.

    Example:
        >>> get_converter("Relu", 17) is not None, get_converter("Binarizer", 1, "ai.onnx.ml") is not None
        (True, True)
    """
    _load_converters()
    found = None
    for since, fn in _CONVERTERS.get(op_key(op_type, domain), ()):
        if since <= opset:
            found = fn
    return found


def supported_ops() -> list[str]:
    """The ONNX op types the importer converts, sorted (other domains' as ``"domain:OpType"``).

    Example:
        >>> "Conv" in supported_ops()
        True
    """
    _load_converters()
    return sorted(k for k in _CONVERTERS if not k.startswith("MyIdentityDemo"))


def _load_converters() -> None:
    from . import ops_control, ops_einsum, ops_extra, ops_math, ops_nn, ops_rnn, ops_tensor  # noqa: F401 - register on import
    from . import ops_ml, ops_string, ops_trees  # noqa: F401 - string tensors, ai.onnx.ml
    from . import ops_quant  # noqa: F401 - MatMulInteger, ConvInteger, QLinearMatMul, QLinearConv
    from . import ops_flex_attention, ops_training, ops_vision  # noqa: F401 - issue 17's vision/training/attention ops


# -- loading and checking ------------------------------------------------------------------------


def load_model(model_or_path: Any, *, check: bool = True, path: "str | None" = None) -> tuple[Any, str]:
    """``(ModelProto, source name)`` from a path, bytes or a ModelProto; corrupt files raise
    `ModelLoadError` naming the file. ``check=False`` skips ``onnx.checker`` (for a ModelProto that
    an earlier `load_model` call already checked: checking a proto serializes every weight again).
    ``path``: the file that bytes ``model_or_path`` were read from, so a caller that hashed the bytes
    need not read it again: its name is the source and the checker looks for external data files
    beside it, but they are not loaded (the caller decides: `ingot.workflow.load` does not key such a
    model by its bytes, then loads them with ``onnx.external_data_helper.load_external_data_for_model``).

    Example:
        >>> load_model(b"not a model")  # doctest: +IGNORE_EXCEPTION_DETAIL
        Traceback (most recent call last):
        ModelLoadError: cannot load model <bytes>: ...
    """
    import onnx

    if isinstance(model_or_path, onnx.ModelProto):
        model, source = model_or_path, "<model>"
    elif isinstance(model_or_path, (bytes, bytearray)):
        source = os.fspath(path) if path is not None else "<bytes>"
        try:
            model = onnx.load_from_string(bytes(model_or_path))
        except Exception as exc:  # protobuf raises DecodeError, RuntimeError...
            raise ModelLoadError(source, f"not a valid ONNX protobuf ({type(exc).__name__}: {exc})") from None
        if path is not None and _has_external_data(model):
            model_or_path = path  # the checker looks for the external files beside the model file
    elif isinstance(model_or_path, (str, os.PathLike)):
        source = os.fspath(model_or_path)
        if not os.path.exists(source):
            raise ModelLoadError(source, "no such file")
        try:
            model = onnx.load(source)
        except Exception as exc:
            raise ModelLoadError(source, f"the file is truncated or not an ONNX model ({type(exc).__name__}: "
                                         f"{str(exc).strip()[:200]}); re-export it") from None
    else:
        raise ModelLoadError(f"<{type(model_or_path).__name__}>", "expected a path, bytes or onnx.ModelProto, "
                             f"got {type(model_or_path).__name__} (a graph IRModule goes to ingot.compile(mod) "
                             f"or ingot.workflow.from_module(mod))")
    if not model.graph.node and not model.graph.output:
        raise ModelLoadError(source, "the model has an empty graph (is the file truncated?)")
    if not check:
        return model, source
    try:
        # Given the path, the checker reads the file itself (GPT-2's 652 MB: ~2 s, 4x slower than given
        # the bytes); given the proto, it would serialize the whole model (all weights) once more first.
        onnx.checker.check_model(model if isinstance(model_or_path, onnx.ModelProto) else
                                 bytes(model_or_path) if isinstance(model_or_path, bytearray) else model_or_path)
    except Exception as exc:
        msg = str(exc).strip().splitlines()
        if msg and "No Op registered" in msg[0]:
            # An op unknown to onnx itself: reported with all other unsupported ops, at once.
            return model, source
        raise ModelLoadError(source, f"the ONNX checker rejects it: {msg[0] if msg else type(exc).__name__}") \
            from None
    return model, source


def _has_external_data(model: Any) -> bool:
    from onnx import TensorProto

    return any(t.data_location == TensorProto.EXTERNAL for t in model.graph.initializer)


def _immutable(array: np.ndarray) -> bool:
    """Whether nobody can write ``array``'s memory: it and every array it views are read-only,
    down to a ``bytes`` object or an own buffer (then a Constant may wrap it without a copy)."""
    base: Any = array
    while isinstance(base, np.ndarray):
        if base.flags.writeable:
            return False
        base = base.base
    return base is None or isinstance(base, bytes)


def model_opset(model: Any) -> int:
    """The default-domain opset the model imports.

    Example:
        >>> from onnx import helper
        >>> model_opset(helper.make_model(helper.make_graph([], "g", [], []),
        ...             opset_imports=[helper.make_opsetid("", 13)]))
        13
    """
    for imp in model.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return 1


def find_unsupported(model: Any, opset: int) -> dict[str, list[str]]:
    """op type → node names of nodes without a converter (subgraph ops like If/Loop included).

    Example:
        >>> from onnx import helper
        >>> g = helper.make_graph([helper.make_node("Frobnicate", [], [], name="r0", domain="com.example")], "g", [], [])
        >>> find_unsupported(helper.make_model(g), 17)
        {'com.example.Frobnicate': ['r0']}
    """
    missing: dict[str, list[str]] = {}
    versions = domain_opsets(model)
    for node in model.graph.node:
        key = node.op_type if node.domain in ("", "ai.onnx") else f"{node.domain}.{node.op_type}"
        if node.domain not in ("", "ai.onnx"):  # another domain (ai.onnx.ml): a converter or nothing
            if get_converter(node.op_type, versions.get(node.domain, 1), node.domain) is None:
                missing.setdefault(key, []).append(node.name)
        elif not _convertible(node.op_type, node.domain, opset):
            missing.setdefault(key, []).append(node.name)
    return missing


def domain_opsets(model: Any) -> "dict[str, int]":
    """``{domain: version}`` of the model's opset imports (the default domain as ``""``).

    Example:
        >>> from onnx import helper
        >>> domain_opsets(helper.make_model(helper.make_graph([], "g", [], []), opset_imports=[
        ...     helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)]))
        {'': 17, 'ai.onnx.ml': 3}
    """
    return {("" if imp.domain == "ai.onnx" else imp.domain): int(imp.version) for imp in model.opset_import}


def _convertible(op_type: str, domain: str, opset: int, depth: int = 0) -> bool:
    # An op converts when it has a converter, or a function body (see functions.py) whose ops do.
    # Context-dependent bodies are only known once the input types are: assumed convertible here
    # (an unsupported op inside one is reported when the node is converted).
    from .functions import function_body, is_expandable

    if domain not in ("", "ai.onnx"):
        return False
    if get_converter(op_type, opset) is not None:
        return True
    if depth > 4 or not is_expandable(op_type, opset):
        return False
    import onnx

    try:
        body = function_body(onnx.helper.make_node(op_type, [], []), opset, [])
    except Exception:  # a context-dependent body needs the node's types: decided at conversion
        return True
    body_opset = _body_opset(body, opset)
    return all(_convertible(n.op_type, n.domain, body_opset, depth + 1) for n in body.node)


def _body_opset(body: Any, opset: int) -> int:
    for imp in body.opset_import:
        if imp.domain in ("", "ai.onnx"):
            return int(imp.version)
    return opset


def graph_inputs(model: Any) -> list[Any]:
    """The real inputs of the graph (ValueInfoProtos), initializers excluded.

    Example:
        >>> from onnx import helper, TensorProto
        >>> g = helper.make_graph([], "g", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])], [])
        >>> [i.name for i in graph_inputs(helper.make_model(g))]
        ['x']
    """
    inits = {t.name for t in model.graph.initializer}
    return [i for i in model.graph.input if i.name not in inits]


def np_dtype(elem_type: int) -> str:
    """numpy dtype name of an ONNX element type (``TensorProto.FLOAT`` → ``"float32"``).

    Example:
        >>> np_dtype(1)
        'float32'
    """
    from onnx import helper

    from onnx import TensorProto

    if elem_type == TensorProto.STRING:  # held by the executor as object arrays of str (ingot.graph.op.string)
        return "string"
    try:
        return str(np.dtype(helper.tensor_dtype_to_np_dtype(elem_type)))
    except Exception:
        raise ShapeDictError(f"ONNX element type {elem_type} is not supported") from None


def is_static_string(value: Any) -> bool:
    """Whether an import-time value is a string tensor: a numpy ``str``/``bytes`` array, or an object
    array of ``str`` (object arrays of ints and symbolic dims are shapes).

    Example:
        >>> is_static_string(np.array(["a"], dtype=object)), is_static_string(np.array([3], dtype=object))
        (True, False)
    """
    if not isinstance(value, np.ndarray):
        return False
    if value.dtype.kind in "US":
        return True
    return value.dtype == object and value.size > 0 and isinstance(value.reshape(-1)[0], (str, bytes))


# -- the conversion context ---------------------------------------------------------------------


class Node:
    """The view of one ONNX node that converters get: inputs (values), attributes, names.

    ``inputs[i]`` is a graph expression, a numpy array (static value) or None (absent optional
    input). ``attrs`` maps attribute names to Python values (ints, floats, strings, lists, numpy
    arrays for tensors).
    """

    def __init__(self, proto: Any, inputs: list, opset: int):
        from onnx import helper

        self.proto = proto
        self.op_type = proto.op_type
        self.name = proto.name or (proto.output[0] if proto.output else "")
        self.inputs = inputs
        self.num_outputs = len(proto.output)
        self.opset = opset
        self.attrs = {}
        for a in proto.attribute:
            value = helper.get_attribute_value(a)
            if isinstance(value, bytes):
                value = value.decode("utf-8", "replace")
            elif a.type == a.TENSOR:
                from onnx import numpy_helper

                value = numpy_helper.to_array(a.t)
            elif isinstance(value, list) and value and isinstance(value[0], bytes):
                value = [v.decode("utf-8", "replace") for v in value]
            self.attrs[a.name] = value

    def input(self, i: int) -> Any:
        """Input ``i`` or None when absent."""
        return self.inputs[i] if i < len(self.inputs) else None

    def attr(self, name: str, default: Any = None) -> Any:
        """Attribute ``name`` (``default`` when absent)."""
        return self.attrs.get(name, default)

    def error(self, message: str) -> ConversionError:
        """A `ConversionError` naming this node."""
        return ConversionError(self.op_type, self.name, message)


class Context(FoldingContext):
    """State of one import: the builder, the value table, symbolic dims.

    Converters use `expr` (a graph expression for an input), `static` (its numpy value if known
    at import time) and `emit` (bind an op call, folding it when all its inputs are constants).
    """

    #: Keep Div by a one-element float constant as an IEEE division (``from_onnx(exact_division=)``).
    exact_division: bool = False
    #: Import LSTM/GRU/RNN unrolled over their static sequence length (``from_onnx(unroll_rnn=)``).
    unroll_rnn: bool = False
    #: ``{domain: opset}`` of the model when unsupported nodes are kept as ``onnx_node`` calls
    #: (``from_onnx(keep_unsupported=True)``), else None.
    opaque_opsets: "dict | None" = None
    #: The value table of the graph being converted (name → value) and the model's name: the
    #: converters of If/Loop/Scan read outer values from it (`ingot.frontend.onnx.ops_control`).
    scope: "dict | None" = None
    source: str = "<model>"
    #: The builder that receives loop bodies (the outermost one; nested bodies build their own).
    root_bb: Any = None
    #: ``{domain: version}`` of the model's opset imports (`domain_opsets`): a node of another domain
    #: than ONNX's own (ai.onnx.ml) is converted at its domain's version.
    domain_versions: "dict | None" = None

    # Values (``static`` and ``emit`` come from FoldingContext) -------------------------------------
    def emit(self, call: Any) -> Any:
        """Bind ``call`` (folded when its arguments are constants); an op that moves string data runs as
        the executor's ``graph_op`` builtin instead (`ingot.frontend.onnx.ops_string`)."""
        from .ops_string import string_graph_op, touches_strings

        if touches_strings(call):
            return string_graph_op(self, call)
        return super().emit(call)

    def expr(self, value: Any, node: "Node | None" = None) -> G.Expr:
        """The value as a graph expression: static arrays become `Constant`s (`to_expr`); a shape holding
        symbolic dims (``Shape`` of a tensor sized at run time, used as data) becomes the int64 tensor of
        their run-time values, the executor's ``shape_to_tensor`` builtin (TVM Relax's ``shape_to_tensor``)."""
        if isinstance(value, np.ndarray) and value.dtype == object and value.size:
            dims = value.reshape(-1).tolist()
            if all(isinstance(d, (int, np.integer, PrimExpr)) for d in dims) and not all(
                    isinstance(d, (int, np.integer)) for d in dims):
                t = self.bb.emit(G.op.builtin("shape_to_tensor", G.ShapeExpr([d if isinstance(d, PrimExpr) else int(d)
                                                                               for d in dims]),
                                              outputs=(((len(dims),), "int64"),)))
                return t if value.ndim == 1 else self.bb.emit(G.op.reshape(t, value.shape))
        return self.to_expr(value, node)

    @staticmethod
    def to_expr(value: Any, node: "Node | None" = None) -> G.Expr:
        """The value as a graph expression (static arrays become `Constant`s; no binding is emitted)."""
        if isinstance(value, G.Expr):
            return value
        if isinstance(value, np.ndarray):
            if is_static_string(value):
                raise ConversionError(node.op_type if node else "?", node.name if node else "?",
                                      "a string constant is used as the input of an op that computes on numbers; "
                                      "string tensors feed the string operators and ops that move data only "
                                      "(docs/strings.md)")
            if value.dtype == object:
                dims = value.reshape(-1).tolist()
                if all(isinstance(d, (int, np.integer)) for d in dims):
                    return G.const(np.array(dims, "int64").reshape(value.shape))
                where = f" in node {node.name!r} ({node.op_type})" if node is not None else ""
                raise ConversionError(node.op_type if node else "?", node.name if node else "?",
                                      f"a shape containing symbolic dims {value.tolist()} is used as tensor data"
                                      f"{where}; give those dims fixed sizes with shape_dict")
            if _immutable(value):
                return G.Constant._wrap_owned(value)  # an initializer: no copy of the weights
            return G.const(value)
        raise IngotError(f"internal: unexpected value {value!r}")

    @staticmethod
    def sinfo(value: Any) -> tuple:
        """``(shape, dtype)`` of a value (shape entries are ints or symbolic dims)."""
        if isinstance(value, np.ndarray):
            if is_static_string(value):
                return tuple(value.shape), "string"
            return tuple(value.shape), ("int64" if value.dtype == object else str(value.dtype))
        s = value.struct_info
        return tuple(s.shape) if s.shape is not None else None, str(s.dtype)

    def shape(self, value: Any) -> tuple:
        """The shape of a value."""
        return self.sinfo(value)[0]

    def dtype(self, value: Any) -> str:
        """The dtype name of a value."""
        return self.sinfo(value)[1]


# -- the import ------------------------------------------------------------------------------


def from_onnx(model_or_path: Any, shape_dict: "Mapping[str, Sequence[Any]] | None" = None,
              dtype_dict: "Mapping[str, str] | str | None" = None, opset: "int | None" = None,
              keep_params_in_input: bool = False,
              const_inputs: "Mapping[str, Any] | None" = None, *, checked: bool = False,
              source: "str | None" = None, exact_division: bool = False,
              keep_unsupported: bool = False, unroll_rnn: bool = False, raw: "bytes | None" = None,
              ) -> tuple[IRModule, dict]:
    """Import an ONNX model (TVM's ``relax.frontend.onnx.from_onnx``).

    Args:
        model_or_path: a path to a ``.onnx`` file, its bytes, or an ``onnx.ModelProto``.
        shape_dict: input name → shape, overriding the model's (entries may be ints, ``-1``/None
            or a string to keep a dim symbolic).
        dtype_dict: input name → dtype (or one dtype for all inputs).
        opset: the opset to convert at (default: the model's own).
        keep_params_in_input: weights become parameters of ``main`` after the inputs (bind them
            with ``ingot.graph.transform.BindParams("main", params)``); by default they are embedded
            as constants and ``params`` is empty.
        const_inputs: input name → value known at import time (TVM's ``freeze_params`` for inputs): the
            input is dropped from ``main`` and folded into the graph, e.g. a run-time ``shape`` or
            ``axes`` input that the graph layer needs statically.
        checked: ``model_or_path`` is a ModelProto that `load_model` already checked (skip the
            checker: on a proto it re-serializes every weight).
        source: the file name to use in error messages when ``model_or_path`` is a ModelProto.
        exact_division: keep ``Div(x, c)`` by a one-element float constant as an IEEE division. By
            default it imports as ``x * (1 / c)``, as ONNX Runtime's and PyTorch's GELU compute it
            (within 1 ulp, exact when ``1 / c`` is a power of two; a vector divide costs 10-16
            multiplies).
        keep_unsupported: a node Ingot cannot convert (no converter, or the converter refuses it) is
            kept whole as ``onnx_node`` calls typed by ONNX shape inference (`ingot.frontend.onnx.opaque`)
            instead of raising `UnsupportedOpsError`; ``ingot.compile(model, fallback="onnxruntime")``
            runs them on ONNX Runtime.
        unroll_rnn: import ``LSTM``/``GRU``/``RNN`` unrolled over their static sequence length (kernels
            per step) instead of as one time-loop kernel that takes any length
            (`ingot.frontend.onnx.ops_rnn` says when each is the better one).
        raw: the serialized model that the ModelProto ``model_or_path`` was parsed from (bytes given as
            ``model_or_path`` are used themselves): initializers become read-only views of it instead
            of copies (`ingot.frontend.onnx.raw_tensors`; it stays alive as long as they do).

    Returns:
        ``(mod, params)``: ``mod["main"]`` takes the model's inputs in order and returns its output
        (a tuple when the model has several).

    Example:
        >>> from onnx import helper, TensorProto
        >>> n = helper.make_node("Add", ["a", "b"], ["c"])
        >>> vi = lambda name: helper.make_tensor_value_info(name, TensorProto.FLOAT, ["n", 4])
        >>> mod, _ = from_onnx(helper.make_model(helper.make_graph([n], "g", [vi("a"), vi("b")], [vi("c")])))
        >>> print(mod["main"].ret_struct_info)
        R.Tensor((n, 4), dtype="float32")
    """
    from onnx import numpy_helper

    # Step 1. load and check the file; find every unsupported op before converting anything.
    model, loaded_from = load_model(model_or_path, check=not checked)
    source = source or loaded_from
    opset = int(opset) if opset is not None else model_opset(model)
    missing = find_unsupported(model, opset)
    if missing and not keep_unsupported:
        raise UnsupportedOpsError(missing, source, opset)

    # Step 2. inputs: shapes from shape_dict or the model; free dims become symbolic Vars.
    inputs = graph_inputs(model)
    names = [i.name for i in inputs]
    shape_dict = dict(shape_dict or {})
    if isinstance(dtype_dict, str):
        dtype_dict = {n: dtype_dict for n in names}
    dtype_dict = dict(dtype_dict or {})
    const_inputs = dict(const_inputs or {})
    for what, d in (("shape_dict", shape_dict), ("dtype_dict", dtype_dict), ("const_inputs", const_inputs)):
        unknown = [k for k in d if k not in names]
        if unknown:
            raise ShapeDictError(f"{source}: {what} names {unknown!r}, which the model does not have as inputs; "
                                 f"the model's inputs are {names!r}")
    dims: dict[str, DimVar] = {}
    params_vars, values = [], {}
    for info in inputs:
        if info.name in const_inputs:
            values[info.name] = np.asarray(const_inputs[info.name])
            continue
        shape = _input_shape(info, shape_dict.get(info.name), dims, source)
        tt = _tensor_type(info)
        dtype = dtype_dict.get(info.name) or np_dtype(tt.elem_type)
        var = G.Var(info.name, G.TensorStructInfo(shape, dtype))
        params_vars.append(var)
        values[info.name] = var

    # Step 3. initializers: static values (or parameters when kept in the input).
    params: dict[str, np.ndarray] = {}
    raw = bytes(model_or_path) if isinstance(model_or_path, (bytes, bytearray)) else raw
    spans = raw_data_spans(raw) if raw is not None else None
    if spans is not None and len(spans) != len(model.graph.initializer):
        spans = None
    for i, init in enumerate(model.graph.initializer):
        array = initializer_view(init, spans[i], raw) if spans is not None else None
        if array is None:
            array = numpy_helper.to_array(init)
        # A view of immutable bytes, or a fresh array over bytes only it holds: made read-only, it
        # becomes a Constant uncopied.
        array.setflags(write=False)
        if keep_params_in_input:
            var = G.Var(init.name, G.TensorStructInfo(array.shape, str(array.dtype)))
            params_vars.append(var)
            params[init.name] = array
            values[init.name] = var
        else:
            values[init.name] = array

    # Step 4. convert the nodes in order.
    bb = G.BlockBuilder()
    ctx = Context(bb)
    ctx.exact_division = exact_division
    ctx.unroll_rnn = unroll_rnn
    ctx.domain_versions = domain_opsets(model)
    if keep_unsupported:
        ctx.opaque_opsets = {imp.domain if imp.domain != "ai.onnx" else "": int(imp.version)
                             for imp in model.opset_import}
    with bb.function("main", params_vars):
        with bb.dataflow():
            for proto in model.graph.node:
                _convert_node(ctx, proto, values, opset, source)
            outs = []
            for out in model.graph.output:
                if out.name not in values:
                    raise ConversionError("<graph output>", out.name, "no node produces this graph output")
                outs.append(Context.to_expr(_graph_output(values[out.name], out.name)))
            # A sequence output is a tuple of its tensors: kept nested even alone, so a caller tells it from
            # several outputs.
            result = outs[0] if len(outs) == 1 and not isinstance(outs[0], G.Tuple) else G.Tuple(outs)
            gv = bb.emit_output(result)
        bb.emit_func_output(gv)
    return bb.get(), params


def _graph_output(value: Any, name: str) -> Any:
    """A graph output: a sequence known at import time is returned as a tuple of its tensors."""
    from .sequence import ImportTimeValue

    return value.as_output(name) if isinstance(value, ImportTimeValue) else value


def _tensor_type(info: Any) -> Any:
    """The tensor type of a graph input; an ``optional(tensor)`` input is given as its tensor (a caller
    that passes a value makes it present: OptionalHasElement is then true)."""
    if info.type.HasField("optional_type") and info.type.optional_type.elem_type.HasField("tensor_type"):
        return info.type.optional_type.elem_type.tensor_type
    return info.type.tensor_type if info.type.HasField("tensor_type") else None


def _input_shape(info: Any, given: Any, dims: dict, source: str) -> tuple:
    tt = _tensor_type(info)
    if tt is None:
        raise ShapeDictError(f"{source}: input {info.name!r} is not a tensor (sequence/map inputs are not supported)")
    model_dims = [d for d in tt.shape.dim] if tt.HasField("shape") else None
    if given is not None:
        given = list(given)
        if model_dims is not None and len(model_dims) != len(given) and model_dims:
            raise ShapeDictError(f"{source}: shape_dict gives input {info.name!r} rank {len(given)} ({given}), "
                                 f"the model declares rank {len(model_dims)}")
        out = []
        for k, d in enumerate(given):
            if d is None or (isinstance(d, int) and d < 0):
                out.append(_dim_var(f"{_clean(info.name)}_dim{k}", dims))
            elif isinstance(d, str):
                out.append(_dim_var(d, dims))
            elif isinstance(d, DimVar):
                out.append(d)
            else:
                out.append(int(d))
        return tuple(out)
    if model_dims is None:
        raise ShapeDictError(f"{source}: input {info.name!r} has no shape in the model; give it with "
                             f"shape_dict={{{info.name!r}: [...]}}")
    out = []
    for k, d in enumerate(model_dims):
        if d.HasField("dim_value") and d.dim_value >= 0:  # an explicit 0 is a real (empty) size
            out.append(int(d.dim_value))
        elif d.HasField("dim_param") and d.dim_param:
            out.append(_dim_var(d.dim_param, dims))
        else:
            out.append(_dim_var(f"{_clean(info.name)}_dim{k}", dims))
    return tuple(out)


def _clean(name: str) -> str:
    # Symbolic dim names are printed in IR; keep them identifier-like (the name itself is data).
    s = "".join(c if c.isalnum() or c == "_" else "_" for c in name)[:32]
    return s if s and not s[0].isdigit() else f"d_{s}"


def _dim_var(name: str, dims: dict) -> DimVar:
    name = _clean(name)
    if name not in dims:
        dims[name] = DimVar(name, "int64")
    return dims[name]


def _convert_node(ctx: Context, proto: Any, values: dict, opset: int, source: str, depth: int = 0) -> None:
    ins = []
    for name in proto.input:
        if name == "":
            ins.append(None)
        elif name in values:
            ins.append(values[name])
        else:
            raise ConversionError(proto.op_type, proto.name or "<unnamed>",
                                  f"input {name!r} is produced by no earlier node, initializer or graph input "
                                  f"({source} is not topologically sorted or is incomplete)")
    if proto.domain not in ("", "ai.onnx"):  # ai.onnx.ml etc.: converters go by that domain's version
        opset = (ctx.domain_versions or {}).get(proto.domain, 1)
    node = Node(proto, ins, opset)
    ctx.scope, ctx.source = values, source  # If/Loop/Scan bodies read outer values by name (ops_control)
    fn = get_converter(proto.op_type, opset, proto.domain)
    if ctx.opaque_opsets is not None and fn is None and not _convertible(proto.op_type, proto.domain, opset):
        result = _opaque(ctx, node, "no converter")
    elif fn is None:
        _expand_function(ctx, node, values, source, depth)
        return
    else:
        try:
            result = fn(ctx, node)
        except (IngotError, ValueError, TypeError, IndexError, KeyError, NotImplementedError) as exc:
            first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            if ctx.opaque_opsets is not None:  # the converter refuses this node: ONNX Runtime runs it
                result = _opaque(ctx, node, first)
            else:
                err = exc if isinstance(exc, ConversionError) else node.error(first)
                if _FALLBACK_HINT not in str(err):  # once, also through nested function bodies
                    err.args = (f"{err}\n{_FALLBACK_HINT}",)
                if err is exc:
                    raise
                raise err from exc
    results = list(result) if isinstance(result, (list, tuple)) else [result]
    for name, value in zip(proto.output, results):
        if name:
            values[name] = _as_value(value)


_FALLBACK_HINT = "(ONNX Runtime can run the nodes Ingot cannot convert: ingot.compile(model, fallback=\"onnxruntime\"))"


def _opaque(ctx: Context, node: Node, why: str) -> list:
    from .opaque import convert_opaque

    return convert_opaque(ctx, node, ctx.opaque_opsets or {}, why)


def _as_value(value: Any) -> Any:
    # numpy on object arrays can return a bare element (a symbolic dim) or a numpy scalar: keep every
    # static value a numpy array.
    from .sequence import ImportTimeValue

    if isinstance(value, (G.Expr, np.ndarray, ImportTimeValue)):  # sequences/optionals: see sequence.py
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    out = np.empty((), dtype=object)
    out[()] = value
    return out


def _expand_function(ctx: Context, node: Node, values: dict, source: str, depth: int) -> None:
    """Convert a node without a converter through its ONNX function body (see functions.py)."""
    from .functions import bind_attributes, function_body, is_expandable, type_proto, with_default_attributes

    proto = node.proto
    if depth > 8 or proto.domain not in ("", "ai.onnx") or not is_expandable(proto.op_type, node.opset):
        raise UnsupportedOpsError({proto.op_type: [proto.name]}, source, node.opset)
    # Step 1. the body for these input types (context-dependent bodies read them).
    types = [type_proto(*ctx.sinfo(v)) if v is not None else type_proto(None, None) for v in node.inputs]
    try:
        body = function_body(proto, node.opset, types)
    except Exception as exc:
        raise node.error(f"no converter, and expanding its ONNX function body failed: {exc}") from None
    # Step 2. a scope of its own: formal inputs bound to the caller's values (absent ones left out).
    scope = {formal: value for formal, value in zip(body.input, node.inputs) if value is not None}
    caller = with_default_attributes(proto, body, node.opset)
    body_opset = _body_opset(body, node.opset)
    prefix = proto.name or (proto.output[0] if proto.output else proto.op_type)
    import onnx

    for inner in body.node:
        bound = bind_attributes(inner, caller)
        named = onnx.NodeProto()
        named.CopyFrom(bound)
        named.name = f"{prefix}/{inner.name or inner.op_type}"
        _convert_node(ctx, named, scope, body_opset, source, depth + 1)
    # Step 3. the caller's outputs are the body's outputs.
    for formal, name in zip(body.output, proto.output):
        if not name:
            continue
        if formal not in scope:
            raise node.error(f"its ONNX function body does not compute output {formal!r}")
        values[name] = scope[formal]
