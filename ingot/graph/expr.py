"""Graph IR expressions (TVM Relax): variables, constants, calls, tuples, functions.

Note: functions are in A-normal form. A `Function` body is a `SeqExpr`: a list of binding blocks
(`BindingBlock`, or `DataflowBlock` for side-effect-free regions) each holding `VarBinding`s
``var = value``, then a result expression. Every expression carries ``struct_info`` (shape, dtype),
computed when the node is built (calls: by the operator's shape inference, see `ingot.graph.op`).

Variables are definitions: structural equality maps a graph `Var` where it is defined (function
parameter, binding) to its counterpart, and compares its uses by that mapping, so two functions
that differ only in variable names are equal. (`Var` sets ``_binding_var`` for
`ingot.ir.structural_equal`.) ``struct_info`` of a call is derived data and not compared.

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((2, 3), "float32"))
    >>> str(x.struct_info)
    'R.Tensor((2, 3), dtype="float32")'
"""
from __future__ import annotations

import hashlib
from typing import Any, Mapping, Sequence

import numpy as np

from ingot.ir.error import IRError
from ingot.ir.module import GlobalVar
from ingot.ir.node import FrozenDict, Node

from .struct_info import (
    FuncStructInfo, ObjectStructInfo, ShapeStructInfo, StructInfo, TensorStructInfo, TupleStructInfo,
)


class Expr(Node):
    """Base of graph expressions; ``struct_info`` is what is known of the value."""

    __slots__ = ("struct_info",)

    def __str__(self) -> str:
        from .printer import expr_to_str

        return expr_to_str(self)

    __repr__ = __str__

    # Arithmetic sugar builds op calls, so ``x + y`` reads as in Relax's Python API.
    def __add__(self, other):
        from .op import add

        return add(self, other)

    def __sub__(self, other):
        from .op import subtract

        return subtract(self, other)

    def __mul__(self, other):
        from .op import multiply

        return multiply(self, other)

    def __truediv__(self, other):
        from .op import divide

        return divide(self, other)


def _check_sinfo(sinfo: Any, what: str) -> StructInfo:
    if not isinstance(sinfo, StructInfo):
        raise IRError(
            f"{what}: struct_info must be a StructInfo such as G.TensorStructInfo((1, 784), \"float32\"), "
            f"got {type(sinfo).__name__}: {sinfo!r}"
        )
    return sinfo


class Var(Expr):
    """A graph variable (function parameter or binding target), typed by its struct info.

    Example:
        >>> x = Var("x", TensorStructInfo((1, 784), "float32"))
        >>> x.name_hint
        'x'
    """

    __slots__ = ("name_hint",)
    _fields = ("name_hint", "struct_info")
    _ignored_fields = ("name_hint",)
    _binding_var = True

    def __init__(self, name_hint: str, struct_info: "StructInfo | None" = None):
        sinfo = ObjectStructInfo() if struct_info is None else _check_sinfo(struct_info, f"Var {name_hint!r}")
        self._init(name_hint=str(name_hint), struct_info=sinfo)


class DataflowVar(Var):
    """A variable local to a `DataflowBlock` (not visible after it).

    Example:
        >>> lv = DataflowVar("lv0", TensorStructInfo((4,), "float32"))
    """

    __slots__ = ()


class Constant(Expr):
    """A constant tensor (weights). ``data`` is a read-only numpy array; equality is by content.

    Example:
        >>> c = Constant(np.ones((2, 2), "float32"))
        >>> c.struct_info.shape
        (2, 2)
    """

    __slots__ = ("data", "_content_hash")
    _fields = ("content_hash", "struct_info")
    _attr_fields = ("content_hash",)

    def __init__(self, data: Any, dtype: "str | None" = None):
        array = np.array(data, dtype=dtype) if dtype is not None or not isinstance(data, np.ndarray) else data.copy()
        if array.dtype == np.float64 and dtype is None and not isinstance(data, np.ndarray):
            array = array.astype("float32")  # Python floats default to float32, as in TVM
        self._init_owned(array)

    @classmethod
    def _wrap_owned(cls, array: np.ndarray) -> "Constant":
        """A Constant over ``array`` without copying it (internal: importers whose arrays nobody
        else can write, e.g. ``numpy_helper.to_array`` views of protobuf bytes; a 500 MB model
        would otherwise be copied once more)."""
        obj = object.__new__(cls)
        obj._init_owned(array)
        return obj

    def _init_owned(self, array: np.ndarray) -> None:
        array.setflags(write=False)
        # The content hash is computed on first use (CSE, the constant table, structural
        # equality): hashing every weight at construction dominated the import of big models.
        self._init(data=array, struct_info=TensorStructInfo(array.shape, str(array.dtype)))

    @property
    def content_hash(self) -> str:
        """Hex digest of dtype, shape and bytes (computed once, on first use)."""
        try:
            return self._content_hash
        except AttributeError:
            array = self.data
            digest = hashlib.sha256(f"{array.dtype}{array.shape}".encode())
            # A uint8 view, not memoryview(array): the buffer protocol refuses ml_dtypes' bfloat16/float8.
            digest.update(np.ascontiguousarray(array).view(np.uint8).reshape(-1))
            object.__setattr__(self, "_content_hash", digest.hexdigest())
            return self._content_hash

    @content_hash.setter
    def content_hash(self, value: str) -> None:
        # Used only by Node.replace/_rebuild_node (object.__setattr__), never by users.
        object.__setattr__(self, "_content_hash", value)


class ShapeExpr(Expr):
    """A shape value ``(d0, d1, ...)`` (ints or symbolic dims), e.g. the target shape of reshape.

    Example:
        >>> ShapeExpr((2, -1)).values
        (2, -1)
    """

    __slots__ = ("values",)
    _fields = ("values",)

    def __init__(self, values: Sequence[Any]):
        from .struct_info import normalize_dim

        vals = tuple(v if isinstance(v, int) else normalize_dim(v) for v in values)
        # ShapeStructInfo rejects nothing here: -1 (infer) is allowed in a reshape target.
        sinfo = object.__new__(ShapeStructInfo)
        sinfo._init(values=vals, ndim=len(vals))
        self._init(values=vals, struct_info=sinfo)


class Tuple(Expr):
    """A tuple of expressions.

    Example:
        >>> a = Var("a", TensorStructInfo((2,), "float32"))
        >>> len(Tuple([a, a]).struct_info.fields)
        2
    """

    __slots__ = ("fields",)
    _fields = ("fields",)

    def __init__(self, fields: Sequence[Expr]):
        fields = tuple(fields)
        for f in fields:
            if not isinstance(f, Expr):
                raise IRError(f"Tuple fields must be graph expressions, got {type(f).__name__}: {f!r}")
        self._init(fields=fields, struct_info=TupleStructInfo([f.struct_info for f in fields]))


class TupleGetItem(Expr):
    """Field ``index`` of a tuple-valued expression.

    Example:
        >>> a = Var("a", TensorStructInfo((2,), "float32"))
        >>> str(TupleGetItem(Tuple([a]), 0).struct_info)
        'R.Tensor((2,), dtype="float32")'
    """

    __slots__ = ("tuple_value", "index")
    _fields = ("tuple_value", "index")
    _attr_fields = ("index",)

    def __init__(self, tuple_value: Expr, index: int):
        sinfo = tuple_value.struct_info
        if not isinstance(sinfo, TupleStructInfo):
            raise IRError(f"TupleGetItem: `{tuple_value}` is not a tuple (its struct info is {sinfo})")
        if not 0 <= index < len(sinfo.fields):
            raise IRError(f"TupleGetItem: index {index} out of range for a tuple of {len(sinfo.fields)} fields")
        self._init(tuple_value=tuple_value, index=int(index), struct_info=sinfo.fields[index])


class Op(Node):
    """A registered operator, referred to by name (``Op.get("relu")``); see `ingot.graph.op_registry`.

    Example:
        >>> Op.get("relu").name
        'relu'
    """

    __slots__ = ("name",)
    _fields = ("name",)
    _attr_fields = ("name",)
    _cache: dict = {}

    def __init__(self, name: str):
        self._init(name=str(name))

    @staticmethod
    def get(name: str) -> "Op":
        """The operator ``name`` (one object per name); raises if it is not registered."""
        from .op_registry import get_op_def

        get_op_def(name)  # validates the name
        op = Op._cache.get(name)
        if op is None:
            op = Op._cache[name] = Op(name)
        return op

    def __str__(self) -> str:
        return f"R.{self.name}"

    __repr__ = __str__


class ExternFunc(Expr):
    """A function registered in the runtime (``ingot.register_func``), called with ``call_packed``.

    Example:
        >>> ExternFunc("env.linear").global_symbol
        'env.linear'
    """

    __slots__ = ("global_symbol",)
    _fields = ("global_symbol",)
    _attr_fields = ("global_symbol",)

    def __init__(self, global_symbol: str):
        self._init(global_symbol=str(global_symbol), struct_info=ObjectStructInfo())


class Call(Expr):
    """``op(*args)`` with attributes. ``op`` is an `Op`, a `GlobalVar`, an `ExternFunc` or a `Var`;
    ``sinfo_args`` carry explicit result struct infos (``call_tir``'s output, ``call_packed``'s).

    Build operator calls with the builders in `ingot.graph.op` (``G.op.relu(x)``), which check the
    attributes and infer ``struct_info``; the constructor takes ``struct_info`` as given.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 3), "float32"))
        >>> str(G.op.relu(x).struct_info)
        'R.Tensor((2, 3), dtype="float32")'
    """

    __slots__ = ("op", "args", "attrs", "sinfo_args")
    _fields = ("op", "args", "attrs", "sinfo_args")

    def __init__(
        self,
        op: Any,
        args: Sequence[Expr],
        attrs: "Mapping[str, Any] | None" = None,
        sinfo_args: Sequence[StructInfo] = (),
        struct_info: "StructInfo | None" = None,
    ):
        args = tuple(args)
        for index, a in enumerate(args):
            if not isinstance(a, (Expr, GlobalVar)):
                raise IRError(
                    f"argument {index} of call to {op}: expected a graph expression (Var, Constant, Tuple...), "
                    f"got {type(a).__name__}: {a!r}; wrap arrays with G.const(...)"
                )
        self._init(op=op, args=args, attrs=FrozenDict(attrs or {}), sinfo_args=tuple(sinfo_args),
                   struct_info=struct_info if struct_info is not None else ObjectStructInfo())


class VarBinding(Node):
    """``var = value`` inside a binding block.

    Example:
        >>> x = Var("x", TensorStructInfo((2,), "float32"))
        >>> b = VarBinding(Var("y", x.struct_info), x)
    """

    __slots__ = ("var", "value")
    _fields = ("var", "value")
    _def_fields = ("var",)

    def __init__(self, var: Var, value: Expr):
        if not isinstance(var, Var):
            raise IRError(f"VarBinding: the target must be a graph Var, got {type(var).__name__}")
        self._init(var=var, value=value)


class BindingBlock(Node):
    """A sequence of bindings (may have side effects, e.g. ``call_packed`` to impure functions).

    Example:
        >>> BindingBlock([]).bindings
        ()
    """

    __slots__ = ("bindings",)
    _fields = ("bindings",)

    def __init__(self, bindings: Sequence[VarBinding]):
        self._init(bindings=tuple(bindings))


class DataflowBlock(BindingBlock):
    """A side-effect-free sequence of bindings: the region graph passes (fusion, DCE) rewrite freely.

    Example:
        >>> DataflowBlock([]).bindings
        ()
    """

    __slots__ = ()


class SeqExpr(Expr):
    """``blocks`` of bindings followed by the result ``body``.

    Example:
        >>> x = Var("x", TensorStructInfo((2,), "float32"))
        >>> SeqExpr([], x).struct_info is x.struct_info
        True
    """

    __slots__ = ("blocks", "body")
    _fields = ("blocks", "body")

    def __init__(self, blocks: Sequence[BindingBlock], body: Expr):
        self._init(blocks=tuple(blocks), body=body, struct_info=body.struct_info)


class Function(Expr):
    """A graph function: ``params`` (Vars), a `SeqExpr` body, its return struct info and attributes.

    Attributes follow TVM: ``"global_symbol"``; ``"Primitive": True`` marks a fused group made by
    `FuseOps` (turned into one PrimFunc by `FuseTIR`).

    Example:
        >>> x = Var("x", TensorStructInfo((2,), "float32"))
        >>> f = Function([x], SeqExpr([], x))
        >>> str(f.ret_struct_info)
        'R.Tensor((2,), dtype="float32")'
    """

    __slots__ = ("params", "body", "ret_struct_info", "attrs")
    _fields = ("params", "body", "ret_struct_info", "attrs")
    _def_fields = ("params",)

    def __init__(
        self,
        params: Sequence[Var],
        body: Expr,
        ret_struct_info: "StructInfo | None" = None,
        attrs: "Mapping[str, Any] | None" = None,
    ):
        params = tuple(params)
        for p in params:
            if not isinstance(p, Var):
                raise IRError(f"Function parameters must be graph Vars, got {type(p).__name__}: {p!r}")
        if not isinstance(body, SeqExpr):
            body = SeqExpr([], body)
        ret = body.struct_info if ret_struct_info is None else ret_struct_info
        self._init(params=params, body=body, ret_struct_info=ret, attrs=FrozenDict(attrs or {}),
                   struct_info=FuncStructInfo([p.struct_info for p in params], ret))

    def with_attr(self, key: str, value: Any) -> "Function":
        """A copy with attribute ``key`` set."""
        return self.replace(attrs=self.attrs.set(key, value))

    def script(self) -> str:
        """This function as Relax-like text."""
        return str(self)


def const(value: Any, dtype: "str | None" = None) -> Constant:
    """A `Constant` from a numpy array or Python scalar/list (``float`` defaults to float32).

    Example:
        >>> const([1.0, 2.0]).struct_info.shape
        (2,)
    """
    return Constant(value, dtype)


def fresh_copy(var: Var, name: "str | None" = None, struct_info: "StructInfo | None" = None) -> Var:
    """A new variable of the same kind (DataflowVar or Var) with the given or original name/sinfo."""
    return type(var)(name or var.name_hint, struct_info or var.struct_info)


def get_shape(expr: Expr) -> "tuple | None":
    """The static shape of a tensor-valued expression (ints and symbolic dims), None if unknown."""
    sinfo = expr.struct_info
    return sinfo.shape if isinstance(sinfo, TensorStructInfo) else None
