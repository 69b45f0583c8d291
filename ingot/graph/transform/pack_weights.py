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
    conv2d(x, W[KH, KW, C, O]), NHWC, groups 1   → conv2d_nhwc_packed_weight(x, W'[O/P, KH, KW, C, P])
    conv2d(x, W[3, 3, C, O]), NHWC, stride 1     → conv2d_nhwc_winograd(x, U[α², O/P, C, P])  (when
                                                   `ingot.ops.winograd.choose_tile` picks a tile)
    linear(x, W[N, K], b?)                       → dense_packed_weight(x, W'[N/P, K, P], b?)
    matmul(x, W[K, N]), x of rank ≥ 2            → dense_packed_weight(x, (W.T)'[N/P, K, P])
    matmul(x, W[K, N]), N fits no 2-vector panel, ≤ 4 rows → linear(x, W.T)   (gemv_rule's row layout)

P is two vectors of the target's float32 lanes when the channels allow, else one (L); every
other case (weights that are not constants, other layouts or dtypes, channel counts that are
not multiples of a vector, grouped convs) keeps the original operator, so the pass is correct
for any shape. Depthwise NHWC convs (weight ``(KH, KW, 1, C)``) stay plain ``conv2d``: their
channels are contiguous already, nothing to pack. Run it after BindParams / FoldConstant /
SimplifyInference (batch norm folded into the weights first) and ConvertLayout. In `default_build_pipeline` it runs after FuseOps (before FuseTIR) so
that fused kernels keep their names (``fused_conv2d_add_relu``): inside a fused group it packs
a weight parameter when every call site passes a constant, and replaces those constants by the
packed ones. Before FuseOps (or on calls left unfused) it rewrites the calls directly.

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

from ..expr import Call, Constant, Function, Op, Var, VarBinding
from ..op_registry import make_call
from ._util import graph_functions, make_pass, map_bindings, used_vars

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
    from ingot.target import as_target

    lanes = max(4, int(as_target(target).vector_lanes("float32")))
    return 2 * lanes, lanes


def _panel_for(extent: Any, panel: int, lanes: int) -> "int | None":
    if not isinstance(extent, int):
        return None
    if extent % panel == 0:
        return panel
    return lanes if extent % lanes == 0 else None


def _gemv_rows(x_shape: Any) -> bool:
    """Whether a dense over ``x`` has few enough rows for `gemv_rule` (≤ GEMV_MAX_ROWS) and the pass
    context's `GemvPolicy` keeps such denses in its row layout (``row_layout``). A run-time batch
    (``x`` of shape ``(batch, K)``) counts as batch 1, as the schedule rules plan it
    (`ingot.ops.schedule.analysis.plan_symbolic_extents`), so a dynamic-batch classifier gets the
    layout of its static twin."""
    from ingot.ops.schedule.reduction import GEMV_MAX_ROWS, current_gemv_policy

    if x_shape is None or not current_gemv_policy().row_layout:
        return False
    rows = list(x_shape[:-1])
    if len(rows) == 1 and not isinstance(rows[0], int) and _is_size_var(rows[0]):
        rows = [1]
    if not _static(rows) or not _static(x_shape[-1:]):
        return False
    return int(np.prod([int(d) for d in rows])) <= GEMV_MAX_ROWS


def _is_size_var(dim: Any) -> bool:
    """Whether a symbolic dim is one run-time size (a batch), not an expression of several."""
    from ingot.ir.expr import Cast, Var as SizeVar

    while isinstance(dim, Cast):
        dim = dim.value
    return isinstance(dim, SizeVar)


def _static(shape: Any) -> bool:
    return shape is not None and all(isinstance(d, int) for d in shape)


def _winograd_tile(call: Call, x_shape: Any, lanes: int) -> "int | None":
    """The Winograd tile for an NHWC conv2d call (`ingot.ops.winograd.choose_tile`), None if it stays direct.
    The batch may be a run-time size: the tile grid depends on H and W only, and the Winograd kernel
    runs one image at a time (`ingot.ops.winograd`), so a dynamic-batch model gets its static twin's tile."""
    from ingot.ops.winograd import choose_tile

    attrs, w = call.attrs, call.args[1].data
    if w.shape[:2] != (3, 3) or tuple(attrs["strides"]) != (1, 1) or tuple(attrs["dilation"]) != (1, 1):
        return None
    out = getattr(call.struct_info, "shape", None)
    if out is None or not _static(x_shape[1:]) or not _static(out[1:]) or _out_dtype_differs(call):
        return None
    return choose_tile((out[1], out[2]), x_shape[3], w.shape[3], lanes)


def _out_dtype_differs(call: Call) -> bool:
    """Whether a call asks for an output dtype other than its data's (Winograd keeps one dtype)."""
    want = call.attrs.get("out_dtype")
    return bool(want) and str(want) != str(call.args[0].struct_info.dtype)


def _rewrite(call: Call, panel: int, lanes: int, winograd: bool = False) -> "Call | None":
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
        if w.ndim != 4 or len(x_shape) != 4:
            return None
        conv = dict(strides=attrs["strides"], padding=attrs["padding"], dilation=attrs["dilation"],
                    out_dtype=out_dtype)
        if attrs["data_layout"] == "NHWC" and attrs["kernel_layout"] == "HWIO":
            # Depthwise/grouped NHWC keeps the plain op: its channels are already contiguous.
            p = _panel_for(w.shape[3], panel, lanes) if attrs["groups"] == 1 else None
            if p is None:
                return None
            tile = _winograd_tile(call, x_shape, lanes) if winograd else None
            if tile is not None:
                from ingot.ops.winograd import transform_weight

                return make_call("conv2d_nhwc_winograd", [call.args[0], Constant(transform_weight(w, tile, p))],
                                 padding=attrs["padding"], out_dtype=out_dtype)
            return make_call("conv2d_nhwc_packed_weight", [call.args[0],
                                                           Constant(packed.pack_conv2d_nhwc_weight(w, p))], **conv)
        if attrs["data_layout"] != "NCHW" or attrs["kernel_layout"] != "OIHW":
            return None
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
    if p is None or (p < panel and _gemv_rows(x_shape)):
        if name == "matmul" and _gemv_rows(x_shape):
            # N fits no two-vector panel (ResNet-50's fc: 1000 outputs) and the batch is small: as
            # ``W[K, N]`` gemm_rule reads 8 columns per task, 4000 bytes apart, and re-streams every
            # cache line; as ``linear(x, W.T)`` gemv_rule streams each weight row once (1.9x, cold).
            return make_call("linear", [call.args[0], Constant(w_nk)], out_dtype=out_dtype)
        return None
    args = [call.args[0], Constant(packed.pack_dense_weight(w_nk, p))] + list(call.args[2:])
    return make_call("dense_packed_weight", args, out_dtype=out_dtype)


def _callers(mod: IRModule) -> "dict[str, list]":
    """``{primitive function name: [calls to it]}`` over the non-primitive graph functions."""
    from ingot.ir.module import GlobalVar

    sites: dict = {}
    for _, func in graph_functions(mod):
        if func.attrs.get("Primitive"):
            continue
        for block in func.body.blocks:
            for b in block.bindings:
                if isinstance(b.value, Call) and isinstance(b.value.op, GlobalVar):
                    sites.setdefault(b.value.op.name_hint, []).append(b.value)
    return sites


def _pack_primitive(func: Function, calls: list, panel: int, lanes: int,
                    winograd: bool) -> "tuple[Function, dict] | None":
    """``func`` (a fused group) with its weight parameters packed, and ``{id(call): {arg index:
    packed Constant}}`` for its call sites; None when nothing packs. A parameter is packed only
    when it is used once, as the weight of a packable call, and every call site passes a Constant."""
    uses = used_vars(func.body)
    index = {id(p): k for k, p in enumerate(func.params)}
    params, site_args, vmap = list(func.params), {id(c): {} for c in calls}, {}
    for block in func.body.blocks:
        for b in block.bindings:
            call = b.value
            w = call.args[1] if isinstance(call, Call) and len(call.args) >= 2 else None
            if not isinstance(w, Var) or id(w) not in index or uses.get(id(w)) != 1:
                continue
            k = index[id(w)]
            consts = [c.args[k] for c in calls]
            if not consts or not all(isinstance(c, Constant) for c in consts):
                continue
            # The rewrite depends on shapes and attributes only: the same for every call site.
            rewritten = [_rewrite(Call(call.op, [call.args[0], c, *call.args[2:]], call.attrs, call.sinfo_args,
                                       call.struct_info), panel, lanes, winograd) for c in consts]
            if rewritten[0] is None:
                continue
            new = rewritten[0]
            param = Var(w.name_hint, new.args[1].struct_info)
            params[k] = param
            vmap[id(b.var)] = Call(new.op, [call.args[0], param, *call.args[2:]], new.attrs, (), new.struct_info)
            for c, r in zip(calls, rewritten):
                site_args[id(c)][k] = r.args[1]
    if not vmap:
        return None

    def rewrite(b: VarBinding, _: dict) -> VarBinding:
        return VarBinding(b.var, vmap[id(b.var)]) if id(b.var) in vmap else b

    body = map_bindings(func, rewrite)
    return Function(params, body.body, func.ret_struct_info, func.attrs), site_args


def pack_weights_module(mod: IRModule, panel: "int | None" = None, lanes: "int | None" = None,
                        winograd: "bool | None" = None, target: Any = None) -> IRModule:
    """Apply PackWeights to every graph function of ``mod`` (see the module note). ``winograd``
    (default: the ``graph.winograd`` pass config, else True) lets eligible 3×3 convs become
    Winograd convs; ``panel``/``lanes`` default to `default_panel` of ``target``.

    Example:
        >>> mod2 = pack_weights_module(IRModule({}))
    """
    if winograd is None:
        from ingot.ir.transform import PassContext

        winograd = bool(PassContext.current().get_config("graph.winograd", True))
    if panel is None or lanes is None:
        default_p, default_l = default_panel(target)
        panel, lanes = panel or default_p, lanes or default_l
    if panel % lanes:
        raise ValueError(f"PackWeights: panel width {panel} must be a multiple of the vector lanes {lanes}")
    # Step 1. Fused groups (after FuseOps): pack weight parameters, remember the call-site constants.
    sites = _callers(mod)
    site_args: dict = {}
    for name, func in graph_functions(mod):
        if func.attrs.get("Primitive") and name in sites:
            done = _pack_primitive(func, sites[name], panel, lanes, winograd)
            if done is not None:
                mod = mod.with_function(name, done[0])
                site_args.update(done[1])
    # Step 2. Other functions: pass the packed constants to the rewritten groups; rewrite the
    # operator calls with constant weights in place (before FuseOps, or calls left unfused).
    for name, func in graph_functions(mod):
        if func.attrs.get("Primitive"):
            continue

        def rewrite(b: VarBinding, vmap: dict) -> VarBinding:
            value = b.value
            if id(value) in site_args:
                args = [site_args[id(value)].get(k, a) for k, a in enumerate(value.args)]
                return VarBinding(b.var, Call(value.op, args, value.attrs, value.sinfo_args, value.struct_info))
            new = _rewrite(value, panel, lanes, winograd)
            return b if new is None else VarBinding(b.var, new)

        mod = mod.with_function(name, map_bindings(func, rewrite))
    return mod


def PackWeights(panel: "int | None" = None, lanes: "int | None" = None,  # noqa: N802 - TVM's pass naming
                winograd: "bool | None" = None, target: Any = None) -> Any:
    """The PackWeights pass (module note). ``panel``/``lanes`` default to `default_panel` of
    ``target`` (else the current target: two / one float32 vectors, 32 / 16 with AVX-512, 16 / 8
    with AVX2); ``winograd`` to the ``graph.winograd`` pass config (True unless set).

    Example:
        >>> p = PackWeights()
        >>> direct = PackWeights(winograd=False)
    """
    return make_pass(lambda mod: pack_weights_module(mod, panel, lanes, winograd, target), "PackWeights")
