"""Elementwise operators of one tensor: activations, math functions, ``cast``.

Example:
    >>> from ingot import graph as G
    >>> x = G.Var("x", G.TensorStructInfo((2, 3), "float32"))
    >>> str(gelu(x).struct_info)
    'R.Tensor((2, 3), dtype="float32")'
"""
from __future__ import annotations

import math
from typing import Any, Callable

import numpy as np

from ..expr import Call, Expr
from ..op_registry import OpPattern, make_call, op_error, register_op
from ._common import tensor_sinfo, topi

_erf = np.vectorize(math.erf, otypes=[np.float64])


def _np_erf(x: np.ndarray) -> np.ndarray:
    return _erf(x).astype(x.dtype)


def _same_sinfo(name: str) -> Callable:
    def infer(args: Any, attrs: Any) -> Any:
        return tensor_sinfo(name, args[0])

    return infer


def _float_only(name: str) -> Callable:
    def infer(args: Any, attrs: Any) -> Any:
        sinfo = tensor_sinfo(name, args[0])
        if not sinfo.dtype.is_float:
            raise op_error(name, f"needs a floating-point tensor, got {sinfo.dtype}; cast it first with G.op.cast")
        return sinfo

    return infer


# name -> (TE builder in ingot.ops.elemwise, numpy reference, float only)
_UNARY: dict[str, tuple[str, Callable, bool]] = {
    "relu": ("relu", lambda x: np.maximum(x, 0).astype(x.dtype), False),
    "gelu": ("gelu", lambda x: (0.5 * x * (1 + _np_erf(x / np.sqrt(2).astype(x.dtype)))).astype(x.dtype), True),
    "gelu_tanh": ("gelu_tanh", lambda x: (0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3))))
                  .astype(x.dtype), True),
    "silu": ("silu", lambda x: (x / (1 + np.exp(-x))).astype(x.dtype), True),
    "hard_swish": ("hard_swish", lambda x: (x * np.clip(x + 3, 0, 6) / 6).astype(x.dtype), True),
    "sigmoid": ("sigmoid", lambda x: (1 / (1 + np.exp(-x))).astype(x.dtype), True),
    "tanh": ("tanh", np.tanh, True),
    "exp": ("exp", np.exp, True),
    # exp(x) - 1 without the cancellation near 0 (Elu/Celu/Selu in float16/bfloat16 need it).
    "expm1": ("expm1", np.expm1, True),
    "log": ("log", np.log, True),
    "sqrt": ("sqrt", np.sqrt, True),
    "rsqrt": ("rsqrt", lambda x: (1 / np.sqrt(x)).astype(x.dtype), True),
    "erf": ("erf", _np_erf, True),
    "floor": ("floor", np.floor, True),
    "ceil": ("ceil", np.ceil, True),
    "round": ("round", np.round, True),
    "sin": ("sin", np.sin, True),
    "cos": ("cos", np.cos, True),
    "negative": ("negative", np.negative, False),
    "abs": ("abs", np.abs, False),
}


def _register_unary(name: str, te_name: str, ref: Callable, float_only: bool) -> None:
    register_op(
        name, num_inputs=1, pattern=OpPattern.ELEMWISE,
        infer=_float_only(name) if float_only else _same_sinfo(name),
        legalize=lambda inputs, attrs, out: getattr(topi("elemwise"), te_name)(inputs[0]),
        numpy=lambda args, attrs: ref(args[0]),
        doc=f"Elementwise {name}.",
    )


for _name, (_te, _ref, _float) in _UNARY.items():
    _register_unary(_name, _te, _ref, _float)


def _builder(name: str) -> Callable[[Expr], Call]:
    def build(x: Expr) -> Call:
        return make_call(name, [x])

    build.__name__ = name
    build.__doc__ = f"""Elementwise ``{name}`` of a tensor.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4,), "float32"))
        >>> str(G.op.{name}(x))
        'R.{name}(x)'
    """
    return build


relu = _builder("relu")
gelu = _builder("gelu")
gelu_tanh = _builder("gelu_tanh")
silu = _builder("silu")
hard_swish = _builder("hard_swish")
sigmoid = _builder("sigmoid")
tanh = _builder("tanh")
exp = _builder("exp")
expm1 = _builder("expm1")
log = _builder("log")
sqrt = _builder("sqrt")
rsqrt = _builder("rsqrt")
erf = _builder("erf")
floor = _builder("floor")
ceil = _builder("ceil")
round = _builder("round")  # noqa: A001 - numpy/TVM name
sin = _builder("sin")
cos = _builder("cos")
negative = _builder("negative")
abs = _builder("abs")  # noqa: A001


register_op(
    "clip", num_inputs=1, pattern=OpPattern.ELEMWISE, attrs={"min": -math.inf, "max": math.inf},
    infer=_same_sinfo("clip"),
    legalize=lambda inputs, attrs, out: topi("elemwise").clip(inputs[0], attrs["min"], attrs["max"]),
    numpy=lambda args, attrs: np.clip(args[0], attrs["min"], attrs["max"]).astype(args[0].dtype),
)


def clip(x: Expr, min: float, max: float) -> Call:  # noqa: A002 - TVM's argument names
    """``x`` clipped into ``[min, max]``.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4,), "float32"))
        >>> str(G.op.clip(x, 0.0, 6.0))
        'R.clip(x, min=0.0, max=6.0)'
    """
    return make_call("clip", [x], min=float(min), max=float(max))


register_op(
    "leaky_relu", num_inputs=1, pattern=OpPattern.ELEMWISE, attrs={"alpha": 0.01},
    infer=_float_only("leaky_relu"),
    legalize=lambda inputs, attrs, out: topi("elemwise").leaky_relu(inputs[0], attrs["alpha"]),
    numpy=lambda args, attrs: np.where(args[0] > 0, args[0], args[0] * attrs["alpha"]).astype(args[0].dtype),
)


def leaky_relu(x: Expr, alpha: float = 0.01) -> Call:
    """``x`` where positive, ``alpha * x`` elsewhere.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4,), "float32"))
        >>> str(G.op.leaky_relu(x, 0.2))
        'R.leaky_relu(x, alpha=0.2)'
    """
    return make_call("leaky_relu", [x], alpha=float(alpha))


def _infer_cast(args: Any, attrs: Any) -> Any:
    return tensor_sinfo("cast", args[0]).with_dtype(attrs["dtype"])


def _emulated(x: Any, dtype: str) -> bool:
    # float8/float4 on either side: their values are bit patterns, a plain C or numpy cast is wrong.
    from ingot.ir.dtype import EMULATED_FLOATS

    src = str(x.dtype) if hasattr(x, "dtype") else ""
    return dtype in EMULATED_FLOATS or src in EMULATED_FLOATS


def _sub_byte(x: Any, dtype: str) -> bool:
    # int4/uint4/int2/uint2 on either side: numpy's astype("int4") means int32, and the wrap is ml_dtypes'.
    return any(name in ("int4", "uint4", "int2", "uint2") for name in (dtype, str(getattr(x, "dtype", ""))))


def _legalize_cast(inputs: Any, attrs: Any, out: Any) -> Any:
    x, dtype = inputs[0], attrs["dtype"]
    if _emulated(x, dtype):
        return topi("lowp").cast(x, dtype, bool(attrs.get("saturate", True)), attrs.get("round_mode", "up"))
    return topi("elemwise").cast(x, dtype)   # sub-byte integers: the C backend wraps


def _np_cast(args: Any, attrs: Any) -> np.ndarray:
    x, dtype = np.asarray(args[0]), attrs["dtype"]
    if _emulated(x, dtype) or _sub_byte(x, dtype):
        return topi("lowp").cast_numpy(x, dtype, bool(attrs.get("saturate", True)),
                                       round_mode=attrs.get("round_mode", "up"))
    return x.astype(dtype)


register_op(
    "cast", num_inputs=1, pattern=OpPattern.ELEMWISE, attrs={"dtype": None}, infer=_infer_cast,
    normalize_attrs=lambda attrs, args: {"dtype": str(attrs["dtype"])},
    legalize=_legalize_cast, numpy=_np_cast,
)

# ONNX Cast/QuantizeLinear with saturate=0: an overflow becomes Inf/NaN instead of the largest value;
# round_mode (up/down/nearest) is Cast's rounding to float8_e8m0fnu.
register_op(
    "cast_emulated", num_inputs=1, pattern=OpPattern.ELEMWISE,
    attrs={"dtype": None, "saturate": True, "round_mode": "up"},
    infer=lambda args, attrs: tensor_sinfo("cast_emulated", args[0]).with_dtype(attrs["dtype"]),
    normalize_attrs=lambda attrs, args: {"dtype": str(attrs["dtype"]), "saturate": bool(attrs["saturate"]),
                                         "round_mode": str(attrs["round_mode"])},
    legalize=_legalize_cast, numpy=_np_cast,
)


def _np_bitcast(args: Any, attrs: Any) -> np.ndarray:
    from ingot.ir.dtype import DataType

    x = np.asarray(args[0])
    # a copy only when strided (np.ascontiguousarray would also turn a 0-d array into shape (1,))
    return (x if x.flags.c_contiguous else x.copy()).view(DataType(attrs["dtype"]).numpy_dtype())


def _bit_width(dtype: Any) -> int:
    from ingot.ir.dtype import DataType

    return 8 if DataType(dtype).is_bool else DataType(dtype).bits


def _infer_bitcast(args: Any, attrs: Any) -> Any:
    sinfo = tensor_sinfo("bitcast", args[0])
    src, dst = str(sinfo.dtype), attrs["dtype"]
    if _bit_width(src) != _bit_width(dst):
        raise op_error("bitcast", f"{src} ({_bit_width(src)} bits) to {dst} ({_bit_width(dst)} bits): the types "
                                  "must have the same width (cast converts values)")
    return sinfo.with_dtype(dst)


register_op(
    "bitcast", num_inputs=1, pattern=OpPattern.ELEMWISE, attrs={"dtype": None}, infer=_infer_bitcast,
    normalize_attrs=lambda attrs, args: {"dtype": str(attrs["dtype"])},
    legalize=lambda inputs, attrs, out: topi("elemwise").bitcast(inputs[0], attrs["dtype"]), numpy=_np_bitcast,
)


def bitcast(x: Expr, dtype: str) -> Call:
    """``x``'s bits read as ``dtype`` of the same width (ONNX BitCast, numpy ``view``, TVM's
    ``reinterpret``); bool counts as 8 bits.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4,), "float32"))
        >>> str(G.op.unary.bitcast(x, "int32").struct_info)
        'R.Tensor((4,), dtype="int32")'
    """
    return make_call("bitcast", [x], dtype=str(dtype))


def cast(x: Expr, dtype: str) -> Call:
    """``x`` converted to ``dtype`` (TVM's ``astype``).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4,), "float32"))
        >>> str(G.op.cast(x, "float16").struct_info)
        'R.Tensor((4,), dtype="float16")'
    """
    return make_call("cast", [x], dtype=str(dtype))


astype = cast


def cast_emulated(x: Expr, dtype: str, saturate: bool = True, round_mode: str = "up") -> Call:
    """``x`` converted to or from an emulated float (float8_*, float4_e2m1fn), rounding to nearest
    even; an overflow gives the largest finite value (``saturate``) or Inf/NaN. ``cast`` does the
    same with ``saturate=True``. ``float8_e8m0fnu`` rounds as ``round_mode`` (``up``, ``down`` or
    ``nearest``) says.

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((4,), "float32"))
        >>> str(G.op.unary.cast_emulated(x, "float8_e5m2", saturate=False).struct_info)
        'R.Tensor((4,), dtype="float8_e5m2")'
    """
    if round_mode not in ("up", "down", "nearest"):
        raise ValueError(f"cast_emulated: round_mode must be 'up', 'down' or 'nearest', got {round_mode!r}")
    return make_call("cast_emulated", [x], dtype=str(dtype), saturate=bool(saturate), round_mode=str(round_mode))
