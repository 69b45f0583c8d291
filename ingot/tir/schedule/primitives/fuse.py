"""`fuse`: a chain of nested loops into one loop.

Note: loops ``l_0 … l_{k-1}`` (extents ``e_0 … e_{k-1}``), each the only child of the previous,
become one loop ``l_0_l_1_…_fused`` of extent ``e_0⋯e_{k-1}``; ``l_j`` is replaced by
``fused // (e_{j+1}⋯e_{k-1}) % e_j`` (no ``%`` for the outermost, no ``//`` for the innermost).
Preconditions (TENSORIR.md §2): a chain of directly nested loops, all starting at 0, without
annotations or thread bindings.

Example (before/after)::

    for i, j in T.grid(8, 4):                   for i_j_fused in T.serial(32):
        with T.block("B"):                          with T.block("B"):
            vi = T.axis.spatial(8, i)      →            vi = T.axis.spatial(8, i_j_fused // 4)
            vj = T.axis.spatial(4, j)                   vj = T.axis.spatial(4, i_j_fused % 4)
"""
from __future__ import annotations

from typing import Any

from ingot.ir.expr import Cast, IntImm, PrimExpr, Range, Var, as_const_int
from ingot.tir.stmt import For, ForKind

from ..analysis import child_block_realizes, enclosing_loops, loop_domains, simplify, substitute_outside_blocks
from ..instruction import InstructionKind, LoopRV
from ..state import _Replacer

FUSE = InstructionKind("fuse", inputs=("*loops",), attrs=("preserve_unit_iters",))


def fuse(sch: Any, *loops: LoopRV, preserve_unit_iters: bool = True) -> LoopRV:
    """Fuse directly nested loops (outermost first) into one loop; returns it.

    Example:
        >>> # ij = sch.fuse(i, j)          # trace: l4 = sch.fuse(l1, l2, preserve_unit_iters=True)
    """
    # Step 1. Check that the loops form a chain of only children starting at 0, unannotated.
    if len(loops) < 1:
        raise ValueError("fuse: give at least one loop")
    srefs = [sch._loop(rv, "fuse", f"loops[{k}]") for k, rv in enumerate(loops)]
    func_name = srefs[0].func_name
    if len({id(s) for s in srefs}) != len(srefs):
        sch._raise("fuse: a loop is given twice", "pass each loop once", func_name, [s.stmt for s in srefs])
    nodes: list[For] = [s.stmt for s in srefs]
    for k in range(1, len(nodes)):
        if nodes[k - 1].body is not nodes[k]:
            sch._raise(
                f"fuse: loop {nodes[k].loop_var.name!r} is not the only child of loop {nodes[k - 1].loop_var.name!r}",
                "fuse takes loops that are directly nested, outermost first, with nothing else in between",
                func_name, [nodes[k - 1], nodes[k]])
    for node in nodes:
        if as_const_int(node.min) != 0:
            sch._raise(f"fuse: loop {node.loop_var.name!r} starts at {node.min}, not 0",
                       "fuse needs loops that start at 0", func_name, [node])
        if node.kind == ForKind.THREAD_BINDING or node.annotations:
            sch._raise(f"fuse: loop {node.loop_var.name!r} is bound to a thread or annotated",
                       "fuse loops before binding or annotating them (unannotate first)", func_name, [node])
    if len(nodes) == 1:
        sch._record(FUSE, list(loops), [bool(preserve_unit_iters)], [loops[0]])
        return loops[0]

    # Step 2. The fused variable and the expressions of the old variables.
    # The widest loop type: a run-time (int64) batch loop fused with int32 loops over constant
    # extents counts in int64, and each narrower loop's expression is cast back to its type.
    dtypes = [n.loop_var.dtype for n in nodes]
    dtype = max(dtypes, key=lambda t: t.bits) if len(set(dtypes)) > 1 else dtypes[0]

    def widen(e: PrimExpr) -> PrimExpr:
        return e if e.dtype == dtype else Cast(dtype, e)

    name = "_".join(n.loop_var.name for n in nodes) + "_fused"
    fused = Var(name, dtype)
    extent: PrimExpr = widen(nodes[0].extent)
    for node in nodes[1:]:
        extent = extent * widen(node.extent)
    vmap: dict[Var, PrimExpr] = {}
    stride: PrimExpr = IntImm(dtype, 1)
    for k in range(len(nodes) - 1, -1, -1):
        node = nodes[k]
        if not preserve_unit_iters and as_const_int(node.extent) == 1:
            vmap[node.loop_var] = IntImm(dtype, 0)
            continue
        expr: PrimExpr = fused if as_const_int(stride) == 1 else fused // stride
        if k > 0:
            expr = expr % widen(node.extent)
        vmap[node.loop_var] = expr if node.loop_var.dtype == dtype else Cast(node.loop_var.dtype, expr)
        stride = stride * widen(node.extent)

    # Step 3. Rewrite the body, simplify the bindings, install.
    dom = loop_domains(enclosing_loops(srefs[0]))
    dom[fused] = Range.from_min_extent(IntImm(dtype, 0), extent)
    body = substitute_outside_blocks(nodes[-1].body, vmap)
    changes = {
        id(r): r.replace(iter_values=tuple(simplify(v, dom) for v in r.iter_values), predicate=simplify(r.predicate, dom))
        for r in child_block_realizes(body)
    }
    body = _Replacer(changes).visit(body)
    new_loop = For(fused, 0, extent, ForKind.SERIAL, body)
    sch.state.replace(func_name, nodes[0], new_loop)
    out = sch._new_rv(LoopRV, sch.state.loop_sref(func_name, new_loop))
    sch._record(FUSE, list(loops), [bool(preserve_unit_iters)], [out])
    return out
