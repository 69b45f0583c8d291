"""`split`: one loop into several nested loops.

Note: the loop ``i`` (extent ``n``) becomes loops ``i_0 … i_{k-1}`` with extents ``f_0 … f_{k-1}``
and every use of ``i`` is replaced by ``i_0 * (f_1⋯f_{k-1}) + … + i_{k-1}``. When the product of
the factors may exceed ``n`` the blocks below get the predicate ``… < n`` (TENSORIR.md §1: that
is how non-divisible splits stay exact). Preconditions (TENSORIR.md §2): at most one factor is
None (it is inferred as ``ceildiv(n, product of the others)``), factors are positive, the loop
starts at 0 and is not bound to a thread.

Example (before/after)::

    for i in T.serial(10):                      for i_0, i_1 in T.grid(3, 4):
        with T.block("B"):                          with T.block("B"):
            vi = T.axis.spatial(10, i)     →            vi = T.axis.spatial(10, i_0 * 4 + i_1)
                                                        T.where(i_0 * 4 + i_1 < 10)
"""
from __future__ import annotations

from typing import Any, Sequence

from ingot.ir.expr import And, IntImm, PrimExpr, Range, Var, as_const_int
from ingot.tir.stmt import For, ForKind

from ..analysis import (
    can_prove, child_block_realizes, enclosing_loops, loop_domains, simplify, substitute_outside_blocks,
)
from ..instruction import ExprRV, InstructionKind, LoopRV
from ..state import _Replacer

SPLIT = InstructionKind("split", inputs=("loop", "factors[]"), attrs=("preserve_unit_iters",), returns_list=True)


def split(sch: Any, loop: LoopRV, factors: Sequence[Any], preserve_unit_iters: bool = True) -> list[LoopRV]:
    """Split ``loop`` into ``len(factors)`` nested loops (outermost first); one factor may be None.

    Factors are ints or ExprRVs from `sample_perfect_tile`. With ``preserve_unit_iters=False``,
    loops of extent 1 are dropped from the bindings (they still exist as loops).

    Example:
        >>> # i0, i1 = sch.split(i, factors=[None, 4])
        >>> # trace: l4, l5 = sch.split(loop=l1, factors=[None, 4], preserve_unit_iters=True)
    """
    # Step 1. Resolve and check the inputs.
    sref = sch._loop(loop, "split")
    node: For = sref.stmt
    factors = list(factors)
    if len(factors) < 2:
        sch._raise(f"split: loop {node.loop_var.name!r} needs at least 2 factors, got {len(factors)}",
                   "pass e.g. factors=[None, 4]", sref.func_name, [node])
    values = [None if f is None else sch._int(f, "split", f"factors[{k}]") for k, f in enumerate(factors)]
    if sum(v is None for v in values) > 1:
        sch._raise(f"split: loop {node.loop_var.name!r}: {sum(v is None for v in values)} factors are None",
                   "at most one factor can be None (it is inferred from the extent and the others)",
                   sref.func_name, [node])
    for k, v in enumerate(values):
        if v is not None and not isinstance(v, int) and not isinstance(factors[k], ExprRV):
            raise TypeError(f"split: factors[{k}] = {factors[k]!r}: symbolic factors must come from sampling (ExprRV)")
        if isinstance(v, int) and v <= 0:
            sch._raise(f"split: factor {k} of loop {node.loop_var.name!r} is {v}",
                       "factors must be positive", sref.func_name, [node])
    if as_const_int(node.min) != 0:
        sch._raise(f"split: loop {node.loop_var.name!r} starts at {node.min}, not 0",
                   "split needs loops that start at 0; normalize the loop first", sref.func_name, [node])
    if node.kind == ForKind.THREAD_BINDING:
        sch._raise(f"split: loop {node.loop_var.name!r} is bound to {node.thread_binding}",
                   "split a loop before binding it to a thread", sref.func_name, [node])
    given = list(values)
    extent = node.extent
    dtype = node.loop_var.dtype

    # Step 2. Infer the None factor; decide whether the split is exact (else: add a predicate).
    known: Any = 1
    for v in values:
        if v is not None:
            known = known * v if isinstance(known, int) and isinstance(v, int) else _as_expr(known, dtype) * v
    n_const = as_const_int(extent)
    if None in values:
        if isinstance(known, int) and n_const is not None:
            inferred: Any = -(-n_const // known)
        else:
            inferred = simplify((extent + (_as_expr(known, dtype) - 1)) // known)
        values[values.index(None)] = inferred
    product: Any = 1
    for v in values:
        product = product * v if isinstance(product, int) and isinstance(v, int) else _as_expr(product, dtype) * v
    if isinstance(product, int) and n_const is not None:
        if product < n_const:
            sch._raise(
                f"split: factors {values} of loop {node.loop_var.name!r} multiply to {product} < extent {n_const}",
                "the factors must cover the loop; make one factor None or larger", sref.func_name, [node])
        exact = product == n_const
    else:
        exact = can_prove(_as_expr(product, dtype) == extent)

    # Step 3. New loop variables; the old one becomes i_0 * (f_1...f_k) + ... + i_k.
    new_vars = [Var(f"{node.loop_var.name}_{k}", dtype) for k in range(len(values))]
    fused: Any = None
    stride: Any = 1
    for var, f in zip(reversed(new_vars), reversed(values)):
        if preserve_unit_iters or not _is_one(f):
            term = var if _is_one(stride) else var * _as_expr(stride, dtype)
            fused = term if fused is None else term + fused
        stride = stride * f if isinstance(stride, int) and isinstance(f, int) else _as_expr(stride, dtype) * f
    if fused is None:
        fused = IntImm(dtype, 0)
    dom = loop_domains(enclosing_loops(sref))
    for var, f in zip(new_vars, values):
        dom[var] = Range.from_min_extent(IntImm(dtype, 0), _as_expr(f, dtype))

    # Step 4. Rewrite the body: substitute, add the predicate if the split is not exact, simplify.
    body = substitute_outside_blocks(node.body, {node.loop_var: fused})
    changes = {}
    for realize in child_block_realizes(body):
        pred = realize.predicate
        if not exact:
            cond = fused < extent
            pred = cond if as_const_int(pred) == 1 else And(pred, cond)
        values_b = tuple(simplify(v, dom) for v in realize.iter_values)
        changes[id(realize)] = realize.replace(iter_values=values_b, predicate=simplify(pred, dom))
    body = _Replacer(changes).visit(body)
    for var, f in reversed(list(zip(new_vars, values))):
        body = For(var, 0, _as_expr(f, dtype), ForKind.SERIAL, body)

    # Step 5. Install, hand out handles, record.
    sch.state.replace(sref.func_name, node, body)
    loops = sch.state._index[sref.func_name].loops
    outputs = [sch._new_rv(LoopRV, loops[id(v)]) for v in new_vars]
    recorded = [f if f is None or isinstance(f, ExprRV) else int(g) for f, g in zip(factors, given)]
    sch._record(SPLIT, [loop, *recorded], [bool(preserve_unit_iters)], outputs)
    return outputs


def _is_one(value: Any) -> bool:
    return as_const_int(value) == 1


def _as_expr(value: Any, dtype: Any) -> PrimExpr:
    return IntImm(dtype, value) if isinstance(value, int) else value


