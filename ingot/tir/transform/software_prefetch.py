"""InjectSoftwarePrefetch: prefetch the next iteration's slice of a buffer under a loop annotation.

Note: ``sch.annotate(loop, "software_prefetch", "W")`` (or ``["W", locality]``, locality 0-3 as
``__builtin_prefetch``'s; default 3 = into L1) asks that each iteration ``v`` of ``loop`` first
prefetch the part of buffer ``W`` that iteration ``v + 1`` reads. This is the hint TVM spells with
``tir.prefetch`` calls (``builtin::prefetch``); here it is an annotation because a schedule does
not insert statements, and only a pass sees the lowered loop nest whose region it must compute.

Why: hardware prefetchers follow sequential streams; a conv weight slice (`ingot.ops.packed`'s
``[O/P, KH, KW, C, P]`` panels, a channel slice of KH·KW pieces 32 KB apart) is not one.

The pass runs after CompactBufferAllocation (loops, multi-dimensional buffers). Step 1: the box of
``W`` read by the loop body with the loop variable at ``v + 1`` and every inner loop over its
range (`eval_int_set`); every box extent must be a constant. Step 2: a nest of serial loops over
the box emitting ``T.prefetch(W[...], 0, locality)`` once per 64-byte cache line along the last
axis, guarded by ``v + 1 < extent``, placed before the body. The annotation is removed.

Example:
    before:  for s in range(4) {"software_prefetch": "W"}:
                 for i in range(8): acc += W[s * 8 + i]
    after:   for s in range(4):
                 if s + 1 < 4:
                     T.prefetch(W[s * 8 + 8], 0, 3)     # one line: 8 floats
                 for i in range(8): acc += W[s * 8 + i]
"""
from __future__ import annotations

from typing import Any

from ingot.arith import Analyzer
from ingot.arith.int_set import eval_int_set
from ingot.ir.expr import BufferLoad, Call, IntImm, Range, Var, as_const_int
from ingot.ir.functor import Mutator, post_order_visit


from ..function import PrimFunc
from ..stmt import Evaluate, For, ForKind, IfThenElse, SeqStmt, Stmt
from .base import prim_func_pass

__all__ = ["InjectSoftwarePrefetch", "PREFETCH_KEY", "prefetch"]

#: The loop annotation this pass lowers.
PREFETCH_KEY = "software_prefetch"
#: Bytes per cache line: one prefetch per line.
LINE_BYTES = 64


def prefetch(load: BufferLoad, locality: int = 3) -> Call:
    """``T.prefetch(load, 0, locality)``: a read prefetch of the cache line holding ``load``'s
    element (C: ``__builtin_prefetch(&W[i], 0, locality)``).

    Example:
        >>> from ingot.ir import decl_buffer
        >>> W = decl_buffer((64,), "float32", "W")
        >>> str(prefetch(W[16]))
        'T.prefetch(W[16], 0, 3)'
    """
    if not isinstance(load, BufferLoad):
        raise TypeError(f"prefetch: expected a BufferLoad (the element whose line to fetch), got {load!r}")
    if not 0 <= int(locality) <= 3:
        raise ValueError(f"prefetch: locality must be 0..3 (__builtin_prefetch's), got {locality}")
    return Call("int32", "prefetch", [load, IntImm("int32", 0), IntImm("int32", int(locality))])


def _parse(loop: For) -> "tuple[str, int]":
    value = loop.annotations[PREFETCH_KEY]
    name, locality = (value, 3) if isinstance(value, str) else (tuple(value) + (3,))[:2]
    if not isinstance(name, str) or not isinstance(locality, int) or not 0 <= locality <= 3:
        raise ValueError(f"loop {loop.loop_var.name!r}: annotation {PREFETCH_KEY!r} = {value!r} must be a buffer "
                         "name or [buffer name, locality 0..3]")
    return name, locality


def _region(loop: For, name: str, ana: Analyzer) -> "tuple[Any, list, list] | None":
    """(buffer, box mins, constant box extents) of ``name`` read by the body at iteration v + 1."""
    loads: list = []
    doms: dict = {loop.loop_var: Range.from_min_extent(loop.loop_var + 1, 1)}

    def visit(node: Any) -> None:
        if isinstance(node, BufferLoad) and node.buffer.name == name:
            loads.append(node)
        elif isinstance(node, For):
            doms[node.loop_var] = Range.from_min_extent(node.min, node.extent)

    post_order_visit(loop.body, visit)
    if not loads:
        return None
    buf = loads[0].buffer
    mins, exts = [], []
    for d in range(len(buf.shape)):
        sets = [eval_int_set(ld.indices[d], doms, ana) for ld in loads]
        lo = sets[0].min_value
        hi = sets[0].max_value
        for s in sets[1:]:
            lo, hi = ana.simplify(_min(lo, s.min_value)), ana.simplify(_max(hi, s.max_value))
        ext = as_const_int(ana.simplify(hi - lo + 1)) if lo is not None and hi is not None else None
        if ext is None:
            raise ValueError(f"loop {loop.loop_var.name!r}: {PREFETCH_KEY}: the region of {name!r} read per "
                             f"iteration has no constant extent along axis {d}; annotate a loop whose body reads "
                             "a fixed-size box")
        mins.append(lo)
        exts.append(ext)
    return buf, mins, exts


def _min(a, b):
    from ingot.tir.op import min as tmin

    return tmin(a, b)


def _max(a, b):
    from ingot.tir.op import max as tmax

    return tmax(a, b)


def _prefetch_nest(buf: Any, mins: list, exts: list, locality: int) -> Stmt:
    """Serial loops over the box, one prefetch per cache line along the last axis."""
    step = max(1, LINE_BYTES // max(1, buf.dtype.bits // 8))
    idx: list = []
    loops: list = []
    for d, (lo, ext) in enumerate(zip(mins, exts)):
        last = d == len(mins) - 1
        n = -(-ext // step) if last else ext
        if n == 1:
            idx.append(lo)
            continue
        v = Var(f"pf{d}", "int32")
        loops.append((v, n))
        idx.append(lo + v * step if last else lo + v)
    body: Stmt = Evaluate(prefetch(BufferLoad(buf, idx), locality))
    for v, n in reversed(loops):
        body = For(v, 0, n, ForKind.SERIAL, body)
    return body


class _Injector(Mutator):
    def __init__(self) -> None:
        self.ana = Analyzer()

    def visit_For(self, node: For) -> Stmt:
        node = node.replace(body=self.visit(node.body))
        if PREFETCH_KEY not in node.annotations:
            return node
        name, locality = _parse(node)
        node = node.replace(annotations=node.annotations.without(PREFETCH_KEY))
        region = _region(node, name, self.ana)
        if region is None:
            raise ValueError(f"loop {node.loop_var.name!r}: annotation {PREFETCH_KEY!r} names buffer {name!r}, "
                             "which its body does not read; annotate the loop over that buffer's slices")
        nest = _prefetch_nest(*region, locality)
        guard = IfThenElse(node.loop_var + 1 < node.min + node.extent, nest)
        return node.replace(body=SeqStmt.flatten(guard, node.body))

    def generic_visit(self, node: Any) -> Any:
        return super().generic_visit(node) if isinstance(node, Stmt) else node


def InjectSoftwarePrefetch():  # noqa: N802
    """The pass lowering ``software_prefetch`` loop annotations (module note) in every PrimFunc.

    Example:
        >>> InjectSoftwarePrefetch().info.name
        'InjectSoftwarePrefetch'
    """

    def transform(func: PrimFunc, mod, ctx) -> PrimFunc:
        return func.with_body(_Injector().visit(func.body))

    return prim_func_pass(transform, opt_level=0, name="InjectSoftwarePrefetch")
