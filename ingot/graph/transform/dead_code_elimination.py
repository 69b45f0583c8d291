"""DeadCodeElimination: drop bindings whose variables are never used and functions never called.

Note: bindings in dataflow blocks are pure and removed when unused; bindings outside them may have
side effects (packed calls) and are kept unless they are operator calls. Functions are kept when
they are entry points (graph functions with a ``global_symbol`` that are not primitive) or are
reachable from one; unreferenced PrimFuncs and fused primitive functions are removed.

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((2,), "float32"))
    >>> bb = G.BlockBuilder()
    >>> with bb.function("main", [x]):
    ...     with bb.dataflow():
    ...         unused = bb.emit(G.op.exp(x))
    ...         gv = bb.emit_output(G.op.relu(x))
    ...     bb.emit_func_output(gv)
    >>> mod = DeadCodeElimination()(bb.get())
    >>> [b.var.name_hint for b in mod["main"].body.blocks[0].bindings]
    ['gv0']
"""
from __future__ import annotations

from typing import Any

from ingot.ir import IRModule
from ingot.ir.module import GlobalVar

from ..expr import Call, DataflowBlock, ExternFunc, Function, Op, SeqExpr, Tuple
from ._util import graph_functions, make_pass, used_vars


def _removable(block: Any, value: Any) -> bool:
    if isinstance(value, Call) and isinstance(value.op, Op) and (
            value.op.name == "tensor_to_shape" or value.op.name == "builtin" and _binds_fresh_dims(value)):
        # It binds symbolic dims that later shapes use without naming its variable (a Shape of a
        # builtin's result read as data: ``shape_to_tensor`` names the dims only).
        return False
    if isinstance(block, DataflowBlock):
        return True
    if isinstance(value, Call):
        return isinstance(value.op, Op) and value.op.name != "call_dps_packed"
    return True


def _binds_fresh_dims(call: Call) -> bool:
    """Whether a ``builtin`` call's outputs declare fresh dims (names, not ints or known expressions)."""
    return any(isinstance(d, str) for dims, _ in call.attrs["outputs"] for d in dims)


def eliminate_in_function(func: Function) -> Function:
    """``func`` without unused bindings (repeated until nothing changes)."""
    while True:
        counts = used_vars(func.body)
        blocks, changed = [], False
        for block in func.body.blocks:
            kept = [b for b in block.bindings if counts.get(id(b.var), 0) or not _removable(block, b.value)]
            changed |= len(kept) != len(block.bindings)
            if kept:
                blocks.append(type(block)(kept))
        if not changed:
            return func
        func = Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs)


def _callees(func: Function) -> set:
    names = set()

    def visit(e: Any) -> None:
        if isinstance(e, GlobalVar):
            names.add(e.name_hint)
        elif isinstance(e, Call):
            visit(e.op)
            for a in e.args:
                visit(a)
        elif isinstance(e, Tuple):
            for f in e.fields:
                visit(f)

    for block in func.body.blocks:
        for b in block.bindings:
            visit(b.value)
    visit(func.body.body)
    return names


def eliminate_module(mod: IRModule) -> IRModule:
    """Remove dead bindings in every graph function, then unreachable functions."""
    for name, func in graph_functions(mod):
        mod = mod.with_function(name, eliminate_in_function(func))
    roots = [n for n, f in graph_functions(mod) if not f.attrs.get("Primitive")]
    if not roots:
        return mod
    live, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in live or name not in mod:
            continue
        live.add(name)
        func = mod[name]
        if isinstance(func, Function):
            todo.extend(_callees(func))
    for name in list(mod.functions):
        if name not in live:
            mod = mod.without_function(name)
    return mod


def DeadCodeElimination() -> Any:  # noqa: N802 - TVM's pass name
    """The DeadCodeElimination pass (see the module note).

    Example: see the module docstring.
    """
    return make_pass(eliminate_module, "DeadCodeElimination")


_ = ExternFunc
