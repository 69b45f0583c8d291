"""PyTorch converters: shape and data movement (view/reshape, permute, cat, split, slice, select,
squeeze/unsqueeze, expand, pad), tensor creation with symbolic sizes, and ``getitem``.

Note: reshapes take their target shape from PyTorch's recorded output shape (``node.out_shape``)
rather than from the arguments: the arguments may hold ``-1`` and symbolic sizes computed by
size arithmetic, while the recorded shape is already resolved, and taking every reshape's dims
from one place keeps symbolic dims structurally equal across the graph.

Example:
    >>> from ingot.frontend.torch.importer import get_converter
    >>> get_converter("aten.view.default") is not None
    True
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot import graph as G

from .importer import register
from .ops_math import tensor

_INT64_MAX = 2 ** 63 - 1


def _axis(dim: int, ndim: int) -> int:
    return dim + ndim if dim < 0 else dim


@register("aten.view.default", "aten.reshape.default", "aten._unsafe_view.default", "aten.flatten.using_ints",
          "aten.unflatten.int", "aten.view_as.default", "aten.reshape_as.default")
def _reshape(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"))
    shape = node.out_shape
    if tuple(ctx.shape(x)) == shape:
        return x
    return ctx.emit(G.op.reshape(x, shape))


@register("aten.permute.default")
def _permute(ctx: Any, node: Any) -> Any:
    return ctx.emit(G.op.permute_dims(tensor(ctx, node.arg("self")), [int(d) for d in node.arg("dims")]))


@register("aten.t.default", "aten.numpy_T.default")
def _t(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"))
    return x if len(ctx.shape(x)) < 2 else ctx.emit(G.op.permute_dims(x))


@register("aten.transpose.int")
def _transpose(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"))
    ndim = len(ctx.shape(x))
    axes = list(range(ndim))
    a, b = _axis(int(node.arg("dim0")), ndim), _axis(int(node.arg("dim1")), ndim)
    if a == b:
        return x
    axes[a], axes[b] = axes[b], axes[a]
    return ctx.emit(G.op.permute_dims(x, axes))


@register("aten.cat.default", "aten.concat.default")
def _cat(ctx: Any, node: Any) -> Any:
    dtype = node.out_dtype
    parts = [tensor(ctx, t, dtype) for t in node.arg("tensors")]
    # torch.cat skips 1-D empty tensors (a legacy rule); drop them so the ranks agree.
    parts = [p for p in parts if not (len(ctx.shape(p)) == 1 and ctx.shape(p)[0] == 0)]
    if len(parts) == 1:
        return parts[0]
    return ctx.emit(G.op.concat(parts, axis=int(node.arg("dim"))))


@register("aten.stack.default")
def _stack(ctx: Any, node: Any) -> Any:
    dtype = node.out_dtype
    parts = [tensor(ctx, t, dtype) for t in node.arg("tensors")]
    axis = _axis(int(node.arg("dim")), len(ctx.shape(parts[0])) + 1)
    expanded = [ctx.expr(ctx.emit(G.op.expand_dims(p, axis))) for p in parts]
    return ctx.emit(G.op.concat(expanded, axis=axis))


def _slice(ctx: Any, x: G.Expr, axis: int, start: int, end: int, step: int = 1) -> Any:
    return ctx.emit(G.op.strided_slice(x, [start], [end], [step], [axis]))


def _static_size(node: Any, shape: tuple, axis: int) -> int:
    size = shape[axis]
    if not isinstance(size, int):
        raise node.error(f"axis {axis} has symbolic size {size}; slicing and splitting it needs a static size "
                         f"(export with a static size for that dimension)")
    return size


@register("aten.slice.Tensor")
def _slice_tensor(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"))
    shape = ctx.shape(x)
    axis = _axis(int(node.arg("dim")), len(shape))
    start, end, step = node.arg("start"), node.arg("end"), node.arg("step")
    start = 0 if start is None else start
    end = _INT64_MAX if end is None else end
    if start == 0 and isinstance(end, int) and end >= _INT64_MAX and step == 1:
        return x  # x[:, 0:] — the full axis, common in exported graphs
    if not (isinstance(start, int) and isinstance(end, int)):
        if tuple(node.out_shape) == tuple(shape) and step == 1 and start == 0:
            return x  # slicing up to the (symbolic) size itself
        raise node.error(f"slice bounds must be static integers, got start={start}, end={end}")
    size = _static_size(node, shape, axis)
    return _slice(ctx, x, axis, start, min(end, size), int(step))


@register("aten.narrow.default")
def _narrow(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"))
    axis = _axis(int(node.arg("dim")), len(ctx.shape(x)))
    start, length = int(node.arg("start")), int(node.arg("length"))
    if start < 0:
        start += _static_size(node, ctx.shape(x), axis)
    return _slice(ctx, x, axis, start, start + length)


@register("aten.select.int")
def _select(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"))
    shape = ctx.shape(x)
    axis = _axis(int(node.arg("dim")), len(shape))
    index = node.arg("index")
    if not isinstance(index, int):
        raise node.error(f"select with a symbolic index {index} is not supported")
    if index < 0:
        index += _static_size(node, shape, axis)
    part = ctx.expr(_slice(ctx, x, axis, index, index + 1))
    return ctx.emit(G.op.squeeze(part, [axis]))


@register("aten.index_select.default")
def _index_select(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"))
    return ctx.emit(G.op.take(x, tensor(ctx, node.arg("index")), axis=int(node.arg("dim"))))


def _split_at(ctx: Any, node: Any, x: G.Expr, axis: int, sizes: list) -> tuple:
    outs, start = [], 0
    for size in sizes:
        outs.append(_slice(ctx, x, axis, start, start + size))
        start += size
    return tuple(outs)


@register("aten.split.Tensor", "aten.split_with_sizes.default", "aten.chunk.default", "aten.unbind.int",
          "aten.tensor_split.sections")
def _split(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"))
    shape = ctx.shape(x)
    axis = _axis(int(node.arg("dim")), len(shape))
    # PyTorch's recorded outputs give every piece's size (also for chunk's uneven last piece).
    sizes = [int(v.shape[axis]) if node.key != "aten.unbind.int" else 1 for v in node.meta_val]
    _static_size(node, shape, axis)
    pieces = _split_at(ctx, node, x, axis, sizes)
    if node.key == "aten.unbind.int":
        return tuple(ctx.emit(G.op.squeeze(ctx.expr(p), [axis])) for p in pieces)
    return pieces


@register("aten.unsqueeze.default")
def _unsqueeze(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"))
    return ctx.emit(G.op.expand_dims(x, _axis(int(node.arg("dim")), len(ctx.shape(x)) + 1)))


@register("aten.squeeze.dim", "aten.squeeze.dims", "aten.squeeze.default")
def _squeeze(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"))
    shape = ctx.shape(x)
    if node.key == "aten.squeeze.default":
        dims = [a for a, d in enumerate(shape) if isinstance(d, int) and d == 1]
    else:
        dims = node.arg("dim")
        dims = [dims] if isinstance(dims, int) else list(dims)
        # PyTorch leaves axes whose size is not 1 alone (no error, unlike numpy).
        dims = [_axis(int(a), len(shape)) for a in dims]
        dims = [a for a in dims if isinstance(shape[a], int) and shape[a] == 1]
    if not dims:
        return x
    return ctx.emit(G.op.squeeze(x, dims))


def _broadcast(ctx: Any, x: G.Expr, shape: tuple) -> Any:
    """``broadcast_to(x, shape)``; a constant ``x`` with a symbolic ``shape`` is bound to a variable
    first, because FoldConstant would try to evaluate the broadcast (it cannot: the size is only
    known at run time)."""
    if tuple(ctx.shape(x)) == tuple(shape):
        return x
    if isinstance(x, G.Constant) and not all(isinstance(d, int) for d in shape):
        x = ctx.bb.emit(x)
    return ctx.emit(G.op.broadcast_to(x, shape))


@register("aten.expand.default", "aten.expand_as.default", "aten.broadcast_to.default")
def _expand(ctx: Any, node: Any) -> Any:
    return _broadcast(ctx, tensor(ctx, node.arg("self")), node.out_shape)


@register("aten.constant_pad_nd.default", "aten.pad.default")
def _pad(ctx: Any, node: Any) -> Any:
    x = tensor(ctx, node.arg("self"))
    if node.key == "aten.pad.default" and node.arg("mode") != "constant":
        raise node.error(f"padding mode {node.arg('mode')!r} is not supported; only 'constant'")
    pad, value = [int(p) for p in node.arg("pad")], node.arg("value")
    ndim = len(ctx.shape(x))
    # PyTorch lists (before, after) pairs from the LAST axis backwards.
    width = [0] * (2 * ndim)
    for k in range(len(pad) // 2):
        axis = ndim - 1 - k
        width[2 * axis], width[2 * axis + 1] = pad[2 * k], pad[2 * k + 1]
    if any(w < 0 for w in width):
        raise node.error(f"negative padding {pad} (cropping) is not supported; slice the tensor instead")
    pairs = [(width[2 * a], width[2 * a + 1]) for a in range(ndim)]
    return ctx.emit(G.op.pad(x, pairs, 0.0 if value is None else float(value)))


# -- tensor creation with symbolic sizes --------------------------------------------------------------


def _filled(ctx: Any, node: Any, value: Any) -> Any:
    shape, dtype = node.out_shape, node.out_dtype
    if all(isinstance(d, int) for d in shape):
        return np.full(shape, value, dtype=dtype)
    return _broadcast(ctx, ctx.expr(np.array(value, dtype=dtype)), shape)


@register("aten.full.default", "aten.zeros.default", "aten.ones.default", "aten.empty.memory_format",
          "aten.new_zeros.default", "aten.new_ones.default", "aten.new_full.default", "aten.new_empty.default")
def _full(ctx: Any, node: Any) -> Any:
    value = {"aten.zeros.default": 0, "aten.new_zeros.default": 0, "aten.ones.default": 1,
             "aten.new_ones.default": 1, "aten.empty.memory_format": 0,
             "aten.new_empty.default": 0}.get(node.key)
    if value is None:
        value = node.arg("fill_value")
    return _filled(ctx, node, value)


@register("aten.zeros_like.default", "aten.ones_like.default", "aten.full_like.default", "aten.empty_like.default")
def _full_like(ctx: Any, node: Any) -> Any:
    value = {"aten.zeros_like.default": 0, "aten.ones_like.default": 1, "aten.empty_like.default": 0}.get(node.key)
    if value is None:
        value = node.arg("fill_value")
    return _filled(ctx, node, value)


# -- tuples --------------------------------------------------------------------------------------------


@register("operator.getitem")
def _getitem(ctx: Any, node: Any) -> Any:
    seq, index = node.arg(0), node.arg(1)
    if not isinstance(seq, (tuple, list)):
        raise node.error(f"getitem on a {type(seq).__name__}; only tuple outputs of multi-output ops are supported")
    value = seq[index]
    if value is None:
        producer = node.fx_node.args[0]
        raise node.error(f"output {index} of {producer.name!r} ({producer.target}) is not supported (only the main "
                         f"result is imported: e.g. max_pool2d indices, batch-norm statistics)")
    return value


@register("aten.index.Tensor")
def _index(ctx: Any, node: Any) -> Any:
    # x[:, idx] with ONE integer index tensor → take along that axis (advanced indexing in general
    # — several index tensors broadcast together, bool masks — is not supported).
    x = tensor(ctx, node.arg("self"))
    indices = list(node.arg("indices"))
    given = [k for k, i in enumerate(indices) if i is not None]
    if len(given) != 1:
        raise node.error(f"indexing with {len(given)} index tensors is not supported; only x[..., idx, ...] with one "
                         f"integer index tensor is")
    index = tensor(ctx, indices[given[0]])
    if not str(index.struct_info.dtype).startswith(("int", "uint")):
        raise node.error(f"boolean-mask indexing is not supported (index dtype {index.struct_info.dtype}); use "
                         f"torch.where")
    return ctx.emit(G.op.take(x, index, axis=given[0]))
