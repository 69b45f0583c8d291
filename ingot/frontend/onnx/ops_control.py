"""ONNX converters: control flow (If, Loop, Scan) and the sequence / optional ops.

Note: an ONNX subgraph (If's branches, Loop's and Scan's body) may read any value of the graphs
around it by name. The importer keeps the value table of the graph being converted in
``ctx.scope``; a subgraph is converted in a scope of its own that sees every outer value.

* **If** with a condition known at import time imports the taken branch inline (the other is never
  converted). Otherwise both branches are converted into `SeqExpr`s over the outer values and bound
  as one `ingot.graph.control_flow.If`.
* **Loop** and **Scan** bodies become graph functions of the module (private, named after the node):
  their parameters are the ONNX body inputs followed by the outer values the body reads (captures,
  passed by the ``loop``/``scan`` call). Outer values known at import time are folded into the body
  instead. A body is imported with the carried values' static shapes; when the body changes a carried
  value's shape, it is imported again with those dimensions unknown.
* **Sequences / optionals** are import-time values (`ingot.frontend.onnx.sequence`).

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> all(get_converter(op, 17) is not None for op in ("If", "Loop", "Scan", "SplitToSequence"))
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot import graph as G
from ingot.ir.error import IngotError
from ingot.graph.control_flow import If, join_struct_info
from ingot.graph.op.control import loop as loop_call, scan as scan_call

from . import ops_dynamic
from .importer import Context, _convert_node, register
from .sequence import OptionalValue, SequenceValue

_INT64_MAX = np.iinfo(np.int64).max


# -- subgraphs ---------------------------------------------------------------------------------------


def outer_names(graph: Any) -> list:
    """Names a subgraph reads from the graphs around it (nested subgraphs included), in first-use order.

    Example:
        >>> from onnx import helper
        >>> g = helper.make_graph([helper.make_node("Add", ["x", "y"], ["z"])], "b", [], [])
        >>> outer_names(g)
        ['x', 'y']
    """
    defined = {i.name for i in graph.input} | {t.name for t in graph.initializer}
    out: dict = {}
    for node in graph.node:
        for name in node.input:
            if name and name not in defined:
                out.setdefault(name, None)
        for a in node.attribute:
            subs = [a.g] if a.type == a.GRAPH else list(a.graphs) if a.type == a.GRAPHS else []
            for sub in subs:
                for name in outer_names(sub):
                    if name not in defined:
                        out.setdefault(name, None)
        defined.update(o for o in node.output if o)
    return list(out)


def _sub_context(ctx: Any, bb: Any) -> Context:
    sub = Context(bb)
    sub.exact_division, sub.opaque_opsets = ctx.exact_division, ctx.opaque_opsets
    sub.root_bb = ctx.root_bb or ctx.bb
    sub.source = ctx.source
    return sub


def _convert_graph(ctx: Any, graph: Any, scope: dict, opset: int) -> list:
    """Convert ``graph``'s nodes into ``ctx`` with ``scope`` (a private copy); its output values."""
    from onnx import numpy_helper

    for init in graph.initializer:
        scope[init.name] = numpy_helper.to_array(init)
    for proto in graph.node:
        _convert_node(ctx, proto, scope, opset, ctx.source)
    return [scope[o.name] for o in graph.output]


def _tensor_sinfo(ctx: Any, value: Any) -> G.TensorStructInfo:
    shape, dtype = ctx.sinfo(value)
    return G.TensorStructInfo(shape, dtype)


def _branch(ctx: Any, node: Any, graph: Any) -> "tuple[G.SeqExpr, list]":
    """One If branch as a SeqExpr over the outer values (its own bindings, then its outputs' tensors),
    and the layout of its outputs: ``None`` for a tensor, the length of a sequence (its tensors are
    consecutive results)."""
    bb = G.BlockBuilder()
    sub = _sub_context(ctx, bb)
    with bb.function("branch", []):
        outs = _convert_graph(sub, graph, dict(ctx.scope), node.opset)
        flat, layout = [], []
        for o in outs:
            if isinstance(o, SequenceValue) and o.items:
                flat += list(o.items)
                layout.append(len(o.items))
            elif isinstance(o, (G.Expr, np.ndarray)):
                flat.append(o)
                layout.append(None)
            else:
                raise node.error(f"branch {graph.name!r} returns an empty sequence or an optional and the condition "
                                 f"is known only at run time; only tensors and sequences of a fixed length can "
                                 f"leave an If decided at run time")
        exprs = [Context.to_expr(o) for o in flat]
        bb.emit_func_output(exprs[0] if len(exprs) == 1 else G.Tuple(exprs))
    return bb.get()["branch"].body, layout


@register("If")
def _if(ctx: Any, node: Any) -> Any:
    cond = node.input(0)
    static = ctx.static(cond)
    if static is not None:  # decided at import time: only the taken branch is imported
        if static.size != 1:
            raise node.error(f"the condition must have one element, got shape {static.shape}")
        taken = node.attrs["then_branch"] if bool(static.reshape(-1)[0]) else node.attrs["else_branch"]
        return _convert_graph(ctx, taken, dict(ctx.scope), node.opset)
    then_seq, then_layout = _branch(ctx, node, node.attrs["then_branch"])
    else_seq, else_layout = _branch(ctx, node, node.attrs["else_branch"])
    if then_layout != else_layout:
        raise node.error(f"the branches return differently shaped sequences ({then_layout} vs {else_layout}; None "
                         f"is a tensor) and the condition is known only at run time")
    value = ctx.bb.emit(If(ctx.expr(cond), then_seq, else_seq))
    count = sum(1 if n is None else n for n in then_layout)
    items = [value] if count == 1 else [ctx.bb.emit(G.TupleGetItem(value, k)) for k in range(count)]
    results, k = [], 0
    for n in then_layout:
        if n is None:
            results.append(items[k])
            k += 1
        else:
            results.append(SequenceValue(items[k:k + n], ctx.dtype(items[k])))
            k += n
    return results


def _body_function(ctx: Any, node: Any, graph: Any, param_sinfos: list) -> "tuple[G.Function, list]":
    """The body ``graph`` as a graph function: parameters for its inputs (``param_sinfos``) and for the
    outer values it reads that are not known at import time; returns ``(function, captured exprs)``."""
    bb = G.BlockBuilder()
    sub = _sub_context(ctx, bb)
    params = [G.Var(_var_name(i.name, k), s) for k, (i, s) in enumerate(zip(graph.input, param_sinfos))]
    scope: dict = {}
    captured = []
    for name in outer_names(graph):
        if name not in ctx.scope:
            raise node.error(f"its body reads {name!r}, which no outer node, initializer or input produces")
        value = ctx.scope[name]
        if isinstance(value, G.Expr):
            var = G.Var(_var_name(name, len(params)), value.struct_info)
            params.append(var)
            captured.append(value)
            scope[name] = var
        else:  # known at import time (or a sequence/optional): folded into the body
            scope[name] = value
    for i, p in zip(graph.input, params):
        scope[i.name] = p
    with bb.function("body", params):
        with bb.dataflow():
            outs = _convert_graph(sub, graph, scope, node.opset)
            for o in outs:
                if not isinstance(o, (G.Expr, np.ndarray)):
                    raise node.error("its body returns a sequence or optional: loop-carried sequences are not "
                                     "supported (their length changes at run time)")
            result = bb.emit_output(G.Tuple([Context.to_expr(o) for o in outs]))
        bb.emit_func_output(result)
    func = bb.get()["body"]
    return G.Function(func.params, func.body, func.ret_struct_info), captured


def _var_name(name: str, k: int) -> str:
    s = "".join(c if c.isalnum() or c == "_" else "_" for c in name)[:32]
    return s if s and not s[0].isdigit() else f"v{k}_{s}"


def _add_body(ctx: Any, node: Any, func: G.Function) -> str:
    root = ctx.root_bb or ctx.bb
    base = _var_name(f"{node.op_type.lower()}_{node.name}" if node.name else f"{node.op_type.lower()}_body", 0)
    return root.add_func(func, base).name_hint


def _relaxed(sinfo: Any) -> Any:
    return G.TensorStructInfo(None, sinfo.dtype, sinfo.ndim) if isinstance(sinfo, G.TensorStructInfo) else sinfo


@register("Loop")
def _loop(ctx: Any, node: Any) -> Any:
    body = node.attrs["body"]
    trip, cond = node.input(0), node.input(1)
    initial = list(node.inputs[2:])
    if any(v is None or not isinstance(v, (G.Expr, np.ndarray)) for v in initial):
        raise node.error("a loop-carried value is a sequence or optional (or absent); only tensors are supported")
    if len(body.input) != 2 + len(initial):
        raise node.error(f"its body takes {len(body.input)} inputs, expected 2 + {len(initial)} loop-carried values")
    head = [G.TensorStructInfo((), "int64"), G.TensorStructInfo((), "bool")]
    carried = [_tensor_sinfo(ctx, v) for v in initial]
    func, captured = _body_function(ctx, node, body, head + carried)
    outs = func.ret_struct_info.fields
    if any(not _same(a, b) for a, b in zip(carried, outs[1:1 + len(carried)])):  # shapes may change per iteration
        try:
            relaxed = [_relaxed(s) for s in carried]
            func, captured = _body_function(ctx, node, body, head + relaxed)
            carried, outs = relaxed, func.ret_struct_info.fields
        except IngotError:
            # The body needs its inputs' dims (an op's shape inference): keep the static parameters. Each
            # iteration's call checks them, so a carried value that does change shape fails, naming the body.
            pass
    n = len(initial)
    static_trip = ctx.static(trip) if trip is not None else None
    fixed = static_trip is not None and _cond_never_changes(ctx, cond, func)
    scans = []
    for s in outs[1 + n:]:
        if fixed and isinstance(s, G.TensorStructInfo) and s.shape is not None:
            scans.append(G.TensorStructInfo((int(static_trip.reshape(-1)[0]), *s.shape), s.dtype))
        else:
            scans.append(G.TensorStructInfo(None, s.dtype, s.ndim + 1 if s.ndim >= 0 else -1))
    out_sinfo = G.TupleStructInfo([join_struct_info(a, b) for a, b in zip(carried, outs[1:1 + n])] + scans)
    trip_e = ctx.expr(trip) if trip is not None else G.const(_INT64_MAX, "int64")
    cond_e = ctx.expr(cond) if cond is not None else G.const(True, "bool")
    name = _add_body(ctx, node, func)
    slice_shapes = [tuple(s.shape) for s in outs[1 + n:]
                    if isinstance(s, G.TensorStructInfo) and s.shape is not None and all(isinstance(d, int) for d in s.shape)]
    value = ctx.bb.emit(loop_call(trip_e, cond_e, [ctx.expr(v) for v in initial],
                                  captured, body=name, out_sinfo=out_sinfo,
                                  scan_slice_shapes=slice_shapes if len(slice_shapes) == len(outs) - 1 - n else ()))
    results = [ctx.bb.emit(G.TupleGetItem(value, k)) for k in range(len(out_sinfo.fields))][:node.num_outputs]
    return [_match_cast(ctx, r) for r in results]


def _match_cast(ctx: Any, value: Any) -> Any:
    """A loop result whose shape only the run knows gets fresh dims (the ``match_cast`` builtin binds them),
    so the ops after the loop compile once for symbolic sizes instead of failing on an unknown shape."""
    s = value.struct_info
    if not isinstance(s, G.TensorStructInfo) or s.shape is not None or s.ndim < 0:
        return value
    dims = ops_dynamic.fresh_dims(ctx, s.ndim)
    return ctx.bb.emit(G.op.builtin("match_cast", value, outputs=((dims, str(s.dtype)),)))


def _same(a: Any, b: Any) -> bool:
    from ingot.graph.struct_info import shape_equal

    return (isinstance(a, G.TensorStructInfo) and isinstance(b, G.TensorStructInfo) and a.dtype == b.dtype
            and a.shape is not None and shape_equal(a.shape, b.shape))


def _cond_never_changes(ctx: Any, cond: Any, func: G.Function) -> bool:
    """Whether the loop runs exactly its trip count: it starts true and the body passes it through."""
    start = ctx.static(cond) if cond is not None else np.array(True)
    if start is None or not bool(start.reshape(-1)[0]):
        return False
    result = func.body.body
    bindings = {id(b.var): b.value for blk in func.body.blocks for b in blk.bindings}
    while isinstance(result, G.Var) and id(result) in bindings:
        result = bindings[id(result)]
    first = result.fields[0] if isinstance(result, G.Tuple) else None
    while isinstance(first, G.Var) and id(first) in bindings:
        first = bindings[id(first)]
    if isinstance(first, G.Constant):
        return bool(first.data.reshape(-1)[0])
    return first is func.params[1]


@register("Scan", since=9)
def _scan(ctx: Any, node: Any) -> Any:
    return _convert_scan(ctx, node, list(node.inputs), batched=False)


@register("Scan", since=8)
def _scan8(ctx: Any, node: Any) -> Any:
    lens = node.input(0)
    inputs = list(node.inputs[1:])
    if lens is not None:
        static = ctx.static(lens)
        first = inputs[-1]
        length = ctx.shape(first)[1]
        if static is None or not np.all(static == length):
            raise node.error("sequence_lens shorter than the scan length is not supported; leave it empty")
    return _convert_scan(ctx, node, inputs, batched=True)


def _convert_scan(ctx: Any, node: Any, inputs: list, batched: bool) -> Any:
    body = node.attrs["body"]
    m = int(node.attr("num_scan_inputs"))
    n = len(inputs) - m
    states, xs = inputs[:n], inputs[n:]
    if any(v is None or not isinstance(v, (G.Expr, np.ndarray)) for v in inputs):
        raise node.error("every state and scan input must be a tensor")
    shapes = [list(ctx.shape(v)) for v in inputs]
    if any(s is None for s in shapes):
        raise node.error("the states and scan inputs need known ranks")
    lead = 1 if batched else 0
    if batched:
        axes = [0] * m
        reverse = [bool(d) for d in (node.attr("directions") or [0] * m)]
    else:
        axes = [a % len(shapes[n + k]) for k, a in enumerate(node.attr("scan_input_axes") or [0] * m)]
        reverse = [bool(d) for d in (node.attr("scan_input_directions") or [0] * m)]
    dtypes = [ctx.dtype(v) for v in inputs]
    state_sinfos = [G.TensorStructInfo(tuple(s[lead:]), d) for s, d in zip(shapes[:n], dtypes[:n])]
    slice_sinfos = []
    for k in range(m):
        s = shapes[n + k][lead:]
        slice_sinfos.append(G.TensorStructInfo(tuple(s[:axes[k]] + s[axes[k] + 1:]), dtypes[n + k]))
    length = shapes[n][lead + axes[0]]
    func, captured = _body_function(ctx, node, body, state_sinfos + slice_sinfos)
    outs = func.ret_struct_info.fields
    k_out = len(outs) - n
    out_axes = [int(a) for a in (node.attr("scan_output_axes") or [0] * k_out)] if not batched else [0] * k_out
    out_reverse = [bool(d) for d in (node.attr("scan_output_directions") or [0] * k_out)] if not batched \
        else [False] * k_out
    batch = [shapes[0][0]] if batched else []
    fields = [G.TensorStructInfo(tuple(batch + list(s.shape)), s.dtype) if s.shape is not None else s
              for s in outs[:n]]
    for k, s in enumerate(outs[n:]):
        if s.shape is None:
            fields.append(G.TensorStructInfo(None, s.dtype, s.ndim + 1 + len(batch)))
            continue
        axis = out_axes[k] % (len(s.shape) + 1)
        out_axes[k] = axis
        shape = list(s.shape)
        shape.insert(axis, length)
        fields.append(G.TensorStructInfo(tuple(batch + shape), s.dtype))
    name = _add_body(ctx, node, func)
    value = ctx.bb.emit(scan_call([ctx.expr(v) for v in states], [ctx.expr(v) for v in xs], captured, body=name,
                                  out_sinfo=G.TupleStructInfo(fields), input_axes=axes, input_reverse=reverse,
                                  output_axes=out_axes, output_reverse=out_reverse, batched=batched))
    return [ctx.bb.emit(G.TupleGetItem(value, k)) for k in range(len(fields))][:node.num_outputs]


# -- sequences and optionals (import-time values) -------------------------------------------------------


def _sequence(node: Any, value: Any, what: str = "input 0") -> SequenceValue:
    if isinstance(value, OptionalValue):
        value = value.value
    if not isinstance(value, SequenceValue):
        raise node.error(f"{what} must be a sequence whose length is known at import time (SequenceConstruct, "
                         f"SplitToSequence, ...); sequences that are graph inputs or loop-carried are not supported")
    return value


def _position(ctx: Any, node: Any, value: Any, length: int, default: int, insert: bool = False) -> int:
    if value is None:
        return default
    static = ctx.static(value)
    if static is None:
        raise node.error("the position must be known at import time")
    pos = int(static.reshape(-1)[0])
    limit = length + (1 if insert else 0)
    if not -length <= pos < limit:
        raise node.error(f"position {pos} is out of range for a sequence of {length} tensors")
    return pos + length if pos < 0 else pos


@register("SequenceEmpty", since=11)
def _sequence_empty(ctx: Any, node: Any) -> Any:
    from .importer import np_dtype

    return SequenceValue([], np_dtype(node.attr("dtype", 1)))


@register("SequenceConstruct", since=11)
def _sequence_construct(ctx: Any, node: Any) -> Any:
    return SequenceValue(node.inputs, ctx.dtype(node.inputs[0]) if node.inputs else None)


@register("SequenceLength", since=11)
def _sequence_length(ctx: Any, node: Any) -> Any:
    return np.array(len(_sequence(node, node.input(0)).items), "int64")


@register("SequenceAt", since=11)
def _sequence_at(ctx: Any, node: Any) -> Any:
    seq = _sequence(node, node.input(0))
    return seq.items[_position(ctx, node, node.input(1), len(seq.items), 0)]


@register("SequenceInsert", since=11)
def _sequence_insert(ctx: Any, node: Any) -> Any:
    seq = _sequence(node, node.input(0))
    items = list(seq.items)
    items.insert(_position(ctx, node, node.input(2), len(items), len(items), insert=True), node.input(1))
    return SequenceValue(items, seq.elem_dtype or ctx.dtype(node.input(1)))


@register("SequenceErase", since=11)
def _sequence_erase(ctx: Any, node: Any) -> Any:
    seq = _sequence(node, node.input(0))
    items = list(seq.items)
    if not items:
        raise node.error("cannot erase from an empty sequence")
    del items[_position(ctx, node, node.input(1), len(items), len(items) - 1)]
    return SequenceValue(items, seq.elem_dtype)


@register("SplitToSequence", since=11)
def _split_to_sequence(ctx: Any, node: Any) -> Any:
    x, split = node.input(0), node.input(1)
    shape = ctx.shape(x)
    axis = int(node.attr("axis", 0)) % len(shape)
    size = shape[axis]
    if not isinstance(size, int):
        raise node.error(f"the split axis {axis} must have a static size, got {size}")
    if split is None:
        sizes = [1] * size
    else:
        if ctx.static(split) is None and len(ctx.shape(split)) == 1:  # run-time sizes, a static count of parts
            return SequenceValue(ops_dynamic.dynamic_split(ctx, node, x, split, axis), ctx.dtype(x))
        if ctx.static(split) is None:
            raise node.error("a run-time split must be a 1-D tensor of sizes (a scalar chunk length gives a number "
                             "of parts only the run knows, which a sequence cannot have here)")
        static = [int(v) for v in np.asarray(ctx.static(split)).reshape(-1)]
        if np.asarray(ctx.static(split)).ndim == 0:
            chunk = static[0]
            sizes = [chunk] * (size // chunk) + ([size % chunk] if size % chunk else [])
        else:
            sizes = static
    if sum(sizes) != size:
        raise node.error(f"split sizes {sizes} do not add up to the axis size {size}")
    xs = ctx.static(x)
    cuts = list(np.cumsum(sizes)[:-1])
    items: list = []
    if xs is not None:
        items = [np.asarray(p) for p in np.split(xs, cuts, axis=axis)]
    elif len(sizes) == 1:
        items = [x]
    else:
        parts = ctx.bb.emit(G.op.split(ctx.expr(x), [int(c) for c in cuts], axis))
        items = [ctx.bb.emit(G.TupleGetItem(parts, k)) for k in range(len(sizes))]
    if split is None and not int(node.attr("keepdims", 1)):
        items = [np.squeeze(i, axis) if isinstance(i, np.ndarray) else ctx.emit(G.op.squeeze(i, [axis]))
                 for i in items]
    return SequenceValue(items, ctx.dtype(x))


@register("ConcatFromSequence", since=11)
def _concat_from_sequence(ctx: Any, node: Any) -> Any:
    seq = _sequence(node, node.input(0))
    if not seq.items:
        raise node.error("cannot concatenate an empty sequence")
    axis = int(node.attr("axis"))
    new_axis = int(node.attr("new_axis", 0))
    rank = len(ctx.shape(seq.items[0])) + new_axis
    axis = axis % rank
    items = [ctx.expr(i) for i in seq.items]
    if new_axis:
        items = [ctx.emit(G.op.expand_dims(i, axis)) for i in items]
    return ctx.emit(G.op.concat(items, axis))


@register("Optional", since=15)
def _optional(ctx: Any, node: Any) -> Any:
    return OptionalValue(node.input(0))


@register("OptionalHasElement", since=15)
def _optional_has_element(ctx: Any, node: Any) -> Any:
    value = node.input(0)
    if isinstance(value, OptionalValue):
        value = value.value
    return np.array(value is not None)


@register("OptionalGetElement", since=15)
def _optional_get_element(ctx: Any, node: Any) -> Any:
    value = node.input(0)
    if isinstance(value, OptionalValue):
        if value.value is None:
            raise node.error("the optional is empty (OptionalGetElement on an empty optional is an error in ONNX)")
        return value.value
    return value
