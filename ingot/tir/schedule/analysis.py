"""Analyses shared by the schedule primitives: tree navigation, block kinds, compact dataflow,
affine bindings, and simplification under loop domains.

Note: TENSORIR.md §1 defines the properties; they are computed here, never assumed.

* *complete block*: all iteration variables spatial, the only writer of its outputs in the scope,
  does not read what it writes;
* *reduction block*: has ``init``, iteration variables spatial or reduce, reduce variables do
  not index the outputs, the only writer of its outputs in the scope;
* *compact dataflow* of a subtree: every block in it is complete or a reduction block;
* *affine binding*: the bindings are a quasi-affine bijection of the enclosing loops. This uses
  `ingot.arith.detect_iter_map` when that exists; otherwise a syntactic check (sums of
  ``loop * const``, and ``floordiv``/``floormod`` by constants, each loop feeding one iteration
  variable except for the ``//``/``%`` pairs that `fuse` produces).

Example:
    >>> # check_compact_dataflow(sch, loop_sref, "parallel")
"""
from __future__ import annotations

from typing import Any, Iterable, Optional

from ingot.ir.buffer import Buffer
from ingot.ir.expr import (
    Add, Cast, FloorDiv, FloorMod, IntImm, Mul, PrimExpr, Range, Sub, Var, as_const_int,
)
from ingot.ir.functor import collect_vars
from ingot.tir.stmt import (
    Allocate, AssertStmt, Block, BlockRealize, For, IfThenElse, LetStmt, SeqStmt, Stmt,
)

from .state import StmtSRef


# -- navigation ---------------------------------------------------------------------------------
def enclosing_loops(sref: StmtSRef) -> list[StmtSRef]:
    """Loop srefs from the outermost (just inside the enclosing block) to the innermost above ``sref``."""
    loops = []
    p = sref.parent
    while p is not None and isinstance(p.stmt, For):
        loops.append(p)
        p = p.parent
    loops.reverse()
    return loops


def scope_block(sref: StmtSRef) -> StmtSRef:
    """The nearest enclosing block sref (the scope in which ``sref`` lives)."""
    p = sref.parent
    while p is not None and not isinstance(p.stmt, Block):
        p = p.parent
    if p is None:
        raise AssertionError(f"{sref!r} has no enclosing block; the function lacks the root block")
    return p


def child_block_realizes(stmt: Stmt) -> list[BlockRealize]:
    """The realizes of the blocks directly under ``stmt`` (not inside other blocks), in order."""
    out: list[BlockRealize] = []
    stack = [stmt]
    while stack:
        s = stack.pop()
        if isinstance(s, BlockRealize):
            out.append(s)
        elif isinstance(s, SeqStmt):
            stack.extend(reversed(s.seq))
        elif isinstance(s, (For, LetStmt, AssertStmt, Allocate)):
            stack.append(s.body)
        elif isinstance(s, IfThenElse):
            if s.else_case is not None:
                stack.append(s.else_case)
            stack.append(s.then_case)
        elif isinstance(s, Block):
            stack.append(s.body)
    return out


def scope_body(scope: StmtSRef) -> Stmt:
    """The body statement of a scope block."""
    return scope.stmt.body


def is_ancestor(outer: StmtSRef, inner: StmtSRef) -> bool:
    """Whether ``outer`` encloses ``inner`` (or is it)."""
    p: Optional[StmtSRef] = inner
    while p is not None:
        if p is outer:
            return True
        p = p.parent
    return False


# -- block properties ---------------------------------------------------------------------------
def writer_counts(scope: StmtSRef) -> dict[int, int]:
    """id(buffer) → number of blocks directly in ``scope`` that write it."""
    counts: dict[int, int] = {}
    for realize in child_block_realizes(scope.stmt.body):
        for region in realize.block.writes:
            counts[id(region.buffer)] = counts.get(id(region.buffer), 0) + 1
    return counts


def block_kind(block: Block, writers: dict[int, int]) -> Optional[str]:
    """``"complete"``, ``"reduction"`` or None (neither) for a block in a scope with ``writers``."""
    if any(writers.get(id(w.buffer), 0) != 1 for w in block.writes):
        return None
    kinds = {iv.kind for iv in block.iter_vars}
    if kinds <= {"S"} and block.init is None:
        written = {id(w.buffer) for w in block.writes}
        if any(id(r.buffer) in written for r in block.reads):
            return None
        return "complete"
    if block.init is not None and kinds <= {"S", "R"}:
        reduce_vars = {id(iv.var) for iv in block.iter_vars if iv.kind == "R"}
        for w in block.writes:
            for r in w.region:
                if any(id(v) in reduce_vars for v in collect_vars([r.min, r.extent])):
                    return None
        return "reduction"
    return None


def check_compact_dataflow(sch: Any, sref: StmtSRef, primitive: str) -> None:
    """Raise unless every block under ``sref`` is complete or a reduction block (TENSORIR.md §1)."""
    scope = scope_block(sref)
    writers = writer_counts(scope)
    for realize in child_block_realizes(sref.stmt):
        if block_kind(realize.block, writers) is None:
            sch._raise(
                f"{primitive}: the subtree under loop {_name(sref)} does not have compact dataflow",
                f"block {realize.block.name_hint!r} is neither a complete block nor a reduction block "
                "(it may share an output buffer with another block, read what it writes without an init, "
                "or have opaque iteration variables). Apply this primitive before decompose_reduction, "
                "or restructure the blocks.",
                sref.func_name, [sref.stmt, realize],
            )


def check_spatial_binding(sch: Any, sref: StmtSRef, primitive: str) -> None:
    """Raise if a block iteration variable bound to the loop ``sref`` is not spatial."""
    loop_var = sref.stmt.loop_var
    for realize in child_block_realizes(sref.stmt):
        for iv, value in zip(realize.block.iter_vars, realize.iter_values):
            if iv.kind != "S" and any(v is loop_var for v in collect_vars(value)):
                kind = {"R": "reduce", "O": "opaque", "T": "thread"}.get(iv.kind, iv.kind)
                sch._raise(
                    f"{primitive}: loop {loop_var.name!r} is bound to the {kind} variable "
                    f"{iv.var.name!r} of block {realize.block.name_hint!r}",
                    f"only loops bound to spatial iteration variables can be {primitive}ed; a reduce loop "
                    "would race on the output. Use rfactor to turn the reduction into a spatial one first.",
                    sref.func_name, [sref.stmt, realize],
                )


# -- affine bindings ----------------------------------------------------------------------------
def loop_domains(loop_srefs: Iterable[StmtSRef]) -> dict[Var, Range]:
    return {s.stmt.loop_var: Range.from_min_extent(s.stmt.min, s.stmt.extent) for s in loop_srefs}


def is_affine_binding(realize: BlockRealize, loops: list[StmtSRef]) -> bool:
    """Whether ``realize``'s bindings are a quasi-affine bijection of the enclosing ``loops``."""
    if not realize.block.iter_vars:
        return True
    dom = loop_domains(loops)
    if any(as_const_int(rng.extent) is None for rng in dom.values()):
        # A run-time extent (a model's symbolic batch): iter-map detection needs constant extents,
        # so check the bindings' form instead, as for any form the analyzer cannot handle.
        return _syntactic_affine(realize.iter_values, dom)
    from ingot.arith.iter_map import detect_iter_map

    try:
        result = detect_iter_map(list(realize.iter_values), dom, realize.predicate, "surjective")
    except (TypeError, NotImplementedError):  # an analyzer that cannot handle this form
        return _syntactic_affine(realize.iter_values, dom)
    if hasattr(result, "success"):
        return bool(result.success)
    return bool(getattr(result, "indices", result))


def _size_expr(e: PrimExpr, loop_ids: set) -> bool:
    """Whether ``e`` is a run-time size: a product of constants > 0 and variables that are not loop
    variables (a buffer's symbolic dims, which are never negative) — the divisor `fuse` leaves when
    it fuses a loop of run-time extent into the one above it."""
    if isinstance(e, Cast):
        return _size_expr(e.value, loop_ids)
    if isinstance(e, Var):
        return id(e) not in loop_ids
    if isinstance(e, IntImm):
        return e.value > 0
    if isinstance(e, Mul):
        return _size_expr(e.a, loop_ids) and _size_expr(e.b, loop_ids)
    return False


def _syntactic_affine(values: Iterable[PrimExpr], dom: dict[Var, Range]) -> bool:
    loop_ids = {id(v) for v in dom}
    plain_uses: dict[int, int] = {}  # loop var → number of bindings using it outside // and %

    def ok(e: PrimExpr, under_divmod: bool, uses: set[int], divmod_uses: set[int]) -> bool:
        if isinstance(e, Var):
            if id(e) not in loop_ids:
                return False
            (divmod_uses if under_divmod else uses).add(id(e))
            return True
        if isinstance(e, IntImm):
            return True
        if isinstance(e, Cast):  # a loop of another integer type (fuse of an int64 batch loop)
            return ok(e.value, under_divmod, uses, divmod_uses)
        if isinstance(e, (Add, Sub)):
            return ok(e.a, under_divmod, uses, divmod_uses) and ok(e.b, under_divmod, uses, divmod_uses)
        if isinstance(e, Mul):
            if as_const_int(e.b) is not None:
                return ok(e.a, under_divmod, uses, divmod_uses)
            if as_const_int(e.a) is not None:
                return ok(e.b, under_divmod, uses, divmod_uses)
            return False
        if isinstance(e, (FloorDiv, FloorMod)):
            c = as_const_int(e.b)
            if c is None:
                # fuse of loops with run-time extents: (seq, batch) -> f // batch, f % batch
                return _size_expr(e.b, loop_ids) and ok(e.a, True, uses, divmod_uses)
            return c > 0 and ok(e.a, True, uses, divmod_uses)
        return False

    for value in values:
        uses: set[int] = set()
        divmod_uses: set[int] = set()
        if not ok(value, False, uses, divmod_uses):
            return False
        for v in uses:
            plain_uses[v] = plain_uses.get(v, 0) + 1
    # A loop variable used plainly by two iteration variables makes the map non-injective
    # (e.g. vi = i, vj = i), unless the loop has extent 1.
    for var, rng in dom.items():
        if plain_uses.get(id(var), 0) > 1 and as_const_int(rng.extent) != 1:
            return False
    return True


def check_affine_bindings(sch: Any, sref: StmtSRef, loops_of: Any, primitive: str) -> None:
    """Raise unless every block under ``sref`` has an affine binding."""
    for realize in child_block_realizes(sref.stmt):
        block_sref = sch.state.sref_of(sref.func_name, realize.block)
        loops = enclosing_loops(block_sref)
        if not is_affine_binding(realize, loops):
            sch._raise(
                f"{primitive}: block {realize.block.name_hint!r} does not have an affine binding",
                "its iteration variables are not a quasi-affine bijection of the enclosing loops, so the "
                "loops cannot be reordered safely; undo the transformation that produced the binding.",
                sref.func_name, [realize],
            )


# -- simplification -----------------------------------------------------------------------------
def simplify(expr: PrimExpr, dom: "dict[Var, Range] | None" = None) -> PrimExpr:
    """Simplify ``expr`` knowing the loop domains (`ingot.arith.Analyzer`).

    Example:
        >>> i = Var("i")
        >>> str(simplify(i * 4 + 0))
        'i * 4'
    """
    from ingot.arith import Analyzer

    if isinstance(expr, IntImm):
        return expr
    ana = Analyzer()
    if dom:
        # Bind only the variables the expression uses (and those their ranges use): binding
        # simplifies each range, and schedules pass every enclosing loop, so binding them all
        # made this the most expensive step of split/fuse during tuning replays.
        needed = _vars_needed(expr, dom)
        for var, rng in dom.items():
            if id(var) in needed:
                ana.bind(var, rng)
    return ana.simplify(expr)


def _vars_needed(expr: PrimExpr, dom: "dict[Var, Range]") -> "set[int]":
    """ids of the variables of ``expr``, closed over the variables of their ranges in ``dom``."""
    from ingot.ir.functor import collect_vars

    by_id = {id(v): r for v, r in dom.items()}
    needed: set[int] = set()
    todo = collect_vars(expr)
    while todo:
        v = todo.pop()
        if id(v) in needed:
            continue
        needed.add(id(v))
        rng = by_id.get(id(v))
        if rng is not None and not (isinstance(rng.min, IntImm) and isinstance(rng.extent, IntImm)):
            todo.extend(collect_vars(rng.min) + collect_vars(rng.extent))
    return needed


def can_prove(cond: PrimExpr, dom: "dict[Var, Range] | None" = None) -> bool:
    """Whether ``cond`` provably holds under the loop domains ``dom`` (`ingot.arith.Analyzer`)."""
    v = as_const_int(cond)
    if v is not None:
        return bool(v)
    from ingot.arith import Analyzer

    ana = Analyzer()
    for var, rng in (dom or {}).items():
        ana.bind(var, rng)
    return bool(ana.can_prove(cond))


def substitute_outside_blocks(stmt: Stmt, vmap: dict[Var, PrimExpr]) -> Stmt:
    """Substitute loop variables in ``stmt``: block bindings and predicates, loop bounds, and
    non-block statements — never inside block bodies (those only see their own iteration vars)."""
    from ingot.ir.functor import substitute

    def go(s: Any) -> Any:
        if isinstance(s, BlockRealize):
            values = tuple(substitute(v, vmap) for v in s.iter_values)
            pred = substitute(s.predicate, vmap)
            if all(a is b for a, b in zip(values, s.iter_values)) and pred is s.predicate:
                return s
            return BlockRealize(values, pred, s.block)
        if isinstance(s, SeqStmt):
            seq = tuple(go(x) for x in s.seq)
            return s if all(a is b for a, b in zip(seq, s.seq)) else SeqStmt(seq)
        if isinstance(s, For):
            return s.replace(min=substitute(s.min, vmap), extent=substitute(s.extent, vmap), body=go(s.body))
        if isinstance(s, IfThenElse):
            return s.replace(condition=substitute(s.condition, vmap), then_case=go(s.then_case),
                             else_case=go(s.else_case) if s.else_case is not None else None)
        if isinstance(s, (LetStmt, AssertStmt)):
            field = "value" if isinstance(s, LetStmt) else "condition"
            return s.replace(**{field: substitute(getattr(s, field), vmap)}, body=go(s.body))
        if isinstance(s, Allocate):
            return s.replace(body=go(s.body))
        return substitute(s, vmap)

    return go(stmt)


def buffer_is_param(func: Any, buffer: Buffer) -> bool:
    return any(p is buffer for p in func.params)


def _name(sref: StmtSRef) -> str:
    s = sref.stmt
    if isinstance(s, For):
        return repr(s.loop_var.name)
    if isinstance(s, Block):
        return repr(s.name_hint)
    return repr(s)
