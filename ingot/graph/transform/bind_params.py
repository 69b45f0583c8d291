"""BindParams: replace function parameters by constant arrays (weights), as TVM's ``BindParams``.

Example:
    >>> import numpy as np
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((2,), "float32"))
    >>> w = G.Var("w", G.TensorStructInfo((2,), "float32"))
    >>> bb = G.BlockBuilder()
    >>> with bb.function("main", [x, w]):
    ...     bb.emit_func_output(bb.emit(G.op.add(x, w)))
    >>> mod = BindParams("main", {"w": np.ones(2, "float32")})(bb.get())
    >>> [p.name_hint for p in mod["main"].params]
    ['x']
"""
from __future__ import annotations

from typing import Any, Mapping

import numpy as np

from ingot.ir import IRModule
from ingot.ir.error import IRError

from ..expr import Constant, Function, SeqExpr, VarBinding
from ..struct_info import TensorStructInfo
from ._util import make_pass, remap


def _to_numpy(value: Any) -> np.ndarray:
    if hasattr(value, "numpy"):
        return np.asarray(value.numpy())
    return np.asarray(value)


def bind_params(func: Function, params: Mapping[Any, Any], func_name: str = "main") -> Function:
    """``func`` with the parameters named in ``params`` (by name or Var) replaced by constants."""
    by_name = {}
    for key, value in params.items():
        by_name[key.name_hint if hasattr(key, "name_hint") else str(key)] = value
    known = {p.name_hint for p in func.params}
    unknown = set(by_name) - known
    if unknown:
        raise IRError(f"BindParams({func_name!r}): no parameter(s) {sorted(unknown)}; the parameters are {sorted(known)}")
    vmap, kept = {}, []
    for p in func.params:
        if p.name_hint not in by_name:
            kept.append(p)
            continue
        array = _to_numpy(by_name[p.name_hint])
        sinfo = p.struct_info
        if isinstance(sinfo, TensorStructInfo):
            if str(array.dtype) != str(sinfo.dtype):
                raise IRError(f"BindParams({func_name!r}): parameter {p.name_hint!r} is {sinfo.dtype}, the array is "
                              f"{array.dtype}; convert it with .astype(\"{sinfo.dtype}\")")
            if sinfo.shape is not None and (len(sinfo.shape) != array.ndim or any(
                    isinstance(d, int) and d != s for d, s in zip(sinfo.shape, array.shape))):
                raise IRError(f"BindParams({func_name!r}): parameter {p.name_hint!r} has shape "
                              f"{tuple(map(str, sinfo.shape))}, the array has shape {array.shape}")
        vmap[p] = Constant(array)
    blocks = [type(block)([VarBinding(b.var, remap(b.value, vmap)) for b in block.bindings])
              for block in func.body.blocks]
    return Function(kept, SeqExpr(blocks, remap(func.body.body, vmap)), func.ret_struct_info, func.attrs)


def BindParams(func_name: str, params: Mapping[Any, Any]) -> Any:  # noqa: N802 - TVM's pass name
    """A pass binding ``params`` (name or Var → numpy array / NDArray) into function ``func_name``.

    Example: see the module docstring.
    """

    def run(mod: IRModule) -> IRModule:
        if func_name not in mod:
            raise IRError(f"BindParams: the module has no function {func_name!r}; it has {sorted(mod.functions)}")
        return mod.with_function(func_name, bind_params(mod[func_name], params, func_name))

    return make_pass(run, "BindParams")
