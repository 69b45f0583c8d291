"""SimplifyInference: batch norm folded into the preceding conv2d/linear weights, or decomposed.

Note: at inference a batch norm is an affine map per channel, ``y = x * scale + shift`` with
``scale = gamma / sqrt(var + eps)`` and ``shift = beta - mean * scale``. When its input is a
``conv2d`` or ``linear`` with a constant weight whose result has no other use, the scale is
multiplied into the weight (output-channel axis) and the batch norm becomes ``add(conv, shift)``;
a ``linear``'s own bias becomes ``bias * scale + shift``. Any other batch norm with constant
statistics becomes ``multiply`` + ``add`` with broadcastable constants (TVM's SimplifyInference).
The new weights are computed here with numpy; the old producer is left unused for
`DeadCodeElimination`. Afterwards FuseOps puts conv + shift + activation in one kernel.

Example:
    >>> import numpy as np
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((1, 2, 4, 4), "float32"))
    >>> c = G.const(np.ones(2, "float32"))
    >>> bb = G.BlockBuilder()
    >>> with bb.function("main", [x]):
    ...     with bb.dataflow():
    ...         y = bb.emit(G.op.conv2d(x, G.const(np.ones((2, 2, 1, 1), "float32"))))
    ...         gv = bb.emit_output(G.op.batch_norm(y, c, c, c, c))
    ...     bb.emit_func_output(gv)
    >>> mod = SimplifyInference()(bb.get())
    >>> [b.value.op.name for b in mod["main"].body.blocks[0].bindings]
    ['conv2d', 'conv2d', 'add']
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot.ir import IRModule

from ..expr import Call, Constant, Op, Var, VarBinding
from ..op_registry import make_call
from ._util import dataflow_binding_ids, graph_functions, make_pass, map_bindings, new_var_like, used_vars


def _bn_affine(call: Call) -> "tuple[np.ndarray, np.ndarray] | None":
    stats = call.args[1:]
    if not all(isinstance(a, Constant) for a in stats):
        return None
    gamma, beta, mean, var = (a.data.astype(np.float64) for a in stats)
    scale = gamma / np.sqrt(var + call.attrs["epsilon"])
    return scale, beta - mean * scale


def _channel_shape(ndim: int, axis: int, c: int) -> tuple:
    shape = [1] * ndim
    shape[axis] = c
    return tuple(shape)


def _fold(bn: Call, producer: "Call | None", dtype: str, new_var: Any) -> "list | None":
    """Bindings replacing ``bn`` (whose input is ``producer``), or None when it cannot fold."""
    affine = _bn_affine(bn)
    if affine is None:
        return None
    scale, shift = affine
    x = bn.args[0]
    ndim = x.struct_info.ndim
    axis = bn.attrs["axis"] % ndim
    name = producer.op.name if isinstance(producer, Call) and isinstance(producer.op, Op) else None
    if name == "conv2d" and isinstance(producer.args[1], Constant) and producer.attrs["groups"] >= 1:
        nchw = producer.attrs["data_layout"] == "NCHW"
        if axis == (1 if nchw else 3):
            w = producer.args[1].data.astype(np.float64)
            w = w * scale.reshape((-1, 1, 1, 1) if nchw else (1, 1, 1, -1))
            conv = make_call("conv2d", [producer.args[0], Constant(w.astype(dtype))], **producer.attrs)
            return [VarBinding(new_var, conv)], make_call(
                "add", [new_var, Constant(shift.reshape(_channel_shape(ndim, axis, -1)).astype(dtype))])
    if name == "linear" and isinstance(producer.args[1], Constant) and axis == ndim - 1 and (
            len(producer.args) == 2 or isinstance(producer.args[2], Constant)):
        w = producer.args[1].data.astype(np.float64) * scale[:, None]
        b = shift if len(producer.args) == 2 else producer.args[2].data.astype(np.float64) * scale + shift
        lin = make_call("linear", [producer.args[0], Constant(w.astype(dtype)), Constant(b.astype(dtype))],
                        **producer.attrs)
        return [], lin
    c_shape = _channel_shape(ndim, axis, -1)
    mul = make_call("multiply", [x, Constant(scale.reshape(c_shape).astype(dtype))])
    return [VarBinding(new_var, mul)], make_call("add", [new_var, Constant(shift.reshape(c_shape).astype(dtype))])


def simplify_module(mod: IRModule) -> IRModule:
    """Fold or decompose every inference batch norm with constant statistics in ``mod``."""
    for fname, func in graph_functions(mod):
        counts = used_vars(func.body)
        dataflow = dataflow_binding_ids(func)
        producers: dict[int, Call] = {}

        def rewrite(b: VarBinding, vmap: dict, producers: dict = producers, counts: dict = counts,
                    dataflow: set = dataflow) -> Any:
            v = b.value
            if isinstance(v, Call):
                producers[id(b.var)] = v
            if not (isinstance(v, Call) and isinstance(v.op, Op) and v.op.name == "batch_norm"):
                return b
            x = v.args[0]
            producer = producers.get(id(x)) if isinstance(x, Var) and counts.get(id(x), 0) == 1 else None
            new_var = new_var_like(b.var, f"{b.var.name_hint}_bn", x.struct_info, id(b.var) in dataflow)
            folded = _fold(v, producer, str(x.struct_info.dtype), new_var)
            if folded is None:
                return b
            pre, value = folded
            return pre + [VarBinding(b.var, value)]

        mod = mod.with_function(fname, map_bindings(func, rewrite))
    return mod


def SimplifyInference() -> Any:  # noqa: N802 - TVM's pass name
    """The SimplifyInference pass (see the module note); follow it with DeadCodeElimination.

    Example: see the module docstring.
    """
    return make_pass(simplify_module, "SimplifyInference")
