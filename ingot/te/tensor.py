"""Tensors and operations of the tensor expression language: `placeholder`, `compute`, axes.

Note: a `Tensor` is the output of an `Operation` — a `PlaceholderOp` (an input) or a `ComputeOp`
(``out[i, j] = body(i, j)``). Indexing a tensor, ``A[i, j]``, gives an ordinary ``BufferLoad`` on a
buffer that belongs to the tensor (a `TensorBuffer`, which remembers its tensor), so compute bodies
are plain `ingot.ir` expressions: they print, hash, substitute and simplify like any other.
`ingot.te.create_prim_func` later replaces each tensor buffer by a fresh parameter or intermediate
buffer of the PrimFunc (TVM's ``ProducerLoad`` → ``BufferLoad`` step).

Tensors and operations are immutable after construction. ``==`` on tensors is identity.

Example:
    >>> from ingot import te
    >>> n = te.var("n")
    >>> A = te.placeholder((n, 4), name="A")
    >>> B = te.compute((n, 4), lambda i, j: A[i, j] * 2.0, name="B")
    >>> B.op.input_tensors[0] is A, B.ndim, B.dtype
    (True, 2, 'float32')
"""
from __future__ import annotations

import inspect
from typing import Any, Callable, Mapping, Sequence

from ingot.ir.buffer import Buffer
from ingot.ir.dtype import DataType
from ingot.ir.expr import BufferLoad, IterVar, PrimExpr, Range, SizeVar, Var, _promote, convert, is_const_int
from ingot.ir.functor import Visitor
from ingot.ir.node import FrozenDict

__all__ = [
    "Tensor", "TensorSlice", "TensorBuffer", "Operation", "PlaceholderOp", "ComputeOp",
    "placeholder", "compute", "var", "size_var", "reduce_axis",
]


# --------------------------------------------------------------------------------------------
# Variables and axes
# --------------------------------------------------------------------------------------------


def var(name: str = "tindex", dtype: "str | DataType" = "int32") -> Var:
    """A symbolic scalar (a shape dimension or a scalar parameter).

    Example:
        >>> from ingot import te
        >>> n = te.var("n")
        >>> A = te.placeholder((n,), name="A")
        >>> A.shape[0] is n
        True
    """
    return Var(name, dtype)


def size_var(name: str = "size", dtype: "str | DataType" = "int32") -> SizeVar:
    """A symbolic scalar known to be non-negative (the usual choice for a shape dimension).

    Example:
        >>> from ingot import te
        >>> m = te.size_var("m")
        >>> type(m).__name__
        'SizeVar'
    """
    return SizeVar(name, dtype)


def reduce_axis(dom: Any, name: str = "rv") -> IterVar:
    """A reduction axis over ``dom`` — a ``(begin, end)`` pair (end exclusive) or a `Range`.

    Example:
        >>> from ingot import te
        >>> k = te.reduce_axis((0, 16), name="k")
        >>> k.kind, k.dom.extent.value
        ('R', 16)
    """
    from .reduce import REDUCE_AXIS_ORIGIN

    rng = _as_range(dom, f"te.reduce_axis {name!r}")
    # The span marks the variable as a reduce axis, so a use outside its reduction is reported.
    return IterVar(rng, Var(name, rng.extent.dtype).with_span(REDUCE_AXIS_ORIGIN), "R")


def _as_range(dom: Any, what: str) -> Range:
    if isinstance(dom, Range):
        return dom
    if isinstance(dom, (tuple, list)) and len(dom) == 2:
        begin, end = dom
        if is_const_int(begin, 0):
            # As TVM: Range(0, n) has extent n, not n - 0.
            begin, end = _promote(begin, end)
            return Range.from_min_extent(begin, end)
        return Range(begin, end)
    raise TypeError(f"{what}: the domain must be a (begin, end) pair or an ingot.ir.Range, got {dom!r}")


# --------------------------------------------------------------------------------------------
# Tensors
# --------------------------------------------------------------------------------------------


class TensorBuffer(Buffer):
    """The buffer standing for a `Tensor` inside compute bodies (replaced by `create_prim_func`).

    Example:
        >>> from ingot import te
        >>> A = te.placeholder((4,), name="A")
        >>> A[0].buffer.tensor is A
        True
    """

    __slots__ = ("tensor",)


class Tensor:
    """An N-D array produced by an operation: a placeholder (input) or a compute stage.

    ``shape`` (tuple of expressions), ``dtype`` (str), ``name``, ``op``, ``value_index`` (which
    output of ``op``), ``ndim``. ``A[i, j]`` (or ``A(i, j)``) reads an element as an expression;
    ``A[i]`` on a 2-D tensor gives a `TensorSlice` to index further.

    Example:
        >>> from ingot import te
        >>> A = te.placeholder((3, 4), dtype="float16", name="A")
        >>> str(A[1, 2]), A.dtype, [int(s) for s in A.shape]
        ('A[1, 2]', 'float16', [3, 4])
    """

    __slots__ = ("shape", "dtype", "op", "value_index", "buffer", "__weakref__")

    def __init__(self, shape: Sequence[Any], dtype: "str | DataType", op: "Operation", value_index: int, name: str):
        setattr_ = object.__setattr__
        setattr_(self, "shape", _as_shape(shape, name))
        setattr_(self, "dtype", str(DataType(dtype)))
        setattr_(self, "op", op)
        setattr_(self, "value_index", int(value_index))
        buffer = TensorBuffer(Var(name, "handle"), dtype, self.shape, name=name)
        object.__setattr__(buffer, "tensor", self)
        setattr_(self, "buffer", buffer)

    def __setattr__(self, name, value):
        raise AttributeError(f"te.Tensor is immutable (tried to set {name!r})")

    @property
    def name(self) -> str:
        """The tensor's name: the op's name, with ``_v<i>`` for the outputs of a multi-output op."""
        return self.buffer.name

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __len__(self) -> int:
        raise TypeError(f"te.Tensor {self.name!r} has a symbolic length; use .shape[0]")

    def __getitem__(self, indices: Any) -> "PrimExpr | TensorSlice":
        if not isinstance(indices, tuple):
            indices = (indices,)
        return TensorSlice(self, ())[indices]

    def __call__(self, *indices: Any) -> PrimExpr:
        """``A(i, j)`` is ``A[i, j]`` (TVM spelling)."""
        if len(indices) != self.ndim:
            raise IndexError(f"te.Tensor {self.name!r} has {self.ndim} dimensions, called with {len(indices)} indices")
        return self[tuple(indices)]

    def __iter__(self):
        raise TypeError(f"te.Tensor {self.name!r} is not iterable; index it with A[i, j]")

    def __repr__(self) -> str:
        dims = ", ".join(str(s) for s in self.shape)
        return f"Tensor(shape=({dims}), name={self.name!r}, dtype={self.dtype!r})"

    __hash__ = object.__hash__


class TensorSlice:
    """A partly indexed tensor, ``A[i]`` of a 2-D ``A``; index it further: ``A[i][j]``.

    Example:
        >>> from ingot import te
        >>> A = te.placeholder((3, 4), name="A")
        >>> str(A[1][2])
        'A[1, 2]'
    """

    __slots__ = ("tensor", "indices")

    def __init__(self, tensor: Tensor, indices: tuple):
        self.tensor, self.indices = tensor, indices

    def __getitem__(self, more: Any) -> "PrimExpr | TensorSlice":
        if not isinstance(more, tuple):
            more = (more,)
        indices = self.indices + tuple(more)
        t = self.tensor
        if len(indices) > t.ndim:
            raise IndexError(f"te.Tensor {t.name!r} has {t.ndim} dimensions, indexed with {len(indices)} indices")
        checked = tuple(_as_index(i, t.name, pos) for pos, i in enumerate(indices))
        if len(checked) < t.ndim:
            return TensorSlice(t, checked)
        return BufferLoad(t.buffer, checked)

    @property
    def dtype(self) -> str:
        return self.tensor.dtype

    def asobject(self) -> PrimExpr:
        raise TypeError(
            f"te.Tensor {self.tensor.name!r} has {self.tensor.ndim} dimensions but is indexed with "
            f"{len(self.indices)}; give all indices, e.g. {self.tensor.name}[{', '.join(['i'] * self.tensor.ndim)}]"
        )


def _partial_use(self: TensorSlice, *args: Any) -> Any:
    return self.asobject()


# Arithmetic on a partly indexed tensor (A[i] + 1 for a 2-D A) reports the missing indices.
for _op in ("add", "sub", "mul", "truediv", "floordiv", "mod", "pow"):
    setattr(TensorSlice, f"__{_op}__", _partial_use)
    setattr(TensorSlice, f"__r{_op}__", _partial_use)
for _op in ("lt", "le", "gt", "ge", "neg"):
    setattr(TensorSlice, f"__{_op}__", _partial_use)
TensorSlice.astype = _partial_use  # type: ignore[attr-defined]


def _as_index(index: Any, name: str, pos: int) -> PrimExpr:
    if isinstance(index, slice):
        raise TypeError(f"te.Tensor {name!r}: index {pos} is a slice; tensor expressions take scalar indices")
    if isinstance(index, TensorSlice):
        index.asobject()
    try:
        expr = convert(index)
    except TypeError as err:
        raise TypeError(f"te.Tensor {name!r}: index {pos} ({index!r}) is not an expression") from err
    if not (expr.dtype.is_integer and expr.dtype.lanes == 1):
        raise TypeError(
            f"te.Tensor {name!r}: index {pos} `{expr}` has dtype {expr.dtype}; indices must be scalar integers "
            f"(cast with .astype(\"int32\"))"
        )
    return expr


def _as_shape(shape: Any, name: str) -> tuple[PrimExpr, ...]:
    if isinstance(shape, (int, PrimExpr)):
        shape = (shape,)
    dims = []
    for pos, dim in enumerate(shape):
        expr = convert(dim)
        if not (expr.dtype.is_integer and expr.dtype.lanes == 1):
            raise TypeError(f"tensor {name!r}: shape entry {pos} `{expr}` has dtype {expr.dtype}; use integers or integer Vars")
        dims.append(expr)
    return tuple(dims)


# --------------------------------------------------------------------------------------------
# Operations
# --------------------------------------------------------------------------------------------


class Operation:
    """Base of the operations that produce tensors; ``output(i)`` is the i-th output tensor."""

    __slots__ = ("name", "tag", "attrs", "outputs")

    def __setattr__(self, name, value):
        raise AttributeError(f"te operations are immutable (tried to set {name!r})")

    @property
    def num_outputs(self) -> int:
        return len(self.outputs)

    def output(self, index: int) -> Tensor:
        """The ``index``-th output tensor."""
        return self.outputs[index]

    @property
    def input_tensors(self) -> list[Tensor]:
        return []


class PlaceholderOp(Operation):
    """The operation of `placeholder`: an input with no computation."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"PlaceholderOp({self.name!r})"


class ComputeOp(Operation):
    """The operation of `compute`: ``axis`` (spatial IterVars), ``reduce_axis``, ``body`` (one
    expression per output; a `ingot.te.Reduce` for reductions), ``input_tensors``.

    Example:
        >>> from ingot import te
        >>> A = te.placeholder((8, 8), name="A")
        >>> k = te.reduce_axis((0, 8), name="k")
        >>> S = te.compute((8,), lambda i: te.sum(A[i, k], axis=k), name="S")
        >>> [iv.var.name for iv in S.op.axis], [iv.var.name for iv in S.op.reduce_axis]
        (['i'], ['k'])
    """

    __slots__ = ("axis", "reduce_axis", "body", "_inputs")

    @property
    def input_tensors(self) -> list[Tensor]:
        return list(self._inputs)

    def __repr__(self) -> str:
        return f"ComputeOp({self.name!r})"


def placeholder(shape: Any, dtype: "str | DataType" = "float32", name: str = "placeholder") -> Tensor:
    """An input tensor of ``shape`` (ints, Vars or expressions) and ``dtype``.

    Example:
        >>> from ingot import te
        >>> A = te.placeholder((2, te.var("n")), name="A", dtype="int8")
        >>> A.dtype, A.op.name
        ('int8', 'A')
    """
    op = object.__new__(PlaceholderOp)
    _set(op, name=str(name), tag="", attrs=FrozenDict({}))
    tensor = Tensor(shape, dtype, op, 0, str(name))
    _set(op, outputs=(tensor,))
    return tensor


def compute(
    shape: Any,
    fcompute: Callable[..., Any],
    name: str = "compute",
    tag: str = "",
    attrs: "Mapping[str, Any] | None" = None,
) -> "Tensor | list[Tensor]":
    """A tensor whose element ``[i, j, ...]`` is ``fcompute(i, j, ...)``.

    ``fcompute`` takes one index variable per dimension (names come from its parameter names) and
    returns an expression, or a `te.sum`/`te.max`/... reduction, or a tuple of them (then a list of
    tensors is returned: one per value). Reductions must be the whole body (TVM's rule): write
    ``mean = sum / n`` as two computes.

    Example:
        >>> from ingot import te
        >>> A = te.placeholder((4, 8), name="A")
        >>> k = te.reduce_axis((0, 8), name="k")
        >>> B = te.compute((4,), lambda i: te.max(A[i, k], axis=k), name="B")
        >>> C = te.compute((4, 8), lambda i, j: te.exp(A[i, j] - B[i]), name="C")
        >>> C.op.input_tensors == [A, B]
        True
    """
    from .reduce import check_body

    name = str(name)
    dims = _as_shape(shape, name)
    # Step 1. The spatial axes, named after fcompute's parameters (i0, i1, ... for *args).
    arg_names = _arg_names(fcompute, len(dims), name)
    axis = tuple(IterVar(Range.from_min_extent(_zero_like(d), d), Var(n, d.dtype), "S") for n, d in zip(arg_names, dims))
    # Step 2. The body, one expression per output.
    result = fcompute(*[iv.var for iv in axis])
    values = list(result) if isinstance(result, (tuple, list)) else [result]
    if not values:
        raise ValueError(f"te.compute {name!r}: fcompute returned an empty tuple; return at least one expression")
    body = []
    for value in values:
        if isinstance(value, TensorSlice):
            value.asobject()
        if isinstance(value, Tensor):
            raise TypeError(f"te.compute {name!r}: fcompute returned the tensor {value.name!r}; return an element like {value.name}[i]")
        body.append(convert(value))
    # Step 3. Check the reductions (top level, shared axes) and the use of reduce axes.
    reduce_axes = check_body(name, tuple(body), axis)
    # Step 4. Build the operation and its outputs.
    op = object.__new__(ComputeOp)
    _set(op, name=name, tag=str(tag), attrs=FrozenDict(dict(attrs or {})), axis=axis, reduce_axis=reduce_axes,
         body=tuple(body), _inputs=tuple(_collect_inputs(body, axis, reduce_axes)))
    if len(body) == 1:
        outputs = (Tensor(dims, body[0].dtype, op, 0, name),)
    else:
        outputs = tuple(Tensor(dims, b.dtype, op, i, f"{name}_v{i}") for i, b in enumerate(body))
    _set(op, outputs=outputs)
    return outputs[0] if len(outputs) == 1 else list(outputs)


def _set(obj: Any, **values: Any) -> None:
    for key, value in values.items():
        object.__setattr__(obj, key, value)


def _zero_like(dim: PrimExpr) -> PrimExpr:
    from ingot.ir.expr import IntImm

    return IntImm(dim.dtype, 0)


def _arg_names(fcompute: Callable, ndim: int, name: str) -> list[str]:
    try:
        params = list(inspect.signature(fcompute).parameters.values())
    except (TypeError, ValueError):  # builtins without a signature: number the axes
        return [f"i{d}" for d in range(ndim)]
    if any(p.kind is inspect.Parameter.VAR_POSITIONAL for p in params):
        return [f"i{d}" for d in range(ndim)]
    positional = [p for p in params if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) and p.default is p.empty]
    if len(positional) != ndim:
        raise TypeError(
            f"te.compute {name!r}: the shape has {ndim} dimension(s) but fcompute takes {len(positional)} index "
            f"argument(s) ({', '.join(p.name for p in positional) or 'none'}); give one argument per dimension, "
            f"e.g. lambda {', '.join(f'i{d}' for d in range(ndim)) or ''}: ..."
        )
    return [p.name for p in positional]


def _collect_inputs(body: Sequence[PrimExpr], axis, reduce_axes) -> list[Tensor]:
    """Tensors read by the body (and by the axes' domains), in order of first read."""
    found: dict[int, Tensor] = {}

    class _Reads(Visitor):
        def visit_Buffer(self, node: Buffer) -> None:
            tensor = getattr(node, "tensor", None)
            if tensor is not None:
                found.setdefault(id(tensor), tensor)

    reader = _Reads()
    for iv in tuple(reduce_axes):
        reader.visit(iv.dom)
    for expr in body:
        reader.visit(expr)
    return list(found.values())
