"""`pad_einsum`: pad an einsum-like block's iteration domain to multiples (ragged shapes).

Note: for a block whose every access is indexed by plain iteration variables (``C[i, j] +=
A[i, k] * B[k, j]``), each bound to its own loop, `pad_einsum(block, padding)` rounds the extent
of iteration variable ``v`` up to a multiple of ``padding[v]``. Every buffer indexed by a padded
variable is replaced by a padded copy ``X_pad``: inputs get a producer block ``X_pad`` before the
nest (``X_pad[v] = X[v] if v < extent else 0``), the output gets a write-back block ``X_unpad``
after it (``X[v] = X_pad[v]`` over the original shape). Padding a *reduce* variable is only exact
when the padded terms add nothing: the block must be a sum of products of loads, each padded
reduce variable indexing one of the (zero-padded) factors. Afterwards the loops have extents that
tile evenly (e.g. 127 → 128 for 16-wide register tiles).

Example (before/after, padding [16, 16, 16] on a 127³ matmul)::

    for i, j, k in T.grid(127, 127, 127):        A_pad[...] = T.if_then_else(i < 127 and k < 127, A[i, k], 0)
        C[i, j] += A[i, k] * B[k, j]        →    for i, j, k in T.grid(128, 128, 128): C_pad[i, j] += A_pad * B_pad
                                                 C[i, j] = C_pad[i, j]   (127 x 127)
"""
from __future__ import annotations

from typing import Any, Sequence

from ingot.ir.buffer import Buffer, decl_buffer
from ingot.ir.expr import BufferLoad, IntImm, IterVar, Mul, Range, Var, as_const_int
from ingot.ir.functor import Visitor
from ingot.tir.op import all as t_all, if_then_else
from ingot.tir.stmt import Block, BlockRealize, BufferStore, For, ForKind, SeqStmt, Stmt

from ..analysis import block_kind, child_block_realizes, enclosing_loops, scope_block, writer_counts
from ..instruction import BlockRV, InstructionKind
from ..state import _Replacer
from .cache import replace_buffer
from .compute_inline import check_in_scope_body, refresh_regions
from .rfactor import detect_combiner

PAD_EINSUM = InstructionKind("pad_einsum", inputs=("block",), attrs=("padding",))


def _accesses(block: Block) -> list[tuple[Buffer, tuple]]:
    found: list = []

    class _Collect(Visitor):
        def visit_BufferLoad(self, node):
            found.append((node.buffer, node.indices))
            self.generic_visit(node)

        def visit_BufferStore(self, node):
            found.append((node.buffer, node.indices))
            self.generic_visit(node)

    _Collect().visit([block.init, block.body])
    return found


def _copy_nest(name: str, shape: Sequence[int], body_fn: Any) -> Stmt:
    loop_vars = [Var(f"ax{d}") for d in range(len(shape))]
    ivs = [IterVar(Range.from_min_extent(0, s), Var(f"v{d}"), "S") for d, s in enumerate(shape)]
    block = refresh_regions(Block(ivs, [], [], name, body_fn([iv.var for iv in ivs])))
    stmt: Stmt = BlockRealize(loop_vars, True, block)
    for v, s in reversed(list(zip(loop_vars, shape))):
        stmt = For(v, 0, s, ForKind.SERIAL, stmt)
    return stmt


def _factors(e: Any) -> list:
    return _factors(e.a) + _factors(e.b) if isinstance(e, Mul) else [e]


def pad_einsum(sch: Any, block: BlockRV, padding: Sequence[int]) -> None:
    """Pad ``block``'s iteration domain so that extent ``k`` becomes a multiple of ``padding[k]``.

    Example:
        >>> # sch.pad_einsum(sch.get_block("C"), [16, 16, 16])
        >>> # trace: sch.pad_einsum(block=b0, padding=[16, 16, 16])
    """
    # Step 1. Checks: einsum-like block, trivially bound loops holding only it.
    sref = sch._block(block, "pad_einsum")
    blk: Block = sref.stmt
    realize = sref.realize
    padding = [int(p) for p in padding]
    if len(padding) != len(blk.iter_vars) or any(p < 1 for p in padding):
        sch._raise(f"pad_einsum: block {blk.name_hint!r} has {len(blk.iter_vars)} iteration variables; padding "
                   f"{padding} must give one positive factor each", "", sref.func_name, [blk])
    check_in_scope_body(sch, sref, "pad_einsum")
    scope = scope_block(sref)
    if block_kind(blk, writer_counts(scope)) is None or not isinstance(blk.body, BufferStore):
        sch._raise(f"pad_einsum: block {blk.name_hint!r} is not a complete or reduction block with one store",
                   "pad_einsum applies to einsum-like blocks (before decompose_reduction)", sref.func_name, [blk])
    own = {id(iv.var) for iv in blk.iter_vars}
    for buf, idx in _accesses(blk):
        if not all(isinstance(i, Var) and id(i) in own for i in idx):
            sch._raise(f"pad_einsum: block {blk.name_hint!r} accesses {buf.name}[{', '.join(map(str, idx))}] at "
                       "indices that are not plain iteration variables", "pad_einsum needs an einsum-like block",
                       sref.func_name, [blk])
    loops = {id(s.stmt.loop_var): s for s in enclosing_loops(sref)}
    bound = []
    for iv, value in zip(blk.iter_vars, realize.iter_values):
        s = loops.get(id(value)) if isinstance(value, Var) else None
        if s is None or as_const_int(s.stmt.min) != 0 or as_const_int(iv.dom.min) != 0 or \
                as_const_int(s.stmt.extent) != as_const_int(iv.dom.extent) or as_const_int(iv.dom.extent) is None:
            sch._raise(f"pad_einsum: iteration variable {iv.var.name!r} of block {blk.name_hint!r} is not bound to "
                       "its own loop of the same constant extent", "apply pad_einsum before split/fuse",
                       sref.func_name, [blk])
        if len(child_block_realizes(s.stmt)) != 1:
            sch._raise(f"pad_einsum: loop {s.stmt.loop_var.name!r} holds other blocks", "", sref.func_name, [blk])
        bound.append(s)
    if len({id(s) for s in bound}) != len(bound) or as_const_int(realize.predicate) != 1:
        sch._raise(f"pad_einsum: block {blk.name_hint!r} shares loops between iteration variables or is predicated",
                   "", sref.func_name, [blk])
    extents = [as_const_int(iv.dom.extent) for iv in blk.iter_vars]
    new_ext = [-(-e // p) * p for e, p in zip(extents, padding)]
    padded = {id(iv.var): n for iv, e, n in zip(blk.iter_vars, extents, new_ext) if n != e}
    if padded and blk.init is not None:
        reduce_padded = [iv for iv in blk.iter_vars if iv.kind == "R" and id(iv.var) in padded]
        if reduce_padded:
            found = detect_combiner(blk)
            factors = _factors(found[2]) if found is not None and found[0].__name__ == "Add" else []
            ok = factors and all(isinstance(f, BufferLoad) for f in factors) and all(
                any(any(i is iv.var for i in f.indices) for f in factors) for iv in reduce_padded)
            if not ok:
                sch._raise(f"pad_einsum: padding the reduce variable(s) {[iv.var.name for iv in reduce_padded]} of "
                           f"block {blk.name_hint!r} would change the result",
                           "only a sum of products of loads can be padded along a reduce axis (the zero padding "
                           "adds nothing); pad the spatial axes only", sref.func_name, [blk])

    # Step 2. Padded copies of every buffer indexed by a padded variable.
    taken = set(sch.state.blocks(sref.func_name))
    new_blk, before, after, allocs = blk, [], [], []
    out = blk.body.buffer
    seen: dict[int, Buffer] = {}
    for buf, idx in _accesses(blk):
        if id(buf) in seen or not any(id(i) in padded for i in idx):
            continue
        shape = [padded.get(id(i), as_const_int(d)) for i, d in zip(idx, buf.shape)]
        pad = decl_buffer(shape, buf.dtype, f"{buf.name}_pad", scope=buf.scope)
        seen[id(buf)] = pad
        allocs.append(pad)
        new_blk = replace_buffer(new_blk, buf, pad)
        orig = [as_const_int(d) for d in buf.shape]
        if buf is out:
            name = f"{buf.name}_unpad"
            after.append(_copy_nest(name, orig, lambda v, b=buf, p=pad: BufferStore(b, p.load(v), v)))
        else:
            name = f"{buf.name}_pad"
            zero = IntImm(buf.dtype, 0) if not buf.dtype.is_float else 0.0

            def fill(v, b=buf, p=pad, o=orig, z=zero):
                cond = t_all(*[x < n for x, n, m in zip(v, o, p.shape) if as_const_int(m) != n])
                return BufferStore(p, if_then_else(cond, b.load(v), z), v)

            before.append(_copy_nest(name, shape, fill))
        if name in taken:
            sch._raise(f"pad_einsum: a block named {name!r} already exists", "rename it first", sref.func_name, [blk])

    # Step 3. Widen the block and its loops; install the copies around the nest.
    new_blk = refresh_regions(new_blk.replace(iter_vars=tuple(
        IterVar(Range.from_min_extent(0, n), iv.var, iv.kind) for iv, n in zip(blk.iter_vars, new_ext))))
    outer = _outermost(bound)
    body = _widen(_Replacer({id(blk): new_blk}).visit(outer), {id(s.stmt.loop_var): n for s, n in zip(bound, new_ext)})
    items = list(scope.stmt.body.seq) if isinstance(scope.stmt.body, SeqStmt) else [scope.stmt.body]
    top = next(k for k, item in enumerate(items) if any(r is realize for r in child_block_realizes(item)))
    items[top] = _Replacer({id(outer): body}).visit(items[top])
    items[top:top + 1] = before + [items[top]] + after
    new_scope = scope.stmt.replace(body=SeqStmt(items), alloc_buffers=scope.stmt.alloc_buffers + tuple(allocs))
    sch.state.replace(sref.func_name, scope.stmt, new_scope)
    sch._record(PAD_EINSUM, [block], [padding], [])


def _outermost(bound: list) -> For:
    """The outermost of the loops bound to the block (they form a chain above it)."""
    ids = {id(s) for s in bound}
    for s in bound:
        p = s.parent
        while p is not None and id(p) not in ids:
            p = p.parent
        if p is None:
            return s.stmt
    raise AssertionError("internal error: no outermost loop")


def _widen(stmt: Stmt, extents: dict) -> Stmt:
    if isinstance(stmt, For):
        body = _widen(stmt.body, extents)
        ext = extents.get(id(stmt.loop_var))
        return stmt.replace(body=body, extent=IntImm(stmt.loop_var.dtype, ext) if ext is not None else stmt.extent)
    if isinstance(stmt, SeqStmt):
        return SeqStmt([_widen(s, extents) for s in stmt.seq])
    return stmt
