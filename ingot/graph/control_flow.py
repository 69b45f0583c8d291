"""Control flow in the graph IR: the `If` expression, its lifting for the build, and the executor steps.

Note: as in TVM Relax, ``If(cond, true_branch, false_branch)`` is an expression whose branches are
`SeqExpr`s: bindings of their own and a result; they read outer values directly (captures). It
prints and parses in TVMScript form::

    if c:
        lv0 = R.add(x, y)
        r = lv0
    else:
        r = R.multiply(x, y)

Loops are calls of the ``loop`` / ``scan`` operators (`ingot.graph.op.control`) whose body is a graph
function of the module named by an attribute, taking the captured outer values as parameters.

The build pipeline (fusion, legalization, FuseTIR...) works on the top-level bindings of module
functions. `lift_control_flow` (run by `ingot.graph.build` first) therefore lifts each branch of each
`If` into a function of the module — ``<func>_then<k>`` / ``<func>_else<k>``, both taking the values
the branches capture, in one order — and replaces the `If` by an ``if_then_else`` call naming them.
Every branch and body is then an ordinary graph function: its kernels are fused, legalized and
compiled once, and it gets its own execution plan. The plan of a function with control flow has
``if_then_else`` / ``loop`` / ``scan`` steps (`compile_control_call`), run by the Python executor
(`run_control_step`, which calls the callee's plan per branch taken or iteration); such a plan has no
AOT C entry. A module without control flow builds exactly as before.

Example:
    >>> from ingot import graph as G
    >>> c = G.Var("c", G.TensorStructInfo((), "bool"))
    >>> x = G.Var("x", G.TensorStructInfo((3,), "float32"))
    >>> node = If(c, G.SeqExpr([], x), G.SeqExpr([], x))
    >>> str(node.struct_info)
    'R.Tensor((3,), dtype="float32")'
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ingot.ir import IRModule
from ingot.ir.error import IRError

from .block_builder import unique_name
from .expr import (
    Call, DataflowBlock, Expr, Function, SeqExpr, Tuple, TupleGetItem, Var, VarBinding,
)
from .struct_info import ObjectStructInfo, StructInfo, TensorStructInfo, TupleStructInfo, shape_equal


class If(Expr):
    """``true_branch`` when ``cond`` (a one-element bool tensor) holds, else ``false_branch``.

    Both branches are `SeqExpr`s that may read any value of the enclosing function. The struct info
    is the branches' when they agree, else what both have in common (dtype, rank).

    Example: see the module docstring.
    """

    __slots__ = ("cond", "true_branch", "false_branch")
    _fields = ("cond", "true_branch", "false_branch")

    def __init__(self, cond: Expr, true_branch: Expr, false_branch: Expr):
        if not isinstance(true_branch, SeqExpr):
            true_branch = SeqExpr([], true_branch)
        if not isinstance(false_branch, SeqExpr):
            false_branch = SeqExpr([], false_branch)
        sinfo = cond.struct_info
        if isinstance(sinfo, TensorStructInfo) and (str(sinfo.dtype) != "bool" or (
                sinfo.shape is not None and int(np.prod([d if isinstance(d, int) else 2 for d in sinfo.shape])) != 1)):
            raise IRError(f"If: the condition `{cond}` must be a one-element bool tensor, got {sinfo}")
        self._init(cond=cond, true_branch=true_branch, false_branch=false_branch,
                   struct_info=join_struct_info(true_branch.struct_info, false_branch.struct_info))


def join_struct_info(a: StructInfo, b: StructInfo) -> StructInfo:
    """What is known of a value that is either ``a`` or ``b``.

    Example:
        >>> str(join_struct_info(TensorStructInfo((2,), "float32"), TensorStructInfo((3,), "float32")))
        'R.Tensor(dtype="float32", ndim=1)'
    """
    if isinstance(a, TensorStructInfo) and isinstance(b, TensorStructInfo) and a.dtype == b.dtype:
        if a.shape is not None and shape_equal(a.shape, b.shape):
            return a
        return TensorStructInfo(None, a.dtype, a.ndim if a.ndim == b.ndim else -1)
    if isinstance(a, TupleStructInfo) and isinstance(b, TupleStructInfo) and len(a.fields) == len(b.fields):
        return TupleStructInfo([join_struct_info(x, y) for x, y in zip(a.fields, b.fields)])
    return a if type(a) is type(b) and a == b else ObjectStructInfo()


# -- analyses over nested bodies ------------------------------------------------------------------


def free_vars(expr: Any) -> list:
    """The graph variables ``expr`` reads but does not define, in first-use order.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2,), "float32"))
        >>> y = G.Var("y", x.struct_info)
        >>> [v.name_hint for v in free_vars(G.SeqExpr([G.BindingBlock([G.VarBinding(y, G.op.exp(x))])], y))]
        ['x']
    """
    out: dict = {}
    _free(expr, set(), out)
    return list(out.values())


def _free(e: Any, bound: set, out: dict) -> None:
    if isinstance(e, Var):
        if id(e) not in bound:
            out.setdefault(id(e), e)
    elif isinstance(e, Call):
        for a in e.args:
            _free(a, bound, out)
    elif isinstance(e, Tuple):
        for f in e.fields:
            _free(f, bound, out)
    elif isinstance(e, TupleGetItem):
        _free(e.tuple_value, bound, out)
    elif isinstance(e, SeqExpr):
        inner = set(bound)
        for block in e.blocks:
            for b in block.bindings:
                _free(b.value, inner, out)
                inner.add(id(b.var))
        _free(e.body, inner, out)
    elif isinstance(e, If):
        _free(e.cond, bound, out)
        _free(e.true_branch, bound, out)
        _free(e.false_branch, bound, out)
    elif isinstance(e, Function):
        _free(e.body, bound | {id(p) for p in e.params}, out)


def substitute(e: Any, vmap: dict) -> Any:
    """``e`` with the variables of ``vmap`` (keyed by ``id``) replaced, through nested SeqExprs and Ifs.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2,), "float32"))
        >>> y = G.Var("y", x.struct_info)
        >>> str(substitute(G.op.exp(x), {id(x): y}))
        'R.exp(y)'
    """
    if isinstance(e, Var):
        return vmap.get(id(e), e)
    if isinstance(e, Call):
        args = [substitute(a, vmap) for a in e.args]
        if all(a is b for a, b in zip(args, e.args)):
            return e
        return Call(e.op, args, e.attrs, e.sinfo_args, e.struct_info)
    if isinstance(e, Tuple):
        fields = [substitute(f, vmap) for f in e.fields]
        return e if all(a is b for a, b in zip(fields, e.fields)) else Tuple(fields)
    if isinstance(e, TupleGetItem):
        inner = substitute(e.tuple_value, vmap)
        return e if inner is e.tuple_value else TupleGetItem(inner, e.index)
    if isinstance(e, SeqExpr):
        blocks = [type(blk)([VarBinding(b.var, substitute(b.value, vmap)) for b in blk.bindings])
                  for blk in e.blocks]
        return SeqExpr(blocks, substitute(e.body, vmap))
    if isinstance(e, If):
        return If(substitute(e.cond, vmap), substitute(e.true_branch, vmap), substitute(e.false_branch, vmap))
    return e


def has_control_flow(mod: IRModule) -> bool:
    """Whether a graph function of ``mod`` binds an `If` (what `lift_control_flow` rewrites).

    Example:
        >>> has_control_flow(IRModule({}))
        False
    """
    return any(isinstance(b.value, If) for f in mod.functions.values() if isinstance(f, Function)
               for blk in f.body.blocks for b in blk.bindings)


# -- lifting for the build -------------------------------------------------------------------------


def lift_control_flow(mod: IRModule) -> IRModule:
    """Lift every `If` branch into a module function and call them with ``if_then_else`` (module note).

    Example:
        >>> from ingot import graph as G
        >>> c = G.Var("c", G.TensorStructInfo((), "bool"))
        >>> x = G.Var("x", G.TensorStructInfo((3,), "float32"))
        >>> bb = G.BlockBuilder()
        >>> with bb.function("main", [c, x]):
        ...     bb.emit_func_output(bb.emit(If(c, G.op.exp(x), G.op.negative(x))))
        >>> sorted(lift_control_flow(bb.get()).function_names)
        ['main', 'main_else0', 'main_then0']
    """
    from .op.control import if_then_else

    functions = dict(mod.functions)
    todo = [n for n, f in functions.items() if isinstance(f, Function)]
    counter: dict = {}
    while todo:
        name = todo.pop(0)
        func = functions[name]
        changed = False
        blocks = []
        for blk in func.body.blocks:
            bindings = []
            for b in blk.bindings:
                if not isinstance(b.value, If):
                    bindings.append(b)
                    continue
                node = b.value
                # Both branches take every value either captures, in one order.
                captured = free_vars(Tuple([node.true_branch, node.false_branch]))
                names = []
                for kind, branch in (("then", node.true_branch), ("else", node.false_branch)):
                    k = counter.get(name, 0)
                    fname = unique_name(f"{name}_{kind}{k}", functions)
                    params = [Var(v.name_hint, v.struct_info) for v in captured]
                    body = substitute(branch, {id(v): p for v, p in zip(captured, params)})
                    functions[fname] = _as_function(params, body)
                    todo.append(fname)
                    names.append(fname)
                counter[name] = counter.get(name, 0) + 1
                call = if_then_else(node.cond, *captured, then_branch=names[0], else_branch=names[1],
                                    out_sinfo=b.var.struct_info)
                bindings.append(VarBinding(b.var, call))
                changed = True
            blocks.append(type(blk)(bindings))
        if changed:
            functions[name] = Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs)
    return IRModule(functions, mod.attrs)


def _as_function(params: list, body: SeqExpr) -> Function:
    """A module function of a branch: its bindings in one dataflow block (so the build fuses them),
    its result bound to a non-dataflow variable when it is a dataflow one."""
    vmap: dict = {}
    bindings = []
    for blk in body.blocks:
        for b in blk.bindings:
            value = substitute(b.value, vmap)
            bindings.append(VarBinding(_plain(b.var, vmap), value))
    result = substitute(body.body, vmap)
    return Function(params, SeqExpr([DataflowBlock(bindings)] if bindings else [], result), result.struct_info)


def _plain(var: Var, vmap: dict) -> Var:
    # Every variable of a lifted branch may be its result: keep them all non-dataflow Vars.
    if type(var) is Var:
        return var
    new = Var(var.name_hint, var.struct_info)
    vmap[id(var)] = new
    return new


# -- execution plans and the executor -----------------------------------------------------------


def compile_control_call(compiler: Any, call: Call) -> list:
    """The plan step of an ``if_then_else`` / ``loop`` / ``scan`` call (`ingot.graph.plan`): the
    callees by name, the attributes the executor needs, the arguments as refs; one result value.

    Example:
        >>> compile_control_call(compiler, call)  # doctest: +SKIP
        ['value', 3]
    """
    name = call.op.name
    attrs = {k: (list(v) if isinstance(v, tuple) else v) for k, v in call.attrs.items() if k != "out_sinfo"}
    funcs = [call.attrs[k] for k in ("then_branch", "else_branch", "body") if k in call.attrs]
    step = {"op": name, "func": ",".join(funcs), "attrs": attrs, "args": [compiler.ref(a) for a in call.args],
            "out": len(compiler.values), "result": result_desc(call.struct_info)}
    compiler.steps.append(step)
    compiler.values.append({"shape": None, "dtype": None, "step": len(compiler.steps) - 1})
    return ["value", len(compiler.values) - 1]


def result_desc(sinfo: StructInfo) -> Any:
    """dtype/rank of each result tensor (for empty scan outputs of a loop that ran no iteration).

    Example:
        >>> result_desc(TensorStructInfo((2, 3), "float32"))
        {'dtype': 'float32', 'ndim': 2}
    """
    if isinstance(sinfo, TupleStructInfo):
        return [result_desc(f) for f in sinfo.fields]
    if isinstance(sinfo, TensorStructInfo):
        return {"dtype": str(sinfo.dtype), "ndim": sinfo.ndim}
    return None


def control_callees(plans: dict) -> set:
    """Names of the graph functions that control-flow steps of ``plans`` call (branches, loop bodies).

    Example:
        >>> control_callees({"main": {"steps": [{"op": "loop", "attrs": {"body": "b"}}]}})
        {'b'}
    """
    names = set()
    for plan in plans.values():
        for step in plan["steps"]:
            if step["op"] in CONTROL_STEPS:
                names.update(step["attrs"][k] for k in ("then_branch", "else_branch", "body") if k in step["attrs"])
    return names


#: The plan step kinds `run_control_step` runs.
CONTROL_STEPS = ("if_then_else", "loop", "scan")


def run_control_step(step: dict, args: list, invoke: Callable[[str, list], Any]) -> Any:
    """Run one control-flow step on its resolved arguments; ``invoke(function, args)`` runs a plan.

    Example:
        >>> step = {"op": "if_then_else", "attrs": {"then_branch": "t", "else_branch": "e"}}
        >>> run_control_step(step, [np.array(False), np.ones(2)], lambda f, a: (f, float(a[0].sum())))
        ('e', 2.0)
    """
    return _unaliased(_run(step, args, invoke), args)


def _unaliased(result: Any, args: list) -> Any:
    """``result`` with every array that may share memory with an argument copied: a branch may return a
    captured value, and a loop that runs no iteration returns its inputs, which may live in the caller's
    planned workspace (reused by later steps once the memory plan thinks them dead)."""
    if isinstance(result, tuple):
        return tuple(_unaliased(r, args) for r in result)
    if isinstance(result, np.ndarray) and any(isinstance(a, np.ndarray) and np.may_share_memory(result, a)
                                              for a in args):
        return result.copy()
    return result


def _run(step: dict, args: list, invoke: Callable[[str, list], Any]) -> Any:
    kind, attrs = step["op"], step["attrs"]
    if kind == "if_then_else":
        cond = np.asarray(args[0])
        if cond.size != 1:
            raise IRError(f"if_then_else ({attrs['then_branch']} / {attrs['else_branch']}): the condition must have "
                          f"one element, got shape {cond.shape}")
        taken = attrs["then_branch"] if bool(cond.reshape(-1)[0]) else attrs["else_branch"]
        return invoke(taken, list(args[1:]))
    if kind == "loop":
        return _run_loop(step, attrs, args, invoke)
    if kind == "scan":
        return _run_scan(step, attrs, args, invoke)
    raise IRError(f"unknown control-flow step {kind!r}")


def _tuple(value: Any) -> tuple:
    return tuple(value) if isinstance(value, (tuple, list)) else (value,)


def _run_loop(step: dict, attrs: dict, args: list, invoke: Callable) -> tuple:
    body, n = attrs["body"], attrs["num_carried"]
    trip = int(np.asarray(args[0]).reshape(-1)[0])
    keep = bool(np.asarray(args[1]).reshape(-1)[0])
    carried, captured = list(args[2:2 + n]), list(args[2 + n:])
    scans: list = []
    i = 0
    while i < trip and keep:
        outs = _tuple(invoke(body, [np.array(i, "int64"), np.array(keep), *carried, *captured]))
        keep = bool(np.asarray(outs[0]).reshape(-1)[0])
        carried = list(outs[1:1 + n])
        scans.append(outs[1 + n:])
        i += 1
    descs = _tuple(step["result"])[n:]
    slices = list(attrs.get("scan_slice_shapes") or ())
    stacked = []
    for k, desc in enumerate(descs):
        if scans:
            stacked.append(np.stack([np.asarray(s[k]) for s in scans]))
        elif k < len(slices) and slices[k] is not None:  # no iteration ran: (0, *slice)
            stacked.append(np.zeros((0, *slices[k]), desc["dtype"]))
        else:  # no iteration ran and the slice's sizes are unknown
            stacked.append(np.zeros((0,) * max(desc["ndim"], 1), desc["dtype"]))
    return tuple(np.asarray(c) for c in carried) + tuple(stacked)


def _run_scan(step: dict, attrs: dict, args: list, invoke: Callable) -> tuple:
    n, m = attrs["num_states"], attrs["num_scan_inputs"]
    states, inputs, captured = list(args[:n]), list(args[n:n + m]), list(args[n + m:])
    if attrs["batched"]:  # opset 8: axis 0 of states and scan inputs is a batch; scan each alone
        per = [_scan_once(attrs, [s[b] for s in states], [x[b] for x in inputs], captured, invoke)
               for b in range(np.asarray(inputs[0]).shape[0])]
        return tuple(np.stack([p[k] for p in per]) for k in range(len(per[0])))
    return _scan_once(attrs, states, inputs, captured, invoke)


def _scan_once(attrs: dict, states: list, inputs: list, captured: list, invoke: Callable) -> tuple:
    n, m = len(states), len(inputs)
    axes = list(attrs["input_axes"]) or [0] * m
    reverse = list(attrs["input_reverse"]) or [False] * m
    inputs = [np.asarray(x) for x in inputs]
    axes = [a % x.ndim for a, x in zip(axes, inputs)]
    length = inputs[0].shape[axes[0]]
    outs_per_step: list = []
    for t in range(length):
        slices = [np.take(x, length - 1 - t if r else t, axis=a) for x, a, r in zip(inputs, axes, reverse)]
        outs = _tuple(invoke(attrs["body"], [*states, *slices, *captured]))
        states = list(outs[:n])
        outs_per_step.append(outs[n:])
    k_out = len(outs_per_step[0]) if outs_per_step else 0
    out_axes = list(attrs["output_axes"]) or [0] * k_out
    out_reverse = list(attrs["output_reverse"]) or [False] * k_out
    results = []
    for k in range(k_out):
        items = [np.asarray(o[k]) for o in outs_per_step]
        if out_reverse[k]:
            items = items[::-1]
        results.append(np.stack(items, axis=out_axes[k] % (items[0].ndim + 1)))
    return tuple(np.asarray(s) for s in states) + tuple(results)


