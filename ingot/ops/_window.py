"""The argument preamble of the sliding-window operators (conv2d in both layouts, depthwise, the
packed-weight convs, conv2d_transpose, pooling): ``out_dtype`` default, stride/dilation pairs,
4-sided padding, validated once.

Note: every window operator used to repeat these five lines; an argument error then said
"strides must be ..." without naming the operator. Here each check names the operator and the
argument and says the accepted forms. Symbolic values (a ``PrimExpr`` that is not a constant) pass
unchecked: only constants can be proved wrong. The graph layer (``ingot.graph.op.nn``) normalizes
its attributes with the same functions, passing its own ``error`` factory so that it raises
``IRError`` about the graph operator.

Example:
    >>> w = conv_window("conv2d_nchw", strides=2, padding=(1, 2), dilation=1)
    >>> w.strides, w.dilation, w.padding
    ((2, 2), (1, 1), (1, 2, 1, 2))
"""
from __future__ import annotations

from typing import Any, Callable, NamedTuple

from ingot.ir import as_const_int, convert


def _value_error(op: str, message: str) -> Exception:
    return ValueError(f"{op}: {message}")


ErrorFactory = Callable[[str, str], Exception]


class Window(NamedTuple):
    """Normalized window arguments: ``strides`` and ``dilation`` as (h, w), ``padding`` as
    (top, left, bottom, right), ``out_dtype`` resolved (None when no data tensor was given)."""

    strides: tuple
    dilation: tuple
    padding: tuple
    out_dtype: "str | None"


def _check_int(op: str, name: str, item: Any, minimum: int, value: Any, error: ErrorFactory) -> None:
    if isinstance(item, bool) or isinstance(item, float):
        raise error(op, f"{name} must hold integers, got {value!r}")
    const = as_const_int(convert(item)) if not isinstance(item, int) else item
    if const is not None and const < minimum:
        bound = "positive" if minimum == 1 else "non-negative"
        raise error(op, f"{name} must be {bound}, got {value!r}")


def pair(op: str, name: str, value: Any, minimum: int = 1, error: ErrorFactory = _value_error) -> tuple:
    """``value`` (an int or a 1- or 2-sequence) as an (h, w) pair whose constants are ``>= minimum``.

    Example:
        >>> pair("pool2d", "pool_size", 3)
        (3, 3)
        >>> pair("conv2d", "strides", (0, 1))
        Traceback (most recent call last):
        ...
        ValueError: conv2d: strides must be positive, got (0, 1)
    """
    if isinstance(value, (list, tuple)) or hasattr(value, "__iter__"):
        value = tuple(value)
        if len(value) not in (1, 2):
            raise error(op, f"{name} must be an int or an (h, w) pair, got {value!r}; pass e.g. {name}=2 or "
                            f"{name}=(2, 1)")
        out = (value[0], value[0]) if len(value) == 1 else tuple(value)
    else:
        out = (value, value)
    for item in out:
        _check_int(op, name, item, minimum, value, error)
    return out


def padding4(op: str, value: Any, name: str = "padding", error: ErrorFactory = _value_error) -> tuple:
    """(top, left, bottom, right) from an int, an (h, w) pair or a 4-tuple (TVM's convention);
    constants must be non-negative.

    Example:
        >>> padding4("conv2d", (1, 2))
        (1, 2, 1, 2)
    """
    if isinstance(value, (list, tuple)) or hasattr(value, "__iter__"):
        value = tuple(value)
        if len(value) == 4:
            out = tuple(value)
        elif len(value) == 2:
            out = (value[0], value[1], value[0], value[1])
        elif len(value) == 1:
            out = (value[0],) * 4
        else:
            raise error(op, f"{name} must be an int, (h, w) or (top, left, bottom, right), got {value!r}")
    else:
        out = (value,) * 4
    for item in out:
        _check_int(op, name, item, 0, value, error)
    return out


def conv_window(op: str, data: Any = None, strides: Any = 1, padding: Any = 0, dilation: Any = 1,
                out_dtype: "str | None" = None, error: ErrorFactory = _value_error) -> Window:
    """The normalized window arguments of operator ``op``; ``out_dtype`` defaults to ``data``'s dtype.

    Example:
        >>> conv_window("pool2d", strides=(2, 1)).strides
        (2, 1)
    """
    if out_dtype is None and data is not None:
        out_dtype = str(data.dtype)
    return Window(pair(op, "strides", strides, error=error), pair(op, "dilation", dilation, error=error),
                  padding4(op, padding, error=error), out_dtype)


def out_extent(size: Any, pad_total: Any, kernel: Any, stride: Any, dilation: Any) -> Any:
    """Output extent of a window sliding over ``size`` padded by ``pad_total`` (floor mode).

    Example:
        >>> int(out_extent(8, 2, 3, 2, 1))
        4
    """
    return (convert(size) + pad_total - ((convert(kernel) - 1) * dilation + 1)) // stride + 1


def cast_pair(lhs: Any, rhs: Any, out_dtype: str) -> tuple:
    """``(lhs, rhs)`` cast to ``out_dtype`` when ``lhs`` is of another dtype (mixed-precision products).

    Example:
        >>> from ingot import te
        >>> a, b = te.placeholder((1,), "int8", name="a"), te.placeholder((1,), "int8", name="b")
        >>> str(cast_pair(a[0], b[0], "int32")[0].dtype)
        'int32'
    """
    if str(lhs.dtype) != out_dtype:
        return lhs.astype(out_dtype), rhs.astype(out_dtype)
    return lhs, rhs
