"""ONNX converters: shapes and data movement (Reshape, Transpose, Concat, Slice, Gather, Shape,
Expand, Pad, ...) and constants (Constant, ConstantOfShape, Range).

Note: every converter here first checks whether all its inputs are static (numpy arrays, possibly
object arrays of symbolic dims); then it computes the result with numpy at import time. This is how
``Shape → Gather → Unsqueeze → Concat → Reshape`` chains disappear from the imported graph.
Ops that need data-dependent gathers (Slice with a negative step, Pad in edge/reflect mode) use
``take`` with index arrays computed at import time.

Example:
    >>> from ingot.frontend.onnx.importer import get_converter
    >>> get_converter("Reshape", 14) is not None
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot import graph as G
from ingot.graph.runtime_shape import is_shape_var, onnx_slice_bounds

from . import ops_dynamic
from ._common import as_array, is_static, norm_axes, static_ints
from .importer import np_dtype, register


def _all_static(*values: Any) -> bool:
    return all(v is None or is_static(v) for v in values)


def _static_dims(ctx: Any, node: Any, x: Any, what: str) -> list[int]:
    shape = ctx.shape(x)
    if not all(isinstance(d, int) for d in shape):
        raise node.error(f"{what} needs a static input shape, got {tuple(map(str, shape))}; fix the dims with "
                         f"shape_dict")
    return list(shape)


@register("Constant")
def _constant(ctx: Any, node: Any) -> Any:
    a = node.attrs
    if "value" in a:
        return np.asarray(a["value"])
    if "value_float" in a:
        return np.array(a["value_float"], "float32")
    if "value_floats" in a:
        return np.array(a["value_floats"], "float32")
    if "value_int" in a:
        return np.array(a["value_int"], "int64")
    if "value_ints" in a:
        return np.array(a["value_ints"], "int64")
    if "value_string" in a or "value_strings" in a:  # a string tensor (feeds string ops: ops_string)
        return np.array(a.get("value_string", a.get("value_strings")), dtype=object)
    raise node.error(f"Constant with attribute(s) {sorted(a)} is not supported (string and sparse constants)")


@register("Shape")
def _shape(ctx: Any, node: Any) -> Any:
    shape = list(ctx.shape(node.input(0)))
    start, end = node.attr("start", 0), node.attr("end", None)
    shape = shape[start:end]
    if all(isinstance(d, int) for d in shape):
        return np.array(shape, "int64")
    return np.array(shape, dtype=object)


@register("Size")
def _size(ctx: Any, node: Any) -> Any:
    total: Any = 1
    for d in ctx.shape(node.input(0)):
        total = total * d
    if not isinstance(total, int):
        raise node.error("Size of a tensor with symbolic dims is not supported; fix them with shape_dict")
    return np.array(total, "int64")


@register("ConstantOfShape", since=9)
def _constant_of_shape(ctx: Any, node: Any) -> Any:
    value = node.attr("value")
    value = np.zeros(1, "float32") if value is None else np.asarray(value).reshape(-1)
    if not is_static(node.input(0)):  # a shape computed at run time
        return ops_dynamic.dynamic_constant_of_shape(ctx, node, value)
    shape = static_ints(node.input(0), node, "the shape input")
    if not all(isinstance(d, int) for d in shape):
        # A shape holding symbolic dims (torch's LSTM export builds its zero initial_h as
        # ConstantOfShape([layers * dirs, batch, H]) from Shape(x)): the one value broadcast to the
        # symbolic shape at run time, so that a dynamic-batch model still compiles once.
        return ctx.emit(G.op.broadcast_to(G.const(value[:1].reshape(())), tuple(shape)))
    return np.full(shape, value[0], dtype=value.dtype)


@register("Range", since=11)
def _range(ctx: Any, node: Any) -> Any:
    if not _all_static(*node.inputs):
        return ops_dynamic.dynamic_range(ctx, node)
    # ONNX's Range takes scalars; one-element tensors (AffineGrid's expansion passes them) read as scalars.
    start, limit, delta = (as_array(v).reshape(()) if as_array(v).size == 1 else as_array(v) for v in node.inputs[:3])
    if start.dtype == object or limit.dtype == object or delta.dtype == object:
        return _symbolic_range(ctx, node, start, limit, delta)
    return np.arange(start, limit, delta, dtype=start.dtype)


def _symbolic_range(ctx: Any, node: Any, start: np.ndarray, limit: np.ndarray, delta: np.ndarray) -> Any:
    """Range(start, n, delta) with a symbolic dim ``n`` (GPT-2's position ids ``arange(seq)`` exported with a
    dynamic sequence length): ``start + delta * [0, 1, ...]``, the counter an exclusive cumsum of ones (broadcast) over
    the symbolic length ``ceil((n - start) / delta)``. Start and delta must be known ints, delta > 0."""
    from ingot.ir import PrimExpr

    s, n, d = start.reshape(-1)[0], limit.reshape(-1)[0], delta.reshape(-1)[0]
    if isinstance(s, PrimExpr) or isinstance(d, PrimExpr) or int(d) <= 0:
        raise node.error(f"Range({s}, {n}, {d}) over symbolic dims needs a constant start and a positive "
                         f"constant delta; fix the dims with shape_dict")
    s, d = int(s), int(d)
    length = n - s if s else n
    length = (length + d - 1) // d if d > 1 else length
    dt = "int64" if start.dtype == object else str(start.dtype)
    # (full() takes static shapes only; broadcast_to takes a symbolic target.)
    ones = ctx.expr(ctx.emit(G.op.broadcast_to(G.const(np.ones(1, dt)), (length,))))
    out = ctx.expr(ctx.emit(G.op.cumsum(ones, axis=0, exclusive=True)))
    if d != 1:
        out = ctx.expr(ctx.emit(G.op.multiply(out, G.const(np.array(d, dt)))))
    if s != 0:
        out = ctx.expr(ctx.emit(G.op.add(out, G.const(np.array(s, dt)))))
    return out


@register("Reshape", since=5)
def _reshape(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    if not is_static(node.input(1)):  # a target shape computed at run time
        return ops_dynamic.dynamic_reshape(ctx, node)
    target = static_ints(node.input(1), node, "the shape input")
    src = ctx.shape(x)
    allow_zero = node.opset >= 14 and node.attr("allowzero", 0)
    if not allow_zero:
        target = [src[i] if isinstance(d, int) and d == 0 else d for i, d in enumerate(target)]
    if is_static(x):
        arr = as_array(x)
        if all(isinstance(d, int) for d in target):
            return arr.reshape(target)
    return ctx.emit(G.op.reshape(ctx.expr(x), tuple(_infer_minus_one(list(src), target))))


def _infer_minus_one(src: list, target: list) -> list:
    """Resolve a -1 in ``target`` by cancelling the symbolic dims it shares with ``src``, so that
    ``(N, 3, 4) → (N, -1)`` gives ``(N, 12)`` rather than ``(N, N*12 // N)``."""
    from ingot.ir import structural_equal

    if -1 not in target or all(isinstance(d, int) for d in src):
        return target
    rest = list(src)
    known = []
    for d in target:
        if isinstance(d, int) and d == -1:
            continue
        match = next((k for k, s in enumerate(rest) if not isinstance(s, int) and not isinstance(d, int)
                      and structural_equal(s, d)), None)
        if match is None:
            known.append(d)
        else:
            rest.pop(match)
    if not all(isinstance(d, int) for d in rest + known):
        return target
    num, den = int(np.prod(rest, dtype=np.int64)), int(np.prod(known, dtype=np.int64))
    if den == 0 or num % den:
        return target
    return [num // den if isinstance(d, int) and d == -1 else d for d in target]


@register("Flatten")
def _flatten(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    shape = ctx.shape(x)
    axis = norm_axes([node.attr("axis", 1)], len(shape))[0] if shape else 0
    lead: Any = 1
    for d in shape[:axis]:
        lead = lead * d
    if is_static(x):
        return as_array(x).reshape(int(lead), -1)
    return ctx.emit(G.op.reshape(ctx.expr(x), (lead, -1)))


@register("Transpose")
def _transpose(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    perm = node.attr("perm")
    perm = None if perm is None else [int(p) for p in perm]
    if is_static(x):
        return np.transpose(as_array(x), perm)
    return ctx.emit(G.op.permute_dims(ctx.expr(x), perm))


@register("Concat")
def _concat(ctx: Any, node: Any) -> Any:
    vals = [v for v in node.inputs if v is not None]
    axis = int(node.attr("axis"))
    if _all_static(*vals):
        arrays = [as_array(v) for v in vals]
        if any(a.dtype == object for a in arrays):
            arrays = [a.astype(object) for a in arrays]
        return np.concatenate(arrays, axis=axis)
    # ONNX allows empty inputs in a concat; they contribute nothing.
    exprs = [ctx.expr(v, node) for v in vals if 0 not in [d for d in ctx.shape(v) if isinstance(d, int)]]
    if len(exprs) == 1:
        return exprs[0]
    axis = norm_axes([axis], len(ctx.shape(exprs[0])))[0]
    return ctx.emit(G.op.concat(ops_dynamic.unify_runtime_dims(ctx, exprs, skip_axis=axis, broadcast=False), axis=axis))


def _unsqueeze_axes(ctx: Any, node: Any) -> list[int]:
    axes = static_ints(node.input(1), node, "the axes input") if node.opset >= 13 else list(node.attr("axes"))
    out_ndim = len(ctx.shape(node.input(0))) + len(axes)
    return sorted(norm_axes(axes, out_ndim))


@register("Unsqueeze")
def _unsqueeze(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    if node.opset >= 13 and not is_static(node.input(1)):  # axes computed at run time
        return ops_dynamic.dynamic_unsqueeze(ctx, node)
    axes = _unsqueeze_axes(ctx, node)
    if is_static(x):
        return np.expand_dims(as_array(x), tuple(axes))
    out = ctx.expr(x)
    for a in axes:
        out = ctx.expr(ctx.emit(G.op.expand_dims(out, a)))
    return out


@register("Squeeze")
def _squeeze(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    if node.opset >= 13 and node.input(1) is not None and not is_static(node.input(1)):  # run-time axes
        return ops_dynamic.dynamic_squeeze(ctx, node)
    axes = static_ints(node.input(1), node, "the axes input") if node.opset >= 13 else node.attr("axes")
    ndim = len(ctx.shape(x))
    axes = None if not axes else norm_axes(axes, ndim)
    if is_static(x):
        return np.squeeze(as_array(x), None if axes is None else tuple(axes))
    e, shape = ctx.expr(x), list(ctx.shape(x))
    if axes and any(is_shape_var(shape[a]) for a in axes):  # a fresh run-time size squeezed: it must be 1
        e = ops_dynamic.match_cast(ctx, e, [1 if a in axes else d for a, d in enumerate(shape)])
    return ctx.emit(G.op.squeeze(e, axis=axes))


@register("Slice")
def _slice(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    if node.opset >= 10 and not _all_static(*node.inputs[1:5]):  # bounds computed at run time
        return ops_dynamic.dynamic_slice(ctx, node)
    if node.opset >= 10:
        starts = static_ints(node.input(1), node, "starts")
        ends = static_ints(node.input(2), node, "ends")
        axes = static_ints(node.input(3), node, "axes")
        steps = static_ints(node.input(4), node, "steps")
    else:
        starts, ends, axes, steps = node.attr("starts"), node.attr("ends"), node.attr("axes"), None
    shape = list(ctx.shape(x))
    axes = norm_axes(axes if axes else range(len(starts)), len(shape))
    steps = steps or [1] * len(axes)
    bounds_known = all(isinstance(v, (int, np.integer)) for v in list(starts) + list(ends))
    if is_static(x) and bounds_known:   # (a constant sliced up to a symbolic dim stays a graph op)
        index = [slice(None)] * len(shape)
        for a, s, e, st in zip(axes, starts, ends, steps):
            b, f = onnx_slice_bounds(shape[a], int(s), int(e), int(st))
            index[a] = slice(b, f if f >= 0 else None, int(st))
        return as_array(x)[tuple(index)]
    out = ctx.expr(x)
    known = [isinstance(s, (int, np.integer)) and isinstance(e, (int, np.integer)) for s, e in zip(starts, ends)]
    if not all(known):
        # Bounds holding symbolic dims (GPT-2's causal mask buffer sliced to [:seq, :seq]): gather the
        # positions start, start+1, ... up to the symbolic end, clamped into the axis so that an end past
        # it cannot read out of bounds (ONNX would shorten the axis then; models slice within it).
        for a, s, e, st, ok in zip(axes, starts, ends, steps, known):
            if ok:
                continue
            dim = shape[a]
            if int(st) != 1 or not isinstance(s, (int, np.integer)) or int(s) < 0 or not isinstance(dim, int):
                raise node.error(f"Slice on axis {a} from {s} to {e} (step {st}) over symbolic dims needs a "
                                 f"constant non-negative start, step 1 and a static axis size; fix the dims "
                                 f"with shape_dict")
            idx = ctx.expr(_symbolic_range(ctx, node, np.array(int(s)), np.array(e, dtype=object), np.array(1)))
            idx = ctx.expr(ctx.emit(G.op.minimum(idx, G.const(np.array(dim - 1, "int64")))))
            out = ctx.expr(ctx.emit(G.op.take(out, idx, axis=a)))
        rest = [(a, s, e, st) for a, s, e, st, ok in zip(axes, starts, ends, steps, known) if ok]
        axes, starts, ends, steps = ([r[i] for r in rest] for i in range(4))
    pos = [(a, s, e, st) for a, s, e, st in zip(axes, starts, ends, steps) if st > 0]
    if node.opset >= 10 and all(known) and any(is_shape_var(shape[p[0]]) and not (
            p[1] == 0 and p[2] >= 2**31 - 1) for p in pos):
        # Static bounds clamped against a size only the run knows: the slice builtin clamps them then.
        return ops_dynamic.dynamic_slice(ctx, node)
    if pos:
        out = ctx.expr(ctx.emit(G.op.strided_slice(out, [p[1] for p in pos], [p[2] for p in pos],
                                                   [p[3] for p in pos], [p[0] for p in pos])))
    for a, s, e, st in zip(axes, starts, ends, steps):
        if st < 0:
            dim = shape[a]
            if not isinstance(dim, int):
                raise node.error(f"a negative step on axis {a} needs a static size, got {dim}")
            b, f = onnx_slice_bounds(dim, int(s), int(e), int(st))
            idx = np.arange(b, f, st, dtype="int64")
            out = ctx.expr(ctx.emit(G.op.take(out, G.const(idx), axis=a)))
    return out


@register("Split")
def _split(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    shape = list(ctx.shape(x))
    axis = norm_axes([node.attr("axis", 0)], len(shape))[0]
    if node.opset >= 13 and node.input(1) is not None and not is_static(node.input(1)):
        return ops_dynamic.dynamic_split(ctx, node, x, node.input(1), axis)
    dim = shape[axis]
    if not isinstance(dim, int):
        raise node.error(f"Split needs a static size on axis {axis}, got {dim}")
    sizes = static_ints(node.input(1), node, "split") if node.opset >= 13 else node.attr("split")
    if not sizes:
        k = int(node.attr("num_outputs", node.num_outputs))
        chunk = -(-dim // k)
        sizes = [min(chunk, dim - i * chunk) for i in range(k)]
    outs, begin = [], 0
    for size in sizes:
        if is_static(x):
            index = [slice(None)] * len(shape)
            index[axis] = slice(begin, begin + size)
            outs.append(as_array(x)[tuple(index)])
        else:
            outs.append(ctx.emit(G.op.strided_slice(ctx.expr(x), [begin], [begin + size], [1], [axis])))
        begin += size
    return outs


@register("Gather")
def _gather(ctx: Any, node: Any) -> Any:
    x, idx = node.input(0), node.input(1)
    shape = ctx.shape(x)
    axis = norm_axes([node.attr("axis", 0)], len(shape))[0]
    dim = shape[axis]
    if is_static(idx):
        i = as_array(idx).astype("int64")
        if isinstance(dim, int):
            i = np.where(i < 0, i + dim, i)
        if is_static(x):
            return np.take(as_array(x), i, axis=axis)
        if i.ndim == 0 and isinstance(dim, int):
            # A scalar index is a slice + squeeze (no index tensor to load at run time).
            k = int(i)
            sl = ctx.emit(G.op.strided_slice(ctx.expr(x), [k], [k + 1], [1], [axis]))
            return ctx.emit(G.op.squeeze(ctx.expr(sl), axis=[axis]))
        return ctx.emit(G.op.take(ctx.expr(x), G.const(i), axis=axis))
    i = ctx.expr(idx)
    if isinstance(dim, int):
        dt = ctx.dtype(i)
        neg = ctx.emit(G.op.less(i, G.const(np.array(0, dt))))
        i = ctx.expr(ctx.emit(G.op.where(neg, ctx.emit(G.op.add(i, G.const(np.array(dim, dt)))), i)))
    return ctx.emit(G.op.take(ctx.expr(x), i, axis=axis))


@register("GatherElements", since=11)
def _gather_elements(ctx: Any, node: Any) -> Any:
    x, idx = node.input(0), node.input(1)
    if not is_static(idx):
        axis = node.attr("axis", 0)
        return ctx.emit(G.op.gather_elements(ctx.expr(x), ctx.expr(idx), axis=axis))
    shape = _static_dims(ctx, node, x, "GatherElements")
    axis = norm_axes([node.attr("axis", 0)], len(shape))[0]
    i = as_array(idx).astype("int64")
    i = np.where(i < 0, i + shape[axis], i)
    # Flat positions into x: the index replaces the coordinate on `axis`.
    grid = list(np.indices(i.shape))
    grid[axis] = i
    flat = np.ravel_multi_index(tuple(grid), shape)
    if is_static(x):
        return as_array(x).reshape(-1)[flat]
    return ctx.emit(G.op.take(ctx.expr(ctx.emit(G.op.reshape(ctx.expr(x), (-1,)))), G.const(flat), axis=0))


def _broadcast_shape(node: Any, a: list, b: list) -> list:
    n = max(len(a), len(b))
    a, b = [1] * (n - len(a)) + list(a), [1] * (n - len(b)) + list(b)
    out = []
    for x, y in zip(a, b):
        if isinstance(x, int) and x == 1:
            out.append(y)
        elif isinstance(y, int) and y == 1:
            out.append(x)
        elif isinstance(x, int) and isinstance(y, int) and x != y:
            raise node.error(f"shapes {a} and {b} do not broadcast")
        else:
            out.append(x)
    return out


@register("Expand", since=8)
def _expand(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    if not is_static(node.input(1)):  # a target shape computed at run time
        return ops_dynamic.dynamic_expand(ctx, node)
    target = static_ints(node.input(1), node, "the shape input")
    out_shape = _broadcast_shape(node, list(ctx.shape(x)), target)
    if not all(isinstance(d, int) for d in out_shape):
        # A symbolic target (ViT's cls_token.expand(batch, -1, -1)) broadcasts at run time.
        return ctx.emit(G.op.broadcast_to(ctx.expr(x), out_shape))
    if is_static(x):
        return np.broadcast_to(as_array(x), out_shape).copy()
    if list(ctx.shape(x)) == out_shape:
        return x
    return ctx.emit(G.op.broadcast_to(ctx.expr(x), out_shape))


@register("Tile", since=6)
def _tile(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    if not is_static(node.input(1)):  # repeats computed at run time
        return ops_dynamic.dynamic_tile(ctx, node)
    reps = static_ints(node.input(1), node, "repeats")
    if is_static(x):
        return np.tile(as_array(x), reps)
    out = ctx.expr(x)
    for axis, r in enumerate(reps):
        if r != 1:
            out = ctx.expr(ctx.emit(G.op.concat([out] * r, axis=axis)))
    return out


def _pad_indices(dim: int, before: int, after: int, mode: str) -> np.ndarray:
    i = np.arange(-before, dim + after)
    if mode == "edge":
        return np.clip(i, 0, dim - 1)
    if mode == "reflect":
        period = 2 * (dim - 1) if dim > 1 else 1
        i = np.mod(i, period)
        return np.where(i >= dim, period - i, i)
    # wrap
    return np.mod(i, dim)


@register("Pad", since=2)
def _pad(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    shape = ctx.shape(x)
    ndim = len(shape)
    mode = node.attr("mode", "constant")
    if node.opset >= 11 and not _all_static(*node.inputs[1:4]):  # pads, value or axes computed at run time
        return ops_dynamic.dynamic_pad(ctx, node, mode)
    if node.opset >= 11:
        pads = static_ints(node.input(1), node, "pads")
        value = node.input(2)
        value = 0 if value is None else as_array(value).reshape(-1)[0] if is_static(value) else None
        if value is None:
            raise node.error("a run-time constant_value is not supported")
        axes = static_ints(node.input(3), node, "axes") if len(node.inputs) > 3 else None
    else:
        pads, value, axes = list(node.attr("pads")), node.attr("value", 0.0), None
    axes = norm_axes(axes, ndim) if axes else list(range(ndim))
    k = len(axes)
    before, after = dict(zip(axes, pads[:k])), dict(zip(axes, pads[k:]))
    if is_static(x) and mode == "constant":
        arr = as_array(x)
        crop = tuple(slice(max(0, -before.get(a, 0)), arr.shape[a] - max(0, -after.get(a, 0))) for a in range(ndim))
        arr = arr[crop]
        width = [(max(0, before.get(a, 0)), max(0, after.get(a, 0))) for a in range(ndim)]
        return np.pad(arr, width, constant_values=value)
    out = ctx.expr(x)
    dt = ctx.dtype(x)
    for a in axes:
        b, e = before[a], after[a]
        if b == 0 and e == 0:
            continue
        dim = ctx.shape(out)[a]
        if not isinstance(dim, int):
            raise node.error(f"padding axis {a} needs a static size, got {dim}")
        if mode == "constant":
            if b < 0 or e < 0:  # negative pads crop
                out = ctx.expr(ctx.emit(G.op.strided_slice(out, [max(0, -b)], [dim - max(0, -e)], [1], [a])))
                b, e = max(b, 0), max(e, 0)
            parts = []
            cur = list(ctx.shape(out))
            if b:
                parts.append(G.const(np.full(cur[:a] + [b] + cur[a + 1:], value, dt)))
            parts.append(out)
            if e:
                parts.append(G.const(np.full(cur[:a] + [e] + cur[a + 1:], value, dt)))
            if len(parts) > 1:
                out = ctx.expr(ctx.emit(G.op.concat(parts, axis=a)))
        elif mode in ("edge", "reflect", "wrap"):
            idx = _pad_indices(dim, b, e, mode).astype("int64")
            out = ctx.expr(ctx.emit(G.op.take(out, G.const(idx), axis=a)))
        else:
            raise node.error(f"Pad mode {mode!r} is not supported (constant, edge, reflect, wrap are)")
    return out


@register("DepthToSpace")
def _depth_to_space(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    n, c, h, w = ctx.shape(x)
    b = int(node.attr("blocksize"))
    if node.attr("mode", "DCR") == "DCR":
        t = ctx.emit(G.op.reshape(x, (n, b, b, c // (b * b), h, w)))
        t = ctx.emit(G.op.permute_dims(ctx.expr(t), (0, 3, 4, 1, 5, 2)))
    else:
        t = ctx.emit(G.op.reshape(x, (n, c // (b * b), b, b, h, w)))
        t = ctx.emit(G.op.permute_dims(ctx.expr(t), (0, 1, 4, 2, 5, 3)))
    return ctx.emit(G.op.reshape(ctx.expr(t), (n, c // (b * b), h * b, w * b)))


@register("SpaceToDepth")
def _space_to_depth(ctx: Any, node: Any) -> Any:
    x = ctx.expr(node.input(0))
    n, c, h, w = ctx.shape(x)
    b = int(node.attr("blocksize"))
    mode = node.attr("mode", "DCR")
    mode = mode.decode() if isinstance(mode, bytes) else str(mode)
    if mode not in ("DCR", "CRD"):
        raise node.error(f"mode={mode!r}; SpaceToDepth's modes are DCR and CRD")
    t = ctx.emit(G.op.reshape(x, (n, c, h // b, b, w // b, b)))
    # DCR: output channel = (row offset, column offset, channel); CRD: (channel, row offset, column offset).
    perm = (0, 3, 5, 1, 2, 4) if mode == "DCR" else (0, 1, 3, 5, 2, 4)
    t = ctx.emit(G.op.permute_dims(ctx.expr(t), perm))
    return ctx.emit(G.op.reshape(ctx.expr(t), (n, c * b * b, h // b, w // b)))


@register("Trilu", since=14)
def _trilu(ctx: Any, node: Any) -> Any:
    x = node.input(0)
    if node.input(1) is not None and not is_static(node.input(1)):
        return ops_dynamic.dynamic_trilu(ctx, node, x, node.input(1), bool(node.attr("upper", 1)))
    shape = _static_dims(ctx, node, x, "Trilu")
    k = 0 if node.input(1) is None else int(as_array(node.input(1)).reshape(-1)[0])
    ones = np.ones(shape[-2:], bool)
    mask = np.triu(ones, k) if node.attr("upper", 1) else np.tril(ones, k)
    if is_static(x):
        return np.where(mask, as_array(x), np.zeros((), as_array(x).dtype))
    dt = ctx.dtype(x)
    return ctx.emit(G.op.where(G.const(mask), ctx.expr(x), G.const(np.array(0, dt))))


@register("EyeLike", since=9)
def _eye_like(ctx: Any, node: Any) -> Any:
    shape = _static_dims(ctx, node, node.input(0), "EyeLike")
    dtype = np_dtype(node.attr("dtype")) if node.attr("dtype") is not None else ctx.dtype(node.input(0))
    return np.eye(shape[0], shape[1], k=int(node.attr("k", 0)), dtype=dtype)


@register("OneHot", since=9)
def _one_hot(ctx: Any, node: Any) -> Any:
    idx, depth, values = node.input(0), node.input(1), node.input(2)
    ndim = len(ctx.shape(idx)) + 1
    axis = norm_axes([node.attr("axis", -1)], ndim)[0]
    i = ctx.expr(idx)
    dt = ctx.dtype(i)
    if is_static(depth):
        d: Any = G.const(np.array(int(as_array(depth).reshape(-1)[0]), dt))
        positions: Any = G.const(np.arange(int(as_array(depth).reshape(-1)[0]), dtype=dt))
    else:  # a run-time depth: the one-hot axis is a fresh dim, the positions a range the executor makes
        d = ctx.expr(ctx.emit(G.op.reshape(ctx.expr(ctx.emit(G.op.astype(ctx.expr(depth), "int64"))), ())))
        positions = ctx.expr(ops_dynamic.dynamic_range(ctx, node, [np.array(0, "int64"), d, np.array(1, "int64")]))
        d = ctx.expr(ctx.emit(G.op.astype(d, dt)))
        positions = ctx.expr(ctx.emit(G.op.astype(positions, dt)))
    # ONNX wraps negative indices once; out-of-range ones match no position (all off_value).
    i = ctx.expr(ctx.emit(G.op.where(ctx.emit(G.op.less(i, G.const(np.array(0, dt)))), ctx.emit(G.op.add(i, d)), i)))
    i = ctx.expr(ctx.emit(G.op.expand_dims(i, axis)))
    ar_shape = [1] * ndim
    ar_shape[axis] = ctx.shape(positions)[0]
    hot = ctx.emit(G.op.equal(i, ctx.expr(ctx.emit(G.op.reshape(positions, tuple(ar_shape))))))
    if is_static(values):
        off, on = (G.const(np.array(v)) for v in as_array(values).reshape(-1)[:2])
    else:
        off, on = (ctx.expr(ctx.emit(G.op.strided_slice(ctx.expr(values), [k], [k + 1], [1], [0]))) for k in (0, 1))
    return ctx.emit(G.op.where(ctx.expr(hot), on, off))
