"""Reductions: `comm_reducer`, the built-in `sum`/`min`/`max`, and the `Reduce` expression.

Note: a reduction is a `Reduce` expression node — a `CommReducer` (combiner ``result(lhs, rhs)``
with an identity element), the ``source`` values, the reduce ``axis`` and a ``condition``. It may
only be the *whole* body of a `te.compute` (TVM's rule): the compute then becomes a reduction block
with ``init`` (store the identity) and an update (``out = combine(out, source)``). Tuples of values
(``argmax``-like reducers) give one `Reduce` per value, sharing everything but ``value_index``.

Reduce-axis variables carry a marker in their ``span`` (`ReduceAxisOrigin`, ignored by structural
equality) so that a reduce axis used outside its reduction is reported at `te.compute` time.

Example:
    >>> from ingot import te
    >>> A = te.placeholder((8, 8), name="A")
    >>> k = te.reduce_axis((0, 8), name="k")
    >>> r = te.sum(A[0, k], axis=k)
    >>> r.combiner.name, str(r.dtype)
    ('sum', 'float32')
"""
from __future__ import annotations

from typing import Any, Callable, Sequence

from ingot.ir import as_const_int
from ingot.ir import expr as E
from ingot.ir.dtype import DataType
from ingot.ir.expr import IterVar, PrimExpr, Var, convert
from ingot.ir.functor import Visitor, substitute
from ingot.ir.node import Node

__all__ = ["CommReducer", "Reduce", "ReduceAxisOrigin", "comm_reducer", "sum", "min", "max", "check_body"]


class ReduceAxisOrigin:
    """Span marker of a variable made by `te.reduce_axis` (so misuse can be reported by name)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "<te.reduce_axis>"


REDUCE_AXIS_ORIGIN = ReduceAxisOrigin()


def is_reduce_var(v: Any) -> bool:
    """Whether ``v`` is the variable of a `te.reduce_axis`."""
    return isinstance(v, Var) and isinstance(getattr(v, "span", None), ReduceAxisOrigin)


class CommReducer(Node):
    """A commutative, associative combiner: ``result`` in terms of ``lhs``/``rhs`` variables, and
    its ``identity_element`` (one entry per reduced value).

    Example:
        >>> from ingot import te
        >>> k = te.reduce_axis((0, 4), "k")
        >>> c = te.sum(te.placeholder((4,), name="A")[k], axis=k).combiner
        >>> [str(v) for v in c((te.const(1.0),), (te.const(2.0),))], str(c.identity_element[0])
        (['1.0 + 2.0'], '0.0')
    """

    __slots__ = ("lhs", "rhs", "result", "identity_element", "name")
    _fields = ("lhs", "rhs", "result", "identity_element", "name")
    _def_fields = ("lhs", "rhs")
    _attr_fields = ("name",)
    _ignored_fields = ("name",)

    def __init__(self, lhs: Sequence[Var], rhs: Sequence[Var], result: Sequence[PrimExpr],
                 identity_element: Sequence[PrimExpr], name: str = "reduce"):
        self._init(lhs=tuple(lhs), rhs=tuple(rhs), result=tuple(result),
                   identity_element=tuple(identity_element), name=str(name))

    def __call__(self, a: Sequence[PrimExpr], b: Sequence[PrimExpr]) -> tuple[PrimExpr, ...]:
        """The combined values ``result`` with ``lhs := a`` and ``rhs := b``."""
        vmap = {**dict(zip(self.lhs, a)), **dict(zip(self.rhs, b))}
        return tuple(substitute(r, vmap) for r in self.result)

    def __repr__(self) -> str:
        return f"CommReducer({self.name})"


class Reduce(PrimExpr):
    """A reduction of ``source`` over ``axis`` with ``combiner``, where ``condition`` holds;
    ``init`` (optional) replaces the identity as the starting value. The value is
    ``source[value_index]``'s reduction.

    Example:
        >>> from ingot import te
        >>> A = te.placeholder((4, 4), name="A")
        >>> k = te.reduce_axis((0, 4), name="k")
        >>> te.max(A[0, k], axis=k, where=k > 0).condition
        k > 0
    """

    __slots__ = ("combiner", "source", "axis", "condition", "value_index", "init")
    _fields = ("combiner", "source", "axis", "condition", "value_index", "init")
    _attr_fields = ("value_index",)
    _def_fields = ("axis",)

    def __init__(self, combiner: CommReducer, source: Sequence[PrimExpr], axis: Sequence[IterVar],
                 condition: PrimExpr, value_index: int, init: Sequence[PrimExpr] = ()):
        source = tuple(source)
        self._init(combiner=combiner, source=source, axis=tuple(axis), condition=convert(condition),
                   value_index=int(value_index), init=tuple(init), dtype=source[int(value_index)].dtype)

    def __repr__(self) -> str:
        from ingot.ir.printer import expr_to_str

        src = ", ".join(expr_to_str(s) for s in self.source)
        axes = ", ".join(iv.var.name for iv in self.axis)
        where = "" if E.is_const_int(self.condition, 1) else f", where={expr_to_str(self.condition)}"
        return f"te.{self.combiner.name}({src}, axis=[{axes}]{where})"

    __str__ = __repr__


def _is_axis_arg(axis: Any) -> bool:
    if isinstance(axis, IterVar):
        return True
    return isinstance(axis, (list, tuple)) and all(isinstance(a, IterVar) for a in axis)


def comm_reducer(fcombine: Callable[..., Any], fidentity: Callable[..., Any], name: str = "reduce") -> Callable:
    """A reducer from a combiner and an identity, like TVM's ``te.comm_reducer``.

    ``fcombine(x, y)`` combines two values (for tuple reducers it takes two tuples and returns a
    tuple); ``fidentity(dtype, ...)`` gives the identity for the values' dtypes. The result is called
    as ``reducer(expr, axis, where=None, init=None)``; called on plain expressions instead of an
    axis (``reducer(a, b, ...)``) it just combines them.

    Example:
        >>> from ingot import te
        >>> mysum = te.comm_reducer(lambda x, y: x + y, lambda t: te.const(0, dtype=t), name="mysum")
        >>> A = te.placeholder((4, 8), name="A")
        >>> k = te.reduce_axis((0, 8), name="k")
        >>> B = te.compute((4,), lambda i: mysum(A[i, k], axis=k), name="B")
        >>> str(te.max(te.const(1.0), te.const(2.0)))
        '2.0'
    """

    def reducer(expr: Any, axis: Any, where: Any = None, init: Any = None, *args: Any) -> Any:
        if _is_axis_arg(axis) and not args:
            return _make_reduce(expr, axis, where, init)
        # Called on values: fold the combiner over them (te.max(a, b) is an elementwise max).
        operands = [expr, axis] + [x for x in (where, init) if x is not None] + list(args)
        result = convert(operands[0])
        for other in operands[1:]:
            result = convert(fcombine(result, convert(other)))
        return result

    def _make_reduce(expr: Any, axis: Any, where: Any, init: Any) -> Any:
        # Step 1. The values, axes and condition.
        multi = isinstance(expr, (tuple, list))
        values = tuple(convert(e) for e in (expr if multi else (expr,)))
        axes = (axis,) if isinstance(axis, IterVar) else tuple(axis)
        if not axes:
            raise ValueError(f"te.{name}: axis=[] is empty; pass at least one axis made with te.reduce_axis")
        for iv in axes:
            if iv.kind != "R":
                raise ValueError(
                    f"te.{name}: axis {iv.var.name!r} is a {iv.kind!r} axis; reduce over axes made with "
                    f"te.reduce_axis((begin, end), name=...)"
                )
        if len({id(iv) for iv in axes}) != len(axes):
            raise ValueError(f"te.{name}: an axis is listed twice in axis={[iv.var.name for iv in axes]}")
        condition = convert(True if where is None else where)
        if not condition.dtype.is_bool:
            raise TypeError(f"te.{name}: where=`{condition}` has dtype {condition.dtype}; it must be a bool condition")
        dtypes = [v.dtype for v in values]
        # Step 2. The combiner, checked against the values' dtypes (no silent promotion).
        lhs = tuple(Var(f"x{i}" if multi else "x", t) for i, t in enumerate(dtypes))
        rhs = tuple(Var(f"y{i}" if multi else "y", t) for i, t in enumerate(dtypes))
        result = fcombine(lhs, rhs) if multi else fcombine(lhs[0], rhs[0])
        result = _as_values(result, len(values), f"te.{name}: the combiner")
        identity = fidentity(*[str(t) for t in dtypes])
        identity = _as_values(identity, len(values), f"te.{name}: the identity")
        _check_dtypes(name, "the combiner's result", result, dtypes)
        _check_dtypes(name, "the identity element", identity, dtypes)
        combiner = CommReducer(lhs, rhs, result, identity, name)
        inits: tuple = ()
        if init is not None:
            inits = tuple(convert(v) for v in (init if isinstance(init, (tuple, list)) else (init,)))
            if len(inits) != len(values):
                raise ValueError(f"te.{name}: init has {len(inits)} value(s) for {len(values)} reduced value(s)")
            _check_dtypes(name, "init", inits, dtypes)
        # Step 3. A reduction over an empty domain (an axis of constant extent 0) is its init/identity:
        # a Reduce node would lower to an empty loop whose guarded init never runs, leaving the
        # output uninitialized (ONNX's reduce_*_empty_set cases read garbage).
        if any(as_const_int(iv.dom.extent) == 0 for iv in axes):
            empty = inits or identity
            return tuple(empty) if multi else empty[0]
        reduces = [Reduce(combiner, values, axes, condition, i, inits) for i in range(len(values))]
        return tuple(reduces) if multi else reduces[0]

    reducer.__name__ = name
    reducer.__doc__ = f"""The ``{name}`` reduction (see `ingot.te.comm_reducer`).

    Example:
        >>> from ingot import te
        >>> A = te.placeholder((4, 8), name="A")
        >>> k = te.reduce_axis((0, 8), name="k")
        >>> B = te.compute((4,), lambda i: te.{name}(A[i, k], axis=k), name="B")
    """
    return reducer


def _as_values(result: Any, count: int, what: str) -> tuple[PrimExpr, ...]:
    items = tuple(result) if isinstance(result, (tuple, list)) else (result,)
    if len(items) != count:
        raise ValueError(f"{what} gives {len(items)} value(s) for {count} reduced value(s)")
    return tuple(convert(v) for v in items)


def _check_dtypes(name: str, what: str, values: Sequence[PrimExpr], dtypes: Sequence[DataType]) -> None:
    for i, (v, t) in enumerate(zip(values, dtypes)):
        if v.dtype != t:
            raise TypeError(
                f"te.{name}: {what} (value {i}, `{v}`) has dtype {v.dtype} but the reduced value has dtype {t}; "
                f"mixing dtypes needs an explicit cast: make the reducer use dtype {t}, or cast the reduced "
                f"expression with .astype(\"{v.dtype}\")"
            )


def _sum_identity(t: str) -> PrimExpr:
    return E.const(0, t)


sum = comm_reducer(lambda x, y: x + y, _sum_identity, name="sum")  # noqa: A001 - TVM's name
# Float min/max start from +-inf, not the largest finite value: max(-inf, -inf) must stay -inf (a
# fully masked attention row is detected by exactly that).
min = comm_reducer(lambda x, y: E._arith(E.Min, x, y), E.min_identity, name="min")  # noqa: A001
max = comm_reducer(lambda x, y: E._arith(E.Max, x, y), E.max_identity, name="max")  # noqa: A001


# --------------------------------------------------------------------------------------------
# Checks of a compute body
# --------------------------------------------------------------------------------------------


class _Uses(Visitor):
    """Collects Reduce nodes below the top level and reduce-axis variables outside reductions."""

    def __init__(self):
        self.nested_reduce: "Reduce | None" = None
        self.stray_axes: list[Var] = []

    def visit_Reduce(self, node: Reduce) -> None:
        if self.nested_reduce is None:
            self.nested_reduce = node

    def visit_Var(self, node: Var) -> None:
        if is_reduce_var(node) and all(node is not v for v in self.stray_axes):
            self.stray_axes.append(node)


def _reduce_var_uses(exprs: Sequence[Any]) -> list[Var]:
    found: list[Var] = []

    class _Collect(Visitor):
        def visit_Var(self, node: Var) -> None:
            if is_reduce_var(node) and all(node is not v for v in found):
                found.append(node)

        def visit_IterVar(self, node: IterVar) -> None:
            self.visit(node.dom)

    collector = _Collect()
    for e in exprs:
        collector.visit(e)
    return found


def check_body(name: str, body: Sequence[PrimExpr], axis: Sequence[IterVar]) -> tuple[IterVar, ...]:
    """Check a compute body (TVM's rules) and return its reduce axes.

    Reductions must be the whole body of every output, share combiner, axes, condition and init
    (differing only in ``value_index``); reduce axes appear only inside the reduction that lists
    them. Raises ``ValueError`` naming the compute and the offending axis or expression.

    Example:
        >>> from ingot import te
        >>> A = te.placeholder((4, 8), name="A")
        >>> k = te.reduce_axis((0, 8), name="k")
        >>> te.compute((4,), lambda i: A[i, k], name="B")
        Traceback (most recent call last):
        ...
        ValueError: te.compute 'B': the reduce axis 'k' is used outside a reduction; wrap the expression in a reducer, e.g. te.sum(..., axis=k)
    """
    reduces = [b for b in body if isinstance(b, Reduce)]
    # Step 1. No reduction below the top level; all or none of the outputs reduce.
    for b in body:
        top_children = [b.source, b.condition, b.init] if isinstance(b, Reduce) else [b]
        uses = _Uses()
        for child in top_children:
            uses.visit(child)
        if uses.nested_reduce is not None:
            raise ValueError(
                f"te.compute {name!r}: the reduction `{uses.nested_reduce}` is nested inside a larger expression; "
                f"a reduction must be the whole body (TVM's rule). Compute it in its own te.compute and use the "
                f"result in a second one (e.g. mean = te.compute(..., lambda i: S[i] / n))"
            )
        if not isinstance(b, Reduce) and uses.stray_axes:
            k = uses.stray_axes[0].name
            raise ValueError(
                f"te.compute {name!r}: the reduce axis {k!r} is used outside a reduction; wrap the expression "
                f"in a reducer, e.g. te.sum(..., axis={k})"
            )
    if not reduces:
        return ()
    if len(reduces) != len(body):
        raise ValueError(
            f"te.compute {name!r}: some outputs are reductions and some are not; a multi-output compute must "
            f"reduce all its values with one reducer call (e.g. a tuple reducer), or use separate computes"
        )
    first = reduces[0]
    for i, r in enumerate(reduces):
        same = (r.combiner is first.combiner and r.axis == first.axis and r.condition is first.condition
                and r.init == first.init and r.source == first.source)
        if not same or r.value_index != i:
            raise ValueError(
                f"te.compute {name!r}: output {i} is not value {i} of the same tuple reduction as output 0; "
                f"return the whole tuple of one reducer call, e.g. lambda i: argmax((idx, val), axis=k)"
            )
    # Step 2. Reduce axes only inside the reduction that lists them, never in its init.
    listed = first.axis
    for v in _reduce_var_uses(list(first.source) + [first.condition]):
        if all(v is not iv.var for iv in listed):
            raise ValueError(
                f"te.compute {name!r}: the reduce axis {v.name!r} is used in te.{first.combiner.name} but not listed "
                f"in its axis=[{', '.join(iv.var.name for iv in listed)}]; add it to axis"
            )
    for v in _reduce_var_uses(list(first.init)):
        raise ValueError(f"te.compute {name!r}: init of te.{first.combiner.name} uses the reduce axis {v.name!r}; "
                         f"init is the starting value and may only use the spatial axes")
    for v in _reduce_var_uses([iv.dom for iv in axis]):
        raise ValueError(f"te.compute {name!r}: the shape uses the reduce axis {v.name!r}")
    return listed
