"""The cost policy: keep a region on its external backend only where it measures faster than Ingot's own kernels.

Note: a backend's pattern table says what it *can* run, not what it runs *faster*: on an AVX2 host
Ingot's dense kernels beat OpenBLAS's sgemm at most sizes (BENCHMARKS.md, "BYOC: one dense layer").
`keep_faster` builds every region of a partitioned module twice — alone as a native graph function and
as a call of the backend's module — times both (calls interleaved, minimum of ``time.perf_counter``
over the rounds, inputs random), and puts the bindings of each region that is not faster back into its
caller, where the normal build compiles them. The decisions come back with the module.

Example:
    >>> from ingot import graph as G
    >>> import ingot.byoc
    >>> x = G.Var("x", G.TensorStructInfo((2, 8), "float32"))
    >>> bb = G.BlockBuilder()
    >>> with bb.function("main", [x]):
    ...     bb.emit_func_output(bb.emit(G.op.linear(x, G.const(np.ones((4, 8), "float32")))))
    >>> mod = ingot.byoc.partition(bb.get(), "cblas")
    >>> slow_blas = lambda ex_native, ex_external, args: (1.0, 2.0)   # (native s, external s)
    >>> mod, decisions = keep_faster(mod, measure=slow_blas)
    >>> sorted(mod.function_names), decisions["cblas_main_0"]["kept"]
    (['main'], False)
"""
from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from ingot.graph.expr import BindingBlock, Call, DataflowVar, Function, SeqExpr, Tuple, Var, VarBinding
from ingot.graph.struct_info import TensorStructInfo
from ingot.graph.transform._util import remap
from ingot.ir import IRModule
from ingot.ir.module import GlobalVar


def _random_inputs(func: Function, seed: int = 0) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for p in func.params:
        s = p.struct_info
        if not isinstance(s, TensorStructInfo) or s.shape is None or not all(isinstance(d, int) for d in s.shape):
            return []
        out.append(rng.standard_normal(tuple(s.shape)).astype(str(s.dtype)))
    return out


def measure_interleaved(ex_native: Any, ex_external: Any, args: list, rounds: int = 20) -> "tuple[float, float]":
    """``(native seconds, external seconds)``: minimum of ``time.perf_counter`` over ``rounds``
    interleaved calls of the two executables' ``main``.

    Example:
        >>> measure_interleaved(ex_a, ex_b, [x])  # doctest: +SKIP
        (0.00021, 0.00034)
    """
    from ingot.graph.executor import Executor

    fns = [Executor(ex_native)["main"], Executor(ex_external)["main"]]
    best = [float("inf"), float("inf")]
    for fn in fns:  # warm up: first calls fault in pages and start thread pools
        fn(*args)
    for _ in range(rounds):
        for k, fn in enumerate(fns):
            t0 = time.perf_counter()
            fn(*args)
            best[k] = min(best[k], time.perf_counter() - t0)
    return best[0], best[1]


def _inline(func: Function, symbol: str, region: Function) -> Function:
    """``func`` with each call of ``symbol`` replaced by the bindings of ``region`` (fresh variables)."""
    blocks = []
    for blk in func.body.blocks:
        bindings = []
        for b in blk.bindings:
            v = b.value
            if not (isinstance(v, Call) and isinstance(v.op, GlobalVar) and v.op.name_hint == symbol):
                bindings.append(b)
                continue
            vmap: dict = dict(zip(region.params, v.args))
            result = region.body.body
            for rb in (x for rblk in region.body.blocks for x in rblk.bindings):
                if rb.var is result:
                    nv = b.var  # the caller's variable is bound to the region's result directly
                else:
                    nv = (DataflowVar if isinstance(b.var, DataflowVar) else Var)(rb.var.name_hint, rb.var.struct_info)
                bindings.append(VarBinding(nv, remap(rb.value, vmap)))
                vmap[rb.var] = nv
            if isinstance(result, Tuple):
                bindings.append(VarBinding(b.var, Tuple([vmap[f] for f in result.fields])))
        blocks.append(type(blk)(bindings))
    return Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info, func.attrs)


def _runs_external_only(region: Function) -> bool:
    """Whether ``region`` holds calls Ingot has no kernel for (ONNX nodes kept for ONNX Runtime)."""
    return any(isinstance(b.value, Call) and getattr(b.value.op, "name", None) == "onnx_node"
               for blk in region.body.blocks for b in blk.bindings)


def keep_faster(mod: IRModule, target: Any = "llvm", *, rounds: int = 20,
                measure: "Callable[[Any, Any, list], tuple] | None" = None) -> "tuple[IRModule, dict]":
    """Keep each external region of ``mod`` only where its backend runs it faster than Ingot's kernels.

    Returns ``(module, {region symbol: {"native_s", "external_s", "kept"}})``. ``measure(ex_native,
    ex_external, args) -> (native s, external s)`` replaces the timing (tests; a cost model). A region
    with symbolic shapes cannot be timed and is kept, and so is one holding ``onnx_node`` calls (ONNX ops
    Ingot cannot compile).

    Example: see the module note.
    """
    from ingot.graph.executor import build

    measure = measure or (lambda a, b, args: measure_interleaved(a, b, args, rounds))
    decisions: dict = {}
    regions = {n: f for n, f in mod.functions.items() if isinstance(f, Function) and f.attrs.get("Compiler")}
    for symbol, region in regions.items():
        if _runs_external_only(region):  # ops Ingot cannot compile (onnx_node): nothing to compare with
            decisions[symbol] = {"native_s": None, "external_s": None, "kept": True}
            continue
        args = _random_inputs(region)
        if not args and region.params:
            decisions[symbol] = {"native_s": None, "external_s": None, "kept": True}
            continue
        native = IRModule({"main": Function(region.params, region.body, region.ret_struct_info)})
        params = [Var(p.name_hint, p.struct_info) for p in region.params]
        call = Call(GlobalVar(symbol), params, struct_info=region.ret_struct_info)
        out = Var("out", region.ret_struct_info)
        wrapper = Function(params, SeqExpr([BindingBlock([VarBinding(out, call)])], out), region.ret_struct_info)
        external = IRModule({"main": wrapper, symbol: region})
        t_native, t_external = measure(build(native, target), build(external, target), args)
        kept = t_external < t_native
        decisions[symbol] = {"native_s": t_native, "external_s": t_external, "kept": kept}
        if not kept:
            for name, func in list(mod.functions.items()):
                if isinstance(func, Function) and name not in regions:
                    mod = mod.with_function(name, _inline(func, symbol, region))
            mod = mod.without_function(symbol)
    return mod, decisions
