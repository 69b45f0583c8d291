"""Helpers shared by the ONNX converters: static values, axes, broadcasting constants.

Example:
    >>> norm_axes([-1, 0], 3)
    [2, 0]
"""
from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from ingot import graph as G


def norm_axes(axes: Sequence[int], ndim: int) -> list[int]:
    """Non-negative axes.

    Example:
        >>> norm_axes([-2], 4)
        [2]
    """
    return [int(a) + ndim if int(a) < 0 else int(a) for a in axes]


def static_ints(value: Any, node: Any, what: str) -> "list[int] | None":
    """A static 1-D integer input (axes, pads, shape) as a list of ints, None when absent; raises
    naming ``what`` when the value is only known at run time.

    Example:
        >>> static_ints(np.array([1, 2]), None, "axes")
        [1, 2]
    """
    if value is None:
        return None
    array = value.data if isinstance(value, G.Constant) else value
    if not isinstance(array, np.ndarray):
        raise _err(node, f"{what} must be known at import time (a constant or an initializer); it is computed at "
                         f"run time here. Fix the input shapes with shape_dict so it folds")
    return [d if not isinstance(d, (int, np.integer)) else int(d) for d in array.reshape(-1).tolist()]


def _err(node: Any, message: str) -> Exception:
    from ..errors import ConversionError

    if node is None:
        return ConversionError("?", "?", message)
    return node.error(message)


def is_static(value: Any) -> bool:
    """Whether a converter input is known at import time (numpy array or Constant)."""
    return isinstance(value, (np.ndarray, G.Constant))


def as_array(value: Any) -> np.ndarray:
    """The numpy value of a static input."""
    return value.data if isinstance(value, G.Constant) else value


def scalar_like(value: float, dtype: str) -> G.Constant:
    """A 0-d constant of ``dtype``.

    Example:
        >>> str(scalar_like(1, "float32").struct_info.dtype)
        'float32'
    """
    return G.const(np.array(value, dtype=dtype))


def is_int_dtype(dtype: str) -> bool:
    """Whether ``dtype`` names an integer type."""
    return np.dtype(dtype).kind in "iu"
