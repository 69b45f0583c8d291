"""ConvertLayout: run the convolutional part of a graph in NHWC (channels innermost).

Note (why): on CPUs every conv, depthwise conv, pool and elementwise op vectorizes over
contiguous channels with contiguous stores in NHWC; NCHW forces transposing write-backs. The
function's signature and results do not change: the graph converts once where NCHW data enters
the NHWC region and once where it leaves (typically the model input and the flatten after the
global pool).

Note (the algorithm): layout propagation in one forward walk over the bindings (A-normal form
is in topological order). Each 4-D tensor of the original program exists in NCHW (its original
variable is bound), in NHWC (an equivalent variable, ``nhwc[v]``), or both. Per binding:

* layout-sensitive ops choose NHWC: NCHW ``conv2d`` (any groups: depthwise ``(KH, KW, 1, C)``)
  becomes NHWC/HWIO with its input converted and its weight permuted (with numpy when constant);
* layout-agnostic ops follow their inputs: when an input exists in NHWC, the op is rewritten in
  NHWC — unary elementwise ops (relu, clip, sigmoid, cast, ...), broadcasting binary ops whose
  other operands are 4-D tensors (converted if needed: residual adds, SE ``multiply``) or
  constants/scalars of rank ≤ 4 (re-laid out with numpy), ``concat`` (axis remapped), ``pad``
  (widths permuted), pools / ``global_avg_pool2d`` / ``resize2d`` (``layout="NHWC"``),
  ``batch_norm``, ``softmax`` and ``strided_slice`` (axes remapped), reductions (axes remapped; without keepdims
  only when the kept axes stay in order, e.g. a spatial mean giving ``(N, C)``), aliases;
* every other use (reshape/flatten, matmul, the function's results, ...) reads the NCHW variable,
  materialized lazily — ``v = permute_dims(nhwc[v], NHWC→NCHW)`` — once, right before its first
  such use. A variable computed in NHWC that nothing reads in NCHW is never converted back.
  A conversion that moves only size-1 axes (the ``(N, 1, 1, C)`` global-pool result) is a
  ``reshape``: the same bytes, no transpose.

So a ResNet/MobileNet/DenseNet-style network has exactly one ``permute_dims`` at its input and
at most one at its output (none when it ends with a global pool). Run FoldConstant/DeadCodeElimination afterwards.

Example:
    >>> import numpy as np
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((1, 3, 8, 8), "float32"))
    >>> bb = G.BlockBuilder()
    >>> with bb.function("main", [x]):
    ...     with bb.dataflow():
    ...         y = bb.emit(G.op.conv2d(x, G.const(np.ones((4, 3, 3, 3), "float32"))))
    ...         gv = bb.emit_output(G.op.relu(y))
    ...     bb.emit_func_output(gv)
    >>> mod = ConvertLayout()(bb.get())
    >>> [b.value.op.name for b in mod["main"].body.blocks[0].bindings]
    ['permute_dims', 'conv2d', 'relu', 'permute_dims']
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ingot.ir import IRModule

from ..expr import Call, Constant, DataflowBlock, DataflowVar, Function, Op, Tuple, Var, VarBinding
from ..op_registry import OpPattern, get_op_def, make_call
from ._util import graph_functions, make_pass, rebuild_function, used_vars

TO_NHWC = (0, 2, 3, 1)
TO_NCHW = (0, 3, 1, 2)

# Broadcasting elementwise operators: any operand may be a 4-D tensor, a scalar or a constant.
_BROADCAST = frozenset({"add", "subtract", "multiply", "divide", "floor_divide", "maximum", "minimum", "power",
                        "equal", "not_equal", "greater", "greater_equal", "less", "less_equal", "where"})
_LAYOUT_ATTR = frozenset({"max_pool2d", "avg_pool2d", "global_avg_pool2d", "resize2d"})
_REDUCE = frozenset({"sum", "mean", "max", "min", "prod"})


def _nhwc_axis(axis: int) -> int:
    """Where NCHW axis ``axis`` sits in NHWC."""
    return TO_NHWC.index(axis % 4)


def _ndim(e: Any) -> "int | None":
    return getattr(e.struct_info, "ndim", None) if hasattr(e, "struct_info") else None


def _relayout(x: Any, axes: tuple) -> Call:
    """``permute_dims(x, axes)``, or the equivalent ``reshape`` when only size-1 axes move (a
    global-pool result ``(N, 1, 1, C)``, a one-channel input): same bytes, no transposing kernel."""
    shape = x.struct_info.shape
    moved = [a for a in axes if not (isinstance(shape[a], int) and shape[a] == 1)]
    if moved == sorted(moved):
        return make_call("reshape", [x], shape=tuple(shape[a] for a in axes))
    return make_call("permute_dims", [x], axes=axes)


def _nhwc_constant(c: np.ndarray) -> np.ndarray:
    """A constant broadcasting against an NCHW tensor, re-laid out to broadcast against NHWC."""
    if c.ndim == 0:
        return c
    c4 = np.ascontiguousarray(c.reshape((1,) * (4 - c.ndim) + c.shape).transpose(TO_NHWC))
    # Leading size-1 axes broadcast anyway: drop them (down to rank 3: (1, C, 1, 1) → (1, 1, C)).
    while c4.ndim > 3 and c4.shape[0] == 1:
        c4 = c4[0]
    return c4


class _Rewriter:
    """One graph function's layout rewrite (see the module note)."""

    def __init__(self, func: Function):
        self.func = func
        self.nhwc: dict[int, Var] = {}   # id(original var) → its NHWC equivalent
        self.bound: set[int] = {id(p) for p in func.params}  # original vars available in NCHW
        self.pending: dict[int, Var] = {}  # id → original var computed in NHWC only (not yet bound)
        self.out: list = []
        self.dataflow = False
        self.handlers: dict[str, Callable[[VarBinding], "Call | None"]] = {
            "conv2d": self._conv2d, "concat": self._concat, "pad": self._pad, "batch_norm": self._batch_norm,
            "softmax": self._softmax, "log_softmax": self._softmax, "strided_slice": self._strided_slice,
            **{n: self._broadcast for n in _BROADCAST}, **{n: self._layout_attr for n in _LAYOUT_ATTR},
            **{n: self._reduce for n in _REDUCE},
        }

    # -- variables in either layout ------------------------------------------------------------

    def _new_var(self, like: Var, suffix: str, sinfo: Any) -> Var:
        cls = DataflowVar if self.dataflow else Var
        return cls(f"{like.name_hint}{suffix}", sinfo)

    def _emit(self, like: Var, suffix: str, call: Call) -> Var:
        var = self._new_var(like, suffix, call.struct_info)
        self.out.append(VarBinding(var, call))
        return var

    def has_nhwc(self, e: Any) -> bool:
        return isinstance(e, Var) and id(e) in self.nhwc

    def to_nhwc(self, e: Any) -> Any:
        """``e`` (a 4-D NCHW tensor) in NHWC: its equivalent, else one new (cached) permute."""
        if isinstance(e, Constant):
            return Constant(np.ascontiguousarray(e.data.transpose(TO_NHWC)))
        if id(e) not in self.nhwc:
            self.nhwc[id(e)] = self._emit(e, "_nhwc", _relayout(e, TO_NHWC))
        return self.nhwc[id(e)]

    def to_nchw(self, e: Any) -> Any:
        """``e`` itself, bound first (``e = permute_dims(nhwc[e])``) when it exists only in NHWC."""
        if isinstance(e, Var) and id(e) in self.pending:
            del self.pending[id(e)]
            self.out.append(VarBinding(e, _relayout(self.nhwc[id(e)], TO_NCHW)))
            self.bound.add(id(e))
        elif isinstance(e, Tuple):
            for f in e.fields:
                self.to_nchw(f)
        return e

    # -- per-operator rewrites: return the NHWC call, or None to keep the op in NCHW -------------

    def _conv2d(self, b: VarBinding) -> "Call | None":
        conv = b.value
        x, w = conv.args
        if conv.attrs["data_layout"] != "NCHW" or _ndim(x) != 4 or _ndim(w) != 4:
            return None
        if isinstance(w, Constant):
            w_new: Any = Constant(np.ascontiguousarray(w.data.transpose(2, 3, 1, 0)))
        else:
            w_new = self._emit(b.var, "_w_hwio", make_call("permute_dims", [self.to_nchw(w)], axes=(2, 3, 1, 0)))
        attrs = dict(conv.attrs, data_layout="NHWC", kernel_layout="HWIO")
        return make_call("conv2d", [self.to_nhwc(x), w_new], **attrs)

    def _unary(self, b: VarBinding) -> "Call | None":
        x = b.value.args[0]
        return make_call(b.value.op.name, [self.nhwc[id(x)]], **b.value.attrs) if self.has_nhwc(x) else None

    def _broadcast(self, b: VarBinding) -> "Call | None":
        call = b.value
        if _ndim(b.var) != 4 or not any(self.has_nhwc(a) for a in call.args):
            return None
        for a in call.args:
            if isinstance(a, Constant):
                if a.data.ndim > 4:
                    return None
            elif not (isinstance(a, Var) and _ndim(a) in (0, 4)):
                return None  # a lower-rank tensor variable: its broadcast axes would need a reshape
        args = [Constant(_nhwc_constant(a.data)) if isinstance(a, Constant) else
                a if _ndim(a) == 0 else self.to_nhwc(a) for a in call.args]
        return make_call(call.op.name, args, **call.attrs)

    def _concat(self, b: VarBinding) -> "Call | None":
        call = b.value
        fields = call.args[0].fields if isinstance(call.args[0], Tuple) else None
        if fields is None or _ndim(b.var) != 4 or not any(self.has_nhwc(f) for f in fields) \
                or not all(isinstance(f, (Var, Constant)) and _ndim(f) == 4 for f in fields):
            return None
        return make_call("concat", [Tuple([self.to_nhwc(f) for f in fields])],
                         axis=_nhwc_axis(call.attrs["axis"]))

    def _pad(self, b: VarBinding) -> "Call | None":
        call = b.value
        x = call.args[0]
        if not self.has_nhwc(x) or _ndim(x) != 4:
            return None
        width = call.attrs["pad_width"]
        return make_call("pad", [self.nhwc[id(x)]], **dict(call.attrs, pad_width=tuple(width[a] for a in TO_NHWC)))

    def _layout_attr(self, b: VarBinding) -> "Call | None":
        call = b.value
        x = call.args[0]
        if call.attrs["layout"] != "NCHW" or not self.has_nhwc(x):
            return None
        return make_call(call.op.name, [self.nhwc[id(x)]], **dict(call.attrs, layout="NHWC"))

    def _batch_norm(self, b: VarBinding) -> "Call | None":
        call = b.value
        x = call.args[0]
        if not self.has_nhwc(x):
            return None
        args = [self.nhwc[id(x)]] + [self.to_nchw(a) for a in call.args[1:]]
        return make_call("batch_norm", args, **dict(call.attrs, axis=_nhwc_axis(call.attrs["axis"])))

    def _softmax(self, b: VarBinding) -> "Call | None":
        call = b.value
        x = call.args[0]
        if not self.has_nhwc(x):
            return None
        return make_call(call.op.name, [self.nhwc[id(x)]], axis=_nhwc_axis(call.attrs["axis"]))

    def _strided_slice(self, b: VarBinding) -> "Call | None":
        call = b.value
        x = call.args[0]
        if not self.has_nhwc(x):
            return None
        axes = tuple(_nhwc_axis(a) for a in call.attrs["axes"])  # normalized: explicit, same order as begin/end
        return make_call("strided_slice", [self.nhwc[id(x)]], **dict(call.attrs, axes=axes))

    def _reduce(self, b: VarBinding) -> "Call | None":
        """Reductions follow with remapped axes. With keepdims the result is NHWC; without, it is
        an ordinary tensor when the kept axes keep their order (then ``b.var`` is rebound)."""
        call = b.value
        x = call.args[0]
        if not self.has_nhwc(x):
            return None
        axes, keep = tuple(call.attrs["axis"]), call.attrs["keepdims"]
        new_axes = tuple(sorted(_nhwc_axis(a) for a in axes))
        if not keep:
            kept = [a for a in range(4) if a not in axes]
            if [a for a in TO_NHWC if a not in axes] != kept:
                return None
        return make_call(call.op.name, [self.nhwc[id(x)]], axis=new_axes, keepdims=keep)

    # -- the walk ------------------------------------------------------------------------------

    def rewrite_binding(self, b: VarBinding) -> None:
        v = b.value
        if isinstance(v, Var):  # alias: follows its source
            if self.has_nhwc(v) and id(v) in self.pending:
                self.nhwc[id(b.var)], self.pending[id(b.var)] = self.nhwc[id(v)], b.var
                return
            self.out.append(b)
            self.bound.add(id(b.var))
            return
        new = None
        if isinstance(v, Call) and isinstance(v.op, Op):
            handler = self.handlers.get(v.op.name)
            if handler is None and get_op_def(v.op.name).pattern == OpPattern.ELEMWISE and len(v.args) == 1:
                handler = self._unary
            new = handler(b) if handler is not None else None
        if new is None:  # NCHW: every NHWC-only operand is converted back first
            for a in (v.args if isinstance(v, Call) else v.fields if isinstance(v, Tuple) else ()):
                self.to_nchw(a)
            self.out.append(b)
            self.bound.add(id(b.var))
            return
        if _ndim(new) == 4 and _ndim(b.var) == 4 and not (v.op.name in _REDUCE and not v.attrs["keepdims"]):
            self.nhwc[id(b.var)] = self._emit(b.var, "_nhwc", new)
            self.pending[id(b.var)] = b.var
        else:  # the NHWC op already yields the original tensor (a reduction to (N, C))
            self.out.append(VarBinding(b.var, new))
            self.bound.add(id(b.var))

    def run(self) -> Function:
        blocks = self.func.body.blocks
        new_blocks = []
        for k, block in enumerate(blocks):
            self.dataflow = isinstance(block, DataflowBlock)
            self.out = []
            for b in block.bindings:
                self.rewrite_binding(b)
            # Variables read after this block (later blocks, the result) must exist in NCHW here;
            # NHWC equivalents bound inside a dataflow block do not outlive it.
            later = used_vars(self.func.body.body)
            for blk in blocks[k + 1:]:
                for lb in blk.bindings:
                    used_vars(lb.value, later)
            for var in list(self.pending.values()):
                if id(var) in later:
                    self.to_nchw(var)
            if self.dataflow:
                self.nhwc = {i: n for i, n in self.nhwc.items() if not isinstance(n, DataflowVar)}
                self.pending = {i: v for i, v in self.pending.items() if i in self.nhwc}
            new_blocks.append(type(block)(self.out))
        return rebuild_function(self.func, new_blocks, self.func.body.body)


def convert_module(mod: IRModule) -> IRModule:
    """Run the convolutional graph functions of ``mod`` in NHWC (see the module note).

    Example:
        >>> mod2 = convert_module(IRModule({}))
    """
    for fname, func in graph_functions(mod):
        if func.attrs.get("Primitive"):
            continue
        mod = mod.with_function(fname, _Rewriter(func).run())
    return mod


def ConvertLayout(desired: "dict | None" = None) -> Any:  # noqa: N802 - TVM's pass name
    """The ConvertLayout pass; ``desired`` follows TVM (``{"conv2d": ["NHWC", "default"]}``), and
    NHWC for conv2d (with the layout-agnostic ops following) is the only conversion implemented.

    Example: see the module docstring.
    """
    if desired is not None and any(k != "conv2d" or v[0] != "NHWC" for k, v in desired.items()):
        raise NotImplementedError(f"ConvertLayout({desired}): only {{'conv2d': ['NHWC', ...]}} is implemented")
    return make_pass(convert_module, "ConvertLayout")
