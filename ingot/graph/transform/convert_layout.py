"""ConvertLayout: run NCHW conv2d in NHWC (channels innermost: contiguous SIMD over channels).

Note: each NCHW ``conv2d`` becomes ``permute_dims(x, NCHW→NHWC)`` → NHWC ``conv2d`` with the
weight permuted OIHW → HWIO (a constant weight is permuted here, with numpy) → ``permute_dims``
back to NCHW, so the function's signature and results do not change. Then layout transforms are
pushed through elementwise operators and bias/residual ``add``s whose other operand is a
per-channel constant (``relu(permute(y))`` → ``permute(relu(y))``), and back-to-back inverse
permutations cancel, so a chain conv → relu → conv keeps NHWC in between and converts once at
each end. Run FoldConstant/DeadCodeElimination afterwards.

Example:
    >>> import numpy as np
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((1, 3, 8, 8), "float32"))
    >>> bb = G.BlockBuilder()
    >>> with bb.function("main", [x]):
    ...     with bb.dataflow():
    ...         gv = bb.emit_output(G.op.conv2d(x, G.const(np.ones((4, 3, 3, 3), "float32"))))
    ...     bb.emit_func_output(gv)
    >>> mod = ConvertLayout()(bb.get())
    >>> [b.value.op.name for b in mod["main"].body.blocks[0].bindings]
    ['permute_dims', 'conv2d', 'permute_dims']
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot.ir import IRModule

from ..expr import Call, Constant, Op, Var, VarBinding
from ..op_registry import OpPattern, get_op_def, make_call
from ._util import dataflow_binding_ids, graph_functions, make_pass, map_bindings, new_var_like

TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)


def _compose(first: tuple, second: tuple) -> tuple:
    """The axes of ``permute(permute(x, first), second)`` as one permutation."""
    return tuple(first[a] for a in second)


_DATAFLOW: set = set()  # ids of the bindings in dataflow blocks of the function being rewritten


def _fresh(like: Var, name: str, sinfo: Any) -> Var:
    return new_var_like(like, name, sinfo, id(like) in _DATAFLOW)


def _is_op(value: Any, name: str) -> bool:
    return isinstance(value, Call) and isinstance(value.op, Op) and value.op.name == name


def _convert_conv(b: VarBinding) -> "list | None":
    conv = b.value
    if conv.attrs["data_layout"] != "NCHW" or conv.struct_info.ndim != 4:
        return None
    x, w = conv.args
    x_call = make_call("permute_dims", [x], axes=TO_NHWC)
    xt = _fresh(b.var, f"{b.var.name_hint}_in", x_call.struct_info)
    pre = [VarBinding(xt, x_call)]
    if isinstance(w, Constant):
        w_new: Any = Constant(np.ascontiguousarray(w.data.transpose(2, 3, 1, 0)))
    else:
        w_call = make_call("permute_dims", [w], axes=(2, 3, 1, 0))
        w_new = _fresh(b.var, f"{b.var.name_hint}_w", w_call.struct_info)
        pre.append(VarBinding(w_new, w_call))
    attrs = dict(conv.attrs, data_layout="NHWC", kernel_layout="HWIO")
    y_call = make_call("conv2d", [xt, w_new], **attrs)
    y = _fresh(b.var, f"{b.var.name_hint}_nhwc", y_call.struct_info)
    return pre + [VarBinding(y, y_call), VarBinding(b.var, make_call("permute_dims", [y], axes=TO_NCHW))]


def _per_channel_nchw(c: Any) -> bool:
    # A constant broadcasting over N, H, W in NCHW: shape (C, 1, 1) or (1, C, 1, 1) or scalar.
    return isinstance(c, Constant) and (c.data.ndim == 0 or (
        c.data.ndim in (3, 4) and all(d == 1 for d in c.data.shape[-2:]) and (c.data.ndim == 3 or c.data.shape[0] == 1)))


def convert_module(mod: IRModule) -> IRModule:
    """Convert the NCHW convolutions of every graph function of ``mod`` (see the module note)."""
    for fname, func in graph_functions(mod):
        _DATAFLOW.clear()
        _DATAFLOW.update(dataflow_binding_ids(func))
        # Step 1: every NCHW conv2d runs in NHWC between two layout transforms.
        func = map_bindings(func, lambda b, vmap: (_convert_conv(b) or b) if _is_op(b.value, "conv2d") else b)
        # Step 2: push NHWC→NCHW transforms down through elementwise ops, cancel inverse pairs.
        perm_of: dict[int, tuple] = {}

        def push(b: VarBinding, vmap: dict, perm_of: dict = perm_of) -> Any:
            v = b.value
            if _is_op(v, "permute_dims") and isinstance(v.args[0], Var) and id(v.args[0]) in perm_of:
                inner, axes = perm_of[id(v.args[0])]
                total = _compose(axes, v.attrs["axes"])
                if total == tuple(range(len(total))):
                    vmap[b.var] = inner
                    return None
            if _is_op(v, "permute_dims") and v.attrs["axes"] == TO_NCHW and isinstance(v.args[0], Var):
                perm_of[id(b.var)] = (v.args[0], TO_NCHW)
                return b
            if isinstance(v, Call) and isinstance(v.op, Op) and v.args and isinstance(v.args[0], Var) \
                    and id(v.args[0]) in perm_of:
                inner, axes = perm_of[id(v.args[0])]
                op_def = get_op_def(v.op.name)
                unary = op_def.pattern == OpPattern.ELEMWISE and len(v.args) == 1
                bias = v.op.name in ("add", "multiply", "subtract") and _per_channel_nchw(v.args[1])
                if unary or bias:
                    args = [inner]
                    if bias:
                        c = v.args[1].data
                        args.append(Constant(c.reshape(c.shape[-3:]).transpose(1, 2, 0) if c.ndim else c))
                    inner_call = make_call(v.op.name, args, **v.attrs)
                    new = _fresh(b.var, f"{b.var.name_hint}_nhwc", inner_call.struct_info)
                    out = make_call("permute_dims", [new], axes=axes)
                    perm_of[id(b.var)] = (new, axes)
                    return [VarBinding(new, inner_call), VarBinding(b.var, out)]
            return b

        mod = mod.with_function(fname, map_bindings(func, push))
    return mod


def ConvertLayout(desired: "dict | None" = None) -> Any:  # noqa: N802 - TVM's pass name
    """The ConvertLayout pass; ``desired`` follows TVM (``{"conv2d": ["NHWC", "default"]}``), and
    NHWC for conv2d is the only conversion implemented.

    Example: see the module docstring.
    """
    if desired is not None and any(k != "conv2d" or v[0] != "NHWC" for k, v in desired.items()):
        raise NotImplementedError(f"ConvertLayout({desired}): only {{'conv2d': ['NHWC', ...]}} is implemented")
    return make_pass(convert_module, "ConvertLayout")
