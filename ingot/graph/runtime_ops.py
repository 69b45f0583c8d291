"""Executor builtins for ops whose attribute-like inputs arrive at run time (issue 17).

Note: a graph op's attributes are import-time values; an ONNX model may compute them (Col2Im's
``image_shape``, DFT's ``axis``, STFT's ``frame_step``, AffineGrid's ``size``, a window's length,
Split's ``split``, Resize's ``scales``). Where such a value decides the *computation* (not only
an output size a kernel can take as a scalar), the op runs as a builtin of the executor
(`ingot.graph.runtime_shape`) that calls the op's own numpy reference with the run's values:

* ``op_ref``: any registered graph op; ``params["runtime_attrs"]`` names the attributes the
  trailing arguments carry (``"ints"``, ``"int"`` or ``"float"``), the call is rebuilt with
  `make_call` (so the op's own attribute checks and shape inference run) and its numpy reference
  is evaluated;
* ``window``, ``split``, ``resize``, ``shape_to_tensor`` for what has no graph op of its own, and
  ``match_cast`` (fresh dims for a value of unknown shape).

Example:
    >>> run = EXTRA_BUILTINS["op_ref"]
    >>> x = np.arange(4, dtype="float32").reshape(1, 4, 1)
    >>> run([x, np.array([2, 1]), np.array([2, 1])],
    ...     {"op": "col2im", "attrs": (), "runtime_attrs": (("image_shape", "ints"), ("block_shape", "ints"))}).shape
    (1, 2, 2, 1)
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ingot.ir.error import IRError

from .runtime_resize import resize_numpy

__all__ = ["EXTRA_BUILTINS", "runtime_attr"]


def runtime_attr(value: Any, kind: str) -> Any:
    """A run-time tensor as an attribute value: ``"ints"`` (a tuple), ``"int"`` or ``"float"`` (its one element).

    Example:
        >>> runtime_attr(np.array([3, 4]), "ints"), runtime_attr(np.array([2.5]), "int")
        ((3, 4), 2)
    """
    flat = np.asarray(value).reshape(-1)
    if kind == "ints":
        return tuple(int(v) for v in flat)
    if flat.size != 1:
        raise IRError(f"a run-time scalar attribute must have one element, got {flat.size} ({flat.tolist()})")
    return int(flat[0]) if kind == "int" else float(flat[0])


def _op_ref(args: list, p: dict) -> Any:
    from .expr import Constant
    from .op import col2im_det, sampling, signal  # noqa: F401  (register the op families `op_ref` serves
    from .op_registry import get_op_def, make_call  # in a process that loaded a package without an import)

    names = tuple(p["runtime_attrs"])
    tensors, values = args[:len(args) - len(names)], args[len(args) - len(names):]
    attrs = dict(p.get("attrs", ()))
    for (name, kind), value in zip(names, values):
        attrs[name] = runtime_attr(value, kind)
    # Rebuilding the call runs the op's attribute checks and shape inference on this run's values.
    call = make_call(p["op"], [Constant(np.ascontiguousarray(t)) for t in tensors], **attrs)
    return get_op_def(p["op"]).numpy(tensors, call.attrs)


def _window(args: list, p: dict) -> Any:
    from ingot.ops.signal import window_numpy

    size = runtime_attr(args[0], "int")
    if size < 0:
        raise IRError(f"{p['kind'].capitalize()}Window: size {size} must not be negative")
    return window_numpy(p["kind"], size, bool(p.get("periodic", 1)), p["dtype"])


def _split(args: list, p: dict) -> Any:
    """ONNX Split with run-time ``split`` sizes (they must add up to the axis)."""
    x, sizes, axis = args[0], [int(s) for s in np.asarray(args[1]).reshape(-1)], p["axis"]
    if sum(sizes) != x.shape[axis] or min(sizes, default=0) < 0:
        raise IRError(f"Split: the run-time split {sizes} must be non-negative sizes adding up to axis {axis}'s "
                      f"{x.shape[axis]}")
    return tuple(np.split(x, np.cumsum(sizes)[:-1], axis=axis))


def _resize(args: list, p: dict) -> Any:
    """ONNX Resize with run-time roi / scales / sizes (absent ones are empty tensors)."""
    x, roi, scales, sizes = (list(args) + [None] * 3)[:4]
    sized = sizes is not None and np.asarray(sizes).size
    attrs = dict(p)
    axes = attrs.pop("axes", None)
    return resize_numpy(x, roi, None if sized else np.asarray(scales, "float64").reshape(-1),
                        np.asarray(sizes).reshape(-1) if sized else None, axes=axes or None, **attrs)


def _shape_to_tensor(args: list, p: dict) -> Any:
    """The run-time values of a shape (a ``ShapeExpr``'s dims, resolved by the executor) as an int64 tensor."""
    return np.array(np.asarray(args[0]).reshape(-1), "int64")


def _match_cast(args: list, p: dict) -> Any:
    """The tensor itself: its plan step binds the fresh dims its output declares (TVM Relax's ``match_cast``),
    so a value whose shape only the run knows (a loop's scan output) feeds kernels compiled for symbolic sizes."""
    return args[0]


#: kind → ``fn(numpy args, params dict)``; merged into `ingot.graph.runtime_shape.BUILTINS`.
EXTRA_BUILTINS: "dict[str, Callable[[list, dict], Any]]" = {
    "op_ref": _op_ref, "window": _window, "split": _split, "resize": _resize, "shape_to_tensor": _shape_to_tensor,
    "match_cast": _match_cast,
}
