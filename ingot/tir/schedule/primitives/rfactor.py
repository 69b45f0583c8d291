"""`rfactor`: turn one reduce loop of a reduction into a spatial axis of a partial-result buffer.

Note: for a reduction block ``C`` with an associative-commutative combiner (sum, product, max,
min: detected from ``init`` = the combiner's identity and ``update`` = ``C[x] = op(C[x], rhs)``)
and a loop ``L`` that feeds only reduce variables, `rfactor(L, factor_axis)` builds

* ``C_rf`` (a new buffer: ``C``'s shape with ``extent(L)`` inserted at ``factor_axis``) and a
  block ``C_rf`` under the original loops. Its iteration variables are ``C``'s spatial ones plus
  one per loop that feeds a reduce variable — spatial for ``L``, reduce for the others — and its
  body is ``C``'s body with the reduce variables rewritten through those new variables, writing
  ``C_rf[..., vL, ...]``; it is a reduction block whose ``L`` axis can now be parallelized or
  vectorized;
* the write-back block (keeps the name ``C``) under copies of the loops that feed ``C``'s spatial
  variables plus a copy of ``L``: ``C[x] = op(C[x], C_rf[..., vL, ...])`` reducing over ``vL``.

It returns the ``C_rf`` block.

Example (before/after, with k split into ko, ki and rfactor(ki, 0))::

    for i, ko, ki in T.grid(16, 4, 4):            for i, ko, ki in T.grid(16, 4, 4):
        with T.block("C"):                           with T.block("C_rf"):  # vki spatial, vko reduce
            vk = T.axis.reduce(16, ko * 4 + ki)          C_rf[vki, vi] += A[vi, vko * 4 + vki]
            C[vi] += A[vi, vk]                →    for i, ki in T.grid(16, 4):
                                                       with T.block("C"): C[vi] += C_rf[vki, vi]
"""
from __future__ import annotations

from typing import Any, Optional

from ingot.ir.buffer import decl_buffer
from ingot.ir.expr import (
    Add, BufferLoad, FloatImm, IntImm, IterVar, Max, Min, Mul, PrimExpr, Range, Var, max_identity, max_value,
    min_identity, min_value,
)
from ingot.ir.functor import collect_vars, substitute
from ingot.ir.structural import structural_equal
from ingot.tir.stmt import Block, BlockRealize, BufferStore, For, ForKind, SeqStmt, Stmt

from ..analysis import block_kind, child_block_realizes, enclosing_loops, scope_block, writer_counts
from ..instruction import BlockRV, InstructionKind, LoopRV
from ..state import _Replacer
from .compute_inline import check_in_scope_body, refresh_regions
from .decompose_reduction import join_conjuncts, split_conjuncts

RFACTOR = InstructionKind("rfactor", inputs=("loop",), attrs=("factor_axis",))

# combiner class -> the identities accepted as its init (the first is canonical). A float max starts
# from -inf (te.max) or, in hand-written TIR, often from the lowest finite value: both are accepted and
# the rfactor block keeps the init it found.
_COMBINERS = {
    Add: (lambda dt: _const(0, dt),),
    Mul: (lambda dt: _const(1, dt),),
    Max: (max_identity, min_value),
    Min: (min_identity, max_value),
}


def _const(v: int, dtype: Any) -> PrimExpr:
    return FloatImm(dtype, float(v)) if dtype.is_float else IntImm(dtype, v)


def _is_const_equal(a: PrimExpr, b: PrimExpr) -> bool:
    return isinstance(a, (IntImm, FloatImm)) and isinstance(b, (IntImm, FloatImm)) and a.value == b.value


def detect_combiner(block: Block) -> "Optional[tuple[type, PrimExpr, PrimExpr, BufferStore]]":
    """(combiner class, identity, rhs, update store) of a reduction block, or None.

    Example:
        >>> # detect_combiner(matmul_block) -> (Add, 0.0, A[vi, vk] * B[vk, vj], store)
    """
    init, update = block.init, block.body
    if not (isinstance(init, BufferStore) and isinstance(update, BufferStore)):
        return None
    if init.buffer is not update.buffer or not structural_equal(tuple(init.indices), tuple(update.indices)):
        return None
    op = type(update.value)
    if op not in _COMBINERS:
        return None
    identities = [make(update.buffer.dtype) for make in _COMBINERS[op]]
    identity = next((i for i in identities if _is_const_equal(init.value, i)), None)
    if identity is None:
        return None

    def is_self(e: PrimExpr) -> bool:
        return isinstance(e, BufferLoad) and e.buffer is update.buffer and \
            structural_equal(tuple(e.indices), tuple(update.indices))

    a, b = update.value.a, update.value.b
    if is_self(a):
        rhs = b
    elif is_self(b):
        rhs = a
    else:
        return None
    from ingot.ir.functor import collect_loads

    if collect_loads(rhs, update.buffer):
        return None
    return op, identity, rhs, update


def rfactor(sch: Any, loop: LoopRV, factor_axis: int) -> BlockRV:
    """Factor the reduce loop ``loop`` out into a new axis of a partial-result buffer; returns the
    rfactor block (the write-back block keeps the original name).

    Example:
        >>> # rf = sch.rfactor(ki, factor_axis=0)   # trace: b5 = sch.rfactor(loop=l4, factor_axis=0)
    """
    # Step 1. The loop feeds reduce variables of exactly one reduction block with a known combiner.
    lsref = sch._loop(loop, "rfactor")
    lvar = lsref.stmt.loop_var
    realizes = child_block_realizes(lsref.stmt)
    if len(realizes) != 1:
        sch._raise(f"rfactor: loop {lvar.name!r} holds {len(realizes)} blocks", "it must hold exactly one "
                   "reduction block", lsref.func_name, [lsref.stmt])
    realize = realizes[0]
    blk: Block = realize.block
    sref = sch.state.sref_of(lsref.func_name, blk)
    check_in_scope_body(sch, sref, "rfactor")
    if block_kind(blk, writer_counts(scope_block(sref))) != "reduction":
        sch._raise(f"rfactor: block {blk.name_hint!r} is not a reduction block",
                   "rfactor applies to a reduction with init (before decompose_reduction)", lsref.func_name, [blk])
    found = detect_combiner(blk)
    if found is None:
        sch._raise(f"rfactor: block {blk.name_hint!r} has no recognized combiner",
                   "the init must be the identity and the update `X[i] = op(X[i], rhs)` with op one of "
                   "+, *, max, min and rhs not reading X", lsref.func_name, [blk])
    op, identity, rhs, update = found
    loops = enclosing_loops(sref)
    spatial_loops = {id(v) for iv, b in zip(blk.iter_vars, realize.iter_values) if iv.kind == "S"
                     for v in collect_vars(b)}
    reduce_loops = {id(v) for iv, b in zip(blk.iter_vars, realize.iter_values) if iv.kind == "R"
                    for v in collect_vars(b)}
    if id(lvar) not in reduce_loops or id(lvar) in spatial_loops:
        sch._raise(f"rfactor: loop {lvar.name!r} is not bound to reduce variables only of block {blk.name_hint!r}",
                   "pick a loop that feeds only the reduction's reduce variables", lsref.func_name,
                   [lsref.stmt, blk])
    if spatial_loops & reduce_loops:
        sch._raise(f"rfactor: block {blk.name_hint!r} has a loop feeding both spatial and reduce variables",
                   "rfactor needs separate spatial and reduce loops", lsref.func_name, [blk])
    out = update.buffer
    ndim = out.ndim
    if not -ndim - 1 <= factor_axis <= ndim:
        raise ValueError(f"rfactor: factor_axis {factor_axis} is out of range for buffer {out.name!r} with {ndim} "
                         f"dims; use a value in [{-ndim - 1}, {ndim}]")
    axis = factor_axis if factor_axis >= 0 else factor_axis + ndim + 1
    rf_extent = lsref.stmt.extent

    # Step 2. The rfactor buffer and block: one new iteration variable per reduce-feeding loop.
    taken = set(sch.state.blocks(sref.func_name))
    rf_name = f"{blk.name_hint}_rf"
    if rf_name in taken:
        sch._raise(f"rfactor: a block named {rf_name!r} already exists", "rename it first", sref.func_name, [blk])
    rf_buf = decl_buffer(tuple(out.shape[:axis]) + (rf_extent,) + tuple(out.shape[axis:]), out.dtype,
                         f"{out.name}_rf", scope=out.scope)
    new_vars: dict[Var, Var] = {}
    rf_ivs, rf_vals = [], []
    for iv, b in zip(blk.iter_vars, realize.iter_values):
        if iv.kind == "S":
            rf_ivs.append(iv)
            rf_vals.append(b)
    for s in loops:
        v = s.stmt.loop_var
        if id(v) in reduce_loops:
            nv = Var(f"v{v.name}", v.dtype)
            new_vars[v] = nv
            rf_ivs.append(IterVar(Range.from_min_extent(s.stmt.min, s.stmt.extent), nv, "S" if v is lvar else "R"))
            rf_vals.append(v)
    reduce_map = {iv.var: substitute(b, new_vars) for iv, b in zip(blk.iter_vars, realize.iter_values)
                  if iv.kind == "R"}
    v_rf = new_vars[lvar]
    rf_index = list(update.indices[:axis]) + [v_rf] + list(update.indices[axis:])
    rf_load = BufferLoad(rf_buf, rf_index)
    rf_block = Block(rf_ivs, [], [], rf_name,
                     BufferStore(rf_buf, op(rf_load, substitute(rhs, reduce_map)), rf_index),
                     init=BufferStore(rf_buf, identity, rf_index))
    rf_block = refresh_regions(rf_block)

    # Step 3. The write-back block under copies of the spatial loops and of the rfactor loop.
    copies = {s.stmt.loop_var: Var(s.stmt.loop_var.name, s.stmt.loop_var.dtype) for s in loops
              if id(s.stmt.loop_var) in spatial_loops or s.stmt.loop_var is lvar}
    wb_ivs, wb_vals, fresh = [], [], {}
    for iv, b in zip(blk.iter_vars, realize.iter_values):
        if iv.kind == "S":
            fresh[iv.var] = Var(iv.var.name, iv.var.dtype)
            wb_ivs.append(IterVar(iv.dom, fresh[iv.var], "S"))
            wb_vals.append(substitute(b, copies))
    wb_rf = Var(f"v{lvar.name}", lvar.dtype)
    wb_ivs.append(IterVar(Range.from_min_extent(lsref.stmt.min, rf_extent), wb_rf, "R"))
    wb_vals.append(copies[lvar])
    out_index = [substitute(i, fresh) for i in update.indices]
    wb_index = out_index[:axis] + [wb_rf] + out_index[axis:]
    wb_block = refresh_regions(Block(wb_ivs, [], [], blk.name_hint,
                                     BufferStore(out, op(BufferLoad(out, out_index), BufferLoad(rf_buf, wb_index)),
                                                 out_index),
                                     init=substitute(blk.init, fresh)))
    dropped = {id(s.stmt.loop_var) for s in loops} - {id(v) for v in copies}
    pred = [c for c in split_conjuncts(realize.predicate) if not any(id(x) in dropped for x in collect_vars(c))]
    wb: Stmt = BlockRealize(wb_vals, substitute(join_conjuncts(pred), copies), wb_block)
    for s in reversed(loops):
        if s.stmt.loop_var in copies:
            node: For = s.stmt
            wb = For(copies[node.loop_var], node.min, node.extent, ForKind.SERIAL, wb)

    # Step 4. Install: the rf block replaces the original; the write-back nest follows its nest.
    scope = scope_block(sref)
    items = list(scope.stmt.body.seq) if isinstance(scope.stmt.body, SeqStmt) else [scope.stmt.body]
    top = next(k for k, item in enumerate(items) if any(r is realize for r in child_block_realizes(item)))
    others = [r for r in child_block_realizes(items[top]) if r is not realize]
    if any(any(x.buffer is out for x in r.block.reads + r.block.writes) for r in others):
        sch._raise(f"rfactor: another block in the loop nest of {blk.name_hint!r} uses {out.name!r}",
                   "the write-back is placed after the nest; move that block out first", sref.func_name, [blk])
    new_realize = BlockRealize(rf_vals, realize.predicate, rf_block)
    items[top] = _Replacer({id(realize): new_realize}).visit(items[top])
    items.insert(top + 1, wb)
    new_scope = scope.stmt.replace(body=SeqStmt(items), alloc_buffers=scope.stmt.alloc_buffers + (rf_buf,))
    sch.state.replace(sref.func_name, scope.stmt, new_scope)
    result = sch._new_rv(BlockRV, sch.state.block_sref(sref.func_name, rf_name))
    sch._record(RFACTOR, [loop], [int(factor_axis)], [result])
    return result
