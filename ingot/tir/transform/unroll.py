"""UnrollLoop: expand unrolled loops, and auto-unroll small inner loops under a pragma.

Note: two sources ask for unrolling.

* ``ForKind.UNROLLED`` loops (``sch.unroll``) with a constant extent up to ``max_extent`` (default
  64) are expanded: the body is repeated with the loop variable replaced by each value. Longer or
  symbolic ones stay ``UNROLLED`` and code generation emits ``#pragma GCC unroll``.
* MetaSchedule's ``pragma_auto_unroll_max_step`` annotation on a loop (with optional
  ``pragma_unroll_explicit``): inside that loop, every serial loop with a constant extent whose
  total number of steps — its extent times the steps of its body, counting a statement as one step
  — is at most the annotated value is unrolled: expanded when ``pragma_unroll_explicit`` is true
  (the default), else marked ``UNROLLED``. Loops are considered innermost first, as in TVM, so a
  small inner loop is unrolled even when its parent is too big. The annotations are removed.

``PassContext(config={"tir.UnrollLoop": {"auto_max_step": 16, "explicit_unroll": True,
"max_extent": 64}})`` sets the same for the whole function (``auto_max_step`` 0 = off).

Example:
    before:  for i in T.unroll(2): B[i] = A[i]
    after:   B[0] = A[0]
             B[1] = A[1]
"""
from __future__ import annotations

from typing import Any

from ingot.ir.expr import as_const_int
from ingot.ir.functor import Mutator, substitute

from ..function import PrimFunc
from ..stmt import For, ForKind, SeqStmt, Stmt, stmt_children
from .base import current_config, prim_func_pass

__all__ = ["UnrollLoop", "unroll_loop"]

AUTO_UNROLL_KEY = "pragma_auto_unroll_max_step"
EXPLICIT_KEY = "pragma_unroll_explicit"


def _steps(stmt: Stmt) -> "int | None":
    """Statement executions of ``stmt`` (None when a loop extent is symbolic)."""
    if isinstance(stmt, For):
        extent = as_const_int(stmt.extent)
        inner = _steps(stmt.body)
        if extent is None or inner is None:
            return None
        # A vectorized loop runs as one vector statement.
        return inner if stmt.kind == ForKind.VECTORIZED else extent * inner
    if isinstance(stmt, SeqStmt):
        total = 0
        for s in stmt.seq:
            n = _steps(s)
            if n is None:
                return None
            total += n
        return total
    children = stmt_children(stmt)
    if not children:
        return 1
    counts = [_steps(c) for c in children]
    return None if any(c is None for c in counts) else max(1, sum(counts))


def _expand(loop: For) -> Stmt:
    extent = as_const_int(loop.extent)
    return SeqStmt.flatten([substitute(loop.body, {loop.loop_var: loop.min + k}) for k in range(extent)])


class _Unroller(Mutator):
    def __init__(self, auto_max_step: int, explicit: bool, max_extent: int) -> None:
        self.auto_max_step = auto_max_step
        self.explicit = explicit
        self.max_extent = max_extent

    def visit_For(self, node: For) -> Stmt:
        saved = (self.auto_max_step, self.explicit)
        annotations = node.annotations
        if AUTO_UNROLL_KEY in annotations:
            self.auto_max_step = int(annotations[AUTO_UNROLL_KEY])
            self.explicit = bool(annotations.get(EXPLICIT_KEY, True))
            node = node.replace(annotations=annotations.without(AUTO_UNROLL_KEY).without(EXPLICIT_KEY))
        try:
            # Innermost first: the body is already unrolled when this loop is considered.
            node = node.replace(body=self.visit(node.body))
            extent = as_const_int(node.extent)
            if node.kind == ForKind.UNROLLED:
                if extent is not None and extent <= self.max_extent:
                    return _expand(node)
                return node
            if node.kind == ForKind.SERIAL and extent is not None and self.auto_max_step > 0:
                steps = _steps(node)
                if steps is not None and steps <= self.auto_max_step:
                    return _expand(node) if self.explicit else node.replace(kind=ForKind.UNROLLED)
            return node
        finally:
            self.auto_max_step, self.explicit = saved

    def generic_visit(self, node: Any) -> Any:
        return super().generic_visit(node) if isinstance(node, Stmt) else node


def unroll_loop(stmt: Stmt, auto_max_step: int = 0, explicit_unroll: bool = True, max_extent: int = 64) -> Stmt:
    """``stmt`` with unrolled loops expanded (see module docstring).

    Example:
        >>> from ingot.ir import Var, decl_buffer
        >>> from ingot.tir import BufferStore
        >>> A = decl_buffer((2,), "float32", "A"); i = Var("i")
        >>> s = unroll_loop(For(i, 0, 2, ForKind.UNROLLED, BufferStore(A, 0.0, [i])))
        >>> [str(x.indices[0]) for x in s.seq]
        ['0', '1']
    """
    return _Unroller(auto_max_step, explicit_unroll, max_extent).visit(stmt)


def UnrollLoop():  # noqa: N802
    """The pass unrolling loops in every PrimFunc (see module docstring).

    Example:
        >>> UnrollLoop().info.name
        'UnrollLoop'
    """

    def transform(func: PrimFunc, mod, ctx) -> PrimFunc:
        cfg = dict(current_config("tir.UnrollLoop", {}) or {})
        unknown = set(cfg) - {"auto_max_step", "explicit_unroll", "max_extent"}
        if unknown:
            raise ValueError(
                f"tir.UnrollLoop config has unknown keys {sorted(unknown)}; "
                "valid: auto_max_step, explicit_unroll, max_extent"
            )
        return func.with_body(unroll_loop(
            func.body, int(cfg.get("auto_max_step", 0)), bool(cfg.get("explicit_unroll", True)),
            int(cfg.get("max_extent", 64)),
        ))

    return prim_func_pass(transform, opt_level=0, name="UnrollLoop")
