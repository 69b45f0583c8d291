"""LegalizeOps: each operator call becomes a ``call_tir`` of a PrimFunc built from its TE compute.

Note: the PrimFunc comes from the operator's registered legalization (a TE compute in
`ingot.ops`) through ``te.create_prim_func``; scalar (0-d) constant operands are inlined into the
compute instead of becoming parameters. Symbolic sizes the PrimFunc takes as scalar parameters
are passed as the call's ``tir_vars``. PrimFuncs are deduplicated by structural hash (two
``relu`` calls on the same shape share one kernel) and carry ``op_pattern`` (the fusion kind).

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((4,), "float32"))
    >>> bb = G.BlockBuilder()
    >>> with bb.function("main", [x]):
    ...     bb.emit_func_output(bb.emit(G.op.relu(x)))
    >>> mod = LegalizeOps()(bb.get())  # doctest: +SKIP
    >>> sorted(mod.functions)  # doctest: +SKIP
    ['main', 'relu']
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot.ir import IRModule, const
from ingot.ir.error import IRError

from ..block_builder import BlockBuilder
from ..expr import Call, Constant, Expr, Function, Op, Tuple, VarBinding
from ..op.base import call_tir
from ..op.dynamic import RUNTIME_SHAPE_OPS
from ..op_registry import get_op_def
from ..struct_info import TensorStructInfo
from ..te_bridge import call_tir_scalars, create_prim_func, placeholder_for
from ._util import graph_functions, make_pass, map_bindings

# Ops that already call a kernel or a registered function, and the run-time shape builtins the
# executor runs itself (`ingot.graph.runtime_shape`).
# Control flow (if_then_else, loop, scan) is run by the executor.
_NOT_LEGALIZED = {"call_tir", "call_dps_packed", "if_then_else", "loop", "scan"} | RUNTIME_SHAPE_OPS


def is_legalizable(call: Any) -> bool:
    """Whether ``call`` is an operator call that LegalizeOps rewrites."""
    return isinstance(call, Call) and isinstance(call.op, Op) and call.op.name not in _NOT_LEGALIZED


def te_inputs_for(args: Any, names: Any, placeholders: list, graph_args: list) -> list:
    """TE inputs of a call's arguments: placeholders for tensors (appended to ``placeholders`` and
    ``graph_args``), inline constants for 0-d constants, lists for tuples."""
    inputs = []
    for index, a in enumerate(args):
        if isinstance(a, Tuple):
            inputs.append(te_inputs_for(a.fields, [f"{names[index]}_{k}" for k in range(len(a.fields))],
                                        placeholders, graph_args))
        elif isinstance(a, Constant) and a.data.ndim == 0:
            inputs.append(const(a.data.item(), str(a.data.dtype)))
        elif isinstance(a.struct_info, TensorStructInfo):
            ph = placeholder_for(a.struct_info, getattr(a, "name_hint", None) or names[index])
            placeholders.append(ph)
            graph_args.append(a)
            inputs.append(ph)
        else:
            raise IRError(f"LegalizeOps: argument {index} (`{a}`) of {names} is not a tensor or tuple of tensors")
    return inputs


def legalize_call(call: Call, bb: BlockBuilder) -> Call:
    """The ``call_tir`` replacing operator call ``call`` (its PrimFunc added through ``bb``)."""
    op_def = get_op_def(call.op.name)
    if op_def.legalize is None:
        raise NotImplementedError(f"operator {call.op.name!r} has no legalization registered; add one in "
                                  f"ingot/graph/op/ (see docs/adding_an_op.md)")
    placeholders: list = []
    graph_args: list = []
    inputs = te_inputs_for(call.args, [f"A{i}" for i in range(len(call.args))], placeholders, graph_args)
    from ingot.tir.function import PrimFunc  # on first use: importing the graph does not load TensorIR

    out = op_def.legalize(inputs, call.attrs, call.struct_info)
    if isinstance(out, PrimFunc):
        # A kernel written in TensorIR (a recurrence has no TE form): its parameters are the tensor
        # arguments then the outputs, as create_prim_func would make them.
        func = out.with_attr("global_symbol", call.op.name).with_attr("op_pattern", op_def.pattern)
    else:
        # Tuple-valued operators (split) return one TE tensor per field: all are outputs.
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        func = create_prim_func(placeholders, outs, call.op.name).with_attr("op_pattern", op_def.pattern)
    # Scalars are read off this function before `add_func` may swap it for an equal one with
    # other Var objects: they are the call's own symbolic expressions.
    tir_vars = call_tir_scalars(func, [a.struct_info for a in graph_args] + _fields(call.struct_info))
    gvar = bb.add_func(func, call.op.name)
    return call_tir(gvar, graph_args, call.struct_info, tir_vars=tir_vars or None)


def _fields(sinfo: Any) -> list:
    from ..struct_info import TupleStructInfo

    return list(sinfo.fields) if isinstance(sinfo, TupleStructInfo) else [sinfo]


def legalize_module(mod: IRModule) -> IRModule:
    """Legalize every operator call of every (non-primitive) graph function of ``mod``."""
    bb = BlockBuilder(mod)
    for name, func in graph_functions(mod):
        if func.attrs.get("Primitive"):
            continue

        def rewrite(b: VarBinding, vmap: dict) -> VarBinding:
            if is_legalizable(b.value):
                return VarBinding(b.var, legalize_call(b.value, bb))
            return b

        bb.update_func(name, map_bindings(func, rewrite))
    return bb.get()


def LegalizeOps() -> Any:  # noqa: N802 - TVM's pass name
    """The LegalizeOps pass (see the module note).

    Example: see the module docstring.
    """
    return make_pass(legalize_module, "LegalizeOps")


_ = (np, Expr, Function)
