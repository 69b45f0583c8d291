"""EliminateCommonSubexpr: a pure call computed twice in a dataflow block is computed once.

Note: a binding's key is its callee (operator name or PrimFunc name), its arguments (variables by
identity, constants by content hash, tuples recursively), its attributes and its explicit result
struct infos. A later binding with a key already seen is dropped and its variable replaced by the
first one's. Only operator calls and ``call_tir`` in dataflow blocks are merged: packed calls
may have side effects.

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((4,), "float32"))
    >>> bb = G.BlockBuilder()
    >>> with bb.function("main", [x]):
    ...     with bb.dataflow():
    ...         a = bb.emit(G.op.exp(x))
    ...         b = bb.emit(G.op.exp(x))
    ...         gv = bb.emit_output(G.op.add(a, b))
    ...     bb.emit_func_output(gv)
    >>> mod = EliminateCommonSubexpr()(bb.get())
    >>> str(mod["main"].body.blocks[0].bindings[-1].value)
    'R.add(lv0, lv0)'
"""
from __future__ import annotations

from typing import Any

from ingot.ir import IRModule
from ingot.ir.module import GlobalVar

from ..expr import Call, Constant, DataflowBlock, Function, Op, SeqExpr, ShapeExpr, Tuple, Var, VarBinding
from ._util import graph_functions, make_pass, remap


def _key(e: Any) -> Any:
    if isinstance(e, Var):
        return ("var", id(e))
    if isinstance(e, Constant):
        return ("const", e.content_hash)
    if isinstance(e, Tuple):
        return ("tuple",) + tuple(_key(f) for f in e.fields)
    if isinstance(e, GlobalVar):
        return ("gvar", e.name_hint)
    if isinstance(e, ShapeExpr):
        return ("shape", tuple(str(v) for v in e.values))
    if isinstance(e, Call) and isinstance(e.op, Op):
        return ("call", e.op.name, tuple(_key(a) for a in e.args), repr(sorted(e.attrs.items())),
                tuple(str(s) for s in e.sinfo_args))
    return ("other", id(e))


def _mergeable(value: Any) -> bool:
    return isinstance(value, Call) and isinstance(value.op, Op) and value.op.name != "call_dps_packed"


def eliminate_in_function(func: Function) -> Function:
    """``func`` with repeated pure calls of each dataflow block merged."""
    vmap: dict = {}
    blocks = []
    for block in func.body.blocks:
        seen: dict = {}
        bindings = []
        for b in block.bindings:
            value = remap(b.value, vmap)
            if isinstance(block, DataflowBlock) and _mergeable(value):
                key = _key(value)
                first = seen.get(key)
                if first is not None and type(first) is type(b.var):
                    vmap[b.var] = first
                    continue
                seen.setdefault(key, b.var)
            bindings.append(b if value is b.value else VarBinding(b.var, value))
        blocks.append(type(block)(bindings))
    return Function(func.params, SeqExpr([blk for blk in blocks if blk.bindings], remap(func.body.body, vmap)),
                    func.ret_struct_info, func.attrs)


def cse_module(mod: IRModule) -> IRModule:
    """Eliminate common subexpressions in every graph function of ``mod``."""
    for name, func in graph_functions(mod):
        mod = mod.with_function(name, eliminate_in_function(func))
    return mod


def EliminateCommonSubexpr() -> Any:  # noqa: N802 - TVM's pass name
    """The EliminateCommonSubexpr pass (see the module note).

    Example: see the module docstring.
    """
    return make_pass(cse_module, "EliminateCommonSubexpr")
