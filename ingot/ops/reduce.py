"""Reductions over axes: sum, mean, max, min, prod, argmax/argmin (``keepdims`` as numpy;
argmax/argmin are one tuple reduction over (index, value) pairs with ``te.comm_reducer``).

Example:
    >>> from ingot import te
    >>> y = sum(te.placeholder((4, 8), name="x"), axis=(1,))
"""
from __future__ import annotations

import builtins
from typing import Any, Sequence

from ingot import tir
from ingot.ir import convert

from ._util import compute, const_like, normalize_axis, prod as _prod


def _axes(x: Any, axis: "int | Sequence[int] | None") -> list[int]:
    ndim = len(x.shape)
    if axis is None:
        return list(range(ndim))
    if isinstance(axis, int):
        axis = [axis]
    return sorted({normalize_axis(a, ndim) for a in axis})


def _reduction_layout(x: Any, axes: Sequence[int], keepdims: bool) -> tuple:
    """``(reduce axes, output shape, source)`` of a reduction of ``x`` over ``axes`` (sorted):
    one reduce axis per reduced dimension, the output shape (reduced dims kept as 1 with
    ``keepdims``, else dropped), and ``source(idx)``, the index of ``x`` an output index reads
    (reduced dims replaced by their reduce axes).

    Example:
        >>> from ingot import te
        >>> raxes, shape, source = _reduction_layout(te.placeholder((4, 8), name="x"), [1], True)
        >>> [int(d) for d in shape], len(raxes)
        ([4, 1], 1)
    """
    from ingot import te

    raxes = [te.reduce_axis((0, x.shape[a]), name=f"k{j}") for j, a in enumerate(axes)]
    if keepdims:
        out_shape = [1 if a in axes else d for a, d in enumerate(x.shape)]
    else:
        out_shape = [d for a, d in enumerate(x.shape) if a not in axes]

    def source(idx: tuple) -> tuple:
        src, it, rit = [], iter(idx), iter(raxes)
        for a in range(len(x.shape)):
            if a in axes:
                src.append(next(rit))
                if keepdims:
                    next(it)  # the kept extent-1 output axis
            else:
                src.append(next(it))
        return tuple(src)

    return raxes, out_shape, source


def _reduce(x: Any, axis: Any, keepdims: bool, kind: str, name: str) -> Any:
    from ingot import te

    raxes, out_shape, source = _reduction_layout(x, _axes(x, axis), keepdims)

    def body(idx: tuple) -> Any:
        value = x[source(idx)]
        if kind == "sum":
            return te.sum(value, axis=raxes)
        if kind == "max":
            return te.max(value, axis=raxes)
        if kind == "min":
            return te.min(value, axis=raxes)
        if kind == "prod":
            comm_reducer = getattr(te, "comm_reducer", None)
            if comm_reducer is None:
                raise NotImplementedError("prod needs te.comm_reducer, which ingot.te does not provide yet")
            product = comm_reducer(lambda u, v: u * v, lambda t: const_like(1, t), name="prod")
            return product(value, axis=raxes)
        raise ValueError(f"unknown reduction kind {kind!r}")

    return compute(out_shape, body, name, tag="reduction")


def sum(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001 - numpy/TVM name
    """Sum over ``axis`` (all axes when None).

    Example:
        >>> from ingot import te
        >>> y = sum(te.placeholder((4, 8), name="x"), axis=1, keepdims=True)
    """
    return _reduce(x, axis, keepdims, "sum", "T_sum")


def max(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Maximum over ``axis``.

    Example:
        >>> from ingot import te
        >>> y = max(te.placeholder((4, 8), name="x"), axis=0)
    """
    return _reduce(x, axis, keepdims, "max", "T_max")


def min(x: Any, axis: Any = None, keepdims: bool = False) -> Any:  # noqa: A001
    """Minimum over ``axis``.

    Example:
        >>> from ingot import te
        >>> y = min(te.placeholder((4, 8), name="x"), axis=0)
    """
    return _reduce(x, axis, keepdims, "min", "T_min")


def prod(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Product over ``axis`` (needs ``te.comm_reducer``).

    Example:
        >>> from ingot import te
        >>> y = prod(te.placeholder((4, 8), name="x"), axis=1)
    """
    return _reduce(x, axis, keepdims, "prod", "T_prod")


def mean(x: Any, axis: Any = None, keepdims: bool = False) -> Any:
    """Mean over ``axis`` (sum, then divide by the count).

    Example:
        >>> from ingot import te
        >>> y = mean(te.placeholder((4, 8), name="x"), axis=1)
    """
    axes = _axes(x, axis)
    total = _reduce(x, axis, keepdims, "sum", "T_mean_sum")
    count = _prod([convert(x.shape[a]) for a in axes])
    count = convert(count).astype(str(x.dtype))
    return compute(total.shape, lambda idx: total[idx] / count, "T_mean", tag="elemwise")


def _arg_reduce(x: Any, axis: "int | None", keepdims: bool, select_last: bool, kind: str) -> Any:
    """argmax/argmin as one tuple reduction over ``(index, value)`` pairs (TVM's argmax reducer)."""
    from ingot import te

    ndim = len(x.shape)
    axes = list(range(ndim)) if axis is None else [normalize_axis(axis, ndim)]
    raxes, out_shape, source = _reduction_layout(x, axes, keepdims)
    better = (lambda a, b: a > b) if kind == "max" else (lambda a, b: a < b)

    def fcombine(lhs: tuple, rhs: tuple) -> tuple:
        # rhs wins when strictly better, or equal with a smaller (select_last: larger) index; this
        # makes the result independent of the order the reduction visits the elements.
        tie = rhs[0] > lhs[0] if select_last else rhs[0] < lhs[0]
        # Index -1 marks the identity: a real element always beats it (even one equal to its value,
        # e.g. a row of -inf, which numpy gives index 0) and never loses to it, in either order.
        none = tir.const(-1, str(lhs[0].dtype))
        wins = tir.Or(better(rhs[1], lhs[1]), tir.And(tir.EQ(rhs[1], lhs[1]), tie))
        take = tir.Or(tir.EQ(lhs[0], none), tir.And(tir.NE(rhs[0], none), wins))
        return tir.Select(take, rhs[0], lhs[0]), tir.Select(take, rhs[1], lhs[1])

    def fidentity(index_dtype: str, value_dtype: str) -> tuple:
        worst = tir.max_identity(value_dtype) if kind == "max" else tir.min_identity(value_dtype)
        return tir.const(-1, index_dtype), worst

    reducer = te.comm_reducer(fcombine, fidentity, name=f"arg{kind}")

    def body(idx: tuple) -> Any:
        # Row-major flat index of the reduced position (one axis: the position itself).
        flat: Any = None
        for r, a in zip(raxes, axes):
            flat = r.var.astype("int64") if flat is None else flat * convert(x.shape[a]).astype("int64") + r.var
        return reducer((flat, x[source(idx)]), axis=raxes)

    # Two outputs (index, value); the value is an intermediate of the PrimFunc.
    return compute(out_shape, body, f"T_arg{kind}", tag="reduction")[0]


def argmax(x: Any, axis: "int | None" = None, keepdims: bool = False, select_last_index: bool = False) -> Any:
    """Index (int64) of the maximum along ``axis`` (of the flattened tensor when None); ties give
    the first index (the last with ``select_last_index``), as numpy/ONNX.

    Example:
        >>> from ingot import te
        >>> y = argmax(te.placeholder((4, 8), name="x"), axis=1)
        >>> [int(d) for d in y.shape], str(y.dtype)
        ([4], 'int64')
    """
    return _arg_reduce(x, axis, keepdims, select_last_index, "max")


def argmin(x: Any, axis: "int | None" = None, keepdims: bool = False, select_last_index: bool = False) -> Any:
    """Index (int64) of the minimum along ``axis`` (see `argmax`).

    Example:
        >>> from ingot import te
        >>> y = argmin(te.placeholder((4, 8), name="x"), axis=0, keepdims=True)
    """
    return _arg_reduce(x, axis, keepdims, select_last_index, "min")


_ = (builtins, tir)
