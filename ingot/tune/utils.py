"""Small analyses the tuner shares: FLOP estimate, loop nests of stores, integer evaluation.

Note: these walk scheduled TensorIR (blocks kept) with a loop stack; block iteration variables
are resolved through their bindings (``iter_values``), so an access index can be evaluated at
any point of the loop space without rewriting the IR.

Example:
    >>> # estimate_flops(matmul_64) -> 524288.0   (2 * 64**3)
"""
from __future__ import annotations

import math
from typing import Any, Callable, Optional

from ingot.ir import expr as E
from ingot.ir.functor import Visitor
from ingot.tir.stmt import Block, BlockRealize, BufferStore, For

_FLOAT_BINARY = (E.Add, E.Sub, E.Mul, E.Div, E.Min, E.Max, E.FloorDiv, E.Mod, E.FloorMod)


def count_float_ops(expr: Any) -> "dict[str, int]":
    """Count floating-point operations in one expression, by kind (add, mul, div, other).

    Example:
        >>> from ingot.ir import Var
        >>> x = Var("x", "float32")
        >>> count_float_ops(x * x + x)
        {'add': 1, 'mul': 1, 'div': 0, 'other': 0, 'int': 0}
    """
    counts = {"add": 0, "mul": 0, "div": 0, "other": 0, "int": 0}

    class _Count(Visitor):
        def generic_visit(self, node):
            if isinstance(node, _FLOAT_BINARY) or isinstance(node, E.Call):
                dtype = getattr(node, "dtype", None)
                is_float = dtype is not None and str(dtype).startswith(("float", "bfloat"))
                if not is_float:
                    counts["int"] += 1
                elif isinstance(node, (E.Add, E.Sub)):
                    counts["add"] += 1
                elif isinstance(node, E.Mul):
                    counts["mul"] += 1
                elif isinstance(node, (E.Div, E.FloorDiv)):
                    counts["div"] += 1
                else:
                    counts["other"] += 1
            super().generic_visit(node)

        def visit_BufferLoad(self, node):
            # index arithmetic is counted separately (feature extractor), not as FLOPs
            return None

    _Count().visit(expr)
    return counts


class LoopInfo:
    """One enclosing loop of a store: variable, extent (int; symbolic → 1), kind, annotations."""

    __slots__ = ("var", "extent", "kind", "annotations")

    def __init__(self, var, extent, kind, annotations):
        self.var, self.extent, self.kind, self.annotations = var, extent, kind, annotations


class StoreSite:
    """A BufferStore with its context: enclosing loops (outermost first), enclosing blocks,
    the bindings of block iteration variables, and whether it is in a block's ``init``."""

    __slots__ = ("store", "loops", "blocks", "bindings", "in_init")

    def __init__(self, store, loops, blocks, bindings, in_init):
        self.store, self.loops, self.blocks, self.bindings, self.in_init = store, loops, blocks, bindings, in_init


def collect_store_sites(func: Any) -> "list[StoreSite]":
    """Every BufferStore of a PrimFunc with its loop/block context (see `StoreSite`).

    Example:
        >>> # [s.store.buffer.name for s in collect_store_sites(matmul)] -> ['C', 'C']  (init, update)
    """
    sites: list[StoreSite] = []
    loops: list[LoopInfo] = []
    blocks: list[Block] = []
    bindings: dict = {}
    in_init = [False]

    class _Walk(Visitor):
        def visit_For(self, node: For):
            ext = E.as_const_int(node.extent)
            loops.append(LoopInfo(node.loop_var, ext if ext is not None else 1, node.kind, node.annotations))
            self.visit(node.body)
            loops.pop()

        def visit_BlockRealize(self, node: BlockRealize):
            block = node.block
            for iv, value in zip(block.iter_vars, node.iter_values):
                bindings[iv.var] = value
            blocks.append(block)
            if block.init is not None:
                in_init.append(True)
                self.visit(block.init)
                in_init.pop()
            self.visit(block.body)
            blocks.pop()

        def visit_BufferStore(self, node: BufferStore):
            sites.append(StoreSite(node, list(loops), list(blocks), dict(bindings), in_init[-1]))

    in_init.append(False)
    _Walk().visit(func.body)
    return sites


def estimate_flops(mod: Any) -> float:
    """Floating-point operations of one call of a PrimFunc or IRModule: float ops of each store
    (outside reduction ``init``s) times the product of its enclosing loop extents.

    Example:
        >>> # estimate_flops(te.create_prim_func([A, B, C_matmul_64])) -> 524288.0
    """
    from ingot.tir.function import PrimFunc

    funcs = [mod] if isinstance(mod, PrimFunc) else [f for _, f in mod.items() if isinstance(f, PrimFunc)]
    total = 0.0
    for func in funcs:
        for site in collect_store_sites(func):
            if site.in_init:
                continue
            c = count_float_ops(site.store.value)
            ops = c["add"] + c["mul"] + c["div"] + c["other"]
            total += ops * math.prod(l.extent for l in site.loops)
    return float(total)


_INT_OPS: "dict[type, Callable]" = {
    E.Add: lambda a, b: a + b, E.Sub: lambda a, b: a - b, E.Mul: lambda a, b: a * b,
    E.FloorDiv: lambda a, b: a // b if b else 0, E.FloorMod: lambda a, b: a % b if b else 0,
    E.Div: lambda a, b: int(a / b) if b else 0, E.Mod: lambda a, b: a % b if b else 0,
    E.Min: min, E.Max: max,
}


def eval_int(expr: Any, env: dict, bindings: "Optional[dict]" = None) -> int:
    """Evaluate an integer index expression with loop variables from ``env`` (missing: 0) and
    block iteration variables through ``bindings``.

    Example:
        >>> from ingot.ir import Var
        >>> i = Var("i")
        >>> eval_int(i * 4 + 1, {i: 2})
        9
    """
    if isinstance(expr, int):
        return expr
    if isinstance(expr, E.IntImm):
        return int(expr.value)
    if isinstance(expr, E.Var):
        if expr in env:
            return env[expr]
        if bindings and expr in bindings:
            return eval_int(bindings[expr], env, bindings)
        return 0
    op = _INT_OPS.get(type(expr))
    if op is not None:
        return int(op(eval_int(expr.a, env, bindings), eval_int(expr.b, env, bindings)))
    if isinstance(expr, E.Cast):
        return eval_int(expr.value, env, bindings)
    if isinstance(expr, E.Select):
        return eval_int(expr.true_value, env, bindings)
    return 0
