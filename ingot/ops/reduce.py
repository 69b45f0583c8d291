"""Reductions over axes: sum, mean, max, min, prod, argmax/argmin (``keepdims`` as numpy).

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


def _reduce(x: Any, axis: Any, keepdims: bool, kind: str, name: str) -> Any:
    from ingot import te

    axes = _axes(x, axis)
    raxes = [te.reduce_axis((0, x.shape[a]), name=f"k{j}") for j, a in enumerate(axes)]
    if keepdims:
        out_shape = [1 if a in axes else d for a, d in enumerate(x.shape)]
    else:
        out_shape = [d for a, d in enumerate(x.shape) if a not in axes]

    def body(idx: tuple) -> Any:
        src, it, rit = [], iter(idx), iter(raxes)
        for a in range(len(x.shape)):
            if a in axes:
                src.append(next(rit))
                if keepdims:
                    next(it)
            else:
                src.append(next(it))
        value = x[tuple(src)]
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


_ = (builtins, tir)
