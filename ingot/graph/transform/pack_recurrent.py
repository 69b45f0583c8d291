"""PackRecurrentWeights: lay out a recurrent layer's constant ``R^T`` for the target's vector width.

Note (why): the time-loop kernel of ``recurrence`` (`ingot.ops.recurrent`) register-tiles its
per-step GEMV ``h @ R^T`` in panels of `REG_VECTORS` vectors of gate columns, stored contiguous over
``k`` (`pack_recurrent_weights`). The importer packs ``R`` without knowing the target, for the
default 32-byte vectors (AVX2); the kernel reads its vector width from the panel width of ``rt``
(`ingot.ops.recurrent.panel_of`). This pass, which knows the target, repacks a constant ``rt`` for
the target's vector width (`target_vector_bytes`: 64 bytes on AVX-512 → panels of 32 float32
columns), or leaves it as ``R^T`` unpacked when the hidden size is not a multiple of the panel.
A layout that already fits (every AVX2 target) is left alone, so its kernels do not change; an ``rt``
that is not a constant keeps the importer's layout (the kernel follows it, with 32-byte vectors).

Example:
    >>> from ingot.ops.recurrent import weight_panel
    >>> weight_panel(64, "float32", 32), weight_panel(64, "float32", 64)
    (16, 32)
"""
from __future__ import annotations

from typing import Any

from ingot.ir import IRModule

from ..expr import Call, Constant, Op, VarBinding
from ._util import graph_functions, make_pass, map_bindings

__all__ = ["PackRecurrentWeights", "pack_recurrent_module"]


def _repacked(call: Any, vector_bytes: int) -> "Call | None":
    """``call`` with its constant ``rt`` in the panels of ``vector_bytes``, or None (nothing to change)."""
    from ingot.ops.recurrent import pack_recurrent_weights, panel_of, unpack_recurrent_weights, weight_panel

    if not (isinstance(call, Call) and isinstance(call.op, Op) and call.op.name == "recurrence"):
        return None
    rt = call.args[1]
    if not isinstance(rt, Constant):
        return None
    dtype = str(rt.data.dtype)
    want = weight_panel(int(call.attrs["hidden"]), dtype, vector_bytes)
    have_bytes, packed = panel_of(rt.data.shape, dtype)
    if (want is None and not packed) or (want is not None and packed and have_bytes == vector_bytes):
        return None
    data = pack_recurrent_weights(unpack_recurrent_weights(rt.data), want)
    return Call(call.op, [call.args[0], Constant(data), *call.args[2:]], call.attrs, call.sinfo_args,
                call.struct_info)


def pack_recurrent_module(mod: IRModule, target: Any = None) -> IRModule:
    """Repack the constant ``rt`` of every ``recurrence`` call of ``mod`` for ``target`` (default:
    `Target.current()`, else the host); see the module note.

    Example:
        >>> mod = pack_recurrent_module(IRModule({}), "llvm -mcpu=sapphirerapids")
    """
    from ingot.ops.recurrent import target_vector_bytes

    vector_bytes = target_vector_bytes(target)

    def rewrite(b: VarBinding, _: dict) -> VarBinding:
        new = _repacked(b.value, vector_bytes)
        return b if new is None else VarBinding(b.var, new)

    for name, func in graph_functions(mod):
        mod = mod.with_function(name, map_bindings(func, rewrite))
    return mod


def PackRecurrentWeights(target: Any = None) -> Any:  # noqa: N802 - TVM's pass naming
    """The PackRecurrentWeights pass (module note), for ``target`` (default: the current target).

    Example:
        >>> p = PackRecurrentWeights("llvm -mcpu=haswell")
    """
    return make_pass(lambda mod: pack_recurrent_module(mod, target), "PackRecurrentWeights")
