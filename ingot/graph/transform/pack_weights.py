"""PackWeights: re-lay out constant conv2d / linear / matmul weights once, at compile time.

Note (why): the CPU default schedules vectorize over output channels (conv) or output columns
(dense) with P-wide register tiles (P = 2 vectors: 32 floats with AVX-512). Packing the weight
into P-wide panels inside every kernel call costs O(weights) per inference (~25 M floats for
ResNet-50, several ms). When the weight is a `Constant` this pass packs it once with numpy and
rewrites the call into the packed-weight operator (`ingot.graph.op.packed`), whose TE compute
reads the panels directly; the schedule rules recognize the panel layout and skip their copy
(TVM's AlterOpLayout to ``OIHW{P}o`` kernels / ``dense_pack``):

    conv2d(x, W[O, C, KH, KW]), NCHW, groups 1   → conv2d_packed_weight(x, W'[O/P, C, KH, KW, P])
    conv2d(x, W[C, 1, KH, KW]), NCHW, groups C   → depthwise_conv2d_packed_weight(x, W'[C/L, KH, KW, L])
    linear(x, W[N, K], b?)                       → dense_packed_weight(x, W'[N/P, K, P], b?)
    matmul(x, W[K, N]), x of rank ≥ 2            → dense_packed_weight(x, (W.T)'[N/P, K, P])

P is two vectors of the target's float32 lanes when the channels allow, else one (L); every
other case (weights that are not constants, other layouts or dtypes, channel counts that are
not multiples of a vector, grouped convs) keeps the original operator, so the pass is correct
for any shape. Run it after BindParams / FoldConstant / SimplifyInference (batch norm folded
into the weights first) and before FuseOps; it is part of `default_build_pipeline`.

Example:
    >>> import numpy as np
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((1, 64), "float32"))
    >>> bb = G.BlockBuilder()
    >>> with bb.function("main", [x]):
    ...     bb.emit_func_output(bb.emit(G.op.linear(x, G.const(np.ones((32, 64), "float32")))))
    >>> mod = PackWeights(panel=16)(bb.get())
    >>> call = mod["main"].body.blocks[0].bindings[0].value
    >>> call.op.name, call.args[1].data.shape
    ('dense_packed_weight', (2, 64, 16))
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot.ir import IRModule

from ..expr import Call, Constant, Op, VarBinding
from ..op_registry import make_call
from ._util import graph_functions, make_pass, map_bindings

__all__ = ["PackWeights", "pack_weights_module", "default_panel"]

_DTYPES = ("float32",)


def default_panel(target: Any = None) -> "tuple[int, int]":
    """``(P, L)``: the panel width for conv/dense weights (two float32 vectors) and the vector
    width L used for depthwise convs, for ``target`` (default: `Target.current()`, else the host).

    Example:
        >>> p, lanes = default_panel("llvm -mcpu=skylake-avx512")
        >>> (p, lanes)
        (32, 16)
    """
    from ingot.target import Target

    if target is None:
        target = Target.current() or Target("llvm")
    lanes = max(4, int(Target(target).vector_lanes("float32")))
    return 2 * lanes, lanes


def _panel_for(extent: Any, panel: int, lanes: int) -> "int | None":
    if not isinstance(extent, int):
        return None
    if extent % panel == 0:
        return panel
    return lanes if extent % lanes == 0 else None


def _static(shape: Any) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


def _rewrite(call: Call, panel: int, lanes: int) -> "Call | None":
    """The packed-weight call replacing ``call``, or None when it keeps its operator."""
    from ingot.ops import packed

    if not isinstance(call, Call) or not isinstance(call.op, Op) or len(call.args) < 2:
        return None
    name, attrs, weight = call.op.name, call.attrs, call.args[1]
    if name not in ("conv2d", "linear", "matmul") or not isinstance(weight, Constant):
        return None
    w = weight.data
    x_sinfo = call.args[0].struct_info
    if str(w.dtype) not in _DTYPES or str(getattr(x_sinfo, "dtype", "")) != str(w.dtype):
        return None
    x_shape = getattr(x_sinfo, "shape", None)
    if x_shape is None:
        return None
    out_dtype = attrs.get("out_dtype")
    if name == "conv2d":
        if attrs["data_layout"] != "NCHW" or attrs["kernel_layout"] != "OIHW" or w.ndim != 4 or len(x_shape) != 4:
            return None
        conv = dict(strides=attrs["strides"], padding=attrs["padding"], dilation=attrs["dilation"],
                    out_dtype=out_dtype)
        if attrs["groups"] == 1:
            p = _panel_for(w.shape[0], panel, lanes)
            if p is None:
                return None
            return make_call("conv2d_packed_weight", [call.args[0], Constant(packed.pack_conv2d_weight(w, p))], **conv)
        c = x_shape[1]
        if attrs["groups"] == c == w.shape[0] and w.shape[1] == 1 and isinstance(c, int) and c % lanes == 0:
            wp = packed.pack_depthwise_weight(w, lanes)
            return make_call("depthwise_conv2d_packed_weight", [call.args[0], Constant(wp)], **conv)
        return None
    if w.ndim != 2 or len(x_shape) < (1 if name == "linear" else 2):
        return None
    w_nk = w if name == "linear" else np.ascontiguousarray(w.T)
    p = _panel_for(w_nk.shape[0], panel, lanes)
    if p is None:
        return None
    args = [call.args[0], Constant(packed.pack_dense_weight(w_nk, p))] + list(call.args[2:])
    return make_call("dense_packed_weight", args, out_dtype=out_dtype)


def pack_weights_module(mod: IRModule, panel: "int | None" = None, lanes: "int | None" = None) -> IRModule:
    """Apply PackWeights to every graph function of ``mod`` (see the module note).

    Example:
        >>> mod2 = pack_weights_module(IRModule({}))
    """
    if panel is None or lanes is None:
        default_p, default_l = default_panel()
        panel, lanes = panel or default_p, lanes or default_l
    if panel % lanes:
        raise ValueError(f"PackWeights: panel width {panel} must be a multiple of the vector lanes {lanes}")
    for name, func in graph_functions(mod):
        if func.attrs.get("Primitive"):
            continue  # fused groups are packed before fusion (their weights are parameters there)

        def rewrite(b: VarBinding, vmap: dict) -> VarBinding:
            new = _rewrite(b.value, panel, lanes)
            return b if new is None else VarBinding(b.var, new)

        mod = mod.with_function(name, map_bindings(func, rewrite))
    return mod


def PackWeights(panel: "int | None" = None, lanes: "int | None" = None) -> Any:  # noqa: N802 - TVM's pass naming
    """The PackWeights pass (module note). ``panel``/``lanes`` default to `default_panel()` of
    the current target (two / one float32 vectors: 32 / 16 with AVX-512).

    Example:
        >>> p = PackWeights()
    """
    return make_pass(lambda mod: pack_weights_module(mod, panel, lanes), "PackWeights")
