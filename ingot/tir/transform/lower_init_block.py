"""LowerInitBlock: turn a reduction block's ``init`` into a statement that runs before the reduction.

Note: the init of a reduction block in a perfect loop nest is *hoisted* right before the outermost
loop that a reduce binding reads, as its own block ``<name>_init`` bound to the spatial iteration
variables, inside fresh copies of the loops below that point which feed spatial bindings (like
``decompose_reduction``). The usual nest ``for i: for k: C[i] += ...`` gets ``C_init`` before ``k``; a
column reduction ``for k: for j: S[j] += A[k, j]`` (and rfactor's ``S_rf``) gets ``for j_init: S_init``
before ``k``. Either way the init runs even when the reduce loops have zero trips: a reduce axis whose
run-time size is 0 gives the identity, not left-over memory. The guard below remains only where the
init cannot be separated (thread-bound loops, whose copies would race with the reduction; a predicate
conjunct mixing spatial and reduce loops when the spatial bindings cannot be proven in range without
it; non-perfect nests).

Guard fallback: a reduction block's ``init`` runs when every reduce iteration variable is at the minimum of
its domain (the first step of the reduction for each output element). Lowering it in place keeps
the block's iteration structure: ``init`` becomes ``if (k == k_min and ...): init`` placed before
the body. After `ConvertBlocksToLoops` substitutes the bindings, the guard reads in loop
variables (``k0 * 4 + k1 == 0``) and `Simplify` cleans it. A reduction that has been split by
``decompose_reduction`` has no ``init`` left, so this pass does not touch it.

Example (TVMScript):

    before:  with T.block("C"):
                 vi, vk = T.axis.remap("SR", [i, k])
                 with T.init(): C[vi] = 0.0
                 C[vi] = C[vi] + A[vi, vk]
    after (hoisted, loops i / k):
             for i:
                 with T.block("C_init"):
                     vi = T.axis.spatial(..., i)
                     C[vi] = 0.0
                 for k:
                     with T.block("C"):
                         vi, vk = T.axis.remap("SR", [i, k])
                         C[vi] = C[vi] + A[vi, vk]
    after (guard fallback):
             with T.block("C"):
                 vi, vk = T.axis.remap("SR", [i, k])
                 if vk == 0: C[vi] = 0.0
                 C[vi] = C[vi] + A[vi, vk]
"""
from __future__ import annotations

from ingot.ir import Var, structural_equal
from ingot.ir.expr import And, Range
from ingot.ir.functor import Mutator, collect_vars, substitute

from .. import op
from ..function import PrimFunc
from ..stmt import Block, BlockRealize, For, IfThenElse, SeqStmt
from ._arith import Analyzer
from .base import prim_func_pass

__all__ = ["LowerInitBlock", "lower_init_block"]


def lower_init_block(block: Block) -> Block:
    """``block`` with its ``init`` moved into the body under the first-reduction-step guard.

    Example:
        >>> # see the module docstring for before/after IR
    """
    if block.init is None:
        return block
    reduce_vars = [iv for iv in block.iter_vars if iv.kind == "R"]
    conds = [iv.var == iv.dom.min for iv in reduce_vars]
    init = block.init if not conds else IfThenElse(op.all(*conds), block.init)
    return block.replace(init=None, body=SeqStmt.flatten(init, block.body))


def _conjuncts(pred) -> list:
    """The terms of ``pred``'s top-level ``and`` chain."""
    if isinstance(pred, And):
        return _conjuncts(pred.a) + _conjuncts(pred.b)
    return [pred]


def _bindings_in_domain(loops: "list[For]", spatial: list) -> bool:
    """Whether each ``(iter_var, value)`` stays in ``iter_var``'s domain over the ranges of ``loops``."""
    ana = Analyzer()
    by_var = {}
    for f in loops:
        ana.bind(f.loop_var, Range(f.min, f.extent))
        by_var[f.loop_var] = f
    for iv, value in spatial:
        f = by_var.get(value) if isinstance(value, Var) else None
        if f is not None and structural_equal(f.min, iv.dom.min) and structural_equal(f.extent, iv.dom.extent):
            continue   # bound to a loop over exactly its domain (symbolic extents defeat the prover)
        lo, hi = iv.dom.min, iv.dom.min + iv.dom.extent
        if not (ana.can_prove(value >= lo) and ana.can_prove(value < hi)):
            return False
    return True


def _hoist_init(loops: "list[For]", realize: BlockRealize):
    """The loop nest ``loops`` around ``realize`` with the init hoisted before the outermost reduce loop.

    The init gets its own nest of the loops (under that point) that feed spatial bindings; loops that
    feed reduce bindings only are dropped, so a zero-trip reduce loop no longer skips the init. A loop
    feeding both (a fused spatial x reduce loop) is kept: the init then runs several times per output
    element, which is harmless since it only stores the identity. None when the init cannot be
    separated (a dropped loop read by the predicate or by a kept loop's bounds, or thread-bound loops
    whose copies would race), and the guard fallback applies.
    """
    block = realize.block
    loop_vars = [f.loop_var for f in loops]
    spatial_uses: set = set()
    reduce_uses: set = set()
    for iv, value in zip(block.iter_vars, realize.iter_values):
        (reduce_uses if iv.kind == "R" else spatial_uses).update(collect_vars(value))
    # Step 1: the outermost loop a reduce binding reads: the init goes right before it (loops above
    # it feed spatial bindings only, so each output element is initialised once per reduction).
    first = next((d for d, v in enumerate(loop_vars) if v in reduce_uses), None)
    if first is None:
        return None
    if any(f.thread_binding is not None for f in loops[first:]):
        return None
    # Step 2: the init's own loops: those of the suffix that spatial bindings read.
    kept = [f for f in loops[first:] if f.loop_var in spatial_uses]
    dropped = {f.loop_var for f in loops[first:]} - {f.loop_var for f in kept}
    for f in kept:
        if dropped & set(collect_vars(f.min)) or dropped & set(collect_vars(f.extent)):
            return None
    # Step 3: the init's predicate: the conjuncts free of dropped loops (an out-of-range spatial
    # tile must not be written); conjuncts on dropped loops only bound the reduction and are left
    # out. A conjunct reading both (rfactor's `k0 * 4 + k1 < n`, k1 spatial in the rf block) is
    # left out too when every spatial binding provably stays inside its iteration domain without it.
    spatial = [(iv, value) for iv, value in zip(block.iter_vars, realize.iter_values) if iv.kind != "R"]
    pred, mixed = [], False
    for c in _conjuncts(realize.predicate):
        used = set(collect_vars(c))
        if not used & dropped:
            pred.append(c)
        elif used & {f.loop_var for f in kept}:
            mixed = True
    if mixed and not _bindings_in_domain(loops[:first] + kept, spatial):
        return None
    init_block = Block([iv for iv, _ in spatial], (), block.writes, block.name_hint + "_init", block.init)
    init = BlockRealize([value for _, value in spatial], op.all(*pred) if pred else True, init_block)
    # The copies define fresh loop variables (the IR keeps one definition per variable).
    fresh = {f.loop_var: Var(f.loop_var.name + "_init", f.loop_var.dtype) for f in kept}
    init = substitute(init, fresh)
    for f in reversed(kept):
        init = f.replace(loop_var=fresh[f.loop_var], min=substitute(f.min, fresh),
                         extent=substitute(f.extent, fresh), body=init)
    # Step 4: rebuild the nest: prefix loops / (init nest; suffix loops / block without init).
    inner = realize.replace(block=block.replace(init=None))
    for f in reversed(loops[first:]):
        inner = f.replace(body=inner)
    stmt = SeqStmt.flatten(init, inner)
    for f in reversed(loops[:first]):
        stmt = f.replace(body=stmt)
    return stmt


class _Lower(Mutator):
    def visit_For(self, node: For):
        # A perfect loop nest ending in a reduction block: try to hoist its init (module docstring).
        loops, body = [node], node.body
        while isinstance(body, For):
            loops.append(body)
            body = body.body
        if isinstance(body, BlockRealize) and body.block.init is not None:
            hoisted = _hoist_init(loops, body)
            if hoisted is not None:
                return self.generic_visit(hoisted)
        return self.generic_visit(node)

    def visit_Block(self, block: Block) -> Block:
        block = self.generic_visit(block)
        return lower_init_block(block)


def LowerInitBlock():  # noqa: N802 - TVM's pass names are CamelCase factories
    """The pass lowering every reduction ``init`` of every PrimFunc (see module docstring).

    Example:
        >>> p = LowerInitBlock()
        >>> p.info.name
        'LowerInitBlock'
    """

    def transform(func: PrimFunc, mod, ctx) -> PrimFunc:
        return func.with_body(_Lower().visit(func.body))

    return prim_func_pass(transform, opt_level=0, name="LowerInitBlock")
