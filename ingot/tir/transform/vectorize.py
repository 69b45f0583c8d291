"""VectorizeLoop: turn small vectorized loops into vector expressions (Ramp/Broadcast).

Note: a loop ``for i in T.vectorized(8)`` whose body is straight-line stores becomes one vector
statement per store: the loop variable becomes ``Ramp(min, 1, 8)``, a load whose index advances by
1 with ``i`` becomes ``A[Ramp(base, 1, 8)]``, a loop-invariant value becomes ``Broadcast(v, 8)``,
and arithmetic (``+ - * /``, ``min``/``max``, casts) is done lane-wise. The C code generator prints
these as SIMD vector types.

The rewrite must keep the loop's meaning, so it is only done when it is plainly safe; otherwise the
loop stays ``VECTORIZED`` and code generation emits it with ``#pragma omp simd`` (the C compiler
then decides). The loop stays a loop when

* its extent is not a power of two in 2..64,
* its body holds anything but stores (an inner loop, an ``if``, a ``let``, an allocation) —
  except ``if`` statements around single stores whose condition does not use ``i`` (kept
  around the vector store),
* a store's index does not advance by exactly 1 with ``i`` (a scatter or a reduction into one place),
  after widening integer casts are pushed down to the leaves of the index (`widen_index`: a kernel
  with an int64 run-time batch indexes ``(int64)(i + 8) + batch_offset``, which is ``(int64)i + 8 +
  ...`` and advances by 1 with ``i``),
* a load's index advances by something other than 0 or 1 (a gather),
* a load reads a buffer stored in the loop at a different index (lanes would see each other's writes),
* a value uses ``i`` through an operation without a lane-wise form here (calls, selects, comparisons,
  integer division).

``PassContext(config={"tir.disable_vectorize": True})`` turns every vectorized loop serial.

Example:
    before:  for i in T.vectorized(8): B[i] = A[i] * 2.0 + C[0]
    after:   B[T.Ramp(0, 1, 8)] = A[T.Ramp(0, 1, 8)] * T.Broadcast(2.0, 8) + T.Broadcast(C[0], 8)
"""
from __future__ import annotations

from typing import Any

from ingot.arith.canonical import SumForm
from ingot.ir import expr as E
from ingot.ir.buffer import Buffer
from ingot.ir.expr import Broadcast, BufferLoad, PrimExpr, Ramp, as_const_int
from ingot.ir.functor import Mutator, collect_loads, collect_vars, substitute
from ingot.ir.node import Node
from ingot.ir.structural import structural_equal

from ..function import PrimFunc
from ..stmt import BufferStore, For, ForKind, IfThenElse, SeqStmt, Stmt
from ._arith import Analyzer
from .widen import widen_index
from .base import current_config, prim_func_pass

__all__ = ["VectorizeLoop", "vectorize_loop", "MAX_VECTOR_LANES"]

MAX_VECTOR_LANES = 64
_LANEWISE = (E.Add, E.Sub, E.Mul, E.Div, E.Min, E.Max)


class _CannotVectorize(Exception):
    """The loop body has a form this rewrite does not handle; keep the loop."""


class _Vectorizer:
    def __init__(self, loop: For, analyzer: Analyzer, widen: bool = True) -> None:
        self.widen = widen
        self.var = loop.loop_var
        self.min = loop.min
        self.lanes = as_const_int(loop.extent)
        self.analyzer = analyzer
        self._uses: dict[int, tuple[Any, bool]] = {}

    def _stride(self, index: PrimExpr) -> "tuple[PrimExpr, int]":
        """(base, stride) of an index that is affine in the loop variable with a constant stride."""
        if self.widen:
            index = widen_index(index)
        base = self.analyzer.simplify(substitute(index, {self.var: self.min}))
        stride = self._linear_stride(index)
        if stride is None:
            step = self.analyzer.simplify(substitute(index, {self.var: self.var + 1}) - index)
            stride = as_const_int(step)
        if stride is None:
            raise _CannotVectorize(f"index {index} does not advance by a constant")
        return base, stride

    def _linear_stride(self, index: PrimExpr) -> "int | None":
        """The stride when the loop variable appears in ``index`` only as a ``c * var`` term (the
        usual flattened index): ``index[var + 1] - index`` is then ``c`` with no simplification.
        None when another term or atom uses the variable (the analyzer decides)."""
        if not (index.dtype.is_int and index.dtype.lanes == 1):
            return None
        stride = 0
        for coeff, atoms in SumForm.from_expr(index).terms.values():
            if len(atoms) == 1 and (atoms[0] is self.var or self._widened_var(atoms[0])):
                stride = coeff
            elif any(a is self.var or (not isinstance(a, E.Var) and self._uses_var(a)) for a in atoms):
                return None
        return stride

    def _widened_var(self, atom: Any) -> bool:
        """Whether ``atom`` is the loop variable widened (``(int64)i``, from `widen_index`)."""
        return (self.widen and isinstance(atom, E.Cast) and atom.value is self.var and atom.dtype.is_int
                and atom.dtype.bits >= self.var.dtype.bits)

    def _uses_var(self, e: Any) -> bool:
        """Whether the loop variable occurs in ``e`` (as ``collect_vars`` sees it: buffers are not
        entered). Memoized per node: `vec` asks it of every subexpression on the way down, which
        with a fresh walk each time cost O(n * depth)."""
        hit = self._uses.get(id(e))
        if hit is not None and hit[0] is e:
            return hit[1]
        if isinstance(e, E.Var):
            found = e is self.var
        elif isinstance(e, Buffer):
            found = False
        elif isinstance(e, Node):
            found = any(self._uses_var(getattr(e, name)) for name in e._fields)
        elif isinstance(e, (tuple, list)):
            found = any(self._uses_var(item) for item in e)
        else:
            return False
        self._uses[id(e)] = (e, found)
        return found

    def vec(self, e: PrimExpr) -> PrimExpr:
        """The vector form of ``e`` (dtype with ``lanes`` lanes)."""
        if not self._uses_var(e):
            return Broadcast(e, self.lanes)
        if e is self.var:
            return Ramp(self.min, 1, self.lanes)
        if isinstance(e, BufferLoad):
            if len(e.indices) != 1:
                raise _CannotVectorize("vectorize runs on flattened (1-D) buffers")
            base, stride = self._stride(e.indices[0])
            if stride == 0:
                return Broadcast(BufferLoad(e.buffer, (base,)), self.lanes)
            if stride != 1:
                raise _CannotVectorize(f"load {e} is strided by {stride}")
            return BufferLoad(e.buffer, (Ramp(base, 1, self.lanes),))
        if isinstance(e, _LANEWISE) and not (e.dtype.is_integer and isinstance(e, E.Div)):
            return type(e)(self.vec(e.a), self.vec(e.b))
        if isinstance(e, E.Cast):
            return E.Cast(e.dtype.with_lanes(self.lanes), self.vec(e.value))
        raise _CannotVectorize(f"{type(e).__name__} `{e}` has no lane-wise form here")

    def store(self, s: BufferStore, stored: list) -> Stmt:
        if len(s.indices) != 1:
            raise _CannotVectorize("vectorize runs on flattened (1-D) buffers")
        base, stride = self._stride(s.indices[0])
        if stride != 1:
            raise _CannotVectorize(f"store to {s.buffer.name} is not contiguous (stride {stride})")
        value = self.vec(s.value)
        return BufferStore(s.buffer, value, (Ramp(base, 1, self.lanes),))


def _try_vectorize(loop: For, analyzer: Analyzer, widen: bool = True) -> "Stmt | None":
    lanes = as_const_int(loop.extent)
    # GCC vector types (the C backend) need a power-of-two lane count; other extents stay loops.
    if lanes is None or not 2 <= lanes <= MAX_VECTOR_LANES or lanes & (lanes - 1):
        return None
    stmts = list(loop.body.seq) if isinstance(loop.body, SeqStmt) else [loop.body]
    # A loop-invariant guard (a reduction's init condition, the predicate of a non-divisible
    # split on an outer loop) is the same for every lane: keep it around the vector store.
    guards = []
    for k, s in enumerate(stmts):
        cond = None
        if (isinstance(s, IfThenElse) and s.else_case is None and isinstance(s.then_case, BufferStore)
                and loop.loop_var not in collect_vars(s.condition)):
            cond, stmts[k] = s.condition, s.then_case
        guards.append(cond)
    if not all(isinstance(s, BufferStore) for s in stmts):
        return None
    # Lanes run each statement together: a load from a buffer stored in the loop must read the
    # element its own lane stores (same index), or it would see another lane's write.
    stored = [(s.buffer.data, s.indices) for s in stmts]
    for s in stmts:
        for load in collect_loads(s.value):
            for data, indices in stored:
                if load.buffer.data is data and not structural_equal(load.indices, indices):
                    return None
    vectorizer = _Vectorizer(loop, analyzer, widen)
    try:
        out = [vectorizer.store(s, stored) for s in stmts]
    except _CannotVectorize:
        return None
    return SeqStmt.flatten([st if g is None else IfThenElse(g, st) for st, g in zip(out, guards)])


class _LoopVectorizer(Mutator):
    def __init__(self, disabled: bool, widen: bool = True) -> None:
        self.disabled = disabled
        self.widen = widen
        self.analyzer = Analyzer()

    def visit_For(self, node: For) -> Stmt:
        self.analyzer.bind(node.loop_var, E.Range.from_min_extent(node.min, node.extent))
        node = self.generic_visit(node)
        if node.kind != ForKind.VECTORIZED:
            return node
        if self.disabled:
            return node.replace(kind=ForKind.SERIAL)
        vectorized = _try_vectorize(node, self.analyzer, self.widen)
        return node if vectorized is None else vectorized

    def generic_visit(self, node: Any) -> Any:
        return super().generic_visit(node) if isinstance(node, Stmt) else node


def vectorize_loop(stmt: Stmt, disabled: bool = False, widen: bool = True) -> Stmt:
    """``stmt`` with its small vectorized loops rewritten into vector statements where safe;
    ``widen``: a loop variable under a widening cast counts (`widen_index`, the default).

    Example:
        >>> from ingot.ir import Var, decl_buffer
        >>> A = decl_buffer((8,), "float32", "A"); i = Var("i")
        >>> s = vectorize_loop(For(i, 0, 8, ForKind.VECTORIZED, BufferStore(A, A[i] * 2.0, [i])))
        >>> str(s.value.dtype)
        'float32x8'
    """
    return _LoopVectorizer(disabled, widen).visit(stmt)


def VectorizeLoop():  # noqa: N802
    """The pass vectorizing loops in every PrimFunc (see module docstring).

    Example:
        >>> VectorizeLoop().info.name
        'VectorizeLoop'
    """

    def transform(func: PrimFunc, mod, ctx) -> PrimFunc:
        disabled = bool(current_config("tir.disable_vectorize", False))
        widen = bool(current_config("tir.widen_index_casts", True))
        return func.with_body(vectorize_loop(func.body, disabled, widen))

    return prim_func_pass(transform, opt_level=0, name="VectorizeLoop")

