"""TE computes for ordering operators: ``topk`` (values and indices).

Note: TE has no sort primitive, so topk is written with the reductions TE has. Stage 1 ranks every
element along the axis by counting the elements that come before it in the total order "better value
first, then smaller index" (ONNX's and ONNX Runtime's tie rule: equal values keep index order, for
largest and smallest alike); stage 2 picks, for output position ``j``, the one index whose rank is
``j``; stage 3 gathers the values at those indices (a plain load, so the values are bit-exact, -0.0 and
NaN payloads included). Stage 1 is quadratic in the axis length — fine for the class heads, beam widths
and proposal lists topk serves in inference graphs; a linear-time selection would need a scan/sort
primitive that TE does not have. Because the rank order is total, the output is always sorted; with
``sorted=False`` (ONNX allows any order then) it is sorted too.

Example:
    >>> from ingot import te
    >>> values, indices = topk(te.placeholder((3, 10), name="x"), 4, axis=1)
    >>> [int(d) for d in values.shape], str(indices.dtype)
    ([3, 4], 'int64')
"""
from __future__ import annotations

from typing import Any

from ingot import tir
from ingot.ir import as_const_int, convert

from ._util import compute, normalize_axis

__all__ = ["topk"]


def topk(x: Any, k: int = 1, axis: int = -1, ret_type: str = "both", largest: bool = True,
         dtype: str = "int64") -> Any:
    """The ``k`` largest (``largest=True``) or smallest elements of ``x`` along ``axis``, in order, ties
    broken by the smaller index (TVM's ``topi.topk``; ONNX ``TopK``).

    ``ret_type`` is ``"both"`` (returns ``[values, indices]``), ``"values"`` or ``"indices"`` (one tensor);
    ``dtype`` is the indices' integer type.

    Example:
        >>> from ingot import te
        >>> x = te.placeholder((2, 8), name="x")
        >>> v, i = topk(x, 3)                                  # 3 largest per row
        >>> only = topk(x, 2, largest=False, ret_type="indices")
    """
    from ingot import te

    if ret_type not in ("both", "values", "indices"):
        raise ValueError(f"topk: ret_type must be 'both', 'values' or 'indices', got {ret_type!r}")
    ndim = len(x.shape)
    axis = normalize_axis(axis, ndim)
    n = x.shape[axis]
    size = as_const_int(convert(n))
    if not isinstance(k, int) or k < 0 or (size is not None and k > size):
        raise ValueError(f"topk: k={k!r} must be an int between 0 and the length {n} of axis {axis}; "
                         f"pass a smaller k (or a constant K input)")
    # Step 1. rank[m] = how many elements precede x[m] in the order (better value, then smaller index).
    r = te.reduce_axis((0, n), name="r")

    def rank_body(idx: tuple) -> Any:
        m = idx[axis]
        other = list(idx)
        other[axis] = r
        a, b = x[tuple(other)], x[tuple(idx)]
        better = a > b if largest else a < b
        before = tir.Or(better, tir.And(a == b, r < m))
        return te.sum(tir.Select(before, tir.const(1, "int32"), tir.const(0, "int32")), axis=r)

    rank = compute(x.shape, rank_body, "T_topk_rank", tag="reduction")
    # Step 2. indices[j] = the index m whose rank is j (exactly one m matches: the order is total).
    out_shape = [k if a == axis else d for a, d in enumerate(x.shape)]
    s = te.reduce_axis((0, n), name="s")

    def pick(idx: tuple) -> Any:
        src = list(idx)
        src[axis] = s
        hit = rank[tuple(src)] == idx[axis].astype("int32")
        return te.sum(tir.Select(hit, s.astype(dtype), tir.const(0, dtype)), axis=s)

    indices = compute(out_shape, pick, "T_topk_indices", tag="reduction")
    if ret_type == "indices":
        return indices

    # Step 3. values[j] = x at indices[j] (a load: bit-exact).
    def gather(idx: tuple) -> Any:
        src = list(idx)
        src[axis] = indices[tuple(idx)].astype("int32") if str(dtype) != "int32" else indices[tuple(idx)]
        return x[tuple(src)]

    values = compute(out_shape, gather, "T_topk_values", tag="injective")
    return values if ret_type == "values" else [values, indices]
