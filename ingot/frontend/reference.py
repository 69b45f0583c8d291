"""A reference interpreter for graph modules: evaluates ``main`` binding by binding with each
operator's registered numpy reference (no compiler involved).

Note: this is how the importers are checked independently of code generation — the ONNX node-test
harness compares it and the compiled path against the expected outputs — and how a user can tell
an importer bug from a kernel bug (``ingot.frontend.reference.evaluate(mod, inputs)`` vs ``ingot.run``).
``call_tir`` is not interpreted (it needs compiled kernels); imported modules have none.

Example:
    >>> import numpy as np
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((3,), "float32"))
    >>> bb = G.BlockBuilder()
    >>> with bb.function("main", [x]):
    ...     bb.emit_func_output(bb.emit(G.op.relu(x)))
    >>> evaluate(bb.get(), {"x": np.array([-1, 0, 2], "float32")})[0].tolist()
    [0.0, 0.0, 2.0]
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from ingot.ir.error import IngotError


def evaluate(mod: Any, inputs: "Mapping[str, Any] | Sequence[Any]", func_name: str = "main") -> list[np.ndarray]:
    """Run ``mod[func_name]`` on ``inputs`` (by parameter name, or positional) with numpy references;
    the outputs as a list of arrays (one per tuple field).

    Example: see the module docstring.
    """
    from ingot import graph as G
    from ingot.graph.control_flow import If
    from ingot.graph.op.control import CONTROL_OPS
    from ingot.graph.op_registry import get_op_def

    func = mod[func_name]
    env: dict[int, Any] = {}
    if isinstance(inputs, Mapping):
        missing = [p.name_hint for p in func.params if p.name_hint not in inputs]
        if missing:
            raise IngotError(f"evaluate: no value for parameter(s) {missing}; the parameters are "
                             f"{[p.name_hint for p in func.params]}")
        values = [inputs[p.name_hint] for p in func.params]
    else:
        values = list(inputs)
    dims: dict = {}  # symbolic dim name -> size: from the inputs' shapes and run-time shapes (issue 17)
    for p, v in zip(func.params, values):
        env[id(p)] = np.asarray(v)
        _bind_dims(p.struct_info, env[id(p)], dims)

    def ev(e: Any) -> Any:
        if isinstance(e, G.Var):
            return env[id(e)]
        if isinstance(e, G.Constant):
            return e.data
        if isinstance(e, G.Tuple):
            return [ev(f) for f in e.fields]
        if isinstance(e, G.TupleGetItem):
            return ev(e.tuple_value)[e.index]
        if isinstance(e, G.SeqExpr):
            for block in e.blocks:
                for b in block.bindings:
                    env[id(b.var)] = ev(b.value)
            return ev(e.body)
        if isinstance(e, If):
            cond = np.asarray(ev(e.cond))
            return ev(e.true_branch if bool(cond.reshape(-1)[0]) else e.false_branch)
        if isinstance(e, G.Call) and isinstance(e.op, G.Op) and e.op.name in CONTROL_OPS:
            return _control_call(mod, e, [ev(a) for a in e.args])
        if isinstance(e, G.Call) and isinstance(e.op, G.Op):
            if e.op.name == "tensor_to_shape":  # binds fresh dims from the tensor's values
                shape = tuple(int(d) for d in np.asarray(ev(e.args[0])).reshape(-1))
                dims.update({n: d for n, d in zip(e.attrs["dims"], shape)})
                return shape
            op_def = get_op_def(e.op.name)
            if op_def.numpy is None:
                raise IngotError(f"evaluate: operator {e.op.name!r} has no numpy reference")
            out = op_def.numpy([ev(a) for a in e.args], _concrete_attrs(e.attrs, dims) if dims else e.attrs)
            _bind_dims(e.struct_info, out, dims)
            if isinstance(e.struct_info, G.TupleStructInfo):   # split, topk: one array per field
                return [np.asarray(o).astype(str(f.dtype), copy=False) for o, f in zip(out, e.struct_info.fields)]
            return np.asarray(out).astype(str(e.struct_info.dtype), copy=False)
        raise IngotError(f"evaluate: cannot interpret {type(e).__name__} `{e}` (only operator calls)")

    with np.errstate(all="ignore"):
        for block in func.body.blocks:
            for b in block.bindings:
                env[id(b.var)] = ev(b.value)
        out = ev(func.body.body)
    # A field that is itself a list (an ONNX sequence output) stays a list of arrays.
    return [[np.asarray(x) for x in o] if isinstance(o, list) else np.asarray(o) for o in out] \
        if isinstance(out, list) else [np.asarray(out)]


def _bind_dims(sinfo: Any, value: Any, dims: dict) -> None:
    """Bind the symbolic dims of ``sinfo`` (a tensor or tuple struct info) not yet known from ``value``'s shape."""
    from ingot import graph as G
    from ingot.ir import Var as PrimVar

    if isinstance(sinfo, G.TupleStructInfo) and isinstance(value, (list, tuple)):
        for f, v in zip(sinfo.fields, value):
            _bind_dims(f, v, dims)
    elif isinstance(sinfo, G.TensorStructInfo) and sinfo.shape is not None:
        for d, n in zip(sinfo.shape, np.shape(value)):
            if isinstance(d, PrimVar) and d.name not in dims:
                dims[d.name] = int(n)


def _concrete_attrs(attrs: Any, dims: dict) -> dict:
    """``attrs`` with symbolic dims (``reshape``'s ``shape=(batch, rt0)``) evaluated from ``dims``."""
    from ingot.graph.plan import dim_to_json, eval_dim_json
    from ingot.ir import PrimExpr

    def concrete(v: Any) -> Any:
        if isinstance(v, PrimExpr):
            return eval_dim_json(dim_to_json(v), dims)
        if isinstance(v, tuple):
            return tuple(concrete(x) for x in v)
        return v

    return {k: concrete(v) for k, v in attrs.items()}


def _control_call(mod: Any, call: Any, args: list) -> Any:
    """An ``if_then_else`` / ``loop`` / ``scan`` call: the executor's semantics
    (`ingot.graph.control_flow.run_control_step`), each callee evaluated by `evaluate`."""
    from ingot import graph as G
    from ingot.graph.control_flow import result_desc, run_control_step

    def invoke(name: str, inputs: list) -> Any:
        out = evaluate(mod, inputs, name)
        return tuple(out) if isinstance(mod[name].ret_struct_info, G.TupleStructInfo) else out[0]

    step = {"op": call.op.name, "attrs": dict(call.attrs), "result": result_desc(call.struct_info)}
    out = run_control_step(step, args, invoke)
    return list(out) if isinstance(call.struct_info, G.TupleStructInfo) else out
