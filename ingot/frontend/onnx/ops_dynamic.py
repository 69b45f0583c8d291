"""ONNX converters for values known only at run time (issue 17).

Note: a converter normally reads shape-like inputs (Reshape's ``shape``, Slice's ``starts``, TopK's
``K``) at import time. When the model computes them from data, the converters below take over
(`ingot.graph.runtime_shape` has the design):

* Reshape / Expand / ConstantOfShape: the target is resolved by a small builtin (0 and -1 of
  Reshape, Expand's bidirectional broadcast), turned into fresh symbolic dims by
  ``tensor_to_shape``, and the op itself stays a kernel compiled once for those symbolic sizes;
* Slice / Tile / Pad / Range / TopK / ReduceX / Squeeze / Unsqueeze with run-time bounds, repeats,
  pads, limits, k or axes, and the ops
  whose output size is the data's (NonZero, Unique, Compress, NonMaxSuppression): one ``builtin``
  call each, its output dims fresh where the data decides them.

* ops whose attribute-like inputs decide the computation (Col2Im, DFT, STFT, AffineGrid; `op_builtin`)
  run their graph op's numpy reference with the run's values; Split's sizes are a ``split`` builtin;
  Trilu's k a mask kernel (`dynamic_trilu`);
* dims of two run-time sources that meet in one op are related by ``match_cast`` (`unify_runtime_dims`).

Fresh dims are named ``rt0, rt1, ...`` in the order the import meets them.

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> get_converter("NonZero", 13) is not None
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot import graph as G
from ingot.graph.runtime_ops import runtime_attr
from ingot.graph.runtime_shape import is_shape_var
from ingot.graph.struct_info import dims_equal

from ._common import as_array, is_static, norm_axes
from .importer import register


def fresh_dims(ctx: Any, count: int) -> tuple:
    """``count`` new names of run-time dims, unique within this import.

    Example:
        >>> class Ctx: pass
        >>> fresh_dims(Ctx(), 2)
        ('rt0', 'rt1')
    """
    start = getattr(ctx, "_runtime_dims", 0)
    ctx._runtime_dims = start + count
    return tuple(f"rt{k}" for k in range(start, start + count))


def static_length(ctx: Any, node: Any, value: Any, what: str) -> int:
    """The static length of the 1-D run-time tensor ``value`` (the rank it gives a result), else an error.

    Example: ``static_length(ctx, node, node.input(1), "Reshape's shape")``.
    """
    shape = ctx.shape(value)
    if shape is None or len(shape) != 1 or not isinstance(shape[0], int):
        raise node.error(f"{what} computed at run time must be a 1-D tensor of static length (its length is the "
                         f"rank of the result), got shape {shape}")
    return shape[0]


def _as_shape(ctx: Any, node: Any, tensor: Any, what: str) -> tuple:
    """The run-time values of a 1-D int tensor as fresh symbolic dims (``tensor_to_shape``)."""
    n = static_length(ctx, node, tensor, what)
    t = ctx.expr(tensor)
    # One tensor feeding several ops gives them the same dims, so their results broadcast together.
    seen = ctx.__dict__.setdefault("_runtime_shapes", {})
    if id(t) in seen:
        return seen[id(t)][1]
    source = t
    if str(t.struct_info.dtype) != "int64":
        t = ctx.expr(ctx.emit(G.op.astype(t, "int64")))
    shape = ctx.emit(G.op.tensor_to_shape(t, fresh_dims(ctx, n)))
    seen[id(source)] = (source, tuple(shape.struct_info.values))  # the source is kept so its id stays unique
    return seen[id(source)][1]


def unify_runtime_dims(ctx: Any, exprs: list, skip_axis: "int | None" = None, broadcast: bool = True) -> list:
    """The operands of an elementwise op (or a Concat), a ``match_cast`` inserted where they pair a fresh
    run-time dim with a different dim (of another run-time source, or a known size): the fresh one is
    taken to *equal* the other (with ``broadcast``, a 1 still broadcasts), which the run checks when it
    binds the dims. Relax needs the same ``match_cast`` between shapes of different sources. Each operand
    is compared with the first, right-aligned; ``skip_axis`` (Concat's axis, non-negative) is left alone.

    Example: ``(rt1, rt2, rt0) + (rt5,)`` relabels the second operand ``(rt0,)``; a run where
    ``rt5 != rt0`` stops with an error naming the axis.
    """
    infos = [e.struct_info for e in exprs]
    if not all(isinstance(s, G.TensorStructInfo) and s.shape is not None for s in infos):
        return list(exprs)
    shapes, changed = [list(s.shape) for s in infos], [False] * len(exprs)
    for i in range(1, len(exprs)):
        ref, other = shapes[0], shapes[i]
        for k in range(1, min(len(ref), len(other)) + 1):
            x, y = ref[-k], other[-k]
            if dims_equal(x, y) or skip_axis is not None and len(ref) - k == skip_axis:
                continue
            for shape, j, mine, theirs in ((other, i, y, x), (ref, 0, x, y)):
                if is_shape_var(mine) and not (broadcast and isinstance(theirs, int) and theirs == 1):
                    shape[-k], changed[j] = theirs, True
                    break
    return [match_cast(ctx, e, d) if c else e for e, d, c in zip(exprs, shapes, changed)]


def check_broadcast(ctx: Any, node: Any, exprs: list) -> list:
    """The operands of an elementwise op, each symbolic dim that meets a constant other than 1 checked
    at run time (the ``broadcast_check`` builtin): the graph broadcasts ``n`` with 5 to 5 and the kernel
    reads a run-time 1 correctly, but a 3 would read out of bounds, so the run stops naming the node.

    Example: ``Add(x[n], y[5])`` passes ``x`` through ``broadcast_check(dims=((0, 5),))``; a run with
    ``n = 1`` broadcasts, ``n = 3`` raises ``Add 'add0': operand 0 has size 3 at axis 0 ...``.
    """
    infos = [e.struct_info for e in exprs]
    if not all(isinstance(s, G.TensorStructInfo) and s.shape is not None for s in infos):
        return list(exprs)
    ndim = max(len(s.shape) for s in infos)
    out = []
    for i, (e, s) in enumerate(zip(exprs, infos)):
        checks = []
        for j, d in enumerate(s.shape):
            k = j + ndim - len(s.shape)
            sizes = {o.shape[k - ndim + len(o.shape)] for o in infos if k - ndim + len(o.shape) >= 0}
            sizes = {v for v in sizes if isinstance(v, int) and v != 1}
            if not isinstance(d, int) and sizes:
                checks.append((j, max(sizes)))
        if checks:
            params = {"dims": tuple(checks), "node": node.name, "op": node.op_type, "operand": i}
            e = ctx.expr(ctx.emit(G.op.builtin("broadcast_check", e, params=params,
                                               outputs=((tuple(s.shape), str(s.dtype)),))))
        out.append(e)
    return out


def match_cast(ctx: Any, e: Any, dims: Any) -> Any:
    """``e`` relabelled with ``dims`` (the ``match_cast`` builtin: the run binds the fresh ones among them
    and checks the others against ``e``'s actual shape).

    Example: a Squeeze of an axis of fresh size ``rt9`` first relabels it 1: ``match_cast(ctx, e, (n, 1, 4))``.
    """
    return ctx.expr(ctx.emit(G.op.builtin("match_cast", e, outputs=((tuple(dims), str(e.struct_info.dtype)),))))


def _builtin(ctx: Any, kind: str, args: list, params: dict, outputs: tuple) -> Any:
    return ctx.emit(G.op.builtin(kind, *[ctx.expr(a) for a in args], params=params, outputs=outputs))


def _outputs(ctx: Any, call: Any, count: int) -> list:
    return [ctx.emit(G.TupleGetItem(call, i)) for i in range(count)]


def op_builtin(ctx: Any, op: str, tensors: list, attrs: dict, runtime: dict, outputs: tuple) -> Any:
    """Graph op ``op`` run by the executor's ``op_ref`` builtin (its numpy reference), for attributes
    only the run knows: ``runtime`` maps attribute names to ``(ONNX input or None, "ints" | "int" |
    "float")``; the static ones among them join ``attrs``, the others travel as trailing arguments.

    Example: ``op_builtin(ctx, "col2im", [x], {}, {"image_shape": (node.input(1), "ints"), ...},
    (((n, c, "rt0", "rt1"), "float32"),))``.
    """
    static, names, values = dict(attrs), [], []
    for name, (value, kind) in runtime.items():
        if value is None:
            continue
        if is_static(value):
            static[name] = runtime_attr(as_array(value), kind)
        else:
            names.append((name, kind))
            values.append(value)
    static = {k: tuple(v) if isinstance(v, list) else v for k, v in static.items() if v is not None}
    params = {"op": op, "attrs": tuple(sorted(static.items())), "runtime_attrs": tuple(names)}
    return _builtin(ctx, "op_ref", [*tensors, *values], params, outputs)


# -- shape attributes known at run time, ops compiled for symbolic sizes -------------------------------


def dynamic_reshape(ctx: Any, node: Any) -> Any:
    """Reshape whose ``shape`` input is computed at run time."""
    x, shape = node.input(0), node.input(1)
    n = static_length(ctx, node, shape, "Reshape's shape")
    allow_zero = int(node.opset >= 14 and node.attr("allowzero", 0))
    target = _builtin(ctx, "reshape_shape", [ctx.expr(shape), x], {"allowzero": allow_zero}, (((n,), "int64"),))
    dims = _as_shape(ctx, node, target, "Reshape's shape")
    return ctx.emit(G.op.reshape(ctx.expr(x), dims))


def dynamic_expand(ctx: Any, node: Any) -> Any:
    """Expand whose ``shape`` input is computed at run time (broadcast both ways with the input's shape)."""
    x, shape = node.input(0), node.input(1)
    n = max(static_length(ctx, node, shape, "Expand's shape"), len(ctx.shape(x)))
    src = list(ctx.shape(x))
    # The builtin broadcasts the shape with x's run-time shape (an error naming the node where they do
    # not broadcast), so its dims are the result's. Where x's dim is a constant other than 1 the result's
    # is that constant: say so, so the kernel's shapes relate. A symbolic dim of x keeps the builtin's
    # dim (it may be a 1 the shape widens; the kernel reads it at select(n == 1, 0, i)).
    target = _builtin(ctx, "expand_shape", [ctx.expr(shape), x], {"node": node.name}, (((n,), "int64"),))
    dims = list(_as_shape(ctx, node, target, "Expand's shape"))
    for k, d in enumerate(src):
        if isinstance(d, int) and d != 1:
            dims[n - len(src) + k] = d
    return ctx.emit(G.op.broadcast_to(ctx.expr(x), tuple(dims)))


def dynamic_constant_of_shape(ctx: Any, node: Any, value: np.ndarray) -> Any:
    """ConstantOfShape whose shape is computed at run time: the value broadcast to fresh dims."""
    dims = _as_shape(ctx, node, node.input(0), "ConstantOfShape's shape")
    return ctx.emit(G.op.broadcast_to(G.const(value[:1].reshape(())), dims))


# -- builtins: the data decides the output size ------------------------------------------------------


def dynamic_range(ctx: Any, node: Any, bounds: "list | None" = None) -> Any:
    """Range with run-time start/limit/delta (``bounds``, else the node's first three inputs)."""
    bounds = list(node.inputs[:3]) if bounds is None else bounds
    return _builtin(ctx, "range", bounds, {}, (((fresh_dims(ctx, 1)[0],), ctx.dtype(bounds[0])),))


def dynamic_slice(ctx: Any, node: Any) -> Any:
    """Slice (opset >= 10) with run-time starts/ends/axes/steps."""
    x = node.input(0)
    shape = list(ctx.shape(x))
    n = static_length(ctx, node, node.input(1), "Slice's starts")
    axes, steps = node.input(3), node.input(4)
    if axes is None:
        axes = np.arange(n, dtype="int64")
    if is_static(axes):
        sliced = set(norm_axes([int(a) for a in np.asarray(axes.data if isinstance(axes, G.Constant) else axes)
                                .reshape(-1)], len(shape)))
    else:
        sliced = set(range(len(shape)))
    args = [x, node.input(1), node.input(2), axes] + ([steps] if steps is not None else [])
    names = iter(fresh_dims(ctx, len(sliced)))
    dims = tuple(next(names) if a in sliced else d for a, d in enumerate(shape))
    return _builtin(ctx, "slice", args, {}, ((dims, ctx.dtype(x)),))


def dynamic_tile(ctx: Any, node: Any) -> Any:
    """Tile with run-time repeats."""
    x = node.input(0)
    return _builtin(ctx, "tile", [x, node.input(1)], {}, ((fresh_dims(ctx, len(ctx.shape(x))), ctx.dtype(x)),))


def dynamic_pad(ctx: Any, node: Any, mode: str) -> Any:
    """Pad (opset >= 11) with run-time pads, constant value or axes."""
    x = node.input(0)
    args = [x, node.input(1)]
    value, axes = node.input(2), node.input(3)
    if value is not None or axes is not None:
        args.append(value if value is not None else np.zeros(0, ctx.dtype(x)))
    if axes is not None:
        args.append(axes)
    return _builtin(ctx, "pad", args, {"mode": mode}, ((fresh_dims(ctx, len(ctx.shape(x))), ctx.dtype(x)),))


def dynamic_topk(ctx: Any, node: Any, axis: int) -> Any:
    """TopK with a run-time K: values and indices whose ``axis`` has the fresh size K."""
    x = node.input(0)
    shape = list(ctx.shape(x))
    shape[axis] = fresh_dims(ctx, 1)[0]
    params = {"axis": axis, "largest": int(node.attr("largest", 1)), "sorted": int(node.attr("sorted", 1))}
    call = _builtin(ctx, "topk", [x, node.input(1)], params, ((tuple(shape), ctx.dtype(x)), (tuple(shape), "int64")))
    return _outputs(ctx, call, 2)


def dynamic_split(ctx: Any, node: Any, x: Any, split: Any, axis: int) -> list:
    """Split (and SplitToSequence) with run-time ``split`` sizes: one part per value (its length is
    static), each with a fresh size on ``axis``."""
    count = static_length(ctx, node, split, f"{node.op_type}'s split")
    shape = list(ctx.shape(x))
    outputs = []
    for name in fresh_dims(ctx, count):
        shape[axis] = name
        outputs.append((tuple(shape), ctx.dtype(x)))
    call = _builtin(ctx, "split", [x, split], {"axis": axis}, tuple(outputs))
    return [call] if count == 1 else _outputs(ctx, call, count)


def dynamic_trilu(ctx: Any, node: Any, x: Any, k: Any, upper: bool) -> Any:
    """Trilu with a run-time ``k``: the mask ``col - row >= k`` (upper) or ``<= k`` (lower) is one
    elementwise kernel over a constant offset table and ``k``; nothing is recompiled per ``k``."""
    rows, cols = ctx.shape(x)[-2:]
    if not (isinstance(rows, int) and isinstance(cols, int)):
        raise node.error(f"Trilu with a run-time k needs static matrix sizes, got {(str(rows), str(cols))}")
    offset = G.const(np.arange(cols, dtype="int64")[None, :] - np.arange(rows, dtype="int64")[:, None])
    kk = ctx.expr(k)
    if str(kk.struct_info.dtype) != "int64":
        kk = ctx.expr(ctx.emit(G.op.astype(kk, "int64")))
    kk = ctx.expr(ctx.emit(G.op.reshape(kk, (1, 1))))
    keep = ctx.emit((G.op.greater_equal if upper else G.op.less_equal)(offset, kk))
    zero = G.const(np.array(0, ctx.dtype(x)))
    return ctx.emit(G.op.where(ctx.expr(keep), ctx.expr(x), zero))


@register("NonZero", since=9)
def _nonzero(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    if is_static(x):
        arr = x.data if isinstance(x, G.Constant) else x
        return np.array(np.nonzero(arr), "int64").reshape(arr.ndim, -1)
    return _builtin(ctx, "nonzero", [x], {}, (((len(ctx.shape(x)), fresh_dims(ctx, 1)[0]), "int64"),))


@register("Compress", since=9)
def _compress(ctx: Any, node: Any) -> Any:
    x, cond = node.input(0), node.input(1)
    axis = node.attr("axis")
    shape = list(ctx.shape(x))
    if axis is None:
        dims: tuple = (fresh_dims(ctx, 1)[0],)
    else:
        axis = norm_axes([axis], len(shape))[0]
        shape[axis] = fresh_dims(ctx, 1)[0]
        dims = tuple(shape)
    return _builtin(ctx, "compress", [x, cond], {"axis": axis}, ((dims, ctx.dtype(x)),))


@register("Unique", since=11)
def _unique(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    shape = list(ctx.shape(x))
    axis = node.attr("axis")
    u = fresh_dims(ctx, 1)[0]
    if axis is None:
        n: Any = 1
        for d in shape:
            n = n * d
        y_dims, inverse = (u,), (n,)
    else:
        axis = norm_axes([axis], len(shape))[0]
        inverse = (shape[axis],)
        shape[axis] = u
        y_dims = tuple(shape)
    outputs = ((y_dims, ctx.dtype(x)), ((u,), "int64"), (inverse, "int64"), ((u,), "int64"))
    call = _builtin(ctx, "unique", [x], {"axis": axis, "sorted": int(node.attr("sorted", 1))}, outputs)
    return _outputs(ctx, call, 4)[:max(node.num_outputs, 1)]


@register("NonMaxSuppression", since=10)
def _non_max_suppression(ctx: Any, node: Any) -> Any:
    args = list(node.inputs[:5])
    while args and args[-1] is None:
        args.pop()
    args = [a if a is not None else np.zeros(0, "float32") for a in args]
    params = {"center_point_box": int(node.attr("center_point_box", 0))}
    return _builtin(ctx, "non_max_suppression", args, params, (((fresh_dims(ctx, 1)[0], 3), "int64"),))


_REDUCE_KINDS = {"ReduceSum": "sum", "ReduceMean": "mean", "ReduceMax": "max", "ReduceMin": "min",
                 "ReduceProd": "prod", "ReduceSumSquare": "sum_square", "ReduceL1": "l1", "ReduceL2": "l2",
                 "ReduceLogSum": "log_sum", "ReduceLogSumExp": "log_sum_exp"}


def dynamic_reduce(ctx: Any, node: Any) -> Any:
    """ReduceX whose ``axes`` input is computed at run time (its length is static: the result's rank)."""
    x = node.input(0)
    ndim = len(ctx.shape(x))
    n = static_length(ctx, node, node.input(1), f"{node.op_type}'s axes")
    keep, noop = int(node.attr("keepdims", 1)), int(node.attr("noop_with_empty_axes", 0))
    rank = ndim if keep or (n == 0 and noop) else (0 if n == 0 else ndim - n)
    params = {"kind": _REDUCE_KINDS[node.op_type], "keepdims": keep, "noop_with_empty_axes": noop}
    return _builtin(ctx, "reduce", [x, node.input(1)], params, ((fresh_dims(ctx, rank), ctx.dtype(x)),))


def dynamic_squeeze(ctx: Any, node: Any) -> Any:
    """Squeeze (opset >= 13) whose ``axes`` are computed at run time."""
    x = node.input(0)
    rank = len(ctx.shape(x)) - static_length(ctx, node, node.input(1), "Squeeze's axes")
    return _builtin(ctx, "squeeze", [x, node.input(1)], {}, ((fresh_dims(ctx, rank), ctx.dtype(x)),))


def dynamic_unsqueeze(ctx: Any, node: Any) -> Any:
    """Unsqueeze (opset >= 13) whose ``axes`` are computed at run time: the input's dims keep their order."""
    x = node.input(0)
    rank = len(ctx.shape(x)) + static_length(ctx, node, node.input(1), "Unsqueeze's axes")
    return _builtin(ctx, "unsqueeze", [x, node.input(1)], {}, ((fresh_dims(ctx, rank), ctx.dtype(x)),))
