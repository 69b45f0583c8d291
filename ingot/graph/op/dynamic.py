"""Operators whose sizes are known only at run time: ``tensor_to_shape`` and ``builtin``.

Note: see `ingot.graph.runtime_shape` for the design. ``tensor_to_shape(t, dims)`` turns the
values of a 1-D integer tensor into fresh symbolic dims (its struct info is ``R.Shape([...])``);
``builtin(*args, kind, params, outputs)`` is a data-dependent op run by the executor (a numpy
builtin) whose ``outputs`` list each output's dims — ints, symbolic expressions of dims already
known, or the *name* of a fresh dim — and dtype. Neither is legalized to a kernel, fused or
folded (their outputs' shapes are not static); the executor binds their fresh dims as it runs.

Example:
    >>> from ingot import graph as G
    >>> t = G.Var("t", G.TensorStructInfo((2,), "int64"))
    >>> str(tensor_to_shape(t, ("rt0", "rt1")).struct_info)
    'R.Shape([rt0, rt1])'
    >>> x = G.Var("x", G.TensorStructInfo((6,), "float32"))
    >>> str(builtin("nonzero", x, outputs=(((1, "rt2"), "int64"),)).struct_info)
    'R.Tensor((1, rt2), dtype="int64")'
"""
from __future__ import annotations

from typing import Any, Sequence

from ..expr import Call, Expr
from ..op_registry import REQUIRED, OpPattern, _REGISTRY, make_call, op_error, register_op
from ..runtime_shape import run_builtin, shape_var
from ..struct_info import ShapeStructInfo, TensorStructInfo, TupleStructInfo

__all__ = ["tensor_to_shape", "builtin", "RUNTIME_SHAPE_OPS"]

#: Operators run by the executor as builtins (not legalized to kernels; see `ingot.graph.runtime_shape`).
RUNTIME_SHAPE_OPS = frozenset({"tensor_to_shape", "builtin"})


def _infer_tensor_to_shape(args: Any, attrs: Any) -> ShapeStructInfo:
    t = args[0].struct_info
    dims = tuple(attrs["dims"])
    if not isinstance(t, TensorStructInfo) or t.ndim != 1 or not t.dtype.is_integer:
        raise op_error("tensor_to_shape", f"the argument must be a 1-D integer tensor, got {t}")
    if t.shape is not None and isinstance(t.shape[0], int) and t.shape[0] != len(dims):
        raise op_error("tensor_to_shape", f"the tensor has {t.shape[0]} values but {len(dims)} dims are named "
                                          f"({dims}); name one fresh dim per value")
    if not all(isinstance(d, str) and d for d in dims):
        raise op_error("tensor_to_shape", f"dims must be names of fresh symbolic dims, got {dims}")
    return ShapeStructInfo([shape_var(d) for d in dims])


def _out_sinfo(spec: Any) -> TensorStructInfo:
    dims, dtype = spec
    return TensorStructInfo([shape_var(d) if isinstance(d, str) else d for d in dims], dtype)


def _infer_builtin(args: Any, attrs: Any) -> Any:
    outputs = attrs["outputs"]
    if not outputs:
        raise op_error("builtin", f"builtin {attrs['kind']!r} declares no outputs")
    fields = [_out_sinfo(o) for o in outputs]
    return fields[0] if len(fields) == 1 else TupleStructInfo(fields)


def _tuples(value: Any) -> Any:
    """Lists (as the printer writes tuples) back to tuples, so attributes stay hashable."""
    return tuple(_tuples(v) for v in value) if isinstance(value, (list, tuple)) else value


def _norm_attrs(attrs: Any, args: Any) -> dict:
    return {k: _tuples(v) for k, v in attrs.items()}


if "tensor_to_shape" not in _REGISTRY:  # idempotent: a reload in tests must not fail
    register_op("tensor_to_shape", num_inputs=1, pattern=OpPattern.OPAQUE, attrs={"dims": REQUIRED},
                infer=_infer_tensor_to_shape, normalize_attrs=_norm_attrs, legalize=None, numpy=None,
                doc="The values of a 1-D integer tensor as fresh symbolic dims (bound at run time).")
    register_op("builtin", num_inputs=None, pattern=OpPattern.OPAQUE,
                attrs={"kind": REQUIRED, "params": (), "outputs": REQUIRED}, infer=_infer_builtin, normalize_attrs=_norm_attrs, legalize=None,
                numpy=lambda args, attrs: run_builtin(attrs["kind"], args, attrs["params"]),
                doc="A data-dependent op run by the executor (numpy builtin); outputs may have fresh dims.")


def tensor_to_shape(t: Expr, dims: Sequence[str]) -> Call:
    """The values of the 1-D integer tensor ``t`` as fresh symbolic dims named ``dims``.

    Example:
        >>> from ingot import graph as G
        >>> t = G.Var("t", G.TensorStructInfo((1,), "int64"))
        >>> tensor_to_shape(t, ("n7",)).struct_info.values[0].name
        'n7'
    """
    return make_call("tensor_to_shape", [t], dims=tuple(dims))


def builtin(kind: str, *args: Expr, params: Any = (), outputs: Any) -> Call:
    """A call of the run-time builtin ``kind`` (`ingot.graph.runtime_shape.BUILTINS`).

    ``params`` is a dict or ``((key, value), ...)``; ``outputs`` is ``((dims, dtype), ...)``, one per
    output, each dim an int, a symbolic expression, or the name of a fresh dim.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4, 3), "float32"))
        >>> call = builtin("compress", x, G.const([1, 0, 1, 1], "bool"), params={"axis": 0},
        ...                outputs=((("rt0", 3), "float32"),))
        >>> str(call.struct_info)
        'R.Tensor((rt0, 3), dtype="float32")'
    """
    items = tuple(sorted(params.items())) if isinstance(params, dict) else tuple(params)
    items = tuple((k, tuple(v) if isinstance(v, list) else v) for k, v in items)
    outs = tuple((tuple(dims), str(dtype)) for dims, dtype in outputs)
    return make_call("builtin", list(args), kind=str(kind), params=items, outputs=outs)
