"""`reorder`: permute loops that lie on one path of the loop tree.

Note: the given loops occupy some positions of the chain from the outermost to the innermost
given loop; reorder puts them at those same positions in the requested order, the loops not
given stay where they are. Preconditions (TENSORIR.md §2): no duplicates; all loops on one path;
between the outermost and the innermost given loop each loop is the only child of the previous
(no branching, no non-loop statement); the blocks below have affine bindings and compact
dataflow (reordering changes execution order).

Example (before/after)::

    for i, j, k in T.grid(...):        sch.reorder(k, i)  →    for k, j, i in T.grid(...):
"""
from __future__ import annotations

from typing import Any

from ..analysis import check_affine_bindings, check_compact_dataflow, enclosing_loops
from ..instruction import InstructionKind, LoopRV

REORDER = InstructionKind("reorder", inputs=("*ordered_loops",))


def reorder(sch: Any, *ordered_loops: LoopRV) -> None:
    """Reorder loops on one path so they appear in the given order (outermost first).

    Example:
        >>> # sch.reorder(i, j0, k, j1)        # trace: sch.reorder(l1, l4, l3, l5)
    """
    # Step 1. Resolve; check duplicates and that all loops are on one path.
    srefs = [sch._loop(rv, "reorder", f"ordered_loops[{k}]") for k, rv in enumerate(ordered_loops)]
    if not srefs:
        return
    func_name = srefs[0].func_name
    if len({id(s) for s in srefs}) != len(srefs):
        sch._raise("reorder: a loop is given twice", "pass each loop once", func_name, [s.stmt for s in srefs])
    given = {id(s) for s in srefs}
    # The innermost given loop is the one with the most given loops above it (if they are on a path).
    depth = {}
    for s in srefs:
        chain = enclosing_loops(s) + [s]
        depth[id(s)] = sum(1 for c in chain if id(c) in given)
    bottom = max(srefs, key=lambda s: depth[id(s)])
    chain = enclosing_loops(bottom) + [bottom]
    on_path = [c for c in chain if id(c) in given]
    if len(on_path) != len(srefs):
        stray = [s.stmt for s in srefs if s not in on_path]
        sch._raise(
            "reorder: the loops do not lie on one path of the loop tree",
            f"loop(s) {[n.loop_var.name for n in stray]} are not ancestors of loop "
            f"{bottom.stmt.loop_var.name!r}; reorder loops that are nested in one another",
            func_name, stray + [bottom.stmt])
    top_index = next(k for k, c in enumerate(chain) if id(c) in given)
    path = chain[top_index:]

    # Step 2. No branching or non-loop statement between the outermost and innermost loop.
    for outer, inner in zip(path, path[1:]):
        if outer.stmt.body is not inner.stmt:
            sch._raise(
                f"reorder: loop {outer.stmt.loop_var.name!r} has a statement other than loop "
                f"{inner.stmt.loop_var.name!r} in its body",
                "reorder needs the loops between the outermost and the innermost given loop to be "
                "perfectly nested (no sibling statements, blocks or branches in between)",
                func_name, [outer.stmt, inner.stmt])

    # Step 3. Blocks below: affine bindings and compact dataflow.
    top = path[0]
    if sch.enable_check:
        check_affine_bindings(sch, top, None, "reorder")
        check_compact_dataflow(sch, top, "reorder")

    # Step 4. Rebuild the chain with the given loops permuted into their positions.
    order = iter(srefs)
    new_headers = [next(order).stmt if id(c) in given else c.stmt for c in path]
    body = path[-1].stmt.body
    for header in reversed(new_headers):
        body = header.replace(body=body)
    sch.state.replace(func_name, top.stmt, body)
    sch._record(REORDER, list(ordered_loops), [], [])

