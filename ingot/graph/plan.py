"""Execution plans: a compiled graph function as a flat, JSON-serializable list of steps.

Note: after the build pipeline a graph function is a sequence of ``call_tir`` (and packed-call)
bindings. `compile_plan` turns it into an `ExecutionPlan` that knows nothing of the graph IR:
  * ``inputs``: name, shape (ints or symbolic dims) and dtype of each parameter;
  * ``steps``: ``call_tir`` / ``call_dps_packed`` / ``call_packed`` / ``call_graph``, whose
    arguments are *refs* (a ``call_tir`` with ``tir_vars`` also has ``"scalars"``: one JSON
    dimension per scalar parameter of the kernel, passed as ints after the outputs) (``["input", i]``, ``["const", k]``, ``["value", v]`` — the v-th tensor a
    step produced —, ``["tuple", [refs]]``, ``["item", ref, i]``, ``["shape", [dims]]``);
  * ``output``: the ref of the result;
  * ``memory`` (static shapes only): the static memory plan of the intermediate tensors.
Variables bound to tuples, tuple items or other variables cost nothing at run time: they are
resolved to refs while compiling. Symbolic dimensions are serialized as small expression trees
(`dim_to_json`) and evaluated with the values bound from the inputs' shapes (`eval_dim_json`).

Static memory planning (TFLite's "greedy by size"): each intermediate tensor lives from the step
that writes it to the last step that reads it (inclusive, so a step's inputs never share memory
with its outputs); tensors are placed largest first at the lowest 64-byte aligned offset of one
arena that does not overlap a placed tensor with an overlapping lifetime. Function outputs are
not planned: they are fresh arrays returned to the caller.

Run-time shapes: a plan with symbolic sizes has no static memory plan; the executor plans it per
binding of the dims its inputs bind (`plan_bound_memory`, same placement, offsets valid for that
binding only) on the binding's first call and keeps the plan. Steps that are not destination-passing
(builtins, packed and graph calls, control flow) may return a view of an argument: the argument then
lives as long as the step's results (`value_lifetimes`) and stays out of any arena when the result
may view it (`result_aliases`).

Measured and not adopted (session 4, ResNet-50 in-model, interleaved A/B, min over rounds, load 4-7):
  * the greedy plan already lands almost every output on lines touched 1-2 steps before
    (ping-pong), so "reuse the most recently freed block" (ORT's arena) changes nothing here;
  * all activation offsets are multiples of 4 KiB (input, output and residual alias modulo 4096),
    but staggering them (offsets spread modulo 4096 within each step) measured 1.00x at 1 thread,
    0.99x per-step / 1.02x end to end at 2 threads, 1.00x on MobileNetV2: no gain, not kept;
  * the ceiling: pre-reading a step's output buffer (a perfectly warm output) saves 1.3% of the
    1-thread run, its inputs 1.1%, its weights ~4% (weights are read cold every inference).

Example:
    >>> place_buffers([100, 100, 100], [(0, 1), (1, 2), (2, 3)])
    ([0, 128, 0], 256)
"""
from __future__ import annotations

from typing import Any

from ingot.ir import expr as PE
from ingot.ir.error import IRError
from ingot.ir.module import GlobalVar

from .expr import Call, Constant, ExternFunc, Function, Op, ShapeExpr, Tuple, TupleGetItem, Var
from .struct_info import TensorStructInfo, TupleStructInfo

#: Alignment of every planned buffer and of every weight in the weights blob (bytes).
ALIGN = 64

_DIM_OPS = {PE.Add: "add", PE.Sub: "sub", PE.Mul: "mul", PE.FloorDiv: "floordiv", PE.FloorMod: "floormod",
            PE.Min: "min", PE.Max: "max", PE.Div: "div", PE.Mod: "mod"}
_DIM_EVAL = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b, "min": min, "max": max,
    "div": lambda a, b: int(a / b), "mod": lambda a, b: a - b * int(a / b),
}


def dim_to_json(dim: Any) -> Any:
    """A dimension as JSON: an int, ``{"var": name}`` or ``{"op": kind, "a": ..., "b": ...}``.

    Example:
        >>> from ingot.ir import Var
        >>> n = Var("n", "int64")
        >>> dim_to_json(n * 2)
        {'op': 'mul', 'a': {'var': 'n'}, 'b': 2}
    """
    if isinstance(dim, int):
        return dim
    if isinstance(dim, PE.IntImm):
        return dim.value
    if isinstance(dim, PE.Var):
        return {"var": dim.name}
    if isinstance(dim, PE.Cast):
        return dim_to_json(dim.value)
    kind = _DIM_OPS.get(type(dim))
    if kind is None:
        raise IRError(f"cannot serialize the dimension expression `{dim}` ({type(dim).__name__}); "
                      f"dimensions may use + - * // % min max of symbolic variables")
    return {"op": kind, "a": dim_to_json(dim.a), "b": dim_to_json(dim.b)}


def eval_dim_json(dim: Any, env: dict) -> int:
    """The value of a JSON dimension with symbolic variables bound by name in ``env``.

    Example:
        >>> eval_dim_json({"op": "add", "a": {"var": "n"}, "b": 1}, {"n": 3})
        4
    """
    if isinstance(dim, int):
        return dim
    if "var" in dim:
        try:
            return env[dim["var"]]
        except KeyError:
            raise IRError(f"symbolic dimension {dim['var']!r} is not bound by the inputs' shapes") from None
    return _DIM_EVAL[dim["op"]](eval_dim_json(dim["a"], env), eval_dim_json(dim["b"], env))


def _tensor_desc(sinfo: Any, what: str) -> dict:
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
        raise IRError(f"{what}: needs a tensor with a known shape, got {sinfo}")
    return {"shape": [dim_to_json(d) for d in sinfo.shape], "dtype": str(sinfo.dtype)}


def _is_static(desc: dict) -> bool:
    return all(isinstance(d, int) for d in desc["shape"])


def nbytes_of(desc: dict) -> int:
    """Bytes of a static tensor description.

    Example:
        >>> nbytes_of({"shape": [2, 3], "dtype": "float32"})
        24
    """
    from ingot.ir import DataType

    count = 1
    for d in desc["shape"]:
        count *= d
    dt = DataType(desc["dtype"])
    return count * max(1, (dt.bits * dt.lanes + 7) // 8)


def align_up(n: int, a: int = ALIGN) -> int:
    """``n`` rounded up to a multiple of ``a``.

    Example:
        >>> align_up(65)
        128
    """
    return (n + a - 1) // a * a


def place_buffers(sizes: list, lifetimes: list) -> "tuple[list[int], int]":
    """Greedy-by-size placement of buffers in one arena: ``(offsets, arena bytes)``.

    ``lifetimes[i]`` is ``(first step, last step)`` inclusive; buffers whose lifetimes overlap
    never overlap in memory.

    Example:
        >>> place_buffers([64, 64], [(0, 0), (0, 1)])
        ([0, 64], 128)
    """
    order = sorted(range(len(sizes)), key=lambda i: (-sizes[i], lifetimes[i][0], i))
    offsets = [0] * len(sizes)
    placed: list[int] = []
    peak = 0
    for i in order:
        lo, hi = lifetimes[i]
        busy = sorted((offsets[j], offsets[j] + sizes[j]) for j in placed
                      if lifetimes[j][0] <= hi and lo <= lifetimes[j][1])
        offset = 0
        for start, end in busy:
            if offset + sizes[i] <= start:
                break
            offset = max(offset, align_up(end))
        offsets[i] = offset
        placed.append(i)
        peak = max(peak, offset + sizes[i])
    return offsets, align_up(peak) if sizes else 0


class ConstantTable:
    """The weights of an executable: constants deduplicated by content, packed in one blob.

    Example:
        >>> import numpy as np
        >>> t = ConstantTable()
        >>> t.add(Constant(np.ones(3, "float32"))), t.add(Constant(np.ones(3, "float32")))
        (0, 0)
    """

    def __init__(self) -> None:
        self.arrays: list = []
        self._index: dict[str, int] = {}

    def add(self, const: Constant) -> int:
        """Index of ``const`` in the table (added once per content)."""
        k = self._index.get(const.content_hash)
        if k is None:
            k = self._index[const.content_hash] = len(self.arrays)
            self.arrays.append(const.data)
        return k

    def layout(self) -> "tuple[list[dict], int]":
        """``([{"shape", "dtype", "offset", "nbytes"}...], blob bytes)``, offsets 64-byte aligned."""
        descs, offset = [], 0
        for a in self.arrays:
            descs.append({"shape": list(a.shape), "dtype": str(a.dtype), "offset": offset, "nbytes": int(a.nbytes)})
            offset = align_up(offset + int(a.nbytes))
        return descs, offset

    def write_into(self, out: Any) -> None:
        """Write all constants into the writable byte buffer ``out`` (a uint8 array of at least
        ``layout()[1]`` bytes), each at its aligned offset, zeros in the padding: one copy per
        constant, straight to its place (the weights of a model can be hundreds of MB)."""
        import numpy as np

        descs, total = self.layout()
        out = np.asarray(out).reshape(-1)
        end = 0
        for d, a in zip(descs, self.arrays):
            out[end:d["offset"]] = 0
            out[d["offset"]:d["offset"] + d["nbytes"]] = np.ascontiguousarray(a).reshape(-1).view(np.uint8)
            end = d["offset"] + d["nbytes"]
        out[end:] = 0

    def blob(self) -> bytes:
        """All constants, each at its aligned offset (zero padding between them)."""
        import numpy as np

        out = np.empty(self.layout()[1], np.uint8)
        self.write_into(out)
        return out.tobytes()


class _Compiler:
    def __init__(self, func: Function, name: str, consts: ConstantTable):
        self.func = func
        self.name = name
        self.consts = consts
        self.refs: dict[int, Any] = {}
        self.values: list[dict] = []  # one per tensor a step produces: {"shape", "dtype", "step"}
        self.steps: list[dict] = []

    def ref(self, e: Any) -> Any:
        if isinstance(e, Var):
            try:
                return self.refs[id(e)]
            except KeyError:
                raise IRError(f"{self.name}: variable {e.name_hint!r} is used before it is bound") from None
        if isinstance(e, Constant):
            return ["const", self.consts.add(e)]
        if isinstance(e, Tuple):
            return ["tuple", [self.ref(f) for f in e.fields]]
        if isinstance(e, TupleGetItem):
            inner = self.ref(e.tuple_value)
            return inner[1][e.index] if inner[0] == "tuple" else ["item", inner, e.index]
        if isinstance(e, ShapeExpr):
            return ["shape", [dim_to_json(v) for v in e.values]]
        if isinstance(e, Call):
            return self.call(e)
        raise IRError(f"{self.name}: the executor cannot evaluate `{e}` ({type(e).__name__}); "
                      f"build the module with ingot.graph.build")

    def new_values(self, sinfo: Any, what: str) -> Any:
        fields = sinfo.fields if isinstance(sinfo, TupleStructInfo) else (sinfo,)
        ids = []
        for f in fields:
            desc = _tensor_desc(f, what)
            desc["step"] = len(self.steps)
            ids.append(len(self.values))
            self.values.append(desc)
        refs = [["value", i] for i in ids]
        return ids, (refs[0] if not isinstance(sinfo, TupleStructInfo) else ["tuple", refs])

    def call(self, e: Call) -> Any:
        op = e.op
        if isinstance(op, Op) and op.name in ("tensor_to_shape", "builtin"):
            from .runtime_shape import compile_runtime_shape_call  # run-time shapes: a builtin step

            return compile_runtime_shape_call(self, e)
        if isinstance(op, Op) and op.name in ("if_then_else", "loop", "scan"):
            from .control_flow import compile_control_call  # control flow: a step the executor runs

            return compile_control_call(self, e)
        if isinstance(op, Op) and op.name in ("call_tir", "call_dps_packed"):
            callee = e.args[0]
            fname = callee.name_hint if op.name == "call_tir" else callee.global_symbol
            args = self.ref(e.args[1])[1]
            ids, result = self.new_values(e.sinfo_args[0], f"{self.name}: {op.name} {fname}")
            step = {"op": op.name, "func": fname, "args": args, "outs": ids}
            if len(e.args) > 2:
                step["scalars"] = [dim_to_json(v) for v in e.args[2].values]
            self.steps.append(step)
            return result
        if isinstance(op, ExternFunc):
            self.steps.append({"op": "call_packed", "func": op.global_symbol, "args": [self.ref(a) for a in e.args],
                               "out": len(self.values)})
            self.values.append({"shape": None, "dtype": None, "step": len(self.steps) - 1})
            return ["value", len(self.values) - 1]
        if isinstance(op, GlobalVar):
            self.steps.append({"op": "call_graph", "func": op.name_hint, "args": [self.ref(a) for a in e.args],
                               "out": len(self.values)})
            self.values.append({"shape": None, "dtype": None, "step": len(self.steps) - 1})
            return ["value", len(self.values) - 1]
        raise IRError(f"{self.name}: operator call `{e}` was not legalized; build with ingot.graph.build(mod) "
                      f"(which runs LegalizeOps) or apply G.transform.LegalizeOps()")

    def compile(self) -> dict:
        inputs = []
        for k, p in enumerate(self.func.params):
            self.refs[id(p)] = ["input", k]
            sinfo = p.struct_info
            if isinstance(sinfo, TensorStructInfo) and sinfo.shape is not None:
                inputs.append({"name": p.name_hint, **_tensor_desc(sinfo, f"{self.name}: parameter {p.name_hint}")})
            elif isinstance(sinfo, TensorStructInfo):
                inputs.append({"name": p.name_hint, "shape": None, "dtype": str(sinfo.dtype)})
            else:
                inputs.append({"name": p.name_hint, "shape": None, "dtype": None})
        for block in self.func.body.blocks:
            for b in block.bindings:
                self.refs[id(b.var)] = self.ref(b.value)
        output = self.ref(self.func.body.body)
        plan = {"name": self.name, "inputs": inputs, "steps": self.steps, "values": self.values,
                "output": output, "memory": None}
        plan["memory"] = plan_memory(plan)
        if plan["memory"] is None:  # run-time sizes: plan what is known, the rest is allocated per call
            plan["known_memory"] = plan_known_memory(plan)
        return plan


def _walk_refs(ref: Any, fn: Any) -> None:
    kind = ref[0]
    if kind == "value":
        fn(ref[1])
    elif kind == "tuple":
        for r in ref[1]:
            _walk_refs(r, fn)
    elif kind == "item":
        _walk_refs(ref[1], fn)


def output_values(plan: dict) -> set:
    """Ids of the values that are (part of) the function's result."""
    out: set = set()
    _walk_refs(plan["output"], out.add)
    return out


def _plan_values(plan: dict, size_of: Any) -> "dict | None":
    """The one planner behind `plan_memory`, `plan_known_memory` and `plan_bound_memory`: places
    every intermediate tensor ``size_of(desc)`` gives a size for (None: not planned) with
    `place_buffers` over `value_lifetimes`; None when there is nothing to plan.

    Never planned: function outputs (fresh arrays for the caller), builtin outputs (a builtin
    returns its own array of the size it found) and values a step that is not destination-passing
    may return a view of into the result (`result_aliases`), so no output aliases the arena."""
    values = plan["values"]
    skip = result_aliases(plan) | {v for s in plan["steps"] if s.get("op") == "builtin" for v in s.get("outs", ())}
    planned, sizes = [], []
    for i, v in enumerate(values):
        if i in skip or v["shape"] is None or v["dtype"] in (None, "string"):
            continue
        size = size_of(v)
        if size is not None:
            planned.append(i)
            sizes.append(size)
    if not planned:
        return None
    live = value_lifetimes(plan)
    offsets, peak = place_buffers(sizes, [live[i] for i in planned])
    return {"offsets": {str(i): off for i, off in zip(planned, offsets)}, "workspace_bytes": peak,
            "naive_bytes": sum(align_up(s) for s in sizes)}


def plan_memory(plan: dict) -> "dict | None":
    """The static memory plan of ``plan``'s intermediate tensors, or None with symbolic shapes.

    Returns ``{"offsets": {value id: offset}, "workspace_bytes": arena size,
    "naive_bytes": sum of the planned tensors' sizes}``.

    Example: see `compile_plan`.
    """
    values = plan["values"]
    if any(v["shape"] is None or not _is_static(v) for v in values) or not all(
            i["shape"] is not None and all(isinstance(d, int) for d in i["shape"]) for i in plan["inputs"]):
        return None
    return _plan_values(plan, nbytes_of) or {"offsets": {}, "workspace_bytes": 0, "naive_bytes": 0}


def plan_known_memory(plan: dict) -> "dict | None":
    """The memory plan of the intermediates whose shapes are static in a plan that also has symbolic or
    run-time sizes (same form and algorithm as `plan_memory`); None when there are none. Builtin
    outputs are excluded (a builtin returns its own array of the size it found).

    Example:
        >>> plan = {"steps": [{"op": "call_tir", "args": [["input", 0]], "outs": [0]},
        ...                   {"op": "call_tir", "args": [["value", 0]], "outs": [1]}],
        ...         "values": [{"shape": [16], "dtype": "float32", "step": 0},
        ...                    {"shape": [{"var": "n"}], "dtype": "float32", "step": 1}],
        ...         "output": ["value", 1], "inputs": []}
        >>> plan_known_memory(plan)["offsets"]
        {'0': 0}
    """
    return _plan_values(plan, lambda desc: nbytes_of(desc) if _is_static(desc) else None)


def bound_nbytes(desc: dict, env: dict) -> "int | None":
    """Bytes of tensor ``desc`` with its symbolic dims bound by name in ``env``; None when a dim
    uses a variable ``env`` does not bind (a size only the data knows, bound later in the run).

    Example:
        >>> bound_nbytes({"shape": [{"var": "batch"}, 8], "dtype": "float32"}, {"batch": 3})
        96
        >>> bound_nbytes({"shape": [{"var": "rt0"}], "dtype": "float32"}, {"batch": 3}) is None
        True
    """
    try:
        shape = [eval_dim_json(d, env) for d in desc["shape"]]
    except IRError:
        return None
    if any(d < 0 for d in shape):
        return None
    return nbytes_of({"shape": shape, "dtype": desc["dtype"]})


def plan_bound_memory(plan: dict, env: dict) -> "dict | None":
    """The memory plan of a plan with symbolic shapes for one binding of its symbolic dims
    (``env``: name -> value, e.g. bound from the inputs' shapes): every intermediate whose size
    ``env`` determines is placed (same form and algorithm as `plan_memory`, offsets for this
    binding only); values sized by the data (NonZero, Unique, Loop results, dims a builtin binds
    later) are left to per-call allocation. None when nothing can be planned.

    Example:
        >>> plan = {"steps": [{"op": "call_tir", "args": [["input", 0]], "outs": [0]},
        ...                   {"op": "call_tir", "args": [["value", 0]], "outs": [1]},
        ...                   {"op": "call_tir", "args": [["value", 1]], "outs": [2]}],
        ...         "values": [{"shape": [{"var": "n"}, 16], "dtype": "float32", "step": 0},
        ...                    {"shape": [{"var": "n"}, 16], "dtype": "float32", "step": 1},
        ...                    {"shape": [{"var": "n"}], "dtype": "float32", "step": 2}],
        ...         "output": ["value", 2], "inputs": []}
        >>> plan_bound_memory(plan, {"n": 2})
        {'offsets': {'0': 0, '1': 128}, 'workspace_bytes': 256, 'naive_bytes': 256}
    """
    return _plan_values(plan, lambda desc: bound_nbytes(desc, env))


#: Steps whose destinations the executor allocates (outputs never alias inputs); any other step
#: (builtin, packed call, graph call, control flow) may return its input or a view of it.
_DPS_OPS = ("call_tir", "call_dps_packed")


def _step_outs(step: dict) -> list:
    return list(step.get("outs", ())) + ([step["out"]] if "out" in step else [])


def value_lifetimes(plan: dict) -> dict:
    """``{value id: (first step, last step)}`` of every tensor a step of ``plan`` produces, inclusive:
    from the step that writes it to the last step that reads it (the producing step when unread).
    An argument of a step that is not destination-passing (a builtin, packed call, graph call or
    control-flow step may return a view of it) lives as long as that step's results.

    Example:
        >>> plan = {"steps": [{"args": [["input", 0]], "outs": [0]}, {"args": [["value", 0]], "outs": [1]}],
        ...         "values": [{"step": 0}, {"step": 1}]}
        >>> value_lifetimes(plan)
        {0: (0, 1), 1: (1, 1)}
    """
    last_use: dict[int, int] = {}
    for k, step in enumerate(plan["steps"]):
        for a in step["args"]:
            _walk_refs(a, lambda v, k=k: last_use.__setitem__(v, k))
    end = {i: max(v["step"], last_use.get(i, v["step"])) for i, v in enumerate(plan["values"])}
    # Backwards, so that a view of a view lives as long as the last one.
    for k in range(len(plan["steps"]) - 1, -1, -1):
        step = plan["steps"][k]
        if step.get("op", "call_tir") in _DPS_OPS:
            continue
        until = max([end[o] for o in _step_outs(step)] + [k])

        def extend(v: int, until: int = until) -> None:
            end[v] = max(end[v], until)

        for a in step["args"]:
            _walk_refs(a, extend)
    return {i: (v["step"], end[i]) for i, v in enumerate(plan["values"])}


def result_aliases(plan: dict) -> set:
    """Ids of the values that are (part of) the function's result or may be viewed by it through
    steps that are not destination-passing (`value_lifetimes`): none of them may live in a workspace.

    Example:
        >>> plan = {"steps": [{"op": "call_tir", "args": [], "outs": [0]},
        ...                   {"op": "builtin", "args": [["value", 0]], "outs": [1]}],
        ...         "values": [{"step": 0}, {"step": 1}], "output": ["value", 1]}
        >>> sorted(result_aliases(plan))
        [0, 1]
    """
    out = output_values(plan)
    for step in reversed(plan["steps"]):
        if step.get("op", "call_tir") not in _DPS_OPS and any(o in out for o in _step_outs(step)):
            for a in step["args"]:
                _walk_refs(a, out.add)
    return out


def check_memory_plan(plan: dict) -> None:
    """Raise `IRError` unless ``plan``'s static memory plan is sound: every planned tensor is
    `ALIGN`-byte aligned and inside the workspace, no function output is planned, and no two
    tensors whose lifetimes overlap (`value_lifetimes`) share a byte. A plan without a memory plan
    (symbolic shapes) passes.

    Example:
        >>> plan = {"steps": [{"args": [["input", 0]], "outs": [0]}, {"args": [["value", 0]], "outs": [1]}],
        ...         "values": [{"shape": [16], "dtype": "float32", "step": 0},
        ...                    {"shape": [16], "dtype": "float32", "step": 1}],
        ...         "output": ["value", 1], "memory": {"offsets": {"0": 0}, "workspace_bytes": 64}}
        >>> check_memory_plan(plan)
    """
    mem = plan.get("memory")
    if mem is None:
        return
    name = plan.get("name", "<plan>")
    offsets = {int(k): off for k, off in mem["offsets"].items()}
    lifetimes = value_lifetimes(plan)
    for v in offsets.keys() & output_values(plan):
        raise IRError(f"{name}: value {v} is a function output but has a workspace offset; outputs are "
                      f"fresh arrays (drop it from memory['offsets'])")
    spans = []
    for v, off in offsets.items():
        size = nbytes_of(plan["values"][v])
        if off % ALIGN or off < 0 or off + size > mem["workspace_bytes"]:
            raise IRError(f"{name}: value {v} at offset {off} ({size} bytes) is not {ALIGN}-byte aligned inside "
                          f"the {mem['workspace_bytes']}-byte workspace; re-plan with plan_memory(plan)")
        spans.append((off, off + size, v))
    spans.sort()
    # Step 1: sweep by address; a tensor can only collide with those whose span is still open.
    open_spans: list = []
    for start, end, v in spans:
        open_spans = [s for s in open_spans if s[1] > start]
        for _, _, u in open_spans:
            (a0, a1), (b0, b1) = lifetimes[u], lifetimes[v]
            # Step 2: overlapping addresses are fine only for disjoint lifetimes.
            if a0 <= b1 and b0 <= a1:
                raise IRError(f"{name}: values {u} (steps {a0}-{a1}) and {v} (steps {b0}-{b1}) are live at the "
                              f"same time but overlap in the workspace (offsets {offsets[u]} and {offsets[v]}); "
                              f"re-plan with plan_memory(plan)")
        open_spans.append((start, end, v))


def compile_plan(func: Function, name: str, consts: ConstantTable) -> dict:
    """The execution plan (a JSON-serializable dict) of graph function ``func``.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4,), "float32"))
        >>> f = G.Function([x], G.SeqExpr([], x))
        >>> compile_plan(f, "main", ConstantTable())["output"]
        ['input', 0]
    """
    return _Compiler(func, name, consts).compile()


def is_aot_compatible(plan: dict) -> bool:
    """Whether ``plan`` can run as one C entry: static shapes, tensor inputs, only ``call_tir`` (and
    external regions with a C entry, steps marked ``"extern"``) whose scalar arguments (``tir_vars``) are constants (a symbolic one cannot be evaluated
    without run-time shapes, which the AOT entry does not compute).

    Example:
        >>> is_aot_compatible({"steps": [], "memory": None, "inputs": [], "output": ["input", 0]})
        False
    """
    if plan["memory"] is None:
        return False
    if any(i["dtype"] is None or i["shape"] is None for i in plan["inputs"]):
        return False
    if any(d["dtype"] == "string" for d in plan["inputs"] + plan["values"]):  # object arrays: the executor's
        return False
    # A BYOC region whose runtime module has a C entry is called from the AOT entry too ("extern").
    if any(s["op"] != "call_tir" and s.get("extern") is None for s in plan["steps"]):
        return False
    if any(not isinstance(d, int) for s in plan["steps"] for d in s.get("scalars", ())):
        return False
    ok = [True]

    def check(ref: Any) -> None:
        if ref[0] == "tuple":
            for r in ref[1]:
                check(r)
        elif ref[0] not in ("input", "const", "value"):
            ok[0] = False

    check(plan["output"])
    for s in plan["steps"]:
        for a in s["args"]:
            if a[0] not in ("input", "const", "value"):
                ok[0] = False
    return ok[0]
