"""Binary operators with numpy broadcasting (arithmetic, comparisons) and ``where``.

Python scalars are accepted for either operand; they become constants of the other operand's dtype.

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((4, 3), "float32"))
    >>> b = G.Var("b", G.TensorStructInfo((3,), "float32"))
    >>> str(add(x, b).struct_info)
    'R.Tensor((4, 3), dtype="float32")'
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ..expr import Call, Expr
from ..op_registry import OpPattern, make_call, op_error, register_op
from ..struct_info import TensorStructInfo
from ._common import as_expr, broadcast_shapes, known_shape, tensor_sinfo, topi


def _infer_binary(name: str, result_bool: bool) -> Callable:
    def infer(args: Any, attrs: Any) -> TensorStructInfo:
        a, b = tensor_sinfo(name, args[0], 0), tensor_sinfo(name, args[1], 1)
        if a.dtype != b.dtype:
            raise op_error(name, f"operand dtypes differ ({a.dtype} vs {b.dtype}); cast one with G.op.cast(x, dtype)")
        shape = broadcast_shapes(name, known_shape(name, a, 0), known_shape(name, b, 1))
        return TensorStructInfo(shape, "bool" if result_bool else a.dtype)

    return infer


# name -> (numpy reference, result is bool)
_BINARY: dict[str, tuple[Callable, bool]] = {
    "add": (np.add, False),
    "subtract": (np.subtract, False),
    "multiply": (np.multiply, False),
    # Integers truncate; everything else (bfloat16 from ml_dtypes has dtype kind "V", not "f") divides.
    "divide": (lambda a, b: np.trunc(a / b).astype(a.dtype) if a.dtype.kind in "iu" else (a / b).astype(a.dtype),
               False),
    "floor_divide": (np.floor_divide, False),
    # C's fmod / % (the remainder takes the sign of the dividend) and Python's % (sign of the divisor).
    "mod": (np.fmod, False),
    "floor_mod": (np.mod, False),
    "power": (np.power, False),
    "maximum": (np.maximum, False),
    "minimum": (np.minimum, False),
    "equal": (np.equal, True),
    "not_equal": (np.not_equal, True),
    "less": (np.less, True),
    "less_equal": (np.less_equal, True),
    "greater": (np.greater, True),
    "greater_equal": (np.greater_equal, True),
}


def _scalar_or_tensor(inp: Any) -> Any:
    return inp


def _register_binary(name: str, ref: Callable, result_bool: bool) -> None:
    register_op(
        name, num_inputs=2, pattern=OpPattern.BROADCAST, infer=_infer_binary(name, result_bool),
        legalize=lambda inputs, attrs, out: getattr(topi("broadcast"), name)(inputs[0], inputs[1]),
        numpy=lambda args, attrs: np.asarray(ref(args[0], args[1])).astype(
            "bool" if result_bool else args[0].dtype),
        doc=f"Broadcasting {name}.",
    )


for _name, (_ref, _bool) in _BINARY.items():
    _register_binary(_name, _ref, _bool)


def _builder(name: str) -> Callable[[Any, Any], Call]:
    def build(a: Any, b: Any) -> Call:
        if not isinstance(a, Expr) and not isinstance(b, Expr):
            raise op_error(name, "at least one operand must be a graph expression")
        a_expr = as_expr(a, b if isinstance(b, Expr) else None)
        b_expr = as_expr(b, a_expr)
        return make_call(name, [a_expr, b_expr])

    build.__name__ = name
    build.__doc__ = f"""Broadcasting ``{name}`` of two tensors (or a tensor and a Python scalar).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4, 3), "float32"))
        >>> str(G.op.{name}(x, x).struct_info.shape)
        '(4, 3)'
    """
    return build


add = _builder("add")
subtract = _builder("subtract")
multiply = _builder("multiply")
divide = _builder("divide")
floor_divide = _builder("floor_divide")
mod = _builder("mod")
floor_mod = _builder("floor_mod")
power = _builder("power")
maximum = _builder("maximum")
minimum = _builder("minimum")
equal = _builder("equal")
not_equal = _builder("not_equal")
less = _builder("less")
less_equal = _builder("less_equal")
greater = _builder("greater")
greater_equal = _builder("greater_equal")


def _infer_where(args: Any, attrs: Any) -> TensorStructInfo:
    c, a, b = (tensor_sinfo("where", x, i) for i, x in enumerate(args))
    if not c.dtype.is_bool:
        raise op_error("where", f"the condition must be a bool tensor, got {c.dtype}; compare with G.op.greater etc.")
    if a.dtype != b.dtype:
        raise op_error("where", f"branch dtypes differ ({a.dtype} vs {b.dtype}); cast one with G.op.cast")
    shape = broadcast_shapes("where", known_shape("where", c), known_shape("where", a, 1), known_shape("where", b, 2))
    return TensorStructInfo(shape, a.dtype)


register_op(
    "where", num_inputs=3, pattern=OpPattern.BROADCAST, infer=_infer_where,
    legalize=lambda inputs, attrs, out: topi("broadcast").where(*inputs),
    numpy=lambda args, attrs: np.where(args[0], args[1], args[2]).astype(args[1].dtype),
)


def where(condition: Expr, x: Any, y: Any) -> Call:
    """``x`` where ``condition`` else ``y`` (broadcast together).

    Example:
        >>> from ingot import graph as G
        >>> c = G.Var("c", G.TensorStructInfo((4,), "bool"))
        >>> x = G.Var("x", G.TensorStructInfo((4,), "float32"))
        >>> str(G.op.where(c, x, 0.0).struct_info)
        'R.Tensor((4,), dtype="float32")'
    """
    x_expr = as_expr(x, y if isinstance(y, Expr) else None)
    return make_call("where", [condition, x_expr, as_expr(y, x_expr)])
