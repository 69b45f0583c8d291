"""SinkReshape: move reshapes that keep the innermost dimension below elementwise operators.

Note (why): ONNX exports of transformers put a reshape between a GEMM and its bias add
(``MatMul [128,768]x[768,3072] -> Reshape [1,128,3072] -> Add bias``), and FuseOps fuses a GEMM
only with elementwise/broadcast consumers: the bias add (and BERT's whole GELU chain) became a
separate kernel that reads and writes the activation once more. A reshape that keeps the last
dimension commutes with an elementwise operator whose other operands are scalars or
last-dimension vectors (``add(reshape(x), b) == reshape(add(x, b'))``), so this pass rewrites

    r = reshape(x, S);  y = op(r, c)   →   t = op(x, c');  y = reshape(t, S)

whenever every tensor operand of ``op`` is such a reshape of a value of one shape (or a constant
broadcast along the last dimension only). Repeated, the reshape sinks to the end of the chain;
there ``reshape(reshape(x))`` becomes one reshape and a reshape back to ``x``'s own shape
disappears (BERT's FFN: matmul -> bias -> GELU -> reshape back to [128, 3072] -> matmul). The
values computed are bit-identical; only where the reshapes sit changes. Run
DeadCodeElimination afterwards (the original reshapes may become unused).

Not in `default_build_pipeline` (measured, session 4): on BERT-base it turns 36 bias-add kernels
per run into GEMM epilogues, but the whole model was not measurably faster (1 thread, CPU-time min
of 14-30 interleaved rounds at load 6-7: 0.995x and 1.001x; the FFN block alone 1.008x / 1.023x /
0.998x); 2-thread runs could not be measured under that load. It is the first step for fusing
BERT's GELU into the FFN GEMM, which also needs FuseOps to group a value used twice (the GELU
reads the biased GEMM output twice).

Example:
    >>> import numpy as np
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((128, 64), "float32"))
    >>> bb = G.BlockBuilder()
    >>> with bb.function("main", [x]):
    ...     with bb.dataflow():
    ...         r = bb.emit(G.op.reshape(x, (1, 128, 64)))
    ...         gv = bb.emit_output(G.op.add(r, G.const(np.ones(64, "float32"))))
    ...     bb.emit_func_output(gv)
    >>> mod = SinkReshape()(bb.get())
    >>> [b.value.op.name for b in mod["main"].body.blocks[0].bindings]
    ['reshape', 'add', 'reshape']
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot.ir import IRModule

from ..expr import Call, Constant, DataflowVar, Op, Var, VarBinding
from ..op_registry import OpPattern, get_op_def, make_call
from ._util import dataflow_binding_ids, graph_functions, make_pass, map_bindings, new_var_like


def _static_shape(expr: Any) -> "tuple | None":
    sinfo = getattr(expr, "struct_info", None)
    shape = getattr(sinfo, "shape", None)
    if shape is None:
        return None
    try:
        return tuple(int(d) for d in shape)
    except (TypeError, ValueError):
        return None


def _last_dim_constant(c: Constant, last: int) -> "Constant | None":
    """``c`` as a scalar or ``[last]`` vector when it broadcasts along the last dimension only."""
    data = np.asarray(c.data)
    if data.size == 1:
        return Constant(data.reshape(()))
    if data.ndim >= 1 and data.shape[-1] == last and data.size == last:
        return Constant(np.ascontiguousarray(data.reshape(last)))
    return None


def _sink(call: Call, pending: dict) -> "tuple[Call, tuple, tuple] | None":
    """``(op on the reshapes' sources, source shape, reshaped shape)``, or None when ``call`` is not
    an elementwise/broadcast call whose tensor operands are all sinkable."""
    if not isinstance(call.op, Op) or get_op_def(call.op.name).pattern > OpPattern.BROADCAST:
        return None
    src_shape = dst_shape = None
    for a in call.args:
        if isinstance(a, Var) and id(a) in pending:
            s, d = _static_shape(pending[id(a)]), _static_shape(a)
            if src_shape is None:
                src_shape, dst_shape = s, d
            elif (s, d) != (src_shape, dst_shape):
                return None
    if src_shape is None or _static_shape(call) != dst_shape:
        return None
    args = []
    for a in call.args:
        if isinstance(a, Var) and id(a) in pending:
            args.append(pending[id(a)])
        elif isinstance(a, Constant):
            c = _last_dim_constant(a, src_shape[-1])
            if c is None:
                return None
            args.append(c)
        else:
            return None  # a tensor operand that is not a reshape of the same shape: keep
    return make_call(call.op.name, args, **dict(call.attrs or {})), src_shape, dst_shape


def sink_reshape_module(mod: IRModule) -> IRModule:
    """Sink innermost-dimension-preserving reshapes below elementwise calls in ``mod``."""
    for fname, func in graph_functions(mod):
        # id(var) -> the value it is a reshape of (last dimension kept), for vars bound to reshapes
        pending: dict = {}
        dataflow = dataflow_binding_ids(func)

        def rewrite(b: VarBinding, vmap: dict, pending: dict = pending, dataflow: set = dataflow) -> Any:
            v = b.value
            if not isinstance(v, Call) or not isinstance(v.op, Op):
                return b
            if v.op.name == "reshape" and isinstance(v.args[0], Var):
                src = v.args[0]
                if id(src) in pending:  # reshape(reshape(x)) -> reshape(x), or x itself
                    src = pending[id(src)]
                    if _static_shape(src) == _static_shape(b.var) and isinstance(b.var, DataflowVar):
                        vmap[b.var] = src
                        return None
                    b = VarBinding(b.var, make_call("reshape", [src], shape=_static_shape(b.var)))
                s, d = _static_shape(src), _static_shape(b.var)
                if s and d and s[-1] == d[-1] and isinstance(src, Var):
                    pending[id(b.var)] = src
                return b
            sunk = _sink(v, pending)
            if sunk is None:
                return b
            new_call, _, dst_shape = sunk
            inner = new_var_like(b.var, f"{b.var.name_hint}_sunk", new_call.struct_info,
                                 id(b.var) in dataflow)
            pending[id(b.var)] = inner
            return [VarBinding(inner, new_call), VarBinding(b.var, make_call("reshape", [inner], shape=dst_shape))]

        mod = mod.with_function(fname, map_bindings(func, rewrite))
    return mod


def SinkReshape() -> Any:  # noqa: N802 - TVM's pass naming
    """The SinkReshape pass (see the module note); follow it with DeadCodeElimination.

    Example: see the module docstring.
    """
    return make_pass(sink_reshape_module, "SinkReshape")
