"""`build` and the Python `Executor` for graph modules (TVM Relax's ``relax.build`` + VM).

Note: `build` runs the default graph pipeline (fold constants, fuse, FuseTIR, legalize, DCE) when
operator calls remain, compiles all PrimFuncs of the module with one ``ingot.build`` call (one
shared library), and keeps the graph functions as the execution plan. The `Executor` walks the
bindings: ``call_tir`` allocates its outputs (shapes evaluated with the symbolic dimensions bound
from the inputs' shapes, so one build serves every batch size) and calls the kernel;
``call_packed``/``call_dps_packed`` call registered functions with NDArrays (zero-copy views).
Not done yet (see docs/graph.md): the AOT C entry, static memory planning, export_library.

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

from typing import Any, Callable

import numpy as np

from ingot.ir import IRModule
from ingot.ir import expr as PE
from ingot.ir.error import IRError
from ingot.ir.module import GlobalVar

from .expr import Call, Constant, ExternFunc, Function, Op, ShapeExpr, Tuple, TupleGetItem, Var
from .struct_info import TensorStructInfo, TupleStructInfo
from .transform.legalize_ops import is_legalizable


class Executable:
    """A compiled graph module: the graph functions (the plan) and one runtime library of kernels.

    Example: see `build`.
    """

    def __init__(self, mod: IRModule, lib: Any, target: Any):
        self.mod = mod
        self.lib = lib
        self.target = target

    def __repr__(self) -> str:
        funcs = [n for n, f in self.mod.functions.items() if isinstance(f, Function)]
        return f"<ingot.graph.Executable functions={funcs} target={self.target}>"


def _needs_pipeline(mod: IRModule) -> bool:
    for func in mod.functions.values():
        if isinstance(func, Function):
            for block in func.body.blocks:
                if any(is_legalizable(b.value) for b in block.bindings):
                    return True
    return False


def build(mod: IRModule, target: Any = "llvm", pipeline: Any = "default") -> Executable:
    """Compile a graph module: legalize/fuse when needed, build all kernels in one library.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4,), "float32"))
        >>> bb = G.BlockBuilder()
        >>> with bb.function("main", [x]):
        ...     bb.emit_func_output(bb.emit(G.op.exp(x)))
        >>> ex = build(bb.get())  # doctest: +SKIP
    """
    import ingot
    from .transform import default_build_pipeline

    if pipeline == "default" and _needs_pipeline(mod):
        mod = default_build_pipeline()(mod)
    elif pipeline not in (None, "default"):
        mod = pipeline(mod)
    prim = {n: f for n, f in mod.functions.items() if not isinstance(f, Function)}
    lib = ingot.build(IRModule(prim), target=target) if prim else None
    return Executable(mod, lib, target)


def eval_dim(dim: Any, env: dict) -> int:
    """The integer value of a dimension (int or PrimExpr) with symbolic variables bound in ``env``.

    Example:
        >>> from ingot.ir import Var
        >>> n = Var("n", "int64")
        >>> eval_dim(n * 2 + 1, {n: 3})
        7
    """
    if isinstance(dim, int):
        return dim
    if isinstance(dim, PE.IntImm):
        return dim.value
    if isinstance(dim, PE.Var):
        if dim not in env:
            raise IRError(f"symbolic dimension {dim.name!r} is not bound by the inputs' shapes")
        return env[dim]
    if isinstance(dim, PE.Cast):
        return eval_dim(dim.value, env)
    ops: dict[type, Callable[[int, int], int]] = {
        PE.Add: lambda a, b: a + b, PE.Sub: lambda a, b: a - b, PE.Mul: lambda a, b: a * b,
        PE.FloorDiv: lambda a, b: a // b, PE.FloorMod: lambda a, b: a % b, PE.Min: min, PE.Max: max,
        PE.Div: lambda a, b: int(a / b), PE.Mod: lambda a, b: a - b * int(a / b),
    }
    fn = ops.get(type(dim))
    if fn is None:
        raise IRError(f"cannot evaluate the dimension expression `{dim}`")
    return fn(eval_dim(dim.a, env), eval_dim(dim.b, env))


def _as_numpy(value: Any) -> np.ndarray:
    if isinstance(value, np.ndarray):
        return value
    if hasattr(value, "numpy"):
        return value.numpy()
    return np.asarray(value)


def _bind_param(param: Var, value: np.ndarray, env: dict, func_name: str) -> None:
    sinfo = param.struct_info
    if not isinstance(sinfo, TensorStructInfo):
        return
    if str(value.dtype) != str(sinfo.dtype):
        raise IRError(f"{func_name}: argument {param.name_hint!r} must be {sinfo.dtype}, got {value.dtype}")
    if sinfo.shape is None:
        return
    if value.ndim != len(sinfo.shape):
        raise IRError(f"{func_name}: argument {param.name_hint!r} must have rank {len(sinfo.shape)} "
                      f"(shape {tuple(map(str, sinfo.shape))}), got shape {value.shape}")
    for axis, (dim, actual) in enumerate(zip(sinfo.shape, value.shape)):
        if isinstance(dim, PE.Var):
            if dim in env and env[dim] != actual:
                raise IRError(f"{func_name}: argument {param.name_hint!r} axis {axis} is {actual}, but "
                              f"{dim.name} = {env[dim]} from an earlier argument")
            env[dim] = actual
        elif isinstance(dim, int) and dim != actual:
            raise IRError(f"{func_name}: argument {param.name_hint!r} must have shape "
                          f"{tuple(map(str, sinfo.shape))}, got {value.shape} (axis {axis})")


class Executor:
    """Runs the functions of an `Executable` (``vm["main"](*inputs)``) on a device.

    Example: see `build`.
    """

    def __init__(self, executable: Executable, device: Any = None):
        self.executable = executable
        self.device = device

    def __getitem__(self, name: str) -> Callable[..., Any]:
        mod = self.executable.mod
        if name not in mod or not isinstance(mod[name], Function):
            graph = [n for n, f in mod.functions.items() if isinstance(f, Function)]
            raise KeyError(f"the executable has no graph function {name!r}; it has {graph}")
        return lambda *args: self._wrap(self.invoke(name, [_as_numpy(a) for a in args]))

    def _wrap(self, value: Any) -> Any:
        from ingot.runtime.ndarray import NDArray

        if isinstance(value, np.ndarray):
            return NDArray(value)
        if isinstance(value, tuple):
            return tuple(self._wrap(v) for v in value)
        return value

    def invoke(self, name: str, args: list) -> Any:
        """Run graph function ``name`` on numpy arrays; returns numpy arrays (tuples for tuples)."""
        func = self.executable.mod[name]
        if len(args) != len(func.params):
            raise IRError(f"{name} takes {len(func.params)} argument(s) "
                          f"({', '.join(p.name_hint for p in func.params)}), got {len(args)}")
        env: dict = {}
        values: dict[int, Any] = {}
        for p, a in zip(func.params, args):
            _bind_param(p, a, env, name)
            values[id(p)] = a
        for block in func.body.blocks:
            for b in block.bindings:
                values[id(b.var)] = self._eval(b.value, values, env, name)
        return self._eval(func.body.body, values, env, name)

    def _alloc(self, sinfo: Any, env: dict) -> list:
        fields = sinfo.fields if isinstance(sinfo, TupleStructInfo) else (sinfo,)
        from ingot.runtime.ndarray import aligned_empty

        return [aligned_empty(tuple(eval_dim(d, env) for d in f.shape), str(f.dtype)) for f in fields]

    def _eval(self, e: Any, values: dict, env: dict, fname: str) -> Any:
        if isinstance(e, Var):
            return values[id(e)]
        if isinstance(e, Constant):
            return e.data
        if isinstance(e, Tuple):
            return tuple(self._eval(f, values, env, fname) for f in e.fields)
        if isinstance(e, TupleGetItem):
            return self._eval(e.tuple_value, values, env, fname)[e.index]
        if isinstance(e, ShapeExpr):
            return tuple(eval_dim(v, env) for v in e.values)
        if not isinstance(e, Call):
            raise IRError(f"{fname}: the executor cannot evaluate `{e}`")
        op = e.op
        if isinstance(op, Op) and op.name == "call_tir":
            ins = [np.ascontiguousarray(x) for x in self._eval(e.args[1], values, env, fname)]
            outs = self._alloc(e.sinfo_args[0], env)
            lib = self.executable.lib
            if lib is None:
                raise IRError(f"{fname}: call_tir {e.args[0].name_hint} but the executable has no kernels")
            lib[e.args[0].name_hint](*ins, *outs)
            return outs[0] if len(outs) == 1 else tuple(outs)
        if isinstance(op, Op) and op.name == "call_dps_packed":
            from ingot.runtime import get_global_func
            from ingot.runtime.ndarray import NDArray

            ins = self._eval(e.args[1], values, env, fname)
            outs = self._alloc(e.sinfo_args[0], env)
            get_global_func(e.args[0].global_symbol)(*[NDArray(np.ascontiguousarray(x)) for x in ins],
                                                     *[NDArray(o) for o in outs])
            return outs[0] if len(outs) == 1 else tuple(outs)
        if isinstance(op, ExternFunc):
            from ingot.runtime import get_global_func
            from ingot.runtime.ndarray import NDArray

            args = [NDArray(np.ascontiguousarray(x)) if isinstance(x, np.ndarray) else x
                    for x in (self._eval(a, values, env, fname) for a in e.args)]
            result = get_global_func(op.global_symbol)(*args)
            return _as_numpy(result) if result is not None else None
        if isinstance(op, GlobalVar):
            args = [self._eval(a, values, env, fname) for a in e.args]
            return self.invoke(op.name_hint, args)
        raise IRError(f"{fname}: operator call `{e}` was not legalized; build with ingot.graph.build(mod) "
                      f"(which runs LegalizeOps) or apply G.transform.LegalizeOps()")


VirtualMachine = Executor
