"""Bridge from graph values to TE: placeholders for struct infos, PrimFuncs from TE outputs.

Example:
    >>> from ingot.graph.struct_info import TensorStructInfo
    >>> x = placeholder_for(TensorStructInfo((4,), "float32"), "x")
"""
from __future__ import annotations

from typing import Any, Sequence

from ingot.ir.error import IRError

from .struct_info import TensorStructInfo


def _te() -> Any:
    try:
        from ingot import te
    except ImportError as err:  # pragma: no cover - depends on the build of the tree
        raise NotImplementedError(
            "lowering graph operators needs ingot.te (te.placeholder/compute/create_prim_func), "
            f"which is not importable here: {err}"
        ) from err
    return te


def placeholder_for(sinfo: TensorStructInfo, name: str) -> Any:
    """A ``te.placeholder`` with the shape (symbolic dims kept) and dtype of ``sinfo``."""
    if not isinstance(sinfo, TensorStructInfo) or sinfo.shape is None:
        raise IRError(f"cannot make a TE placeholder {name!r} for {sinfo}: a tensor with a known shape is needed")
    return _te().placeholder(tuple(sinfo.shape), dtype=str(sinfo.dtype), name=name)


def tensor_sinfo_of(tensor: Any) -> TensorStructInfo:
    """The struct info of a TE tensor (its shape and dtype)."""
    return TensorStructInfo(tuple(tensor.shape), str(tensor.dtype))


def create_prim_func(inputs: Sequence[Any], outputs: Sequence[Any], name: str) -> Any:
    """``te.create_prim_func(inputs + outputs)`` named ``name`` (its ``global_symbol``)."""
    func = _te().create_prim_func(list(inputs) + list(outputs))
    return func.with_attr("global_symbol", name)
