"""Data movement (injective) operators: reshape, permute_dims/transpose, flatten, concat,
expand_dims, squeeze, strided_slice, split (a tuple result), take, gather_elements.

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((2, 3, 4), "float32"))
    >>> reshape(x, (6, -1)).struct_info.shape
    (6, 4)
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ingot.ir import convert

from ..expr import Call, Expr, Tuple
from ..op_registry import OpPattern, make_call, op_error, register_op
from ..struct_info import TensorStructInfo, TupleStructInfo, dims_equal, normalize_dim
from ._common import known_shape, norm_axis, tensor_sinfo, topi


def _product(dims: Sequence[Any]) -> Any:
    acc: Any = 1
    for d in dims:
        acc = acc * d if isinstance(acc, int) and isinstance(d, int) else normalize_dim(convert(acc) * d)
    return acc


def _norm_reshape(attrs: Any, args: Any) -> dict:
    src = known_shape("reshape", tensor_sinfo("reshape", args[0]))
    shape = [normalize_dim(d) for d in attrs["shape"]]
    unknown = [i for i, d in enumerate(shape) if isinstance(d, int) and d == -1]
    if len(unknown) > 1:
        raise op_error("reshape", f"at most one dimension may be -1, got {tuple(attrs['shape'])}")
    total = _product(src)
    if unknown:
        known = _product([d for i, d in enumerate(shape) if i != unknown[0]])
        if isinstance(total, int) and isinstance(known, int):
            if known == 0 or total % known:
                raise op_error("reshape", f"cannot reshape {tuple(src)} into {tuple(attrs['shape'])}")
            shape[unknown[0]] = total // known
        else:
            shape[unknown[0]] = normalize_dim(convert(total) // known)
    elif isinstance(total, int) and isinstance(_product(shape), int) and total != _product(shape):
        raise op_error("reshape", f"cannot reshape {tuple(src)} ({total} elements) into {tuple(shape)} "
                                  f"({_product(shape)} elements)")
    return {"shape": tuple(shape)}


register_op(
    "reshape", num_inputs=1, pattern=OpPattern.INJECTIVE, attrs={"shape": None}, normalize_attrs=_norm_reshape,
    infer=lambda args, attrs: TensorStructInfo(attrs["shape"], tensor_sinfo("reshape", args[0]).dtype),
    legalize=lambda inputs, attrs, out: topi("transform").reshape(inputs[0], out.shape),
    numpy=lambda args, attrs: args[0].reshape(attrs["shape"]),
)


def reshape(x: Expr, shape: Sequence[Any]) -> Call:
    """``x`` viewed with ``shape`` (one entry may be -1; symbolic dims allowed).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4, 6), "float32"))
        >>> G.op.reshape(x, (2, 12)).struct_info.shape
        (2, 12)
    """
    return make_call("reshape", [x], shape=tuple(shape))


def _norm_permute(attrs: Any, args: Any) -> dict:
    ndim = tensor_sinfo("permute_dims", args[0]).ndim
    axes = attrs["axes"]
    axes = tuple(reversed(range(ndim))) if axes is None else tuple(norm_axis("permute_dims", a, ndim) for a in axes)
    if sorted(axes) != list(range(ndim)):
        raise op_error("permute_dims", f"axes {tuple(attrs['axes'])} are not a permutation of {ndim} axes")
    return {"axes": axes}


register_op(
    "permute_dims", num_inputs=1, pattern=OpPattern.INJECTIVE, attrs={"axes": None}, normalize_attrs=_norm_permute,
    infer=lambda args, attrs: TensorStructInfo(
        [known_shape("permute_dims", args[0].struct_info)[a] for a in attrs["axes"]], args[0].struct_info.dtype),
    legalize=lambda inputs, attrs, out: topi("transform").transpose(inputs[0], attrs["axes"]),
    numpy=lambda args, attrs: np.transpose(args[0], attrs["axes"]),
)


def permute_dims(x: Expr, axes: "Sequence[int] | None" = None) -> Call:
    """``numpy.transpose(x, axes)`` (Relax's name; `transpose` is the same).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 3, 4), "float32"))
        >>> G.op.permute_dims(x, (0, 2, 1)).struct_info.shape
        (2, 4, 3)
    """
    return make_call("permute_dims", [x], axes=None if axes is None else tuple(axes))


transpose = permute_dims


def flatten(x: Expr, start_dim: int = 1, end_dim: int = -1) -> Call:
    """Merge axes ``start_dim..end_dim`` (PyTorch's ``flatten``) — a `reshape`.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 8, 1, 1), "float32"))
        >>> G.op.flatten(x).struct_info.shape
        (2, 8)
    """
    shape = known_shape("flatten", tensor_sinfo("flatten", x))
    s, e = norm_axis("flatten", start_dim, len(shape)), norm_axis("flatten", end_dim, len(shape))
    return reshape(x, tuple(shape[:s]) + (_product(shape[s:e + 1]),) + tuple(shape[e + 1:]))


def _infer_concat(args: Any, attrs: Any) -> TensorStructInfo:
    sinfo = args[0].struct_info
    if not isinstance(sinfo, TupleStructInfo) or not sinfo.fields:
        raise op_error("concat", "expects a non-empty tuple of tensors, e.g. G.op.concat([a, b], axis=1)")
    shapes = [known_shape("concat", tensor_sinfo("concat", _Fake(f), i), i) for i, f in enumerate(sinfo.fields)]
    first = sinfo.fields[0]
    axis = norm_axis("concat", attrs["axis"], len(shapes[0]))
    for i, (f, s) in enumerate(zip(sinfo.fields, shapes)):
        if f.dtype != first.dtype or len(s) != len(shapes[0]):
            raise op_error("concat", f"tensor {i} is {f}, incompatible with tensor 0 ({first})")
        for a, (d0, d) in enumerate(zip(shapes[0], s)):
            if a != axis and not dims_equal(d0, d):
                raise op_error("concat", f"tensor {i} has dim {d} at axis {a}, tensor 0 has {d0}")
    out = list(shapes[0])
    out[axis] = _sum([s[axis] for s in shapes])
    return TensorStructInfo(out, first.dtype)


class _Fake:
    def __init__(self, sinfo: Any):
        self.struct_info = sinfo


def _sum(dims: Sequence[Any]) -> Any:
    acc: Any = 0
    for d in dims:
        acc = acc + d if isinstance(acc, int) and isinstance(d, int) else normalize_dim(convert(acc) + d)
    return acc


register_op(
    "concat", num_inputs=1, pattern=OpPattern.INJECTIVE, attrs={"axis": 0}, infer=_infer_concat,
    legalize=lambda inputs, attrs, out: topi("transform").concatenate(inputs[0], attrs["axis"]),
    numpy=lambda args, attrs: np.concatenate(args[0], axis=attrs["axis"]),
)


def concat(tensors: "Sequence[Expr] | Tuple", axis: int = 0) -> Call:
    """Join tensors along ``axis``.

    Example:
        >>> from ingot import graph as G
        >>> a = G.Var("a", G.TensorStructInfo((2, 3), "float32"))
        >>> G.op.concat([a, a], axis=1).struct_info.shape
        (2, 6)
    """
    tup = tensors if isinstance(tensors, Expr) else Tuple(list(tensors))
    return make_call("concat", [tup], axis=int(axis))


def _infer_expand_dims(args: Any, attrs: Any) -> TensorStructInfo:
    x = tensor_sinfo("expand_dims", args[0])
    s = list(known_shape("expand_dims", x))
    axis = attrs["axis"]
    axis = axis + len(s) + 1 if axis < 0 else axis
    if not 0 <= axis <= len(s):
        raise op_error("expand_dims", f"axis {attrs['axis']} out of range for rank {len(s)}")
    return TensorStructInfo(s[:axis] + [1] + s[axis:], x.dtype)


register_op(
    "expand_dims", num_inputs=1, pattern=OpPattern.BROADCAST, attrs={"axis": 0}, infer=_infer_expand_dims,
    legalize=lambda inputs, attrs, out: topi("transform").expand_dims(inputs[0], attrs["axis"]),
    numpy=lambda args, attrs: np.expand_dims(args[0], attrs["axis"]),
)


def expand_dims(x: Expr, axis: int) -> Call:
    """Insert a size-1 axis at ``axis``.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 3), "float32"))
        >>> G.op.expand_dims(x, -1).struct_info.shape
        (2, 3, 1)
    """
    return make_call("expand_dims", [x], axis=int(axis))


def _norm_squeeze(attrs: Any, args: Any) -> dict:
    s = known_shape("squeeze", tensor_sinfo("squeeze", args[0]))
    if attrs["axis"] is None:
        axes = tuple(a for a, d in enumerate(s) if isinstance(d, int) and d == 1)
    else:
        axis = attrs["axis"]
        axes = tuple(sorted(norm_axis("squeeze", a, len(s)) for a in ((axis,) if isinstance(axis, int) else axis)))
        for a in axes:
            if not (isinstance(s[a], int) and s[a] == 1):
                raise op_error("squeeze", f"axis {a} has size {s[a]}, only size-1 axes can be squeezed")
    return {"axis": axes}


register_op(
    "squeeze", num_inputs=1, pattern=OpPattern.INJECTIVE, attrs={"axis": None}, normalize_attrs=_norm_squeeze,
    infer=lambda args, attrs: TensorStructInfo(
        [d for a, d in enumerate(args[0].struct_info.shape) if a not in attrs["axis"]], args[0].struct_info.dtype),
    legalize=lambda inputs, attrs, out: topi("transform").squeeze(inputs[0], attrs["axis"]),
    numpy=lambda args, attrs: np.squeeze(args[0], attrs["axis"]),
)


def squeeze(x: Expr, axis: "int | Sequence[int] | None" = None) -> Call:
    """Remove size-1 axes (the given ones, or all).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 1, 3), "float32"))
        >>> G.op.squeeze(x).struct_info.shape
        (2, 3)
    """
    return make_call("squeeze", [x], axis=axis)


def _norm_slice(attrs: Any, args: Any) -> dict:
    s = known_shape("strided_slice", tensor_sinfo("strided_slice", args[0]))
    axes = attrs["axes"] if attrs["axes"] is not None else tuple(range(len(attrs["begin"])))
    axes = tuple(norm_axis("strided_slice", a, len(s)) for a in axes)
    strides = tuple(attrs["strides"]) if attrs["strides"] is not None else (1,) * len(axes)
    begin, end = [], []
    for a, b, e, st in zip(axes, attrs["begin"], attrs["end"], strides):
        if not isinstance(s[a], int):
            raise op_error("strided_slice", f"axis {a} has symbolic size {s[a]}; slicing needs a static size")
        if st <= 0:
            raise op_error("strided_slice", f"stride {st} on axis {a}: only positive strides are supported")
        b, e = int(b), int(e)
        b = max(0, min(b + s[a] if b < 0 else b, s[a]))
        e = max(0, min(e + s[a] if e < 0 else e, s[a]))
        begin.append(b)
        end.append(e)
    return {"begin": tuple(begin), "end": tuple(end), "strides": strides, "axes": axes}


def _infer_slice(args: Any, attrs: Any) -> TensorStructInfo:
    x = args[0].struct_info
    s = list(x.shape)
    for a, b, e, st in zip(attrs["axes"], attrs["begin"], attrs["end"], attrs["strides"]):
        s[a] = max(0, (e - b + st - 1) // st)
    return TensorStructInfo(s, x.dtype)


register_op(
    "strided_slice", num_inputs=1, pattern=OpPattern.INJECTIVE,
    attrs={"begin": None, "end": None, "strides": None, "axes": None}, normalize_attrs=_norm_slice, infer=_infer_slice,
    legalize=lambda inputs, attrs, out: topi("transform").strided_slice(inputs[0], attrs["begin"], attrs["end"],
                                                                        attrs["strides"], attrs["axes"]),
    numpy=lambda args, attrs: args[0][tuple(
        slice(attrs["begin"][attrs["axes"].index(a)], attrs["end"][attrs["axes"].index(a)],
              attrs["strides"][attrs["axes"].index(a)]) if a in attrs["axes"] else slice(None)
        for a in range(args[0].ndim))],
)


def strided_slice(x: Expr, begin: Sequence[int], end: Sequence[int], strides: "Sequence[int] | None" = None,
                  axes: "Sequence[int] | None" = None) -> Call:
    """``x[begin:end:strides]`` on ``axes`` (negative bounds count from the end; clamped like numpy).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((8, 4), "float32"))
        >>> G.op.strided_slice(x, [1], [-1], [2]).struct_info.shape
        (3, 4)
    """
    return make_call("strided_slice", [x], begin=tuple(begin), end=tuple(end),
                     strides=None if strides is None else tuple(strides), axes=None if axes is None else tuple(axes))


def _infer_take(args: Any, attrs: Any) -> TensorStructInfo:
    x, idx = tensor_sinfo("take", args[0], 0), tensor_sinfo("take", args[1], 1)
    if not idx.dtype.is_integer:
        raise op_error("take", f"indices must be integers, got {idx.dtype}")
    s = list(known_shape("take", x))
    axis = norm_axis("take", attrs["axis"], len(s))
    return TensorStructInfo(s[:axis] + list(known_shape("take", idx, 1)) + s[axis + 1:], x.dtype)


register_op(
    "take", num_inputs=2, pattern=OpPattern.INJECTIVE, attrs={"axis": 0}, infer=_infer_take,
    legalize=lambda inputs, attrs, out: topi("transform").take(inputs[0], inputs[1], attrs["axis"]),
    numpy=lambda args, attrs: np.take(args[0], np.clip(args[1], 0, args[0].shape[attrs["axis"]] - 1), attrs["axis"]),
)


def take(x: Expr, indices: Expr, axis: int = 0) -> Call:
    """``numpy.take(x, indices, axis)`` (indices clipped into range), e.g. an embedding lookup.

    Example:
        >>> from ingot import graph as G
        >>> emb = G.Var("emb", G.TensorStructInfo((1000, 64), "float32"))
        >>> ids = G.Var("ids", G.TensorStructInfo((1, 16), "int64"))
        >>> G.op.take(emb, ids).struct_info.shape
        (1, 16, 64)
    """
    return make_call("take", [x, indices], axis=int(axis))


def _norm_split(attrs: Any, args: Any) -> dict:
    s = known_shape("split", tensor_sinfo("split", args[0]))
    axis = norm_axis("split", attrs["axis"], len(s))
    ios = attrs["indices_or_sections"]
    if not isinstance(s[axis], int):
        raise op_error("split", f"axis {axis} has symbolic size {s[axis]}; splitting needs a static size")
    if isinstance(ios, int):
        if ios <= 0 or s[axis] % ios:
            raise op_error("split", f"axis {axis} of size {s[axis]} cannot be split into {ios} equal sections; "
                                    f"pass the cut indices instead")
        return {"indices_or_sections": ios, "axis": axis}
    indices = tuple(int(i) + s[axis] if int(i) < 0 else int(i) for i in ios)
    return {"indices_or_sections": indices, "axis": axis}


def _split_bounds(size: int, ios: Any) -> list:
    if isinstance(ios, int):
        return [size // ios * k for k in range(ios + 1)]
    return [0] + [min(max(i, 0), size) for i in ios] + [size]


def _infer_split(args: Any, attrs: Any) -> TupleStructInfo:
    x = args[0].struct_info
    axis = attrs["axis"]
    bounds = _split_bounds(x.shape[axis], attrs["indices_or_sections"])
    fields = []
    for b, e in zip(bounds[:-1], bounds[1:]):
        shape = list(x.shape)
        shape[axis] = max(0, e - b)
        fields.append(TensorStructInfo(shape, x.dtype))
    return TupleStructInfo(fields)


register_op(
    "split", num_inputs=1, pattern=OpPattern.INJECTIVE, attrs={"indices_or_sections": None, "axis": 0},
    normalize_attrs=_norm_split, infer=_infer_split,
    legalize=lambda inputs, attrs, out: topi("transform").split(inputs[0], attrs["indices_or_sections"], attrs["axis"]),
    numpy=lambda args, attrs: tuple(np.split(args[0], attrs["indices_or_sections"], axis=attrs["axis"])),
    doc="numpy.split: a tuple of tensors.",
)


def split(x: Expr, indices_or_sections: "int | Sequence[int]", axis: int = 0) -> Call:
    """``numpy.split(x, indices_or_sections, axis)``: a tuple (``R.Tuple``) of ``sections`` equal parts
    or of the parts between the cut ``indices``; take the parts with ``G.TupleGetItem`` (``bb.emit`` the
    call, then ``bb.emit(G.TupleGetItem(parts, k))``).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 10), "float32"))
        >>> [f.shape for f in G.op.split(x, [3, 7], axis=1).struct_info.fields]
        [(2, 3), (2, 4), (2, 3)]
    """
    ios = indices_or_sections if isinstance(indices_or_sections, int) else tuple(indices_or_sections)
    return make_call("split", [x], indices_or_sections=ios, axis=int(axis))


def _infer_gather_elements(args: Any, attrs: Any) -> TensorStructInfo:
    x, idx = tensor_sinfo("gather_elements", args[0], 0), tensor_sinfo("gather_elements", args[1], 1)
    if not idx.dtype.is_integer:
        raise op_error("gather_elements", f"indices must be integers, got {idx.dtype}")
    sx, si = known_shape("gather_elements", x), known_shape("gather_elements", idx, 1)
    if len(sx) != len(si):
        raise op_error("gather_elements", f"data {tuple(sx)} and indices {tuple(si)} must have the same rank")
    norm_axis("gather_elements", attrs["axis"], len(sx))
    return TensorStructInfo(si, x.dtype)


def _np_gather_elements(args: Any, attrs: Any) -> np.ndarray:
    x, idx = args
    axis = attrs["axis"] % x.ndim
    idx = np.where(idx < 0, idx + x.shape[axis], idx)
    return np.take_along_axis(x, np.clip(idx, 0, x.shape[axis] - 1), axis=axis)


register_op(
    "gather_elements", num_inputs=2, pattern=OpPattern.INJECTIVE, attrs={"axis": 0}, infer=_infer_gather_elements,
    legalize=lambda inputs, attrs, out: topi("transform").gather_elements(inputs[0], inputs[1], attrs["axis"]),
    numpy=_np_gather_elements,
)


def gather_elements(x: Expr, indices: Expr, axis: int = 0) -> Call:
    """``out[i, j, ..] = x[.., indices[i, j, ..] at axis, ..]`` (ONNX GatherElements, ``torch.gather``,
    ``numpy.take_along_axis``): the output has the indices' shape; negative indices count from the
    end, out-of-range ones are clipped.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((3, 4), "float32"))
        >>> i = G.Var("i", G.TensorStructInfo((3, 2), "int64"))
        >>> G.op.gather_elements(x, i, axis=1).struct_info.shape
        (3, 2)
    """
    return make_call("gather_elements", [x, indices], axis=int(axis))


take_along_axis = gather_elements
