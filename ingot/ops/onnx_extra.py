"""TE computes for operators the ONNX frontend needs beyond the core inventory: topk (indices),
bitwise and/or/xor/shifts, bitwise not.

Note: written with the reductions TE already has (sum), no multi-value reducers:
  * topk ranks every element by counting the elements that come before it in the sorted order
    (greater value, or equal value at a smaller index — ONNX's tie rule), then output ``j`` is the
    index whose rank is ``j``. Quadratic in the axis length, fine for the heads and small axes
    these serve; a real sort would need a scan/sort primitive.

Example:
    >>> from ingot import te
    >>> x = te.placeholder((3, 5), name="x")
    >>> i = topk_indices(x, 2, axis=1)
    >>> [int(d) for d in i.shape]
    [3, 2]
"""
from __future__ import annotations

from typing import Any

from ingot import tir
from ingot.ir import convert

from ._util import compute, normalize_axis


def topk_indices(x: Any, k: int, axis: int = -1, largest: bool = True) -> Any:
    """The int64 indices of the ``k`` largest (or smallest) elements along ``axis``, in sorted
    order, ties broken by the smaller index (ONNX ``TopK``). Values: ``gather_elements`` of them.

    Example:
        >>> from ingot import te
        >>> i = topk_indices(te.placeholder((2, 8), name="x"), 3)
    """
    from .sort import topk

    return topk(x, k, axis, ret_type="indices", largest=largest, dtype="int64")


def bitwise(a: Any, b: Any, kind: str) -> Any:
    """Broadcasting integer ``and``/``or``/``xor``/``shift_left``/``shift_right`` (ONNX BitwiseAnd...,
    BitShift). Shifts by a negative amount or by at least the bit width give 0 (right shifts of a
    negative signed value: -1), as ONNX defines them; no shift in the generated C is undefined.

    Example:
        >>> from ingot import te
        >>> y = bitwise(te.placeholder((4,), "uint8", "a"), te.placeholder((1,), "uint8", "b"), "shift_left")
    """
    from ingot.ir import Call, DataType

    from ._util import broadcast_index

    ndim = max(len(a.shape), len(b.shape))
    out_shape = []
    for k in range(ndim):
        da = a.shape[k - ndim + len(a.shape)] if k - ndim + len(a.shape) >= 0 else 1
        db = b.shape[k - ndim + len(b.shape)] if k - ndim + len(b.shape) >= 0 else 1
        out_shape.append(db if _is_one(da) else da)
    dtype = str(a.dtype)
    bits = DataType(dtype).bits
    signed = dtype.startswith("int")

    def body(idx: tuple) -> Any:
        x, y = a[broadcast_index(a, out_shape, idx)], b[broadcast_index(b, out_shape, idx)]
        if kind in ("and", "or", "xor"):
            return Call(dtype, f"bitwise_{kind}", [x, y])
        zero = tir.const(0, dtype)
        valid = tir.And(y >= zero, y < tir.const(bits, dtype))
        amount = tir.min(tir.max(y, zero), tir.const(bits - 1, dtype))  # never an undefined shift
        if kind == "shift_left":
            if signed:  # shift the unsigned bit pattern: signed overflow is undefined in C
                udt = f"uint{bits}"
                shifted = Call(udt, "shift_left", [x.astype(udt), amount.astype(udt)]).astype(dtype)
            else:
                shifted = Call(dtype, "shift_left", [x, amount])
            return tir.Select(valid, shifted, zero)
        if kind == "shift_right":
            out_of_range = tir.Select(x < zero, tir.const(-1, dtype), zero) if signed else zero
            return tir.Select(valid, Call(dtype, "shift_right", [x, amount]), out_of_range)
        raise ValueError(f"bitwise: unknown kind {kind!r}; use and/or/xor/shift_left/shift_right")

    return compute(out_shape, body, f"T_bitwise_{kind}", tag="broadcast")


def bitwise_not(x: Any) -> Any:
    """Integer ``~x`` (ONNX BitwiseNot).

    Example:
        >>> from ingot import te
        >>> y = bitwise_not(te.placeholder((4,), "int32", "x"))
    """
    from ingot.ir import Call

    return compute(x.shape, lambda idx: Call(str(x.dtype), "bitwise_not", [x[tuple(idx)]]), "T_bitwise_not",
                   tag="elemwise")


def _is_one(dim: Any) -> bool:
    from ._util import is_one

    return is_one(dim)


def scatter_elements(data: Any, indices: Any, updates: Any, axis: int = 0, reduction: str = "none") -> Any:
    """ONNX ``ScatterElements``: ``out = data`` with ``out[i.. with axis = indices[j..]] (op)= updates[j..]``.

    Each output element searches the index positions that target it (a reduction over the indices'
    ``axis`` length, so quadratic in it): ``reduction="none"`` takes the last one (ONNX leaves
    duplicates unspecified), ``add``/``mul``/``max``/``min`` combine all of them with ``data``.
    Indices are wrapped (negative) and never read outside ``updates``.

    Example:
        >>> from ingot import te
        >>> d = te.placeholder((3, 4), name="d")
        >>> y = scatter_elements(d, te.placeholder((2, 4), "int64", "i"), te.placeholder((2, 4), name="u"))
    """
    from ingot import te

    ndim = len(data.shape)
    axis = normalize_axis(axis, ndim)
    ishape = list(indices.shape)
    r = te.reduce_axis((0, ishape[axis]), name="r")
    dtype = str(data.dtype)

    def source(idx: tuple, j: Any) -> tuple:
        # The index position in this output element's line; other coordinates clamped in range.
        src = [tir.min(i, convert(ishape[d]).astype(str(convert(i).dtype)) - 1) if d != axis else j
               for d, i in enumerate(idx)]
        return tuple(src)

    def hit(idx: tuple, j: Any) -> Any:
        pos = indices[source(idx, j)]
        size = convert(data.shape[axis]).astype(str(pos.dtype))
        pos = tir.Select(pos < 0, pos + size, pos)
        cond = pos == idx[axis].astype(str(pos.dtype))
        for d in range(ndim):
            if d != axis:  # the output element lies inside the indices' extent on the other axes
                cond = tir.And(cond, idx[d] < convert(ishape[d]).astype(str(convert(idx[d]).dtype)))
        return cond

    if reduction == "none":
        last = compute(data.shape, lambda idx: te.max(tir.Select(hit(idx, r), r.astype("int64"),
                                                                 tir.const(-1, "int64")), axis=r),
                       "T_scatter_last", tag="reduction")

        def pick(idx: tuple) -> Any:
            j = last[tuple(idx)]
            safe = tir.max(j, tir.const(0, "int64")).astype(str(convert(idx[axis]).dtype))
            return tir.Select(j >= 0, updates[source(idx, safe)], data[tuple(idx)])

        return compute(data.shape, pick, "T_scatter_elements", tag="injective")
    if reduction == "add":
        red = lambda v, ax: te.sum(v, axis=ax)  # noqa: E731
        neutral, combine = tir.const(0, dtype), lambda a, b: a + b
    elif reduction == "mul":
        red = te.comm_reducer(lambda a, b: a * b, lambda t: tir.const(1, t), name="prod")
        red = (lambda reducer: lambda v, ax: reducer(v, axis=ax))(red)
        neutral, combine = tir.const(1, dtype), lambda a, b: a * b
    elif reduction in ("max", "min"):
        # +-inf for floats: combining with the neutral value must keep data even where data is -inf.
        lowest = tir.max_identity(dtype) if reduction == "max" else tir.min_identity(dtype)
        red = (lambda f: lambda v, ax: f(v, axis=ax))(te.max if reduction == "max" else te.min)
        neutral = lowest
        combine = (lambda a, b: tir.max(a, b)) if reduction == "max" else (lambda a, b: tir.min(a, b))
    else:
        raise ValueError(f"scatter_elements: unknown reduction {reduction!r}; use none/add/mul/max/min")
    acc = compute(data.shape, lambda idx: red(tir.Select(hit(idx, r), updates[source(idx, r)], neutral), r),
                  "T_scatter_acc", tag="reduction")
    # max/min: an element no index targets keeps data (combining with the neutral value is a no-op).
    return compute(data.shape, lambda idx: combine(data[tuple(idx)], acc[tuple(idx)]), "T_scatter_elements",
                   tag="elemwise")


def unary_math(x: Any, fn: str) -> Any:
    """Elementwise C math function ``fn`` (``asin``, ``acos``, ``atan``, ``sinh``, ``cosh``, ``asinh``,
    ``acosh``, ``atanh``; any float intrinsic of `ingot.tir.op`).

    Example:
        >>> from ingot import te
        >>> y = unary_math(te.placeholder((4,), name="x"), "asin")
    """
    from ingot.ir import Call

    return compute(x.shape, lambda idx: Call(str(x.dtype), fn, [x[tuple(idx)]]), f"T_{fn}", tag="elemwise")
