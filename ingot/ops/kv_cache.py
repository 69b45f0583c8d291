"""``tensor_scatter`` (ONNX TensorScatter, opset 24): write a block of new entries into a KV cache at a
per-batch position, ``linear`` or ``circular`` (wrapping) along the sequence axis.

Note: written as a gather, so the kernel is injective and needs no scatter: output position ``s`` of
batch ``b`` reads ``update[..., s - write_indices[b], ...]`` when that lies in ``[0, S)`` (``S`` the
update's length; modulo the cache length for ``circular``), else keeps ``past_cache``. A ``linear``
write past the cache's end is invalid ONNX; its entries that would land outside are dropped.

Example:
    >>> import numpy as np
    >>> cache = np.zeros((2, 4, 1), "float32")
    >>> upd = np.ones((2, 2, 1), "float32")
    >>> tensor_scatter_numpy(cache, upd, np.array([1, 3]), "circular")[..., 0].tolist()
    [[0.0, 1.0, 1.0, 0.0], [1.0, 0.0, 0.0, 1.0]]
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot import tir
from ingot.ir import as_const_int

from ._util import compute, normalize_axis


def _check(mode: str, axis: int, ndim: int) -> int:
    if mode not in ("linear", "circular"):
        raise ValueError(f"tensor_scatter: mode must be 'linear' or 'circular', got {mode!r}")
    axis = normalize_axis(axis, ndim)
    if axis == 0:
        raise ValueError("tensor_scatter: axis 0 is the batch axis that write_indices index; the sequence axis "
                         "must be another one")
    return axis


def _int64(dim: Any) -> Any:
    # shape dims are int32 constants or int64 symbolic sizes; the index arithmetic is int64
    value = as_const_int(dim)
    return tir.const(value, "int64") if value is not None else dim.astype("int64")


def tensor_scatter_numpy(past: np.ndarray, update: np.ndarray, write_indices: Any = None, mode: str = "linear",
                         axis: int = -2) -> np.ndarray:
    """numpy reference of `tensor_scatter` (``write_indices`` None: every batch writes at 0).

    Example: see the module docstring.
    """
    past, update = np.asarray(past), np.asarray(update)
    axis = _check(mode, axis, past.ndim)
    starts = np.zeros(past.shape[0], np.int64) if write_indices is None else np.asarray(write_indices, np.int64)
    length, count = past.shape[axis], update.shape[axis]
    out = past.copy()
    for b in range(past.shape[0]):
        where = starts[b] + np.arange(count)
        if mode == "circular":
            where = where % length
        keep = (where >= 0) & (where < length)
        src = np.moveaxis(update[b], axis - 1, 0)[keep]
        dst = np.moveaxis(out[b], axis - 1, 0)      # a view: writing it writes ``out``
        dst[where[keep]] = src
    return out


def tensor_scatter(past: Any, update: Any, write_indices: Any = None, mode: str = "linear", axis: int = -2) -> Any:
    """TE of `tensor_scatter_numpy`.

    Example:
        >>> from ingot import te
        >>> y = tensor_scatter(te.placeholder((2, 8, 4), name="c"), te.placeholder((2, 1, 4), name="u"),
        ...                    te.placeholder((2,), "int64", name="w"))
        >>> [int(v) for v in y.shape]
        [2, 8, 4]
    """
    axis = _check(mode, axis, len(past.shape))
    length, count = (_int64(d) for d in (past.shape[axis], update.shape[axis]))

    def body(idx: tuple) -> Any:
        pos = idx[axis].astype("int64")
        rel = pos if write_indices is None else pos - write_indices[idx[0]].astype("int64")
        if mode == "circular":
            rel = tir.floormod(rel, length)
        inside = (rel >= 0) & (rel < count)
        src = tir.min(tir.max(rel, tir.const(0, "int64")), count - 1)
        return tir.select(inside, update[(*idx[:axis], src, *idx[axis + 1:])], past[idx])

    return compute(past.shape, body, "T_tensor_scatter", tag="injective")
