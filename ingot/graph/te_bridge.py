"""Bridge from graph values to TE: placeholders for struct infos, PrimFuncs from TE outputs, and
the ``tir_vars`` of a call to such a PrimFunc.

Note: placeholders keep the graph's symbolic dims (the very `ingot.ir.Var` objects), and
``te.create_prim_func`` keeps those objects in the PrimFunc: in buffer shapes, and as scalar
parameters (appended after the tensors) when a variable is not a whole dimension of any
parameter (``(6 * batch, 32)``). `call_tir_scalars` therefore finds each scalar parameter among
the graph-side variables by identity; if a PrimFunc was built elsewhere (different Var objects),
it matches the PrimFunc's buffer shapes against the call's struct infos instead.

Example:
    >>> from ingot.graph.struct_info import TensorStructInfo
    >>> x = placeholder_for(TensorStructInfo((4,), "float32"), "x")
"""
from __future__ import annotations

from typing import Any, Sequence

from ingot.ir import expr as PE
from ingot.ir.error import IRError

from .struct_info import TensorStructInfo


def _te() -> Any:
    from ingot import te  # on first use: importing the graph does not load the TE layer

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


def match_dims(pattern: Any, value: Any, out: dict) -> None:
    """Bind the Vars of dimension ``pattern`` (a PrimFunc buffer dim) to the matching parts of
    ``value`` (a graph dim): ``n`` ↦ ``batch``; ``6 * n`` vs ``6 * batch`` recurses."""
    if isinstance(pattern, PE.Var):
        out.setdefault(pattern, value)
    elif isinstance(pattern, PE.Cast) and isinstance(value, PE.Cast):
        match_dims(pattern.value, value.value, out)
    elif isinstance(pattern, PE.BinaryOp) and type(pattern) is type(value):
        match_dims(pattern.a, value.a, out)
        match_dims(pattern.b, value.b, out)


def call_tir_scalars(func: Any, sinfos: Sequence[Any]) -> list:
    """The ``tir_vars`` of a call of ``func``: one graph-side expression per scalar parameter.

    ``sinfos`` are the struct infos of the call's tensor arguments followed by its outputs, in the
    order of ``func``'s buffer parameters. A scalar parameter that also appears in ``sinfos`` (the
    same Var object, as `create_prim_func` keeps them) is passed as itself; otherwise it is matched
    through the buffer shapes. A variable that cannot be found raises an error naming it.

    Example:
        >>> from ingot import te
        >>> from ingot.ir import Var
        >>> n = Var("batch", "int64")
        >>> x = placeholder_for(TensorStructInfo((n * 6, 4), "float32"), "x")
        >>> y = te.compute((n * 6, 4), lambda i, j: x[i, j] * 2.0, name="y")
        >>> f = create_prim_func([x], [y], "double")
        >>> [str(v) for v in call_tir_scalars(f, [TensorStructInfo((n * 6, 4), "float32")] * 2)]
        ['batch']
    """
    scalars = [p for p in func.params if isinstance(p, PE.Var)]
    if not scalars:
        return []
    known: list = []
    for s in sinfos:
        if isinstance(s, TensorStructInfo) and s.shape is not None:
            from ingot.ir.functor import collect_vars

            known.extend(collect_vars([d for d in s.shape if isinstance(d, PE.PrimExpr)]))
    bound: dict = {}
    buffers = [p for p in func.params if not isinstance(p, PE.Var)]
    for buf, s in zip(buffers, sinfos):
        if isinstance(s, TensorStructInfo) and s.shape is not None and len(buf.shape) == len(s.shape):
            for d, g in zip(buf.shape, s.shape):
                match_dims(d, g, bound)
    out = []
    for v in scalars:
        if any(v is k for k in known):
            out.append(v)
        elif v in bound:
            out.append(bound[v])
        else:
            name = func.attrs.get("global_symbol", "?") if hasattr(func, "attrs") else "?"
            raise IRError(f"PrimFunc {name!r}: its scalar parameter {v.name!r} is not determined by the shapes of "
                          f"the call's arguments and outputs; pass its value explicitly with "
                          f"G.op.call_tir(..., tir_vars=[...])")
    return out
