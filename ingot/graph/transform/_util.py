"""Small helpers shared by the graph passes: variable remapping, use counts, pass construction.

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((2,), "float32"))
    >>> y = G.Var("y", G.TensorStructInfo((2,), "float32"))
    >>> str(remap(G.op.relu(x), {x: y}))
    'R.relu(y)'
"""
from __future__ import annotations

from typing import Any, Callable, Mapping

from ingot.ir import IRModule

from ..control_flow import If, free_vars, substitute
from ..expr import BindingBlock, Call, Expr, Function, SeqExpr, Tuple, TupleGetItem, Var, VarBinding


def remap(expr: Any, vmap: Mapping[Var, Expr]) -> Any:
    """``expr`` with variables replaced per ``vmap`` (bindings are in A-normal form: shallow).

    Call struct infos are kept: replacing a variable by a value with the same struct info (a
    constant, a renamed variable) does not change them.
    """
    return substitute(expr, {id(k): v for k, v in vmap.items()}) if vmap else expr


def used_vars(expr: Any, out: "dict[int, int] | None" = None) -> dict:
    """Use counts of graph variables in ``expr`` keyed by ``id(var)``."""
    counts = {} if out is None else out
    if isinstance(expr, Var):
        counts[id(expr)] = counts.get(id(expr), 0) + 1
    elif isinstance(expr, Call):
        for a in expr.args:
            used_vars(a, counts)
    elif isinstance(expr, Tuple):
        for f in expr.fields:
            used_vars(f, counts)
    elif isinstance(expr, TupleGetItem):
        used_vars(expr.tuple_value, counts)
    elif isinstance(expr, SeqExpr):
        for block in expr.blocks:
            for b in block.bindings:
                used_vars(b.value, counts)
        used_vars(expr.body, counts)
    elif isinstance(expr, If):  # control flow: the condition and what the branches capture
        used_vars(expr.cond, counts)
        for v in free_vars(Tuple([expr.true_branch, expr.false_branch])):
            used_vars(v, counts)
    return counts


def rebuild_function(func: Function, blocks: list, body: Expr) -> Function:
    """``func`` with new blocks and result (empty blocks dropped)."""
    blocks = [blk for blk in blocks if blk.bindings]
    return Function(func.params, SeqExpr(blocks, body), func.ret_struct_info, func.attrs)


def map_bindings(func: Function, fn: Callable[[VarBinding, dict], "VarBinding | list | None"]) -> Function:
    """Rewrite each binding with ``fn(binding_with_remapped_value, vmap)`` (it may return a binding,
    a list of bindings, or None to drop it and record a replacement in ``vmap``)."""
    vmap: dict = {}
    blocks = []
    for block in func.body.blocks:
        bindings = []
        for b in block.bindings:
            value = remap(b.value, vmap)
            binding = b if value is b.value else VarBinding(b.var, value)
            result = fn(binding, vmap)
            if result is None:
                continue
            bindings.extend(result if isinstance(result, list) else [result])
        blocks.append(type(block)(bindings) if isinstance(block, BindingBlock) else block)
    return rebuild_function(func, blocks, remap(func.body.body, vmap))


def new_var_like(var: Var, name: str, sinfo: Any, in_dataflow: bool) -> Var:
    """A new binding variable for a value inserted before ``var``'s binding: a `DataflowVar`
    inside a dataflow block (it must not leak out of it), else a `Var`."""
    from ..expr import DataflowVar

    return (DataflowVar if in_dataflow or isinstance(var, DataflowVar) else Var)(name, sinfo)


def dataflow_binding_ids(func: Function) -> set:
    """``id``s of the variables bound inside the dataflow blocks of ``func``."""
    from ..expr import DataflowBlock

    return {id(b.var) for blk in func.body.blocks if isinstance(blk, DataflowBlock) for b in blk.bindings}


def graph_functions(mod: IRModule) -> list[tuple[str, Function]]:
    """The graph functions of ``mod`` (not PrimFuncs), in order."""
    return [(name, f) for name, f in mod.functions.items() if isinstance(f, Function)]


def make_pass(fn: Callable[[IRModule], IRModule], name: str, opt_level: int = 0) -> Any:
    """A module pass (``ingot.ir.transform.module_pass``) running ``fn(mod)``."""
    from ingot.ir import transform

    return transform.module_pass(lambda mod, ctx: fn(mod), opt_level=opt_level, name=name)
