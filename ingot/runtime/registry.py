"""The global packed-function registry (``register_func`` / ``get_global_func``).

Note: this is one of the few string-keyed registries Ingot keeps, because users extend it:
a graph's ``call_packed("env.linear", ...)`` names a function registered here, so models can
mix generated kernels with library calls written in Python. Registered functions receive
``NDArray`` arguments for tensors (wrapped without copying) and Python scalars otherwise.
``PackedFunc.as_c_function()`` exposes one as a C ``IngotPackedFunc`` pointer so generated
code (e.g. an AOT executor) can call it with the ordinary ABI.

Example::

    >>> import numpy as np
    >>> @register_func("doc.scale", override=True)
    ... def scale(x, out, factor):
    ...     out.numpy()[:] = x.numpy() * factor
    >>> f = get_global_func("doc.scale")
    >>> out = np.zeros(2, "float32")
    >>> f(np.ones(2, "float32"), out, 3.0)
    >>> out.tolist()
    [3.0, 3.0]
"""

from __future__ import annotations

import ctypes
import difflib
import threading

import numpy as np

from . import abi
from ._ffi import PACKED_FUNC_TYPE, DLTensor
from .device import Device
from .dtype import dlpack_to_dtype, numpy_dtype
from .errors import FunctionNotFoundError, IngotRuntimeError
from .ndarray import NDArray, from_dlpack

__all__ = ["PackedFunc", "register_func", "get_global_func", "list_global_func_names",
           "remove_global_func"]

_registry: dict[str, "PackedFunc"] = {}
_lock = threading.Lock()


def _to_ndarray(value):
    if isinstance(value, NDArray):
        return value
    if isinstance(value, np.ndarray):
        return NDArray(value)
    if hasattr(value, "__dlpack__") and not isinstance(value, type):
        return from_dlpack(value)
    return value


class PackedFunc:
    """A registered function: calling it wraps array arguments as NDArrays (zero-copy).

    Example::

        >>> pf = PackedFunc(lambda x: x.shape, "doc.shape")
        >>> pf(np.zeros((2, 3)))
        (2, 3)
    """

    __slots__ = ("func", "name", "_c_func")

    def __init__(self, func, name: str):
        if not callable(func):
            raise TypeError(f"register_func({name!r}): expected a callable, got {type(func).__name__}")
        self.func = func
        self.name = name
        self._c_func = None

    def __call__(self, *args):
        return self.func(*[_to_ndarray(a) for a in args])

    def as_c_function(self) -> int:
        """Address of a C ``IngotPackedFunc`` that calls this function (kept alive by self).

        Tensor arguments arrive as NDArrays viewing the caller's memory; a Python exception
        becomes ``INGOT_ERR_RUNTIME`` with the message written to ``err``.

        Example::

            >>> addr = get_global_func("doc.scale").as_c_function()
            >>> addr > 0
            True
        """
        if self._c_func is None:
            self._c_func = PACKED_FUNC_TYPE(self._c_entry)
        return ctypes.cast(self._c_func, ctypes.c_void_p).value

    def _c_entry(self, args, codes, num_args, err, err_len) -> int:
        try:
            values = [_from_c_value(args[i], codes[i]) for i in range(num_args)]
            self.func(*values)
            return abi.OK
        except BaseException as exc:  # noqa: BLE001 - must not unwind into C
            if err and err_len > 0:
                msg = f"{self.name}: {type(exc).__name__}: {exc}".encode("utf-8", "replace")
                msg = msg[: err_len - 1] + b"\0"
                ctypes.memmove(err, msg, len(msg))
            return abi.ERR_RUNTIME

    def __repr__(self) -> str:
        return f"<ingot.PackedFunc {self.name}>"


def _from_c_value(value, code: int):
    if code == abi.ARG_INT:
        return value.v_int64
    if code == abi.ARG_FLOAT:
        return value.v_float64
    if code == abi.ARG_NULL:
        return None
    if code == abi.ARG_TENSOR:
        t = DLTensor.from_address(value.v_handle)
        dtype = dlpack_to_dtype(t.dtype.code, t.dtype.bits, t.dtype.lanes)
        npd = numpy_dtype(dtype)
        shape = tuple(ctypes.cast(t.shape, ctypes.POINTER(ctypes.c_int64))[i] for i in range(t.ndim))
        count = int(np.prod(shape)) if shape else 1
        ptr = (t.data or 0) + t.byte_offset
        raw = (ctypes.c_char * (count * npd.itemsize)).from_address(ptr) if count else bytearray()
        arr = np.frombuffer(raw, dtype=npd).reshape(shape) if count else np.empty(shape, npd)
        if t.strides:
            raise IngotRuntimeError("packed function arguments must be contiguous (strides NULL)")
        return NDArray(arr, Device(t.device.device_type, t.device.device_id))
    return value.v_handle


def register_func(func_name, f=None, override: bool = False):
    """Register ``f`` under ``func_name``; usable as a decorator. Returns ``f``.

    ``@register_func`` without a name registers under the function's ``__name__``. A name
    already taken raises unless ``override=True``.

    Example::

        >>> @register_func("doc.add_one", override=True)
        ... def add_one(x):
        ...     return x + 1
        >>> get_global_func("doc.add_one")(1)
        2
    """
    if callable(func_name) and f is None:
        fn = func_name
        return register_func(fn.__name__, fn, override=override)
    if not isinstance(func_name, str) or not func_name:
        raise TypeError(f"register_func: the name must be a non-empty str, got {func_name!r}")

    def _register(fn):
        packed = PackedFunc(fn, func_name)
        with _lock:
            if func_name in _registry and not override:
                raise IngotRuntimeError(
                    f"global function {func_name!r} is already registered; pass override=True "
                    "to replace it"
                )
            _registry[func_name] = packed
        return fn

    if f is None:
        return _register
    return _register(f)


def get_global_func(name: str, allow_missing: bool = False) -> PackedFunc | None:
    """The registered function ``name`` (``None`` if missing and ``allow_missing``).

    Example::

        >>> get_global_func("doc.no.such.func", allow_missing=True) is None
        True
    """
    pf = _registry.get(name)
    if pf is None and not allow_missing:
        close = difflib.get_close_matches(name, list(_registry), n=3)
        hint = f"; did you mean {', '.join(map(repr, close))}?" if close else ""
        raise FunctionNotFoundError(
            f"no global function named {name!r} is registered{hint} "
            "(register one with @ingot.register_func(name))"
        )
    return pf


def list_global_func_names() -> list[str]:
    """Sorted names of all registered functions.

    Example::

        >>> _ = register_func("doc.listed", lambda: None, override=True)
        >>> "doc.listed" in list_global_func_names()
        True
    """
    return sorted(_registry)


def remove_global_func(name: str) -> None:
    """Unregister ``name`` (no error if absent).

    Example::

        >>> remove_global_func("doc.add_one")
        >>> get_global_func("doc.add_one", allow_missing=True) is None
        True
    """
    with _lock:
        _registry.pop(name, None)
