"""Injective data movement: reshape, transpose, flatten, concatenate, expand_dims, squeeze,
strided_slice, split, take, gather_elements.

Example:
    >>> from ingot import te
    >>> y = transpose(te.placeholder((2, 3), name="x"), (1, 0))
"""
from __future__ import annotations

from typing import Any, Sequence

from ingot import tir
from ingot.ir import IntImm, convert

from ._util import compute, normalize_axis, prod


def reshape(x: Any, newshape: Sequence[Any]) -> Any:
    """``x`` with shape ``newshape`` (same number of elements; row-major order).

    Example:
        >>> from ingot import te
        >>> y = reshape(te.placeholder((2, 6), name="x"), (3, 4))
    """
    in_shape = [convert(d) for d in x.shape]
    out_shape = [convert(d) for d in newshape]

    def body(idx: tuple) -> Any:
        # Step 1: the flat (row-major) position of the output element.
        flat: Any = IntImm(convert(idx[0]).dtype if idx else "int32", 0)
        for i, d in zip(idx, out_shape):
            flat = flat * d + i
        # Step 2: the input index of that flat position.
        src = []
        for d in reversed(in_shape):
            src.append(flat % d)
            flat = flat // d
        return x[tuple(reversed(src))]

    return compute(out_shape, body, "T_reshape", tag="injective")


def transpose(x: Any, axes: "Sequence[int] | None" = None) -> Any:
    """``numpy.transpose(x, axes)`` (reversed axes when None).

    Example:
        >>> from ingot import te
        >>> y = transpose(te.placeholder((2, 3, 4), name="x"), (0, 2, 1))
    """
    ndim = len(x.shape)
    axes = list(reversed(range(ndim))) if axes is None else [normalize_axis(a, ndim) for a in axes]
    out_shape = [x.shape[a] for a in axes]

    def body(idx: tuple) -> Any:
        src = [None] * ndim
        for out_axis, in_axis in enumerate(axes):
            src[in_axis] = idx[out_axis]
        return x[tuple(src)]

    return compute(out_shape, body, "T_transpose", tag="injective")


def flatten(x: Any, start_dim: int = 1, end_dim: int = -1) -> Any:
    """Merge axes ``start_dim..end_dim`` into one (PyTorch's ``flatten``; TVM's ``batch_flatten`` by default).

    Example:
        >>> from ingot import te
        >>> y = flatten(te.placeholder((2, 3, 4), name="x"))
    """
    ndim = len(x.shape)
    s, e = normalize_axis(start_dim, ndim), normalize_axis(end_dim, ndim)
    shape = list(x.shape[:s]) + [prod([convert(d) for d in x.shape[s:e + 1]])] + list(x.shape[e + 1:])
    return reshape(x, shape)


def expand_dims(x: Any, axis: int, num_newaxis: int = 1) -> Any:
    """Insert ``num_newaxis`` size-1 axes at ``axis``.

    Example:
        >>> from ingot import te
        >>> y = expand_dims(te.placeholder((2, 3), name="x"), 1)
    """
    ndim = len(x.shape)
    axis = axis + ndim + 1 if axis < 0 else axis
    shape = list(x.shape[:axis]) + [1] * num_newaxis + list(x.shape[axis:])

    def body(idx: tuple) -> Any:
        return x[tuple(idx[:axis]) + tuple(idx[axis + num_newaxis:])]

    return compute(shape, body, "T_expand_dims", tag="injective")


def squeeze(x: Any, axis: "Sequence[int] | None" = None) -> Any:
    """Drop size-1 axes (those listed, or all).

    Example:
        >>> from ingot import te
        >>> y = squeeze(te.placeholder((2, 1, 3), name="x"), (1,))
    """
    ndim = len(x.shape)
    if axis is None:
        axes = [a for a, d in enumerate(x.shape) if isinstance(convert(d), IntImm) and convert(d).value == 1]
    else:
        axes = [normalize_axis(a, ndim) for a in axis]
    shape = [d for a, d in enumerate(x.shape) if a not in axes]

    def body(idx: tuple) -> Any:
        it = iter(idx)
        return x[tuple(IntImm(convert(idx[0]).dtype if idx else "int32", 0) if a in axes else next(it)
                       for a in range(ndim))]

    return compute(shape, body, "T_squeeze", tag="injective")


def concatenate(tensors: Sequence[Any], axis: int = 0) -> Any:
    """Join tensors along ``axis``.

    Example:
        >>> from ingot import te
        >>> y = concatenate([te.placeholder((2, 3), name="a"), te.placeholder((4, 3), name="b")], 0)
    """
    ndim = len(tensors[0].shape)
    axis = normalize_axis(axis, ndim)
    offsets = [convert(0)]
    for t in tensors:
        offsets.append(offsets[-1] + t.shape[axis])
    shape = list(tensors[0].shape)
    shape[axis] = offsets[-1]

    def body(idx: tuple) -> Any:
        # Select the source tensor by the position along ``axis``, from the last one backwards.
        def read(k: int) -> Any:
            src = list(idx)
            src[axis] = idx[axis] - offsets[k]
            return tensors[k][tuple(src)]

        value = read(len(tensors) - 1)
        for k in range(len(tensors) - 2, -1, -1):
            value = tir.if_then_else(idx[axis] < offsets[k + 1], read(k), value)
        return value

    return compute(shape, body, "T_concat", tag="injective")


def strided_slice(x: Any, begin: Sequence[int], end: Sequence[int], strides: "Sequence[int] | None" = None,
                  axes: "Sequence[int] | None" = None) -> Any:
    """``x[begin:end:strides]`` on ``axes`` (all leading axes when None); constant bounds.

    Example:
        >>> from ingot import te
        >>> y = strided_slice(te.placeholder((8, 4), name="x"), [2], [6])
    """
    ndim = len(x.shape)
    axes = list(range(len(begin))) if axes is None else [normalize_axis(a, ndim) for a in axes]
    strides = list(strides) if strides is not None else [1] * len(axes)
    shape = list(x.shape)
    starts = [0] * ndim
    steps = [1] * ndim
    for a, b, e, s in zip(axes, begin, end, strides):
        shape[a] = max(0, (e - b + s - (1 if s > 0 else -1)) // s)
        starts[a], steps[a] = b, s

    def body(idx: tuple) -> Any:
        return x[tuple(i * steps[a] + starts[a] if (steps[a] != 1 or starts[a] != 0) else i
                       for a, i in enumerate(idx))]

    return compute(shape, body, "T_strided_slice", tag="injective")


def take(x: Any, indices: Any, axis: int = 0) -> Any:
    """``numpy.take(x, indices, axis)`` (indices clipped into range, as TVM's ``mode="clip"``).

    Example:
        >>> from ingot import te
        >>> y = take(te.placeholder((10, 4), name="x"), te.placeholder((3,), name="i", dtype="int64"))
    """
    ndim = len(x.shape)
    axis = normalize_axis(axis, ndim)
    ishape = list(indices.shape)
    shape = list(x.shape[:axis]) + ishape + list(x.shape[axis + 1:])
    k = len(ishape)

    def body(idx: tuple) -> Any:
        pos = indices[tuple(idx[axis:axis + k])]
        limit = convert(x.shape[axis]).astype(str(pos.dtype)) - 1
        pos = tir.min(tir.max(pos, 0), limit)
        return x[tuple(idx[:axis]) + (pos,) + tuple(idx[axis + k:])]

    return compute(shape, body, "T_take", tag="injective")


def broadcast_to(x: Any, shape: Sequence[Any]) -> Any:
    """``numpy.broadcast_to(x, shape)`` as a new tensor (TVM's ``broadcast_to``, ONNX ``Expand``).

    Example:
        >>> from ingot import te
        >>> y = broadcast_to(te.placeholder((3, 1), name="x"), (2, 3, 4))
    """
    from ._util import broadcast_index

    out_shape = tuple(convert(d) for d in shape)
    if not hasattr(x, "shape"):
        # A 0-d constant operand arrives inlined as a scalar expression (legalize does that to 0-d
        # constants): every element is that value.
        return compute(out_shape, lambda idx: x, "T_broadcast_to", tag="broadcast")
    return compute(out_shape, lambda idx: x[broadcast_index(x, out_shape, idx)], "T_broadcast_to",
                   tag="broadcast")


def cumsum(x: Any, axis: int = 0, exclusive: bool = False) -> Any:
    """Cumulative sum along ``axis`` (``exclusive``: the element itself is not included).

    A reduction over the axis guarded by ``k <= i`` (quadratic in the axis length; scans are
    short in the models this serves).

    Example:
        >>> from ingot import te
        >>> y = cumsum(te.placeholder((4, 8), name="x"), axis=1)
    """
    from ingot import te

    axis = normalize_axis(axis, len(x.shape))
    k = te.reduce_axis((0, x.shape[axis]), name="k")

    def body(idx: tuple) -> Any:
        src = list(idx)
        src[axis] = k
        keep = k < idx[axis] if exclusive else k <= idx[axis]
        zero = tir.const(0, str(x.dtype))
        return te.sum(tir.Select(keep, x[tuple(src)], zero), axis=k)

    return compute(x.shape, body, "T_cumsum", tag="cumsum")


def full(shape: Sequence[Any], fill_value: float, dtype: str = "float32") -> Any:
    """A tensor of ``shape`` filled with ``fill_value``.

    Example:
        >>> y = full((2, 3), 1.5)
    """
    from ._util import const_like

    return compute(tuple(convert(d) for d in shape), lambda idx: const_like(fill_value, dtype), "T_full",
                   tag="elemwise")


def arange(start: float, stop: float, step: float = 1, dtype: str = "float32") -> Any:
    """``numpy.arange(start, stop, step)`` (constant bounds).

    Example:
        >>> y = arange(0, 10, 2, "int64")
    """
    import math

    from ._util import const_like

    n = max(0, int(math.ceil((stop - start) / step)))
    return compute((n,), lambda idx: const_like(start, dtype) + idx[0].astype(dtype) * const_like(step, dtype),
                   "T_arange", tag="elemwise")


def split(x: Any, indices_or_sections: "int | Sequence[int]", axis: int = 0) -> list:
    """``numpy.split``: ``sections`` equal parts, or cut before each of the ``indices``; one tensor per part.

    Example:
        >>> from ingot import te
        >>> parts = split(te.placeholder((6, 4), name="x"), [2, 5], axis=0)
        >>> [int(p.shape[0]) for p in parts]
        [2, 3, 1]
    """
    from ingot.ir import as_const_int

    ndim = len(x.shape)
    axis = normalize_axis(axis, ndim)
    size = as_const_int(convert(x.shape[axis]))
    if isinstance(indices_or_sections, int):
        sections = indices_or_sections
        if size is None or sections <= 0 or size % sections:
            raise ValueError(f"split: axis {axis} of size {x.shape[axis]} cannot be split into {sections} equal sections")
        bounds = [size // sections * k for k in range(sections + 1)]
    else:
        if size is None:
            raise ValueError(f"split: axis {axis} has symbolic size {x.shape[axis]}; splitting needs a static size")
        bounds = [0] + [min(max(int(i), 0), size) for i in indices_or_sections] + [size]
    parts = []
    for k, (b, e) in enumerate(zip(bounds[:-1], bounds[1:])):
        shape = list(x.shape)
        shape[axis] = max(0, e - b)

        def body(idx: tuple, b: int = b) -> Any:
            src = list(idx)
            src[axis] = idx[axis] + b if b else idx[axis]
            return x[tuple(src)]

        parts.append(compute(shape, body, f"T_split_{k}", tag="injective"))
    return parts


def gather_elements(x: Any, indices: Any, axis: int = 0) -> Any:
    """``out[i..] = x[i.. with indices[i..] at axis]`` (ONNX GatherElements, ``torch.gather``,
    ``numpy.take_along_axis``); negative indices count from the end; out has the indices' shape.

    Example:
        >>> from ingot import te
        >>> y = gather_elements(te.placeholder((3, 4), name="x"), te.placeholder((3, 2), name="i", dtype="int64"), 1)
    """
    ndim = len(x.shape)
    axis = normalize_axis(axis, ndim)
    if len(indices.shape) != ndim:
        raise ValueError(f"gather_elements: indices have rank {len(indices.shape)}, data has rank {ndim}; they must match")

    def body(idx: tuple) -> Any:
        pos = indices[tuple(idx)]
        size = convert(x.shape[axis]).astype(str(pos.dtype))
        pos = tir.Select(pos < 0, pos + size, pos)
        # Clipped into range like take (an out-of-range index must not read out of bounds).
        pos = tir.min(tir.max(pos, 0), size - 1)
        src = list(idx)
        src[axis] = pos
        return x[tuple(src)]

    return compute(indices.shape, body, "T_gather_elements", tag="injective")
