"""`decompose_reduction`: move a reduction block's ``init`` into its own block before a loop.

Note: the reduction block ``C`` (with ``init``) under loop ``L`` becomes two blocks: ``C_init``,
placed right before ``L``, whose loops are copies of the loops from ``L`` down to ``C`` that the
*spatial* bindings use (loops feeding only reduce variables are dropped), and ``C`` itself without
``init``. Preconditions (TENSORIR.md §2): ``C`` is a reduction block, ``L`` encloses it, and no loop
above ``L`` feeds a reduce variable (the init would be re-run inside the reduction).
Afterwards ``C`` is neither complete nor a reduction block, so parallelize/vectorize first.

Example (before/after, at loop k's parent j)::

    for i, j, k in T.grid(16, 16, 16):          for i in range(16):
        with T.block("C"):                          for j in range(16):
            with T.init(): C[vi, vj] = 0.0              with T.block("C_init"): C[vi, vj] = 0.0
            C[vi, vj] += A[vi, vk] * B[vk, vj]      for j, k in T.grid(16, 16):
                                                        with T.block("C"): C[vi, vj] += ...
"""
from __future__ import annotations

from typing import Any

from ingot.ir.expr import And, IntImm, IterVar, Var, as_const_int
from ingot.ir.functor import collect_vars, substitute
from ingot.tir.stmt import Block, BlockRealize, For, SeqStmt

from ..analysis import block_kind, enclosing_loops, is_ancestor, scope_block, writer_counts
from ..instruction import BlockRV, InstructionKind, LoopRV
from ..state import _Replacer
from .compute_inline import refresh_regions

DECOMPOSE_REDUCTION = InstructionKind("decompose_reduction", inputs=("block", "loop"))


def split_conjuncts(cond: Any) -> list:
    """``a and b and c`` as ``[a, b, c]`` (a constant True gives ``[]``)."""
    if as_const_int(cond) == 1:
        return []
    if isinstance(cond, And):
        return split_conjuncts(cond.a) + split_conjuncts(cond.b)
    return [cond]


def join_conjuncts(conds: list) -> Any:
    """The conjunction of ``conds`` (True for none)."""
    if not conds:
        return IntImm("bool", 1)
    out = conds[0]
    for c in conds[1:]:
        out = And(out, c)
    return out


def decompose_reduction(sch: Any, block: BlockRV, loop: LoopRV) -> BlockRV:
    """Split the reduction ``block`` into an init block placed before ``loop`` and an update block.

    Returns the init block.

    Example:
        >>> # init = sch.decompose_reduction(b0, k)   # trace: b5 = sch.decompose_reduction(block=b0, loop=l3)
    """
    # Step 1. Checks: a reduction block with an init; the loop encloses it.
    sref = sch._block(block, "decompose_reduction")
    lsref = sch._loop(loop, "decompose_reduction")
    blk: Block = sref.stmt
    if blk.init is None:
        sch._raise(f"decompose_reduction: block {blk.name_hint!r} has no init",
                   "only a reduction block (with T.init()) can be decomposed; it may have been decomposed already",
                   sref.func_name, [blk])
    if block_kind(blk, writer_counts(scope_block(sref))) != "reduction":
        sch._raise(f"decompose_reduction: block {blk.name_hint!r} is not a reduction block",
                   "its reduce variables must not index the output and it must be the only writer of it",
                   sref.func_name, [blk])
    if not is_ancestor(lsref, sref):
        sch._raise(f"decompose_reduction: loop {lsref.stmt.loop_var.name!r} does not enclose block "
                   f"{blk.name_hint!r}", "pass one of the loops returned by get_loops(block)",
                   sref.func_name, [lsref.stmt, blk])
    loops = enclosing_loops(sref)
    inner = loops[[id(x) for x in loops].index(id(lsref)):]
    realize = sref.realize
    reduce_loops = {id(v) for iv, b in zip(blk.iter_vars, realize.iter_values) if iv.kind == "R"
                    for v in collect_vars(b)}
    above = [s for s in loops[: len(loops) - len(inner)] if id(s.stmt.loop_var) in reduce_loops]
    if above:
        sch._raise(f"decompose_reduction: loop {above[0].stmt.loop_var.name!r} above loop "
                   f"{lsref.stmt.loop_var.name!r} feeds a reduce variable of block {blk.name_hint!r}",
                   "the init would run again in every iteration of that loop; decompose at a loop outside "
                   "all reduce loops", sref.func_name, [above[0].stmt, lsref.stmt])

    # Step 2. The init block: spatial iteration variables with the same bindings.
    spatial = [(iv, v) for iv, v in zip(blk.iter_vars, realize.iter_values) if iv.kind == "S"]
    used = {id(x) for _, v in spatial for x in collect_vars(v)}
    kept = [s for s in inner if id(s.stmt.loop_var) in used]
    new_vars = {s.stmt.loop_var: Var(f"{s.stmt.loop_var.name}_init", s.stmt.loop_var.dtype) for s in kept}
    ivars = [IterVar(iv.dom, Var(f"{iv.var.name}_init", iv.var.dtype), "S") for iv, _ in spatial]
    vmap = {iv.var: niv.var for (iv, _), niv in zip(spatial, ivars)}
    init_body = substitute(blk.init, vmap)
    init_block = Block(ivars, [], [w.replace(region=tuple(substitute(r, vmap) for r in w.region))
                                   for w in blk.writes], f"{blk.name_hint}_init", init_body)
    # Keep the predicate conjuncts that only mention kept or outer loops (a reduce split's guard goes).
    dropped = {id(s.stmt.loop_var) for s in inner if s not in kept}
    pred = [c for c in split_conjuncts(realize.predicate) if not any(id(x) in dropped for x in collect_vars(c))]
    stmt: Any = BlockRealize([substitute(v, new_vars) for _, v in spatial],
                             substitute(join_conjuncts(pred), new_vars), init_block)
    for s in reversed(kept):
        node: For = s.stmt
        stmt = For(new_vars[node.loop_var], node.min, node.extent, node.kind, stmt,
                   thread_binding=node.thread_binding, annotations=node.annotations)

    # Step 3. The update block loses its init; the init nest goes right before the loop.
    taken = set(sch.state.blocks(sref.func_name))
    if init_block.name_hint in taken:
        sch._raise(f"decompose_reduction: a block named {init_block.name_hint!r} already exists",
                   "rename it first", sref.func_name, [blk])
    # Without its init the update reads its own output: its regions say so (as TVM's do).
    new_loop = _Replacer({id(blk): refresh_regions(blk.replace(init=None))}).visit(lsref.stmt)
    sch.state.replace(sref.func_name, lsref.stmt, SeqStmt([stmt, new_loop]))
    out = sch._new_rv(BlockRV, sch.state.block_sref(sref.func_name, init_block.name_hint))
    sch._record(DECOMPOSE_REDUCTION, [block, loop], [], [out])
    return out
