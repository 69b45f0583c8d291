"""`blockize` and `tensorize`: wrap a loop subtree in an outer block; replace it by a tensor intrinsic.

Note: `blockize(L)` needs exactly one block ``X`` under ``L``. Its bindings are divided by
`ingot.arith.subspace_divide` into a part from the loops outside ``L`` and a part from the loops
inside (``vi = io * 16 + ii`` → outer ``io``, inner ``ii``); a binding that mixes them (an inner
digit above an outer one) is refused. The outer block ``X_o`` gets one iteration variable per
non-trivial outer part (same kind), bound to it; inside, ``X`` is rebound to
``vio * inner_extent + inner``. A reduction's ``init`` moves to ``X_o``'s init as a loop nest over
the inner spatial extents with a block ``X_init``. Regions of ``X_o`` are inferred.

`tensorize(block_or_loop, name)` (a loop is blockized first) matches the outer block's body
against the intrinsic's description (`tensor_intrin.TensorIntrin`): loops pairwise with equal
extents, blocks with the same number of *varying* iteration variables (those bound to the inner
loops; the others are fixed for the tile), and expressions node by node; each description buffer
maps to one real buffer with a constant-per-tile offset per dimension (leading extra dimensions
of the real buffer are fixed indices). The body is then replaced by the implementation's, whose
parameter buffers are bound to the matched regions by ``match_buffers``.

Example (blockize at j1, before/after)::

    for i, j0, j1 in T.grid(16, 4, 16):         for i, j0 in T.grid(16, 4):
        with T.block("C"):                          with T.block("C_o"):
            vj = T.axis.spatial(64, j0 * 16 + j1)       vjo = T.axis.spatial(4, j0)
                                                        for j1 in range(16):
                                                            with T.block("C"): vj = vjo * 16 + j1
"""
from __future__ import annotations

from typing import Any, Optional

from ingot.ir.buffer import BufferRegion, MatchBufferRegion, decl_buffer
from ingot.ir.expr import BufferLoad, IntImm, IterVar, PrimExpr, Range, Var, as_const_int
from ingot.ir.functor import Mutator, collect_vars, substitute
from ingot.tir.stmt import Block, BlockRealize, BufferStore, For, ForKind, SeqStmt, Stmt

from ..analysis import child_block_realizes, enclosing_loops, loop_domains
from ..instruction import BlockRV, InstructionKind, LoopRV
from .compute_inline import refresh_regions
from .decompose_reduction import join_conjuncts, split_conjuncts

BLOCKIZE = InstructionKind("blockize", inputs=("target",), attrs=("preserve_unit_iters",))
TENSORIZE = InstructionKind("tensorize", inputs=("block_or_loop",), attrs=("tensor_intrin", "preserve_unit_iters"))


def _blockize(sch: Any, lsref: Any, preserve_unit_iters: bool) -> str:
    """Blockize the subtree of loop ``lsref`` (no recording); returns the outer block's name."""
    from ingot.arith import Analyzer, subspace_divide

    # Step 1. One block under the loop; divide its bindings into outer and inner parts.
    realizes = child_block_realizes(lsref.stmt)
    if len(realizes) != 1:
        sch._raise(f"blockize: loop {lsref.stmt.loop_var.name!r} holds {len(realizes)} blocks",
                   "blockize needs exactly one block under the loop", lsref.func_name, [lsref.stmt])
    realize = realizes[0]
    blk: Block = realize.block
    bsref = sch.state.sref_of(lsref.func_name, blk)
    loops = enclosing_loops(bsref)
    k = [id(x) for x in loops].index(id(lsref))
    inner_loops = loops[k:]
    inner_ids = {id(s.stmt.loop_var) for s in inner_loops}
    outer_pred, inner_pred = [], []
    for c in split_conjuncts(realize.predicate):
        used = {id(v) for v in collect_vars(c)}
        if used & inner_ids and used - inner_ids:
            sch._raise(f"blockize: the predicate {c} of block {blk.name_hint!r} mixes loops inside and outside "
                       f"loop {lsref.stmt.loop_var.name!r}", "blockize at a loop that the split predicate does not "
                       "cross", lsref.func_name, [blk])
        (inner_pred if used & inner_ids else outer_pred).append(c)
    dom = loop_domains(loops)
    parts = subspace_divide(list(realize.iter_values), dom, [s.stmt.loop_var for s in inner_loops],
                            join_conjuncts(inner_pred))
    if parts is None:
        sch._raise(f"blockize: the bindings of block {blk.name_hint!r} cannot be divided at loop "
                   f"{lsref.stmt.loop_var.name!r}", "each binding must be (outer loops) * extent + (inner loops); "
                   "reorder so the inner loops are innermost", lsref.func_name, [lsref.stmt, blk])

    # Step 2. Outer iteration variables; the inner block rebound through them.
    ana = Analyzer()
    for var, rng in dom.items():
        ana.bind(var, rng, allow_override=True)
    outer_ivs, outer_vals, inner_vals, outer_of = [], [], [], {}
    for iv, ((o_expr, o_ext), (i_expr, i_ext)) in zip(blk.iter_vars, parts):
        o_expr = ana.simplify(o_expr)
        if o_ext != 1 or (preserve_unit_iters and as_const_int(o_expr) is None):
            ov = Var(f"{iv.var.name}_o", iv.var.dtype)
            outer_ivs.append(IterVar(Range.from_min_extent(IntImm(iv.var.dtype, 0), o_ext), ov, iv.kind))
            outer_vals.append(o_expr)
            outer_of[id(iv.var)] = (ov, i_ext)
            inner_vals.append(ana.simplify(ov * i_ext + i_expr))
        else:
            if as_const_int(o_expr) is None:
                sch._raise(f"blockize: binding of {iv.var.name!r} has an outer part {o_expr} of extent 1",
                           "use preserve_unit_iters=True", lsref.func_name, [blk])
            inner_vals.append(ana.simplify(o_expr * i_ext + i_expr))
    init: Optional[Stmt] = None
    if blk.init is not None:
        # Step 3. The init nest: loops over the inner extents of the spatial variables.
        ivs, vals, loops_init = [], [], []
        for iv, ((o_expr, _o), (_i, i_ext)) in zip(blk.iter_vars, parts):
            if iv.kind != "S":
                continue
            nv = Var(f"{iv.var.name}_init", iv.var.dtype)
            ivs.append(IterVar(iv.dom, nv, "S"))
            base = outer_of[id(iv.var)][0] * i_ext if id(iv.var) in outer_of else ana.simplify(o_expr) * i_ext
            if i_ext != 1:
                w = Var(f"{iv.var.name}_i_init", iv.var.dtype)
                loops_init.append((w, i_ext))
                vals.append(ana.simplify(base + w))
            else:
                vals.append(ana.simplify(base))
        vmap = {iv.var: n.var for iv, n in zip([x for x in blk.iter_vars if x.kind == "S"], ivs)}
        init_block = refresh_regions(Block(ivs, [], [], f"{blk.name_hint}_init", substitute(blk.init, vmap)))
        init = BlockRealize(vals, True, init_block)
        for w, ext in reversed(loops_init):
            init = For(w, 0, ext, ForKind.SERIAL, init)
    new_inner = BlockRealize(inner_vals, join_conjuncts(inner_pred), blk.replace(init=None))
    from ..state import _Replacer

    body = _Replacer({id(realize): new_inner}).visit(lsref.stmt)
    name = f"{blk.name_hint}_o"
    if name in sch.state.blocks(lsref.func_name) or (init is not None and
                                                    f"{blk.name_hint}_init" in sch.state.blocks(lsref.func_name)):
        sch._raise(f"blockize: a block named {name!r} (or its init) already exists", "rename it first",
                   lsref.func_name, [blk])
    outer = refresh_regions(Block(outer_ivs, [], [], name, body, init=init))
    sch.state.replace(lsref.func_name, lsref.stmt, BlockRealize(outer_vals, join_conjuncts(outer_pred), outer))
    return name


def blockize(sch: Any, target: LoopRV, preserve_unit_iters: bool = True) -> BlockRV:
    """Wrap the subtree under loop ``target`` into a new outer block; returns it.

    Example:
        >>> # outer = sch.blockize(j1)        # trace: b5 = sch.blockize(target=l4, preserve_unit_iters=True)
    """
    lsref = sch._loop(target, "blockize", "target")
    name = _blockize(sch, lsref, preserve_unit_iters)
    out = sch._new_rv(BlockRV, sch.state.block_sref(lsref.func_name, name))
    sch._record(BLOCKIZE, [target], [bool(preserve_unit_iters)], [out])
    return out


class _NoMatch(Exception):
    pass


class _Matcher:
    """Structural match of a scheduled subtree (``a``) against an intrinsic description (``d``)."""

    def __init__(self) -> None:
        from ingot.arith import Analyzer

        self.ana = Analyzer()
        self.var_map: dict[Var, PrimExpr] = {}
        self.inner: set[int] = set()  # ids of actual inner loop vars and varying iteration vars
        self.fixed: dict[Var, PrimExpr] = {}  # actual fixed iteration var -> outer-block expression
        self.buffers: dict[int, tuple[Any, Any, list, list]] = {}  # id(desc buf) -> (desc, real, lead, offsets)

    def fail(self, why: str) -> None:
        raise _NoMatch(why)

    def stmt(self, a: Stmt, d: Stmt) -> None:
        if type(a) is not type(d):
            self.fail(f"{type(a).__name__} where the intrinsic has {type(d).__name__}")
        if isinstance(d, For):
            if not (self.ana.can_prove_equal(a.extent, d.extent) and self.ana.can_prove_equal(a.min, d.min)):
                self.fail(f"loop {a.loop_var.name} has extent {a.extent}, the intrinsic's loop {d.extent}")
            self.var_map[d.loop_var] = a.loop_var
            self.inner.add(id(a.loop_var))
            self.stmt(a.body, d.body)
        elif isinstance(d, SeqStmt):
            if len(a.seq) != len(d.seq):
                self.fail("different number of statements")
            for x, y in zip(a.seq, d.seq):
                self.stmt(x, y)
        elif isinstance(d, BlockRealize):
            self.realize(a, d)
        elif isinstance(d, BufferStore):
            self.access(a.buffer, a.indices, d.buffer, d.indices)
            self.expr(a.value, d.value)
        else:
            self.fail(f"unsupported statement {type(d).__name__} in the intrinsic description")

    def realize(self, a: BlockRealize, d: BlockRealize) -> None:
        if as_const_int(a.predicate) != 1 or as_const_int(d.predicate) != 1:
            self.fail("predicated blocks are not matched")
        varying = []
        for iv, val in zip(a.block.iter_vars, a.iter_values):
            if any(id(v) in self.inner for v in collect_vars(val)):
                varying.append((iv, val))
            else:
                self.fixed[iv.var] = val
        if len(varying) != len(d.block.iter_vars):
            self.fail(f"block {a.block.name_hint!r} varies over {len(varying)} iteration variables in the tile, "
                      f"the intrinsic over {len(d.block.iter_vars)}")
        for (aiv, aval), div, dval in zip(varying, d.block.iter_vars, d.iter_values):
            if aiv.kind != div.kind:
                self.fail(f"iteration variable {aiv.var.name} is {aiv.kind}, the intrinsic's {div.var.name} {div.kind}")
            offset = self.ana.simplify(aval - substitute(dval, self.var_map))
            if any(id(v) in self.inner for v in collect_vars(offset)):
                self.fail(f"binding {aval} is not the intrinsic's {dval} plus a per-tile offset")
            self.var_map[div.var] = aiv.var - offset
            self.inner.add(id(aiv.var))
        if (a.block.init is None) != (d.block.init is None):
            self.fail("one block has an init and the other not (decompose_reduction first)")
        if d.block.init is not None:
            self.stmt(a.block.init, d.block.init)
        self.stmt(a.block.body, d.block.body)

    def _outer(self, e: PrimExpr) -> PrimExpr:
        e = self.ana.simplify(substitute(e, self.fixed))
        if any(id(v) in self.inner for v in collect_vars(e)):
            self.fail(f"index part {e} varies inside the tile")
        return e

    def access(self, abuf: Any, aidx: tuple, dbuf: Any, didx: tuple) -> None:
        if abuf.dtype != dbuf.dtype or len(aidx) < len(didx):
            self.fail(f"buffer {abuf.name} ({abuf.dtype}, {len(aidx)} dims) does not fit the intrinsic's "
                      f"{dbuf.name} ({dbuf.dtype}, {len(didx)} dims)")
        lead_n = len(aidx) - len(didx)
        lead = [self._outer(x) for x in aidx[:lead_n]]
        offsets = [self._outer(x - substitute(y, self.var_map)) for x, y in zip(aidx[lead_n:], didx)]
        seen = self.buffers.get(id(dbuf))
        if seen is None:
            self.buffers[id(dbuf)] = (dbuf, abuf, lead, offsets)
            return
        if seen[1] is not abuf or not all(self.ana.can_prove_equal(p, q) for p, q in
                                          zip(seen[2] + seen[3], lead + offsets)):
            self.fail(f"intrinsic buffer {dbuf.name} is matched to two different regions")

    def expr(self, a: PrimExpr, d: PrimExpr) -> None:
        if isinstance(d, BufferLoad):
            if not isinstance(a, BufferLoad):
                self.fail(f"{a} where the intrinsic loads {d}")
            self.access(a.buffer, a.indices, d.buffer, d.indices)
            return
        if isinstance(d, Var):
            expected = self.var_map.get(d, d)
            if not self.ana.can_prove_equal(a, expected):
                self.fail(f"{a} where the intrinsic has {d}")
            return
        if type(a) is not type(d):
            self.fail(f"{a} ({type(a).__name__}) where the intrinsic has {d} ({type(d).__name__})")
        for name in d._fields:
            x, y = getattr(a, name), getattr(d, name)
            if isinstance(y, PrimExpr):
                self.expr(x, y)
            elif isinstance(y, tuple):
                if len(x) != len(y):
                    self.fail(f"{a} and {d} differ in arity")
                for p, q in zip(x, y):
                    self.expr(p, q)
            elif x != y:
                self.fail(f"{a} and {d} differ in {name}")


def _rename_blocks(stmt: Stmt, taken: set, suffix: str) -> Stmt:
    class _Rename(Mutator):
        def visit_Block(self, node: Block) -> Any:
            node = self.generic_visit(node)
            name = f"{node.name_hint}_{suffix}"
            k = 0
            while name in taken:
                k += 1
                name = f"{node.name_hint}_{suffix}{k}"
            taken.add(name)
            return node.replace(name_hint=name)

    return _Rename().visit(stmt)


def tensorize(sch: Any, block_or_loop: Any, tensor_intrin: str, preserve_unit_iters: bool = True) -> None:
    """Replace a block (or the subtree of a loop, blockized first) by the tensor intrinsic
    ``tensor_intrin``'s implementation, after matching its description.

    Example:
        >>> # sch.tensorize(j1, "avx512_fma_f32x16")
        >>> # trace: sch.tensorize(block_or_loop=l4, tensor_intrin="avx512_fma_f32x16", preserve_unit_iters=True)
    """
    from ..tensor_intrin import TensorIntrin

    # Step 1. The outer block (blockize a loop first) and the intrinsic.
    intrin = TensorIntrin.get(tensor_intrin)
    sref = sch._block_or_loop(block_or_loop, "tensorize")
    func_name = sref.func_name
    # A refusal after blockizing a loop leaves nothing behind: Schedule rolls the whole primitive
    # back (state, handles, trace) on any exception, so no manual restore is needed here.
    if isinstance(sref.stmt, For):
        name = _blockize(sch, sref, preserve_unit_iters)
        sref = sch.state.block_sref(func_name, name)
    outer: Block = sref.stmt
    if outer.init is not None:
        sch._raise(f"tensorize: block {outer.name_hint!r} has an init",
                   "decompose_reduction first, then tensorize the update", func_name, [outer])

    # Step 2. Match the body against the description.
    m = _Matcher()
    try:
        m.stmt(outer.body, intrin.desc.body.block.body)
        missing = [p.name for p in intrin.desc.buffer_params if id(p) not in m.buffers]
        if missing:
            m.fail(f"the intrinsic's buffers {missing} are not accessed")
    except _NoMatch as err:
        sch._raise(f"tensorize: block {outer.name_hint!r} does not match intrinsic {tensor_intrin!r}: {err}",
                   "schedule the loops so that the tile under the block has the intrinsic's shape and computation",
                   func_name, [outer])

    # Step 3. Bind the implementation's buffers to the matched regions; replace the body.
    from .cache import replace_buffer

    impl_root: Block = intrin.impl.body.block
    body = impl_root.body
    fresh = []
    for ip in intrin.impl.buffer_params:  # fresh definitions: the intrinsic may be used many times
        nb = decl_buffer(ip.shape, ip.dtype, ip.name, scope=ip.scope)
        body = replace_buffer(body, ip, nb)
        fresh.append(nb)
    matches = []
    for dp, ip in zip(intrin.desc.buffer_params, fresh):
        _, real, lead, offsets = m.buffers[id(dp)]
        region = [Range.from_min_extent(x, IntImm(x.dtype, 1)) for x in lead] + \
                 [Range.from_min_extent(o, s) for o, s in zip(offsets, dp.shape)]
        matches.append(MatchBufferRegion(ip, BufferRegion(real, region)))
    body = _rename_blocks(body, set(sch.state.blocks(func_name)), outer.name_hint)
    new = outer.replace(body=body, match_buffers=outer.match_buffers + tuple(matches),
                        alloc_buffers=outer.alloc_buffers + impl_root.alloc_buffers)
    sch.state.replace(func_name, outer, new)
    sch._record(TENSORIZE, [block_or_loop], [tensor_intrin, bool(preserve_unit_iters)], [])
