"""FuseOps and FuseTIR: group operator calls by pattern kind, then make one PrimFunc per group.

Note (why fusion works this way): as in TVM, each operator has a pattern kind (`OpPattern`).
Walking a dataflow block in order, a call joins the group of an argument's producer when that
producer's value is used only by this call (so every group is a tree with one output and fusing
can never create a cycle) and the kinds allow it:
  * producer group out-elementwise-fusable (conv2d, linear, matmul, pooling) + elementwise or
    broadcast consumer (bias add, activation, residual add) → fuse, the group stays
    out-elementwise-fusable;
  * producer group injective or lower + injective or lower consumer → fuse (elementwise chains);
  * producer group injective or lower + reduction consumer → fuse (the group becomes a reduction);
  * producer group reduction + elementwise/broadcast consumer → fuse (an epilogue).
Each group of two or more calls becomes a graph `Function` with ``"Primitive": True`` named
``fused_<op>_<op>...`` and the group is replaced by one call to it. `FuseTIR` turns each
primitive function into one PrimFunc by chaining the operators' TE computes (intermediate
tensors become the PrimFunc's root-block ``alloc_buffers``) and replaces the calls by ``call_tir``.
The default pipeline is FuseOps → FuseTIR → LegalizeOps (the calls left unfused).

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((1, 8), "float32"))
    >>> w = G.Var("w", G.TensorStructInfo((4, 8), "float32"))
    >>> bb = G.BlockBuilder()
    >>> with bb.function("main", [x, w]):
    ...     with bb.dataflow():
    ...         lv0 = bb.emit(G.op.linear(x, w))
    ...         gv = bb.emit_output(G.op.relu(lv0))
    ...     bb.emit_func_output(gv)
    >>> sorted(FuseOps()(bb.get()).functions)
    ['fused_linear_relu', 'main']
"""
from __future__ import annotations

from typing import Any

from ingot.ir import IRModule
from ingot.ir.module import GlobalVar

from ..block_builder import BlockBuilder
from ..expr import (
    Call, Constant, DataflowBlock, Expr, Function, Op, SeqExpr, Tuple, Var, VarBinding,
)
from ..op.base import call_tir
from ..op_registry import OpPattern, get_op_def
from ..te_bridge import call_tir_scalars, create_prim_func
from ._util import graph_functions, make_pass, remap, used_vars
from .legalize_ops import is_legalizable, te_inputs_for

_MAX_GROUP = 64
#: The most tensor inputs a fused group takes (TVM's FuseOps has the same cap, ``max_function_args``):
#: an unrolled recurrent layer's concat tree of ``2T`` step outputs would otherwise fuse into one
#: kernel of ``2T`` arguments, whose packed entry and lowering grow with ``T`` and are made once per
#: tree instead of once for all equal subtrees.
_MAX_INPUTS = 64


def _num_inputs(bindings: list) -> int:
    """How many distinct tensors from outside ``bindings`` their calls read (0-d constants are inlined)."""
    inside = {id(b.var) for b in bindings}
    seen: set = set()
    for b in bindings:
        for a in b.value.args:
            for x in (a.fields if isinstance(a, Tuple) else (a,)):
                if isinstance(x, Var) and id(x) not in inside or isinstance(x, Constant) and x.data.ndim > 0:
                    seen.add(id(x))
    return len(seen)


def _can_fuse(group_pattern: int, consumer: int) -> "int | None":
    """The fused group's pattern, or None when a ``consumer`` may not join the group."""
    if group_pattern == OpPattern.OUT_ELEMWISE_FUSABLE and consumer <= OpPattern.BROADCAST:
        return OpPattern.OUT_ELEMWISE_FUSABLE
    if group_pattern <= OpPattern.INJECTIVE and consumer <= OpPattern.INJECTIVE:
        return max(group_pattern, consumer)
    if group_pattern <= OpPattern.INJECTIVE and consumer == OpPattern.REDUCTION:
        return OpPattern.REDUCTION
    if group_pattern == OpPattern.REDUCTION and consumer <= OpPattern.BROADCAST:
        return OpPattern.REDUCTION
    return None


class _Group:
    def __init__(self, binding: VarBinding, pattern: int):
        self.bindings = [binding]
        self.pattern = pattern


def _arg_vars(call: Call) -> list:
    out = []
    for a in call.args:
        if isinstance(a, Var):
            out.append(a)
        elif isinstance(a, Tuple):
            out.extend(f for f in a.fields if isinstance(f, Var))
    return out


def _fuse_block(block: DataflowBlock, counts: dict, bb: BlockBuilder) -> DataflowBlock:
    # Step 1: assign groups, walking bindings in order.
    group_of: dict[int, _Group] = {}
    order: dict[int, _Group] = {}  # by id: membership tests on a list were quadratic in the block
    for b in block.bindings:
        if not is_legalizable(b.value):
            continue
        pattern = get_op_def(b.value.op.name).pattern
        mine = _Group(b, pattern)
        for v in _arg_vars(b.value):
            g = group_of.get(id(v))
            if g is None or g is mine or counts.get(id(v), 0) != 1:
                continue
            fused = _can_fuse(g.pattern, pattern) if len(mine.bindings) == 1 else \
                _can_fuse(g.pattern, mine.pattern) or _can_fuse(mine.pattern, g.pattern)
            if fused is None or len(g.bindings) + len(mine.bindings) > _MAX_GROUP:
                continue
            if _num_inputs(g.bindings + mine.bindings) > _MAX_INPUTS:
                continue
            g.bindings.extend(mine.bindings)
            g.pattern = fused
            for mb in mine.bindings:
                group_of[id(mb.var)] = g
            order.pop(id(mine), None)
            mine = g
        group_of[id(b.var)] = mine
        if id(mine) not in order:
            order[id(mine)] = mine
    # Step 2: rebuild the block, replacing each multi-call group by one call at its last binding.
    # (Positions looked up in a dict: ``block.bindings.index`` per sort key was quadratic in the block,
    # seconds for an unrolled recurrent layer's thousands of bindings.)
    position = {id(b): k for k, b in enumerate(block.bindings)}
    last_of = {id(g.bindings[-1].var): g for g in order.values() if len(g.bindings) > 1}
    grouped = {id(b.var) for g in last_of.values() for b in g.bindings}
    bindings = []
    for b in block.bindings:
        if id(b.var) in last_of:
            g = last_of[id(b.var)]
            g.bindings.sort(key=lambda x: position[id(x)])
            bindings.append(VarBinding(b.var, _make_group_call(g, bb)))
        elif id(b.var) not in grouped:
            bindings.append(b)
    return DataflowBlock(bindings)


def _make_group_call(group: _Group, bb: BlockBuilder) -> Call:
    """A primitive Function for ``group`` (added to the module) and the call replacing the group."""
    inside = {id(b.var) for b in group.bindings}
    params, args, vmap = [], [], {}

    def param_for(a: Expr) -> Expr:
        if isinstance(a, Var) and id(a) in inside:
            return a
        if isinstance(a, Constant) and a.data.ndim == 0:
            return a  # scalars stay inline; FuseTIR folds them into the compute
        if isinstance(a, Tuple):
            return Tuple([param_for(f) for f in a.fields])
        key = a if isinstance(a, Var) else id(a)
        if key not in vmap:
            vmap[key] = Var(getattr(a, "name_hint", None) or f"p{len(params)}", a.struct_info)
            params.append(vmap[key])
            args.append(a)
        return vmap[key]

    bindings = []
    for b in group.bindings:
        call = b.value
        new_args = [param_for(a) for a in call.args]
        bindings.append(VarBinding(b.var, Call(call.op, new_args, call.attrs, call.sinfo_args, call.struct_info)))
    out = group.bindings[-1].var
    name = "fused_" + "_".join(b.value.op.name for b in group.bindings)
    func = Function(params, SeqExpr([DataflowBlock(bindings)], out), out.struct_info, {"Primitive": True})
    gvar = bb.add_func(func, name)
    return Call(gvar, args, {}, (), out.struct_info)


def fuse_module(mod: IRModule) -> IRModule:
    """Group fusable operator calls of every graph function into primitive functions."""
    bb = BlockBuilder(mod)
    for name, func in graph_functions(mod):
        if func.attrs.get("Primitive"):
            continue
        counts = used_vars(func.body)
        blocks = [_fuse_block(blk, counts, bb) if isinstance(blk, DataflowBlock) else blk for blk in func.body.blocks]
        bb.update_func(name, Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs))
    return bb.get()


def FuseOps() -> Any:  # noqa: N802 - TVM's pass name
    """The FuseOps pass (see the module note).

    Example: see the module docstring.
    """
    return make_pass(fuse_module, "FuseOps")


# -- FuseTIR ------------------------------------------------------------------------------------


def primitive_to_prim_func(func: Function, name: str) -> Any:
    """One PrimFunc computing primitive function ``func`` by chaining its operators' TE computes."""
    from ..te_bridge import placeholder_for

    tensors: dict[int, Any] = {}
    placeholders = [placeholder_for(p.struct_info, p.name_hint) for p in func.params]
    for p, ph in zip(func.params, placeholders):
        tensors[id(p)] = ph

    def te_value(a: Any) -> Any:
        if isinstance(a, Tuple):
            return [te_value(f) for f in a.fields]
        if isinstance(a, Constant) and a.data.ndim == 0:
            return te_inputs_for([a], ["c"], [], [])[0]
        return tensors[id(a)]

    for block in func.body.blocks:
        for b in block.bindings:
            op_def = get_op_def(b.value.op.name)
            if op_def.legalize is None:
                raise NotImplementedError(f"FuseTIR: operator {b.value.op.name!r} has no legalization")
            inputs = [te_value(a) for a in b.value.args]
            tensors[id(b.var)] = op_def.legalize(inputs, b.value.attrs, b.value.struct_info)
    out = tensors[id(func.body.body)]
    return create_prim_func(placeholders, list(out) if isinstance(out, (list, tuple)) else [out], name)


def fuse_tir_module(mod: IRModule) -> IRModule:
    """Replace calls to primitive functions by ``call_tir`` of one PrimFunc each."""
    bb = BlockBuilder(mod)
    made: dict[str, GlobalVar] = {}
    scalars: dict[str, tuple] = {}  # primitive function -> (its PrimFunc, struct infos of its params + output)
    # Structurally equal groups (an unrolled recurrent layer's T steps: hundreds of copies of a few
    # groups) make the same PrimFunc: build it once per structural hash of the group. The block builder
    # would dedupe the PrimFuncs afterwards, but building each one (TE computes, create_prim_func) is
    # what costs; the module that comes out is the same.
    by_group: dict[str, str] = {}
    for name, func in graph_functions(mod):
        if func.attrs.get("Primitive"):
            key = _group_hash(func)
            first = by_group.get(key)
            if first is not None:
                made[name], scalars[name] = made[first], scalars[first]
                continue
            by_group[key] = name
            prim = primitive_to_prim_func(func, name)
            scalars[name] = (prim, [p.struct_info for p in func.params] + _fields(func.ret_struct_info))
            made[name] = bb.add_func(prim, name + "_tir")
    if not made:
        return mod
    for name, func in graph_functions(mod):
        if func.attrs.get("Primitive"):
            continue
        blocks = []
        for blk in func.body.blocks:
            bindings = []
            for b in blk.bindings:
                v = b.value
                if isinstance(v, Call) and isinstance(v.op, GlobalVar) and v.op.name_hint in made:
                    v = call_tir(made[v.op.name_hint], list(v.args), v.struct_info,
                                 tir_vars=_call_scalars(scalars[v.op.name_hint], v) or None)
                bindings.append(VarBinding(b.var, v))
            blocks.append(type(blk)(bindings))
        bb.update_func(name, Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs))
    out = bb.get()
    for name in made:
        out = out.without_function(name)
    # The PrimFuncs take the primitive functions' names (fused_linear_relu), as in TVM.
    renamed = {}
    for name, gv in made.items():
        renamed[gv.name_hint] = name
    funcs = {}
    for name, func in out.functions.items():
        new_name = renamed.get(name, name)
        if new_name != name:
            func = func.with_attr("global_symbol", new_name)
        funcs[new_name] = _rename_calls(func, renamed) if isinstance(func, Function) else func
    return IRModule(funcs, out.attrs)


def _group_hash(func: Function) -> str:
    """The structural hash of primitive function ``func`` without its name attributes: equal hashes
    make equal PrimFuncs (parameters are matched by position, free symbolic dims by name; constants by
    content)."""
    from ingot.ir.structural import structural_hash

    attrs = func.attrs
    for key in ("global_symbol", "name"):
        if key in attrs:
            attrs = attrs.without(key)
    return structural_hash(func.replace(attrs=attrs))


def _fields(sinfo: Any) -> list:
    from ..struct_info import TupleStructInfo

    return list(sinfo.fields) if isinstance(sinfo, TupleStructInfo) else [sinfo]


def _call_scalars(made: tuple, call: Call) -> list:
    """The ``tir_vars`` of a call of a primitive function: its PrimFunc's scalar parameters are the
    primitive function's symbolic dims; at the call site they are the caller's (the same Vars
    unless the function is shared, so they are mapped through the parameters' shapes)."""
    from ..te_bridge import match_dims

    prim, param_sinfos = made
    inner = call_tir_scalars(prim, param_sinfos)
    if not inner:
        return []
    bound: dict = {}
    for p, a in zip(param_sinfos, [x.struct_info for x in call.args] + _fields(call.struct_info)):
        if getattr(p, "shape", None) is not None and getattr(a, "shape", None) is not None:
            for d, g in zip(p.shape, a.shape):
                match_dims(d, g, bound)
    from ingot.ir.functor import substitute

    return [substitute(e, bound) if bound else e for e in inner]


def _rename_calls(func: Function, renamed: dict) -> Function:
    blocks = []
    for blk in func.body.blocks:
        bindings = []
        for b in blk.bindings:
            v = b.value
            if isinstance(v, Call) and isinstance(v.op, Op) and v.op.name == "call_tir" and \
                    v.args[0].name_hint in renamed:
                v = Call(v.op, [GlobalVar(renamed[v.args[0].name_hint])] + list(v.args[1:]), v.attrs,
                         v.sinfo_args, v.struct_info)
            bindings.append(VarBinding(b.var, v))
        blocks.append(type(blk)(bindings))
    return Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs)


def FuseTIR() -> Any:  # noqa: N802 - TVM's pass name
    """The FuseTIR pass (see the module note).

    Example:
        >>> p = FuseTIR()
    """
    return make_pass(fuse_tir_module, "FuseTIR")


_ = (remap,)
