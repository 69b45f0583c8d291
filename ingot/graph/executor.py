"""`build` and the `Executor` for graph modules (TVM Relax's ``relax.build`` + VM, with an AOT entry).

Note: `build` (1) runs the default graph pipeline (fold constants, fuse, FuseTIR, legalize, DCE)
when operator calls remain; (2) schedules every kernel: a tuned schedule from the
``apply_schedule`` hook, else ``ingot.ops.schedule.default_schedule``, else a safe local
fallback (`ingot.graph.schedule_hook`; ``ex.schedule_report`` says which each kernel got);
(3) turns each graph function into an `ExecutionPlan` (`ingot.graph.plan`) with a static memory
plan; (4) lowers the kernels and emits them, plus one AOT C entry per static plan
(`ingot.graph.aot`), as one C translation unit, compiled once into one shared library.
Weights are packed into one aligned blob passed to the AOT entry as a pointer.

The `Executor` runs a function with one foreign call (the AOT entry) when its plan is static;
otherwise (symbolic shapes: one build serves every batch size; packed calls) it interprets the
plan in Python, calling the kernels one by one, its intermediates in an arena planned per binding
of the symbolic dims (see `Executor`) or, for sizes only the data knows, allocated per call.
`Executable.export_library` writes the library, the weights and a JSON manifest
(`ingot.graph.artifact`); `load_executable` reads them back in a fresh process.

Example:
    >>> import numpy as np, ingot
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((2, 3), "float32"))
    >>> bb = G.BlockBuilder()
    >>> with bb.function("main", [x]):
    ...     bb.emit_func_output(bb.emit(G.op.relu(x)))
    >>> vm = Executor(build(bb.get(), "llvm"), ingot.cpu())  # doctest: +SKIP
    >>> vm["main"](np.ones((2, 3), "float32")).numpy().sum()  # doctest: +SKIP
    6.0
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from typing import Any, Callable

import numpy as np

from ingot.ir import IRModule
from ingot.ir import expr as PE
from ingot.ir.error import IRError
from ingot.support import gc_paused

from .expr import Function
from .plan import ConstantTable, compile_plan, eval_dim_json, is_aot_compatible, nbytes_of, plan_bound_memory
from .transform.legalize_ops import is_legalizable


class Executable:
    """A compiled graph module: execution plans, one kernel library, the weights blob.

    Attributes: ``mod`` (the built IRModule; None after `load_executable`), ``lib`` (the runtime
    Module), ``target``, ``plans`` (function name → plan dict), ``constants`` (weights layout),
    ``external`` (``global_symbol`` → runtime module of each region an external backend compiled,
    called by the plan's ``call_dps_packed`` steps; `ingot.byoc`),
    ``weights`` (the blob, an aligned uint8 array), ``aot`` (function name → AOT entry name in
    ``lib``), ``kernels`` (PrimFunc name → name in ``lib``), ``schedule_report``.

    Example: see `build`.
    """

    def __init__(self, mod: "IRModule | None", lib: Any, target: Any, plans: dict, constants: list,
                 weights: np.ndarray, aot: dict, kernels: dict, schedule_report: dict, external: "dict | None" = None):
        self.mod = mod
        self.external = external or {}  # global_symbol -> runtime module of an external (BYOC) region
        self.lib = lib
        self.target = target
        self.plans = plans
        self.constants = constants
        self.weights = weights
        self.aot = aot
        self.kernels = kernels
        self.schedule_report = schedule_report
        if lib is not None and self.external:
            bind_external_entries(self)

    def stats(self) -> dict:
        """Per graph function: AOT or not, kernel calls, peak workspace and unplanned bytes.

        Example:
            >>> ex.stats()["main"]["workspace_bytes"]  # doctest: +SKIP
            512
        """
        out = {}
        for name, plan in self.plans.items():
            mem = plan["memory"] or {}
            out[name] = {"aot": name in self.aot, "steps": len(plan["steps"]),
                         "workspace_bytes": mem.get("workspace_bytes"), "naive_bytes": mem.get("naive_bytes")}
        return out

    def export_library(self, path: str) -> str:
        """Write ``path`` (the shared library), ``<stem>.weights.bin`` and ``<stem>.json``.

        Example:
            >>> ex.export_library("/tmp/model.so")  # doctest: +SKIP
            '/tmp/model.so'
        """
        from .artifact import export_executable

        return export_executable(self, path)

    def __repr__(self) -> str:
        return f"<ingot.graph.Executable functions={list(self.plans)} aot={list(self.aot)} target={self.target}>"


def _extern_steps(plan: dict) -> list:
    return [s for s in plan["steps"] if s.get("extern") is not None]


def _mark_extern_steps(plans: dict, externals: dict) -> list:
    """Give every ``call_dps_packed`` step of an external region whose runtime module has a C entry
    (``c_entry()``) its slot in the library's table of external entries (``step["extern"]``), so
    the AOT entry calls it with no Python in between; returns one key per slot (symbol and a hash
    of the module's bytes, written into the C source: see `ingot.graph.aot.extern_table_c`)."""
    import hashlib

    slots: dict = {}
    for symbol in sorted(externals):
        module = externals[symbol]
        if getattr(module, "c_entry", None) is not None and module.c_entry() is not None:
            slots[symbol] = len(slots)
    for plan in plans.values():
        for step in plan["steps"]:
            if step["op"] == "call_dps_packed" and step["func"] in slots:
                step["extern"] = slots[step["func"]]
    return [f"{symbol} {hashlib.sha256(externals[symbol].save_to_bytes()).hexdigest()[:16]}" for symbol in slots]


def bind_external_entries(ex: "Executable") -> None:
    """Fill the library's table of external region entries (`ingot.graph.aot.EXTERN_TABLE`) with the
    C entries of ``ex.external``'s runtime modules (at build and at load).

    Example:
        >>> bind_external_entries(ex)  # doctest: +SKIP
    """
    import ctypes
    import os

    from .aot import EXTERN_TABLE

    slots = {s["func"]: s["extern"] for p in ex.plans.values() for s in _extern_steps(p)}
    if not slots or ex.lib is None:
        return
    handle = ctypes.CDLL(ex.lib.lib_path, mode=os.RTLD_LOCAL | getattr(os, "RTLD_NOW", 0))  # the loaded library
    table = (ctypes.c_void_p * (max(slots.values()) + 1)).in_dll(handle, EXTERN_TABLE)
    for symbol, k in slots.items():
        entry = ex.external[symbol].c_entry()
        if entry is None:
            raise IRError(f"external region {symbol!r}: the plan calls it from the AOT entry but its runtime module "
                          f"has no C entry (c_entry() is None); rebuild the model")
        table[k] = entry


def _needs_pipeline(mod: IRModule) -> bool:
    for func in mod.functions.values():
        if isinstance(func, Function):
            for block in func.body.blocks:
                if any(is_legalizable(b.value) for b in block.bindings):
                    return True
    return False


def build(mod: IRModule, target: Any = "llvm", pipeline: Any = "default", *,
          apply_schedule: "Callable[[Any], Any] | None" = None, aot: bool = True, layout: str = "auto") -> Executable:
    """Compile a graph module: legalize/fuse, schedule, plan, emit kernels + AOT entries, compile.

    ``apply_schedule(prim_func) -> prim_func | None`` substitutes tuned kernels (None: use the
    default schedule). ``aot=False`` builds no AOT entries (every call interprets the plan).
    ``layout`` goes to `default_build_pipeline`: ``"auto"`` runs conv networks in NHWC on CPUs,
    ``"NCHW"`` keeps the model's layout.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4,), "float32"))
        >>> bb = G.BlockBuilder()
        >>> with bb.function("main", [x]):
        ...     bb.emit_func_output(bb.emit(G.op.exp(x)))
        >>> ex = build(bb.get())  # doctest: +SKIP
        >>> ex.schedule_report  # doctest: +SKIP
        {'exp': 'fallback'}
    """
    from ingot.target import as_target

    # One pause of the cyclic collector for the whole build: the graph passes, scheduling and
    # lowering make millions of short-lived acyclic objects, and with the collector back on between
    # kernels its scans cost ~2.5 s of a ResNet-50 compile's CPU (loaded host; 311 collections).
    with gc_paused():
        return _build(mod, as_target(target), pipeline, apply_schedule, aot, layout)


def _build(mod: IRModule, target: Any, pipeline: Any, apply_schedule: Any, aot: bool, layout: str) -> Executable:
    from .transform import default_build_pipeline

    from .external import has_external_functions, lower_external_functions

    externals: dict = {}
    if has_external_functions(mod):  # BYOC regions (PartitionGraph): each backend's codegen builds its module
        mod, externals = lower_external_functions(mod, target)
    from .control_flow import has_control_flow, lift_control_flow

    if has_control_flow(mod):  # If branches become module functions (compiled once each)
        mod = lift_control_flow(mod)
    if pipeline == "default" and _needs_pipeline(mod):
        mod = default_build_pipeline(target, layout)(mod)
    elif pipeline not in (None, "default"):
        mod = pipeline(mod)
    prim = IRModule({n: f for n, f in mod.functions.items() if not isinstance(f, Function)})
    # The plans come before the kernels are scheduled (they do not depend on them), so that gcc
    # can compile the AOT entries while Python lowers the kernels (`OverlappedLink`).
    consts = ConstantTable()
    plans = {name: compile_plan(f, name, consts) for name, f in mod.functions.items()
             if isinstance(f, Function) and not f.attrs.get("Primitive")}
    layout, _ = consts.layout()
    extern_keys = _mark_extern_steps(plans, externals)
    from .control_flow import control_callees

    # Branches and loop bodies run through the interpreter of their caller's control-flow step.
    callees = control_callees(plans)
    aot_plans = {n: p for n, p in plans.items() if aot and is_aot_compatible(p) and n not in callees}
    extern_keys = extern_keys if any(_extern_steps(p) for p in aot_plans.values()) else None
    checked: dict = {}  # kernel key -> KernelSource of the last schedule that passed the check
    with _overlapped_link(prim, target, aot_plans, layout, extern_keys) as overlap:
        scheduled, report = _schedule_kernels(prim, target, apply_schedule, checked,
                                              overlap.add_kernel if overlap is not None else None)
        lib, kernels, aot_names = _compile(scheduled, target, aot_plans, layout, checked, extern_keys, overlap)
    weights = _weights_array(consts)
    return Executable(mod, lib, target, plans, layout, weights, aot_names, kernels, report, externals)


#: gcc -O3 spends about 12x more time per character on the AOT entries than on kernel C (hundreds
#: of address-taken DLTensors in one frame make dead-store elimination and alias walking slow):
#: the weight that balances the translation units. Measured on ResNet-50 (42 KB of AOT entries):
#: with 12 the two units take 2.32 / 2.20 s of compiler CPU (one unit: 4.43 s); with 25, 1.75 / 2.90.
AOT_GCC_WEIGHT = 12


def _kernel_names(prim: IRModule) -> "dict[str, tuple[str, str, str]]":
    """``{key: (exported name, entry symbol, kernel symbol)}`` of the PrimFuncs of ``prim``, as
    `ingot.codegen.c.generate_c` names them."""
    from ingot.codegen.build import kernel_symbols
    from ingot.codegen.c import function_name
    from ingot.tir.function import PrimFunc

    items = [(getattr(k, "name_hint", k), f) for k, f in prim.items() if isinstance(f, PrimFunc)]
    names = [function_name(str(k), f) for k, f in items]
    return {k: (n, *syms) for (k, _), n, syms in zip(items, names, kernel_symbols(names))}


def _overlapped_link(prim: IRModule, target: Any, aot_plans: dict, layout: list, extern_keys: "list | None"):
    """An `ingot.codegen.build.OverlappedLink` for ``prim`` already compiling the AOT entries
    (made with the kernel symbols the module will have unless a schedule renames a kernel, in
    which case `_compile` makes them again), or a null context when there is no kernel."""
    import contextlib

    from ingot.codegen.build import OverlappedLink

    if not prim.functions:
        return contextlib.nullcontext()
    symbols = {key: symbol for key, (_, symbol, _) in _kernel_names(prim).items()}
    entries, _, _ = _aot_entries(aot_plans, symbols, set(symbols.values()), layout, extern_keys)
    overlap = OverlappedLink(_compile_options(target, ""))
    overlap.add_entries(entries, list(symbols.values()), AOT_GCC_WEIGHT)
    return overlap


def _schedule_kernels(prim: IRModule, target: Any, apply_schedule: Any, checked: dict,
                      on_kernel: Any = None) -> "tuple[IRModule, dict[str, str]]":
    """`schedule_hook.schedule_func` on every kernel, checking each schedule by making its C
    (`ingot.driver.kernel_cache.kernel_source`: from the kernel source cache, or lowered and
    printed), so one bad schedule falls back alone instead of failing the module. The C of the
    schedule each kernel keeps is left in ``checked[key]`` for `_compile` and, in module order,
    given to ``on_kernel`` (gcc may start on it while the next kernels are lowered)."""
    from ingot.tir.function import PrimFunc

    from .schedule_hook import schedule_func

    names = _kernel_names(prim)
    report: dict[str, str] = {}
    funcs = {}
    for key, func in prim.items():
        key = getattr(key, "name_hint", key)
        if isinstance(func, PrimFunc):
            func, report[key] = schedule_func(func, target, apply_schedule,
                                              lambda f, k=key: _check_kernel(f, k, names, target, prim.attrs, checked))
            kept = checked.get(key)
            if on_kernel is not None and kept is not None and kept[0] is func:
                on_kernel(kept[1])
        funcs[key] = func
    return IRModule(funcs, prim.attrs), report


def _check_kernel(func: Any, key: str, names: dict, target: Any, mod_attrs: Any, checked: dict) -> None:
    """Raise if ``func`` (a candidate schedule of kernel ``key``) cannot be lowered and printed as
    C; on success its `KernelSource` goes to ``checked[key]`` (the candidate kept last wins)."""
    from ingot.codegen.c import function_name
    from ingot.driver.kernel_cache import kernel_source

    name, symbol, kernel_symbol = names[key]
    if function_name(key, func) != name:  # the schedule renamed it: checked alone, _compile makes its C anew
        from ingot.codegen.build import kernel_symbols

        name = function_name(key, func)
        [(symbol, kernel_symbol)] = kernel_symbols([name])
    checked[key] = (func, kernel_source(func, key, name, symbol, kernel_symbol, target, mod_attrs=dict(mod_attrs)))


def _kernel_sources(prim: IRModule, target: Any, checked: "dict | None") -> list:
    """The `KernelSource` of every PrimFunc of ``prim`` in module order, reusing the checked ones."""
    from ingot.driver.kernel_cache import kernel_source

    names = _kernel_names(prim)
    pieces = []
    for key, func in prim.items():
        key = getattr(key, "name_hint", key)
        if key not in names:
            continue
        name, symbol, kernel_symbol = names[key]
        hit = (checked or {}).get(key)
        if hit is not None and hit[0] is func and (hit[1].name, hit[1].symbol, hit[1].kernel_symbol) == names[key]:
            pieces.append(hit[1])
        else:
            pieces.append(kernel_source(func, key, name, symbol, kernel_symbol, target, mod_attrs=dict(prim.attrs)))
    return pieces


def _host_empty(shape: Any, dtype: Any) -> np.ndarray:
    """Long-lived memory the executable owns (weights blob, workspace arena): 2 MiB-aligned and
    advised for transparent huge pages (`ingot.runtime.memory.huge_empty`), so the physical cache
    placement is the same in every compile (measured latency-neutral against numpy memory:
    BENCHMARKS.md "Session 7: placement noise"). Small buffers and hosts without THP get ordinary
    64-byte-aligned memory."""
    from ingot.runtime.memory import huge_empty

    return huge_empty(shape, dtype)


def _weights_array(consts: ConstantTable) -> np.ndarray:
    """The weights blob as an aligned uint8 array (`ConstantTable.write_into`: each constant copied
    once, straight to its offset)."""
    out = _host_empty((max(consts.layout()[1], 1),), "uint8")
    consts.write_into(out)
    return out


def _aot_entries(aot_plans: dict, symbols: dict, taken: set, layout: list,
                 extern_keys: "list | None") -> "tuple[str, dict, dict]":
    """The C of the AOT entries of ``aot_plans`` calling kernels by their entry ``symbols``
    (``{kernel: symbol}``; ``taken``: the symbols in use), as it starts the module's tail; with
    their metadata (``{name in lib: entry}``) and ``{graph function: name in lib}``."""
    from ingot.codegen.sanitize import sanitize_identifier

    from .aot import aot_metadata, emit_aot_function, extern_table_c

    taken = set(taken)
    texts, functions, aot_names = ([extern_table_c(extern_keys)] if extern_keys is not None else []), {}, {}
    for name, plan in aot_plans.items():
        symbol, k = f"ingot_graph_{sanitize_identifier(name)}", 1
        while symbol in taken:
            symbol, k = f"ingot_graph_{sanitize_identifier(name)}_{k}", k + 1
        taken.add(symbol)
        lib_name = f"graph.{name}"
        texts.append(emit_aot_function(plan, symbol, symbols, layout))
        functions[lib_name] = aot_metadata(plan, symbol, layout)
        aot_names[name] = lib_name
    return "\n/* ===== AOT entries of the graph functions ===== */\n" + "\n".join(texts) + "\n", functions, aot_names


def _compile(prim: IRModule, target: Any, aot_plans: dict, layout: list,
             lowered_cache: "dict | None" = None, extern_keys: "list | None" = None,
             overlap: Any = None) -> "tuple[Any, dict, dict]":
    """Lower ``prim``, emit its C plus the AOT entries, compile one library; returns
    ``(lib, {kernel: name in lib}, {graph function: AOT name in lib})``. ``extern_keys``: the
    slots of the table of external region entries the AOT entries call (None: no table).
    ``overlap``: the `ingot.codegen.build.OverlappedLink` that compiled units ahead, if any."""
    if not prim.functions and not aot_plans:
        return None, {}, {}
    from ingot.codegen.build import assemble_source, link_kernel_sources
    from ingot.codegen.c import function_name
    from ingot.codegen.prelude import emit_metadata_c, emit_source_c
    from ingot.runtime.module import Module
    from ingot.runtime.threads import num_threads_for_target

    pieces = _kernel_sources(prim, target, lowered_cache)
    source = assemble_source(pieces, target, include_source=False)
    md = source.metadata
    tail = emit_metadata_c(md)
    kernels = {name: function_name(name, f) for name, f in ((getattr(k, "name_hint", k), f) for k, f in prim.items())}
    symbols = {name: md["functions"][lib_name]["symbol"] for name, lib_name in kernels.items()}
    taken = {d["symbol"] for d in md["functions"].values()}
    entries, aot_functions, aot_names = _aot_entries(aot_plans, symbols, taken, layout, extern_keys)
    md = {**md, "functions": {**md["functions"], **aot_functions}, "source_included": True}
    # The library's source (``lib.get_source()``, embedded as ingot_module_source) is the one
    # translation unit; gcc may get it split in several (`link_kernel_sources`), same library.
    aot_text = entries + emit_metadata_c(md)
    code = source.code[:-len(tail)] + aot_text
    options = _compile_options(target, code)
    embedded = emit_source_c(code)
    path = link_kernel_sources(pieces, aot_text + embedded, options, tail_weight=AOT_GCC_WEIGHT * len(aot_text),
                               overlap=overlap)
    lib = Module(path, source=code + embedded)
    lib.set_num_threads(num_threads_for_target(target))
    return lib, kernels, aot_names


def _compile_options(target: Any, code: str) -> Any:
    from ingot.codegen import build as cbuild

    helper = getattr(cbuild, "_options_for_source", None)
    return helper(target, code) if helper is not None else cbuild.compile_options_for(target)


def eval_dim(dim: Any, env: dict) -> int:
    """The integer value of a dimension (int or PrimExpr) with symbolic variables bound in ``env``.

    Example:
        >>> from ingot.ir import Var
        >>> n = Var("n", "int64")
        >>> eval_dim(n * 2 + 1, {n: 3})
        7
    """
    from .plan import dim_to_json

    if isinstance(dim, PE.PrimExpr) or isinstance(dim, int):
        by_name = {getattr(k, "name", k): v for k, v in env.items()}
        return eval_dim_json(dim_to_json(dim), by_name)
    raise IRError(f"cannot evaluate the dimension `{dim}`")


def _as_numpy(value: Any) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "numpy"):
        return value.numpy()
    return np.asarray(value)


def _bind_input(desc: dict, value: np.ndarray, env: dict, func_name: str) -> None:
    if desc["dtype"] is None:
        return
    if desc["dtype"] == "string":  # str/bytes/object arrays; builtins convert them (ingot.graph.op.string)
        if value.dtype.kind not in "OUS":
            raise IRError(f"{func_name}: argument {desc['name']!r} must be a string tensor (a numpy array of str), "
                          f"got {value.dtype}")
    elif str(value.dtype) != desc["dtype"]:
        raise IRError(f"{func_name}: argument {desc['name']!r} must be {desc['dtype']}, got {value.dtype}")
    shape = desc["shape"]
    if shape is None:
        return
    shown = tuple(d if isinstance(d, int) else d.get("var", "?") for d in shape)
    if value.ndim != len(shape):
        raise IRError(f"{func_name}: argument {desc['name']!r} must have rank {len(shape)} (shape {shown}), "
                      f"got shape {value.shape}")
    for axis, (dim, actual) in enumerate(zip(shape, value.shape)):
        if isinstance(dim, int):
            if dim != actual:
                raise IRError(f"{func_name}: argument {desc['name']!r} must have shape {shown}, got {value.shape} "
                              f"(axis {axis})")
        elif "var" in dim:
            name = dim["var"]
            if name in env and env[name] != actual:
                raise IRError(f"{func_name}: argument {desc['name']!r} axis {axis} is {actual}, but {name} = "
                              f"{env[name]} from an earlier argument")
            env[name] = actual


class Executor:
    """Runs the functions of an `Executable` (``vm["main"](*inputs)``) on a device.

    A static function runs as one call of its AOT C entry; others are interpreted step by step.
    ``use_aot=False`` forces the interpreter. ``on_step(function_name, step, seconds)``, when
    given, is called after each interpreted plan step (a step is a dict with ``"op"``:
    ``call_tir``, ``call_packed``, ``call_dps_packed``, ``call_graph``, and ``"func"``); it implies
    the interpreter, since the AOT entry is one C call (per-kernel profiling uses it).

    Thread safety: several threads may call one Executor at once (a server's request threads
    calling one model). Shared by all calls, read-only: the executable, its library and the
    weights blob. Per call: the workspace arena of the function's static memory plan and the C
    argument block are checked out of a pool for the duration of the call and returned after it
    (a call never sees another call's intermediates); outputs are fresh arrays per call. The
    pool grows to the number of calls that ever ran at once (one arena each) and keeps them.
    The C entry runs without the GIL, so calls overlap where cores allow.

    Run-time shapes (a plan whose memory plan is None: a dynamic batch or sequence, data-dependent
    sizes): the first call with a given binding of the symbolic dims the inputs' shapes bind (e.g.
    ``batch=1, seq=128``) plans every intermediate those dims size (`ingot.graph.plan.plan_bound_memory`,
    the static planner's placement), and keeps that plan and a pool of arenas for it, keyed by the
    binding; later calls with the same binding reuse both, so the kernels write memory that is
    already mapped instead of fresh pages per call. The last ``max_bindings`` bindings are kept
    (least recently used dropped); ``max_bindings=0`` allocates every intermediate per call. Values
    sized by the data (NonZero, Unique, Loop results) are allocated per call either way; outputs are
    never planned. `memory_stats` shows the plans and how often each was reused.

    Example: see `build`.
    """

    def __init__(self, executable: Executable, device: Any = None, use_aot: bool = True,
                 on_step: "Callable[[str, dict, float], None] | None" = None, max_bindings: int = 4):
        self.executable = executable
        self.device = device
        self.use_aot = use_aot and on_step is None
        self.on_step = on_step
        self.max_bindings = max_bindings
        self._consts = self._constant_views()
        # function name -> free (arena, planned views) pairs of its static plan (the interpreter's;
        # list.pop/append are atomic)
        self._workspaces: dict[str, list] = {}
        # function name -> {binding: _BoundPlan} of a plan with run-time shapes, least recently used first
        self._bound: dict[str, OrderedDict] = {}
        self._plans_made: dict[str, int] = {}
        self._bound_lock = threading.Lock()  # guards the binding caches (lookup, insert, evict)
        self._runners: dict[str, Callable] = {}
        self._lock = threading.Lock()  # guards creating a runner (once per function)

    def _constant_views(self) -> list:
        w = self.executable.weights
        return [w[c["offset"]:c["offset"] + c["nbytes"]].view(c["dtype"]).reshape(c["shape"])
                for c in self.executable.constants]

    def _new_workspace(self, name: str) -> "np.ndarray | None":
        """A fresh workspace arena for one call of static function ``name`` (None when its plan needs none)."""
        mem = self.executable.plans[name]["memory"]
        if mem is None or not mem["workspace_bytes"]:
            return None
        return _host_empty((mem["workspace_bytes"],), "uint8")

    def _bound_plan(self, name: str, plan: dict, env: dict) -> "_BoundPlan | None":
        """The memory plan of run-time function ``name`` for this call's binding ``env`` (made on the
        binding's first call, kept for the last ``max_bindings`` bindings); None when disabled."""
        if self.max_bindings <= 0:
            return None
        key = tuple(sorted(env.items()))
        with self._bound_lock:
            cache = self._bound.setdefault(name, OrderedDict())
            bound = cache.get(key)
            if bound is not None:
                cache.move_to_end(key)
                bound.calls += 1
                return bound
        # Planning runs outside the lock (place_buffers is quadratic in the values); two threads
        # that both miss plan alike and the first one stored wins.
        bound = _BoundPlan(dict(env), plan_bound_memory(plan, env))
        with self._bound_lock:
            cache = self._bound.setdefault(name, OrderedDict())
            kept = cache.get(key)
            if kept is not None:
                kept.calls += 1
                return kept
            cache[key] = bound
            self._plans_made[name] = self._plans_made.get(name, 0) + 1
            while len(cache) > self.max_bindings:
                cache.popitem(last=False)  # arenas in use by a call go with their caller
            return bound

    def memory_stats(self, name: str = "main") -> dict:
        """How graph function ``name`` gets its intermediates: ``{"static": True, "workspace_bytes"}``
        for a static memory plan; for run-time shapes, ``"plans_made"`` (binding plans made so
        far, evicted ones included) and ``"bindings"``, most recently used last: per binding its
        dims, ``workspace_bytes``, ``planned`` (values in the arena), ``calls`` (calls that used
        the plan) and ``arenas`` (made for calls in flight at once).

        Example:
            >>> vm = Executor(ex)  # doctest: +SKIP
            >>> vm["main"](np.ones((3, 8), "float32"))  # doctest: +SKIP
            >>> vm.memory_stats()["bindings"]  # doctest: +SKIP
            [{'binding': {'batch': 3}, 'workspace_bytes': 4096, 'planned': 5, 'calls': 1, 'arenas': 1}]
        """
        plan = self.executable.plans.get(name)
        if plan is None:
            raise KeyError(f"the executable has no graph function {name!r}; it has {sorted(self.executable.plans)}")
        if plan["memory"] is not None:
            return {"static": True, "workspace_bytes": plan["memory"]["workspace_bytes"]}
        with self._bound_lock:
            bindings = [b.summary() for b in self._bound.get(name, {}).values()]
            return {"static": False, "plans_made": self._plans_made.get(name, 0), "bindings": bindings}

    def __getitem__(self, name: str) -> Callable[..., Any]:
        runner = self._runners.get(name)
        if runner is not None:
            return runner
        plans = self.executable.plans
        if name not in plans:
            raise KeyError(f"the executable has no graph function {name!r}; it has {sorted(plans)}")
        with self._lock:
            runner = self._runners.get(name)
            if runner is not None:
                return runner
            if self.use_aot and name in self.executable.aot:
                runner = self._aot_runner(name)
            else:
                def runner(*args: Any) -> Any:
                    return self._wrap(self.invoke(name, [_as_numpy(a) for a in args]))
            self._runners[name] = runner
        return runner

    def _aot_runner(self, name: str) -> Callable[..., Any]:
        from ingot.runtime.dtype import dtype_str
        from ingot.runtime.ndarray import NDArray, aligned_empty

        from .aot import output_descs

        ex = self.executable
        plan = ex.plans[name]
        fn = ex.lib[ex.aot[name]]
        # The runner keeps the weights itself: it may outlive this Executor
        # (``Executor(ex)["main"]`` drops the Executor at once).
        weights_arr = ex.weights
        weights = weights_arr.ctypes.data
        specs = [(tuple(d["shape"]), np.dtype(d["dtype"])) for d in output_descs(plan, ex.constants)]
        structure = plan["output"]
        names = [dtype_str(d) for _, d in specs]
        single = structure[0] != "tuple"
        wrap = NDArray._wrap_trusted

        def rebuild(ref: Any, it: Any) -> Any:
            if ref[0] == "tuple":
                return tuple(rebuild(r, it) for r in ref[1])
            value = next(it)
            return value if isinstance(value, NDArray) else NDArray(value)

        def new_state() -> Callable[..., tuple]:
            """One call's private state: a workspace arena and a caller whose argument block
            points at it (`StaticCaller`: one aligned allocation for the outputs, cached
            DLTensors, DESIGN.md "Executor overhead"); returns ``run(*inputs) -> outputs``."""
            ws = self._new_workspace(name)
            ws_addr = None if ws is None else ws.ctypes.data
            caller = fn.static_caller(weights, ws_addr)
            if caller is not None and caller.num_inputs is not None:
                fast = caller.run

                def run_state(*args: Any) -> tuple:
                    _ = ws, weights_arr
                    return fast(*args)
            else:  # not expected for an AOT entry; stay correct
                def run_state(*args: Any) -> tuple:
                    _ = ws, weights_arr
                    outs = tuple(aligned_empty(s, d) for s, d in specs)
                    fn(weights, ws_addr, *args, *outs)
                    return outs
            return run_state

        # Free states; a call pops one (or makes one when all are in use by other threads) and
        # puts it back after: list.pop/append are atomic, so no lock on the hot path.
        pool = [new_state()]
        pop, push = pool.pop, pool.append

        if single:
            name0 = names[0]

            def run(*args: Any) -> Any:
                try:
                    state = pop()
                except IndexError:
                    state = new_state()
                try:
                    return wrap(state(*args)[0], name0)
                finally:
                    push(state)
        else:
            def run(*args: Any) -> Any:
                try:
                    state = pop()
                except IndexError:
                    state = new_state()
                try:
                    outs = state(*args)
                finally:
                    push(state)
                return rebuild(structure, iter([wrap(o, n) for o, n in zip(outs, names)]))

        run.__doc__ = f"Run graph function {name!r} (one call of its AOT C entry; thread-safe, see `Executor`)."
        run.pool = pool  # the free per-call states (tests look at how many were made)
        return run

    def _wrap(self, value: Any) -> Any:
        from ingot.runtime.ndarray import NDArray

        if isinstance(value, np.ndarray):
            # a string tensor stays a numpy object array (an NDArray holds fixed-size elements only)
            return value if value.dtype.kind in "OUS" else NDArray(value)
        if isinstance(value, tuple):
            return tuple(self._wrap(v) for v in value)
        return value

    def invoke(self, name: str, args: list) -> Any:
        """Interpret graph function ``name`` on numpy arrays; returns numpy arrays (tuples for tuples).

        Example:
            >>> vm.invoke("main", [np.ones((2, 3), "float32")])  # doctest: +SKIP
        """
        plan = self.executable.plans.get(name)
        if plan is None:
            raise KeyError(f"the executable has no graph function {name!r}; it has {sorted(self.executable.plans)}")
        inputs = plan["inputs"]
        if len(args) != len(inputs):
            raise IRError(f"{name} takes {len(inputs)} argument(s) ({', '.join(i['name'] for i in inputs)}), "
                          f"got {len(args)}")
        env: dict = {}
        for desc, a in zip(inputs, args):
            if isinstance(a, np.ndarray):
                _bind_input(desc, a, env, name)
        values: list = [None] * len(plan["values"])
        # This call's own workspace arena and its views, from the pool of the static plan or of
        # this binding's plan (see the class note on thread safety).
        if plan["memory"] is not None:
            mem, free, binding = plan["memory"], self._workspaces.setdefault(name, []), {}
        else:
            bound = self._bound_plan(name, plan, env)
            if bound is None or bound.memory is None:
                return self._interpret(name, plan, args, env, values, {})
            mem, free, binding = bound.memory, bound.free, bound.env
        try:
            arena = free.pop()
        except IndexError:
            arena = _new_arena(plan, mem, binding)
            if plan["memory"] is None:
                bound.arenas += 1
        try:
            return self._interpret(name, plan, args, env, values, arena[1])
        finally:
            free.append(arena)

    def _interpret(self, name: str, plan: dict, args: list, env: dict, values: list, planned: dict) -> Any:

        def resolve(ref: Any) -> Any:
            kind = ref[0]
            if kind == "input":
                return args[ref[1]]
            if kind == "const":
                return self._consts[ref[1]]
            if kind == "value":
                return values[ref[1]]
            if kind == "tuple":
                return tuple(resolve(r) for r in ref[1])
            if kind == "item":
                return resolve(ref[1])[ref[2]]
            return tuple(eval_dim_json(d, env) for d in ref[1])  # "shape"

        def alloc(v: int) -> np.ndarray:
            view = planned.get(v)
            if view is not None:
                return view
            from ingot.runtime.ndarray import aligned_empty

            desc = plan["values"][v]
            return aligned_empty(tuple(eval_dim_json(d, env) for d in desc["shape"]), desc["dtype"])

        on_step = self.on_step
        for step in plan["steps"]:
            if step["op"] == "builtin":  # run-time shapes: binds fresh dims in env (ingot.graph.runtime_shape)
                from .runtime_shape import run_builtin_step

                t0 = time.perf_counter()
                run_builtin_step(step, plan, resolve, values, env)
                if on_step is not None:
                    on_step(name, step, time.perf_counter() - t0)
                continue
            if on_step is None:
                self._run_step(name, step, resolve, alloc, values)
            else:
                t0 = time.perf_counter()
                self._run_step(name, step, resolve, alloc, values)
                on_step(name, step, time.perf_counter() - t0)
        return resolve(plan["output"])

    def _run_step(self, fname: str, step: dict, resolve: Callable, alloc: Callable, values: list) -> None:
        from ingot.runtime import get_global_func
        from ingot.runtime.ndarray import NDArray

        op = step["op"]
        if op == "call_tir":
            ex = self.executable
            if ex.lib is None:
                raise IRError(f"{fname}: call_tir {step['func']} but the executable has no kernels")
            ins = [np.require(resolve(a), requirements="C") for a in step["args"]]
            outs = [alloc(v) for v in step["outs"]]
            # tir_vars: symbolic sizes evaluated from this call's shape environment, after the outputs.
            scalars = resolve(["shape", step["scalars"]]) if "scalars" in step else ()
            ex.lib[ex.kernels.get(step["func"], step["func"])](*ins, *outs, *scalars)
            for v, o in zip(step["outs"], outs):
                values[v] = o
        elif op == "call_dps_packed" and step["func"] in self.executable.external:
            ins = [np.require(resolve(a), requirements="C") for a in step["args"]]
            outs = [alloc(v) for v in step["outs"]]
            self.executable.external[step["func"]].run(*ins, *outs)
            for v, o in zip(step["outs"], outs):
                values[v] = o
        elif op == "call_dps_packed":
            ins = [NDArray(np.require(resolve(a), requirements="C")) for a in step["args"]]
            outs = [alloc(v) for v in step["outs"]]
            get_global_func(step["func"])(*ins, *[NDArray(o) for o in outs])
            for v, o in zip(step["outs"], outs):
                values[v] = o
        elif op == "call_packed":
            args = [NDArray(np.require(x, requirements="C")) if isinstance(x, np.ndarray) else x
                    for x in (resolve(a) for a in step["args"])]
            result = get_global_func(step["func"])(*args)
            values[step["out"]] = _unwrap(result)
        elif op == "call_graph":
            values[step["out"]] = self.invoke(step["func"], [resolve(a) for a in step["args"]])
        elif op in ("if_then_else", "loop", "scan"):  # control flow: calls the branches' / bodies' plans
            from .control_flow import run_control_step

            values[step["out"]] = run_control_step(step, [resolve(a) for a in step["args"]], self.invoke)
        else:
            raise IRError(f"{fname}: unknown plan step {op!r} (a newer Ingot wrote this plan?)")


class _BoundPlan:
    """The memory plan of a run-time function for one binding of its symbolic dims, with its pool
    of free ``(arena, views)`` pairs (list.pop/append are atomic) and use counts."""

    __slots__ = ("env", "memory", "free", "calls", "arenas")

    def __init__(self, env: dict, memory: "dict | None"):
        self.env = env
        self.memory = memory
        self.free: list = []
        self.calls = 1
        self.arenas = 0

    def summary(self) -> dict:
        mem = self.memory or {}
        return {"binding": dict(self.env), "workspace_bytes": mem.get("workspace_bytes", 0),
                "planned": len(mem.get("offsets", ())), "calls": self.calls, "arenas": self.arenas}


def _new_arena(plan: dict, mem: dict, binding: dict) -> "tuple[np.ndarray | None, dict]":
    """A workspace arena for memory plan ``mem`` of ``plan`` and the view of every planned value in
    it (``{value id: array}``, made once per arena: a call only looks them up). The shapes are
    evaluated with ``binding``, the symbolic dims the plan was made for (a static plan has none)."""
    if not mem["workspace_bytes"]:
        return None, {}
    ws = _host_empty((mem["workspace_bytes"],), "uint8")
    views = {}
    for key, off in mem["offsets"].items():
        desc = plan["values"][int(key)]
        shape = tuple(eval_dim_json(d, binding) for d in desc["shape"])
        views[int(key)] = ws[off:off + nbytes_of({"shape": shape, "dtype": desc["dtype"]})].view(
            desc["dtype"]).reshape(shape)
    return ws, views


def _unwrap(result: Any) -> Any:
    if result is None:
        return None
    if isinstance(result, (tuple, list)):
        return tuple(_unwrap(r) for r in result)
    return _as_numpy(result)


def load_executable(path: str) -> Executable:
    """Load an executable written by `Executable.export_library` (library, weights, manifest).

    Example:
        >>> ex = load_executable("/tmp/model.so")  # doctest: +SKIP
        >>> Executor(ex)["main"](data)  # doctest: +SKIP
    """
    from .artifact import load_executable as load

    return load(path)


VirtualMachine = Executor
