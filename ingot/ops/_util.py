"""Helpers shared by the operator families: fixed-arity compute lambdas and broadcast indexing.

Example:
    >>> normalize_axis(-1, 4)
    3
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ingot.ir import IntImm, PrimExpr, as_const_int, convert, structural_equal
from ingot.tir import Select


#: Block annotation: the default schedule keeps this stage as its own loop nest (`inline_injective`
#: skips it). For a stage whose value its consumer reads many times and whose expression is large:
#: inlined, each read would repeat the whole expression in C (GridSample's reflected coordinates grew
#: to a megabyte of C that GCC compiled for minutes).
KEEP_STAGE_KEY = "keep_stage"


def compute(shape: Sequence[Any], fbody: Callable[[tuple], Any], name: str, tag: str = "",
            attrs: "dict | None" = None) -> Any:
    """``te.compute(shape, ...)`` where ``fbody`` takes the index tuple (any rank, including 0).

    TE names loop variables after the lambda's parameters, so the lambda gets exactly
    ``len(shape)`` named parameters (``ax0, ax1, ...``) instead of ``*args``.

    Example:
        >>> from ingot import te
        >>> x = te.placeholder((2, 3), name="x")
        >>> y = compute(x.shape, lambda idx: x[idx] * 2.0, "double")
    """
    from ingot import te

    n = len(shape)
    params = ", ".join(f"ax{k}" for k in range(n))
    namespace: dict = {"fbody": fbody}
    # A generated def gives the exact arity and readable loop-variable names (ax0, ax1, ...).
    exec(f"def fcompute({params}):\n    return fbody(({params}{',' if n == 1 else ''}))", namespace)  # noqa: S102
    kwargs = {"name": name}
    if tag:
        kwargs["tag"] = tag
    if attrs:
        kwargs["attrs"] = attrs
    return te.compute(tuple(shape), namespace["fcompute"], **kwargs)


def load(tensor: Any, indices: Sequence[Any]) -> PrimExpr:
    """``tensor[indices]`` for any rank (a 0-d tensor is read with an empty index tuple)."""
    return tensor[tuple(indices)]


def normalize_axis(axis: int, ndim: int) -> int:
    """A non-negative axis for a tensor of rank ``ndim`` (negative axes count from the end).

    Example:
        >>> normalize_axis(1, 3), normalize_axis(-3, 3)
        (1, 0)
    """
    if not -ndim <= axis < max(ndim, 1):
        raise ValueError(f"axis {axis} is out of range for a tensor of rank {ndim}")
    return axis + ndim if axis < 0 else axis


def is_one(dim: Any) -> bool:
    """Whether a dimension is the constant 1."""
    return as_const_int(convert(dim)) == 1 if not isinstance(dim, int) else dim == 1


def dims_equal(a: Any, b: Any) -> bool:
    """Whether two dimensions are provably equal (same constant or same expression)."""
    a, b = convert(a), convert(b)
    ca, cb = as_const_int(a), as_const_int(b)
    if ca is not None and cb is not None:
        return ca == cb
    return structural_equal(a, b)


def broadcast_shape(*shapes: Sequence[Any]) -> tuple:
    """numpy's broadcast of shapes whose dims are ints or expressions.

    A symbolic dim against a constant other than 1 gives the constant: the symbolic one must be 1 or
    equal to it at run time, and `broadcast_index` reads it either way.

    Example:
        >>> [int(d) for d in broadcast_shape((4, 1), (3,))]
        [4, 3]
        >>> from ingot.ir import Var
        >>> [str(d) for d in broadcast_shape((Var("n", "int64"),), (5,))]
        ['5']
    """
    ndim = max(len(s) for s in shapes)
    out = []
    for k in range(ndim):
        dim = None
        for s in shapes:
            j = k - (ndim - len(s))
            if j < 0:
                continue
            d = convert(s[j])
            if dim is None or is_one(dim):
                dim = d
            elif is_one(d) or dims_equal(dim, d):
                continue
            elif as_const_int(d) is not None and as_const_int(dim) is None:
                dim = d  # symbolic vs a constant: the constant (the symbolic one is 1 or equal at run time)
            elif not (as_const_int(dim) is not None and as_const_int(d) is None):
                raise ValueError(f"shapes {[tuple(map(str, s)) for s in shapes]} do not broadcast at axis {k}")
        out.append(dim)
    return tuple(out)


def broadcast_index(tensor: Any, out_shape: Sequence[Any], indices: Sequence[Any]) -> tuple:
    """The index into ``tensor`` for output index ``indices`` under numpy broadcasting.

    A symbolic dim of ``tensor`` that is not provably the output's (``n`` against 5, or against
    another symbolic dim) may be a broadcast 1 at run time: it is read at ``select(n == 1, 0, i)``.
    Dims that are equal or constant keep the plain index (static kernels do not change).

    Example:
        >>> from ingot import te
        >>> from ingot.ir import Var
        >>> x = te.placeholder((Var("n", "int64"), 1), name="x")
        >>> [str(e) for e in broadcast_index(x, (5, 3), (Var("i", "int64"), Var("j", "int64")))]
        ['T.Select(n == T.int64(1), T.int64(0), i)', 'T.int64(0)']
    """
    offset = len(out_shape) - len(tensor.shape)
    result = []
    for j, dim in enumerate(tensor.shape):
        out_dim = out_shape[j + offset]
        index = convert(indices[j + offset])
        if is_one(dim) and not is_one(out_dim):
            result.append(IntImm(index.dtype, 0))
        elif as_const_int(convert(dim)) is None and not is_one(out_dim) and not dims_equal(dim, out_dim):
            one = convert(dim) == IntImm(convert(dim).dtype, 1)
            result.append(Select(one, IntImm(index.dtype, 0), index))
        else:
            result.append(indices[j + offset])
    return tuple(result)


def prod(values: Sequence[Any]) -> Any:
    """The product of dimensions (1 for none)."""
    acc: Any = 1
    for v in values:
        acc = acc * v
    return acc


def const_like(value: Any, dtype: Any) -> PrimExpr:
    """``value`` as a constant of ``dtype``."""
    from ingot.ir import const

    return const(value, str(dtype))


def nest_lets(pairs: Sequence[tuple], body: Any) -> Any:
    """``body`` under one ``LetStmt`` per ``(var, value)`` pair, the first pair outermost (later
    values may use earlier vars): how the hand-written TIR kernels (`ingot.ops.recurrent`,
    `ingot.ops.deform_roi`) name a value once instead of repeating its expression.

    Example:
        >>> from ingot.ir import Var
        >>> from ingot.tir import Evaluate
        >>> a, b = Var("a", "int64"), Var("b", "int64")
        >>> stmt = nest_lets([(a, 1), (b, a + 1)], Evaluate(b))
        >>> stmt.var.name, stmt.body.var.name
        ('a', 'b')
    """
    from ingot.tir import LetStmt

    for var, value in reversed(pairs):
        body = LetStmt(var, value, body)
    return body
