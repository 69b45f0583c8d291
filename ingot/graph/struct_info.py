"""Struct info: what the graph IR knows statically about a value (shape, dtype, arity).

Note: every graph expression carries a struct info, as in TVM Relax. A tensor's shape is a tuple
of dimensions, each a Python ``int`` or an `ingot.ir.PrimExpr` over symbolic dimension variables
(``ingot.ir.Var("n", "int64")``); the same ``Var`` object appearing in several shapes means "the
same size". Integer constants are normalized to Python ints so shapes print and compare plainly.
``shape=None`` means "rank known (``ndim``), sizes unknown" (``ndim=-1``: nothing known).

Example:
    >>> from ingot.ir import Var
    >>> n = Var("n", "int64")
    >>> s = TensorStructInfo((n, 784), "float32")
    >>> s.ndim, str(s)
    (2, 'R.Tensor((n, 784), dtype="float32")')
"""
from __future__ import annotations

from typing import Any, Sequence

from ingot.arith import Analyzer
from ingot.ir import DataType, IntImm, PrimExpr, Var, convert, structural_equal
from ingot.ir.error import IRError
from ingot.ir.node import Node


Dim = "int | PrimExpr"


def normalize_dim(dim: Any) -> "int | PrimExpr":
    """A dimension as a Python int when constant, else as a `PrimExpr` (integer typed).

    Example:
        >>> normalize_dim(IntImm("int64", 4))
        4
    """
    if isinstance(dim, bool):
        raise IRError(f"a tensor dimension must be an integer or an integer expression, got the bool {dim}")
    if isinstance(dim, int):
        return dim
    if hasattr(dim, "__index__") and not isinstance(dim, PrimExpr):
        return int(dim)  # numpy integers
    dim = convert(dim)
    if isinstance(dim, IntImm):
        return dim.value
    if not dim.dtype.is_integer:
        raise IRError(f"tensor dimension `{dim}` has dtype {dim.dtype}; dimensions must be integers")
    if not isinstance(dim, Var):
        # An inferred size in its simplest form: a reshape of a reshape must give `batch` back, not
        # `8 * (batch * 96) // 768`, or later broadcasts cannot match it against `batch`.
        dim = Analyzer().simplify(dim)
        if isinstance(dim, IntImm):
            return dim.value
    return dim


def dims_equal(a: Any, b: Any) -> bool:
    """Whether two dimensions are provably the same size (equal ints or the same symbolic expression).

    Example:
        >>> from ingot.ir import Var
        >>> n = Var("n", "int64")
        >>> dims_equal(n, n), dims_equal(n, 4), dims_equal(3, 3)
        (True, False, True)
    """
    if isinstance(a, int) and isinstance(b, int):
        return a == b
    if isinstance(a, int) or isinstance(b, int):
        return False
    return structural_equal(a, b)


def shape_equal(a: "Sequence[Any] | None", b: "Sequence[Any] | None") -> bool:
    """Whether two shapes are provably equal, dimension by dimension."""
    if a is None or b is None:
        return False
    return len(a) == len(b) and all(dims_equal(x, y) for x, y in zip(a, b))


class StructInfo(Node):
    """Base of struct infos."""

    __slots__ = ()

    def __str__(self) -> str:
        from .printer import struct_info_to_str

        return struct_info_to_str(self)

    __repr__ = __str__


class ObjectStructInfo(StructInfo):
    """Any value; nothing known.

    Example:
        >>> str(ObjectStructInfo())
        'R.Object'
    """

    __slots__ = ()

    def __init__(self):
        self._init()


class PrimStructInfo(StructInfo):
    """A scalar of ``dtype`` (e.g. an int argument of a packed function).

    Example:
        >>> str(PrimStructInfo("int64"))
        'R.Prim("int64")'
    """

    __slots__ = ("dtype",)
    _fields = ("dtype",)
    _attr_fields = ("dtype",)

    def __init__(self, dtype: "str | DataType"):
        self._init(dtype=DataType(dtype))


class ShapeStructInfo(StructInfo):
    """A shape value (the argument of ``reshape``): its ``values`` when known, else only ``ndim``.

    Example:
        >>> ShapeStructInfo((2, 3)).ndim
        2
    """

    __slots__ = ("values", "ndim")
    _fields = ("values", "ndim")
    _attr_fields = ("ndim",)

    def __init__(self, values: "Sequence[Any] | None" = None, ndim: int = -1):
        if values is not None:
            values = tuple(normalize_dim(v) for v in values)
            ndim = len(values)
        self._init(values=values, ndim=int(ndim))


class TensorStructInfo(StructInfo):
    """A tensor of ``dtype`` with ``shape`` (ints and symbolic dims), or unknown shape of rank ``ndim``.

    Example:
        >>> t = TensorStructInfo((1, 784), "float32")
        >>> t.shape, str(t.dtype)
        ((1, 784), 'float32')
    """

    __slots__ = ("shape", "dtype", "ndim")
    _fields = ("shape", "dtype", "ndim")
    _attr_fields = ("dtype", "ndim")

    def __init__(self, shape: "Sequence[Any] | None" = None, dtype: "str | DataType" = "float32", ndim: int = -1):
        if shape is not None:
            if isinstance(shape, (int, PrimExpr)):
                shape = (shape,)
            shape = tuple(normalize_dim(d) for d in shape)
            for d in shape:
                if isinstance(d, int) and d < 0:
                    raise IRError(f"tensor shape {shape} has a negative dimension; dimensions are sizes (>= 0)")
            ndim = len(shape)
        self._init(shape=shape, dtype=DataType(dtype), ndim=int(ndim))

    @property
    def is_static(self) -> bool:
        """Whether every dimension is a known integer."""
        return self.shape is not None and all(isinstance(d, int) for d in self.shape)

    def with_shape(self, shape: Sequence[Any]) -> "TensorStructInfo":
        """The same dtype with another shape."""
        return TensorStructInfo(shape, self.dtype)

    def with_dtype(self, dtype: "str | DataType") -> "TensorStructInfo":
        """The same shape with another dtype."""
        return TensorStructInfo(self.shape, dtype, self.ndim)


class TupleStructInfo(StructInfo):
    """A tuple of values (e.g. the outputs of ``split``).

    Example:
        >>> len(TupleStructInfo([TensorStructInfo((2,), "float32")] * 2).fields)
        2
    """

    __slots__ = ("fields",)
    _fields = ("fields",)

    def __init__(self, fields: Sequence[StructInfo]):
        fields = tuple(fields)
        for f in fields:
            if not isinstance(f, StructInfo):
                raise IRError(f"TupleStructInfo fields must be struct infos, got {type(f).__name__}: {f!r}")
        self._init(fields=fields)


class FuncStructInfo(StructInfo):
    """A function: parameter struct infos and return struct info.

    Example:
        >>> f = FuncStructInfo([TensorStructInfo((2,), "float32")], TensorStructInfo((2,), "float32"))
        >>> len(f.params)
        1
    """

    __slots__ = ("params", "ret")
    _fields = ("params", "ret")

    def __init__(self, params: Sequence[StructInfo], ret: StructInfo):
        self._init(params=tuple(params), ret=ret)


def is_base_of(base: StructInfo, derived: StructInfo) -> bool:
    """Whether a value described by ``derived`` may be used where ``base`` is expected.

    Example:
        >>> is_base_of(TensorStructInfo(ndim=2, dtype="float32"), TensorStructInfo((2, 3), "float32"))
        True
    """
    if isinstance(base, ObjectStructInfo):
        return True
    if type(base) is not type(derived):
        return False
    if isinstance(base, TensorStructInfo):
        if base.dtype != derived.dtype:
            return False
        if base.ndim != -1 and base.ndim != derived.ndim:
            return False
        return base.shape is None or shape_equal(base.shape, derived.shape)
    if isinstance(base, TupleStructInfo):
        return len(base.fields) == len(derived.fields) and all(
            is_base_of(a, b) for a, b in zip(base.fields, derived.fields)
        )
    return structural_equal(base, derived)
