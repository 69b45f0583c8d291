"""Task extraction: the distinct fused kernels of a graph model, each with a weight and FLOPs.

Note: extraction runs exactly the pipeline `ingot.graph.build` runs before scheduling (bind the
model's params, then `ingot.graph.transform.default_build_pipeline` when operator calls remain),
so a task's workload is structurally equal to the kernel the apply-best hook later sees.
Kernels are keyed by `workload_key`: the structural hash of ``{"main": kernel}`` after
`normalize_kernel` (which drops the per-kernel ``global_symbol`` and the fusion's ``op_pattern``
attributes, so two call sites of the same computation under different names share one task).
A task's weight is the number of ``call_tir`` sites of all its kernels in the graph functions.

Example:
    >>> # tasks = extract_tasks(model, "llvm -num-cores=2")
    >>> # [(t.name, t.weight, t.flop_count) for t in tasks]
    >>> # [('fused_linear_relu', 2, 16384.0), ('linear', 1, 8192.0)]
"""
from __future__ import annotations

import dataclasses
from typing import Any

#: Function attributes that name or classify a kernel without changing what it computes; they
#: are dropped from the tuning workload so structurally equal kernels share one record.
_VOLATILE_ATTRS = ("global_symbol", "op_pattern")


def normalize_kernel(func: Any) -> Any:
    """``func`` as a tuning workload: ``global_symbol`` set to ``"main"``, ``op_pattern`` dropped.

    Example:
        >>> from ingot import te
        >>> A = te.placeholder((4,), name="A")
        >>> f = te.create_prim_func([A, te.compute((4,), lambda i: A[i] + 1.0)])
        >>> normalize_kernel(f.with_attr("global_symbol", "fused_add")).attrs["global_symbol"]
        'main'
    """
    attrs = func.attrs
    for key in _VOLATILE_ATTRS:
        if key in attrs:
            attrs = attrs.without(key)
    return func.replace(attrs=attrs.set("global_symbol", "main"))


def workload_module(func: Any) -> Any:
    """The tuning workload of a kernel: the IRModule ``{"main": normalize_kernel(func)}``.

    Example:
        >>> # workload_module(kernel)["main"].attrs["global_symbol"]  -> 'main'
    """
    from ingot.ir import IRModule

    return IRModule({"main": normalize_kernel(func)})


def workload_key(func: Any) -> str:
    """The database key of a kernel (structural hash of its `workload_module`).

    Example:
        >>> # workload_key(kernel_a) == workload_key(kernel_b)  # same computation, other names
    """
    from ingot.ir import structural_hash

    return structural_hash(workload_module(func))


@dataclasses.dataclass
class ExtractedTask:
    """One distinct kernel of a model: ``name`` (first kernel name), ``mod`` (the workload
    module ``{"main": func}``), ``workload_hash``, ``weight`` (calls per model run),
    ``flop_count`` (per call), ``kernels`` (the names of the kernels it stands for),
    ``weight_params`` (indices of the kernel parameters bound to graph constants, i.e. weights,
    at every call site: cold inside the model) and ``output_params`` (indices of its outputs).

    Example:
        >>> # t = extract_tasks(model, "llvm")[0]; t.weight * t.flop_count  # FLOPs per model run
    """

    name: str
    mod: Any
    workload_hash: str
    weight: int
    flop_count: float
    kernels: list
    weight_params: tuple = ()
    output_params: tuple = ()

    def __repr__(self) -> str:
        return (f"ExtractedTask({self.name!r}, weight={self.weight}, flop={self.flop_count:.3g}, "
                f"hash={self.workload_hash[:12]})")


def _graph_module(mod_or_model: Any, params: "dict | None") -> Any:
    """The graph IRModule of a `Model` (``.mod`` + ``.params``) or an IRModule, params bound."""
    from ingot.ir import IRModule

    if isinstance(mod_or_model, IRModule):
        mod = mod_or_model
    elif hasattr(mod_or_model, "mod") and isinstance(mod_or_model.mod, IRModule):
        mod = mod_or_model.mod
        params = {**(getattr(mod_or_model, "params", None) or {}), **(params or {})}
    else:
        raise TypeError(f"extract_tasks: expected an ingot.Model (from ingot.load) or a graph IRModule, got "
                        f"{type(mod_or_model).__name__}; load a file with ingot.load(path) first")
    if params:
        from ingot.graph.transform.bind_params import BindParams

        mod = BindParams("main", params)(mod)
    return mod


def fused_kernels(mod_or_model: Any, params: "dict | None" = None, target: Any = None) -> "tuple[Any, dict]":
    """``(module after the build pipeline, {kernel name: PrimFunc})`` — the kernels
    `ingot.graph.build` would schedule.

    Example:
        >>> # mod, kernels = fused_kernels(model); sorted(kernels)
    """
    from ingot.graph.executor import _needs_pipeline  # the same test build() applies
    from ingot.graph.transform import default_build_pipeline
    from ingot.tir.function import PrimFunc

    mod = _graph_module(mod_or_model, params)
    if _needs_pipeline(mod):
        mod = default_build_pipeline(target)(mod)  # the target picks the layout (NHWC on CPUs)
    kernels = {getattr(n, "name_hint", n): f for n, f in mod.functions.items() if isinstance(f, PrimFunc)}
    return mod, kernels


def count_calls(mod: Any) -> "dict[str, int]":
    """``{kernel name: number of call_tir sites}`` over the graph functions of ``mod``.

    Example:
        >>> # count_calls(fused_mod) -> {'fused_linear_relu': 2, 'linear': 1}
    """
    from ingot.graph.expr import Call, Op

    counts: dict = {}
    for node in _graph_nodes(mod):
        if isinstance(node, Call) and isinstance(node.op, Op) and node.op.name == "call_tir":
            name = getattr(node.args[0], "name_hint", str(node.args[0]))
            counts[name] = counts.get(name, 0) + 1
    return counts


def _graph_nodes(mod: Any):
    """Every node reachable from the bodies of ``mod``'s graph functions (not the primitive
    ones), each once, parents before children."""
    from ingot.graph.expr import Function

    seen: set = set()
    stack = [func.body for _, func in mod.functions.items()
             if isinstance(func, Function) and not func.attrs.get("Primitive")][::-1]
    while stack:
        node = stack.pop()
        if isinstance(node, (list, tuple)):
            stack.extend(reversed(node))
            continue
        if node is None or id(node) in seen:
            continue
        seen.add(id(node))
        yield node
        stack.extend(reversed([getattr(node, f, None) for f in getattr(node, "_fields", ())]))


def call_site_params(mod: Any) -> "dict[str, tuple[tuple, tuple]]":
    """``{kernel name: (weight parameter indices, output parameter indices)}`` over the
    ``call_tir`` sites of ``mod``'s graph functions. A parameter is a weight when it is bound to a
    graph `Constant` (directly or through a variable binding) at *every* call site: inside the
    model those are read from L3/DRAM on each run, while activations were just written by the
    previous kernel (what the model tuner's cold-cache timing flushes, `RunnerConfig.cache_flush`).
    The inputs of ``call_tir`` are the kernel's first parameters; its outputs follow.

    Example:
        >>> # call_site_params(fused_mod)["fused_conv2d_add_relu"]  -> ((1, 2), (4,))
    """
    from ingot.graph.expr import Call, Constant, Op, Tuple, Var, VarBinding
    from ingot.tir.function import PrimFunc

    bound: dict = {}
    sites: dict = {}
    for node in _graph_nodes(mod):
        if isinstance(node, VarBinding):
            bound[node.var] = node.value
        if isinstance(node, Call) and isinstance(node.op, Op) and node.op.name == "call_tir":
            name = getattr(node.args[0], "name_hint", str(node.args[0]))
            inputs = node.args[1].fields if len(node.args) > 1 and isinstance(node.args[1], Tuple) else node.args[1:2]
            sites.setdefault(name, []).append(tuple(inputs))

    def is_constant(e: Any) -> bool:
        for _ in range(64):  # a chain of variable bindings (bounded: bindings never form cycles)
            if isinstance(e, Constant):
                return True
            if not isinstance(e, Var) or e not in bound:
                return False
            e = bound[e]
        return False

    params = {getattr(n, "name_hint", n): len(f.params) for n, f in mod.functions.items() if isinstance(f, PrimFunc)}
    out: dict = {}
    for name, calls in sites.items():
        n_in = len(calls[0])
        weights = tuple(i for i in range(n_in) if all(len(c) == n_in and is_constant(c[i]) for c in calls))
        out[name] = (weights, tuple(range(n_in, params.get(name, n_in))))
    return out


def extract_tasks(mod_or_model: Any, target: Any = "llvm", params: "dict | None" = None) -> "list[ExtractedTask]":
    """The tuning tasks of a model: one per distinct fused kernel (structural hash), heaviest
    (weight x FLOPs) first.

    ``mod_or_model``: an `ingot.Model` (``ingot.load(...)``) or a graph IRModule; ``params``
    (name -> array) are bound into ``main`` first. Kernels that are already lowered or marked
    ``tir.is_scheduled`` are not tasks (the build keeps them as they are). ``target`` picks the
    graph pipeline's layout as `ingot.graph.build` does (NHWC conv networks on CPUs).

    Example:
        >>> # tasks = extract_tasks(ingot.load("mlp.onnx"), "llvm -num-cores=2")
        >>> # print(tasks[0].name, tasks[0].weight, tasks[0].flop_count)
    """
    from ingot.ir import structural_hash
    from ingot.tir.stmt import BlockRealize

    from ..utils import estimate_flops

    mod, kernels = fused_kernels(mod_or_model, params, target)
    calls = count_calls(mod)
    site_params = call_site_params(mod)
    tasks: dict = {}
    for name, func in kernels.items():
        # Scheduled-level kernels have the root BlockRealize as body; lowered ones (no blocks)
        # and hand-scheduled ones are kept as they are by the build, so they are not tasks.
        if func.attrs.get("tir.is_scheduled") or not isinstance(func.body, BlockRealize) or not calls.get(name):
            continue
        wl = workload_module(func)
        key = structural_hash(wl)
        weights, outputs = site_params.get(name, ((), ()))
        if key in tasks:
            t = tasks[key]
            t.weight += calls[name]
            t.kernels.append(name)
            # a weight of the task only if it is a constant at every call site of every kernel
            t.weight_params = tuple(i for i in t.weight_params if i in weights)
            continue
        tasks[key] = ExtractedTask(name, wl, key, calls[name], float(estimate_flops(wl)), [name], weights, outputs)
    return sorted(tasks.values(), key=lambda t: (-t.weight * t.flop_count, t.name))
