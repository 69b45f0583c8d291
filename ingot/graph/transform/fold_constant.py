"""FoldConstant: evaluate operator calls whose inputs are all constants (with the operator's numpy
reference) and replace them by the resulting `Constant`.

Note: TVM folds by compiling and running the kernels; Ingot evaluates the registered numpy
reference of each op, which needs no compiler and gives the same values. ``call_tir`` and packed
calls are left alone. Run `DeadCodeElimination` afterwards to drop the folded bindings' inputs.

Example:
    >>> import numpy as np
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((2,), "float32"))
    >>> bb = G.BlockBuilder()
    >>> with bb.function("main", [x]):
    ...     c = bb.emit(G.op.exp(G.const(np.zeros(2, "float32"))))
    ...     bb.emit_func_output(bb.emit(G.op.add(x, c)))
    >>> mod = FoldConstant()(bb.get())
    >>> mod["main"].body.blocks[0].bindings[-1].value.args[1].data.tolist()
    [1.0, 1.0]
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ingot.ir import IRModule

from ..expr import Call, Constant, Op, Tuple, VarBinding
from ..op_registry import get_op_def
from ..struct_info import TensorStructInfo
from ._util import graph_functions, make_pass, map_bindings


def _const_value(arg: Any) -> Any:
    if isinstance(arg, Constant):
        return arg.data
    if isinstance(arg, Tuple) and all(isinstance(f, Constant) for f in arg.fields):
        return [f.data for f in arg.fields]
    return None


def try_fold(call: Any) -> "Constant | None":
    """The constant value of ``call`` if it is an op call on constants with a numpy reference."""
    if not isinstance(call, Call) or not isinstance(call.op, Op) or call.op.name in ("call_tir", "call_dps_packed"):
        return None
    values = [_const_value(a) for a in call.args]
    if any(v is None for v in values):
        return None
    op_def = get_op_def(call.op.name)
    if op_def.numpy is None or not isinstance(call.struct_info, TensorStructInfo):
        return None
    if not call.struct_info.is_static:
        # A symbolic output shape (e.g. broadcast_to(const, (batch, 1, 16))) is known only at run time.
        return None
    result = np.asarray(op_def.numpy(values, call.attrs))
    return Constant(result.astype(str(call.struct_info.dtype)))


def fold_module(mod: IRModule) -> IRModule:
    """Fold constants in every graph function of ``mod``."""
    for name, func in graph_functions(mod):
        def rewrite(b: VarBinding, vmap: dict) -> "VarBinding | None":
            folded = try_fold(b.value)
            if folded is None:
                return b
            vmap[b.var] = folded
            return None

        mod = mod.with_function(name, map_bindings(func, rewrite))
    return mod


def FoldConstant() -> Any:  # noqa: N802 - TVM's pass name
    """The FoldConstant pass (see the module note).

    Example: see the module docstring.
    """
    return make_pass(fold_module, "FoldConstant")
