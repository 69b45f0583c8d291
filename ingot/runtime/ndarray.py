"""NDArray: an n-dimensional array on a device, the runtime's argument and result type.

Note: on the CPU an ``NDArray`` wraps a numpy array; ``.numpy()`` returns that array itself
(zero-copy), so results written by a kernel are visible through it at once. ``array()`` and
``empty()`` allocate 64-byte aligned, C-contiguous storage (what vectorized kernels like).
``from_dlpack`` wraps another framework's memory without copying (numpy, PyTorch, ...). An
NDArray keeps a ready-made ``DLTensor`` for the C ABI, so passing it to a compiled function
costs a pointer store.

Example::

    >>> import numpy as np
    >>> from ingot.runtime.ndarray import array, empty
    >>> a = array(np.arange(6, dtype="float32").reshape(2, 3))
    >>> a.shape, a.dtype, a.device
    ((2, 3), 'float32', cpu(0))
    >>> empty((4,), "int8").numpy().dtype
    dtype('int8')
"""

from __future__ import annotations

import ctypes
from math import prod

import numpy as np

from . import abi
from ._ffi import DLTensor
from .device import Device, cpu
from .dtype import dtype_str, dtype_to_dlpack, numpy_dtype
from .errors import ArgumentError, IngotRuntimeError

__all__ = ["NDArray", "array", "empty", "from_dlpack", "aligned_empty", "ALIGNMENT"]

#: Byte alignment of arrays allocated by ``array``/``empty``.
ALIGNMENT = 64


def aligned_empty(shape, dtype, alignment: int = ALIGNMENT) -> np.ndarray:
    """An uninitialized C-contiguous numpy array whose data pointer is ``alignment``-aligned.

    Example::

        >>> a = aligned_empty((3, 5), "float32")
        >>> a.ctypes.data % 64, a.flags.c_contiguous
        (0, True)
    """
    npd = dtype if isinstance(dtype, np.dtype) else numpy_dtype(dtype_str(dtype))
    shape = _normalize_shape(shape)
    nbytes = prod(shape) * npd.itemsize
    raw = np.empty(nbytes + alignment, dtype=np.uint8)
    offset = (-raw.ctypes.data) % alignment
    return raw[offset:offset + nbytes].view(npd).reshape(shape)


def _normalize_shape(shape) -> tuple[int, ...]:
    if isinstance(shape, (int, np.integer)):
        shape = (int(shape),)
    try:
        out = tuple(int(d) for d in shape)
    except TypeError as exc:
        raise ArgumentError(f"shape must be a tuple of ints, got {shape!r}") from exc
    if any(d < 0 for d in out):
        raise ArgumentError(f"shape must not have negative dimensions, got {out}")
    return out


def _require_cpu(device, what: str) -> Device:
    if device is None:
        return cpu(0)
    if not isinstance(device, Device):
        raise ArgumentError(f"{what}: device must be an ingot Device such as ingot.cpu(0), got {device!r}")
    if not device.is_cpu():
        raise IngotRuntimeError(
            f"{what}: arrays on {device} are not supported yet by the CPU runtime; "
            "allocate on ingot.cpu(0)"
        )
    return device


class NDArray:
    """An n-dimensional array on a device (CPU: backed by a numpy array, no copy).

    Construct with :func:`array`, :func:`empty` or :func:`from_dlpack`; ``NDArray(np_array)``
    wraps an existing numpy array as is.

    Example::

        >>> x = NDArray(np.zeros((2, 2), "float32"))
        >>> x.numpy()[0, 0] = 5
        >>> float(x.numpy()[0, 0])
        5.0
    """

    __slots__ = ("_np", "_device", "_dtype", "_abi", "_dlt", "_shape_buf", "__weakref__")

    def __init__(self, data: np.ndarray, device: Device | None = None):
        if not isinstance(data, np.ndarray):
            raise ArgumentError(
                f"NDArray wraps a numpy.ndarray, got {type(data).__name__}; "
                "use ingot.runtime.ndarray.array(x) to copy other data"
            )
        self._device = _require_cpu(device, "NDArray")
        self._dtype = dtype_str(data.dtype)
        self._np = data
        self._abi = None  # (shape, DLTensor address, data address, c_contiguous), see _abi_info
        self._dlt = None
        self._shape_buf = None

    @classmethod
    def _wrap_trusted(cls, data: np.ndarray, dtype: str) -> "NDArray":
        """Wrap a CPU numpy array whose Ingot dtype name is known (no checks: hot paths only).

        Example::

            >>> NDArray._wrap_trusted(np.zeros(2, "float32"), "float32").dtype
            'float32'
        """
        self = _new_object(cls)
        self._np = data
        self._device = _CPU0
        self._dtype = dtype
        self._abi = self._dlt = self._shape_buf = None
        return self

    # ------------------------------------------------------------ properties
    @property
    def shape(self) -> tuple[int, ...]:
        """Shape as a tuple of ints.

        Example::

            >>> empty((2, 3), "float32").shape
            (2, 3)
        """
        return self._np.shape

    @property
    def dtype(self) -> str:
        """Element type as an Ingot dtype string (``"float32"``, ``"bool"``, ...).

        Example::

            >>> empty((1,), "uint8").dtype
            'uint8'
        """
        return self._dtype

    @property
    def device(self) -> Device:
        """The device holding the data.

        Example::

            >>> empty((1,), "float32").device
            cpu(0)
        """
        return self._device

    @property
    def ndim(self) -> int:
        """Number of dimensions.

        Example::

            >>> empty((2, 3, 4), "float32").ndim
            3
        """
        return self._np.ndim

    @property
    def size(self) -> int:
        """Number of elements.

        Example::

            >>> empty((2, 3), "float32").size
            6
        """
        return self._np.size

    @property
    def nbytes(self) -> int:
        """Bytes of data.

        Example::

            >>> empty((2, 3), "float32").nbytes
            24
        """
        return self._np.nbytes

    @property
    def data_ptr(self) -> int:
        """Address of the first element.

        Example::

            >>> empty((8,), "float32").data_ptr % 64
            0
        """
        return self._np.ctypes.data

    # ------------------------------------------------------------ conversion
    def numpy(self) -> np.ndarray:
        """The data as a numpy array; on the CPU this is a zero-copy view.

        Example::

            >>> a = array([1, 2, 3], dtype="int32")
            >>> a.numpy().tolist()
            [1, 2, 3]
        """
        return self._np

    asnumpy = numpy

    def __array__(self, dtype=None, copy=None):
        if copy:
            return np.array(self._np, dtype=dtype, copy=True)
        return self._np if dtype is None else self._np.astype(dtype, copy=False)

    def copyfrom(self, source) -> "NDArray":
        """Copy ``source`` (NDArray, numpy array or nested list) into this array, in place.

        The source is converted to this array's dtype; the shapes must match.

        Example::

            >>> a = empty((2,), "float32").copyfrom([1.5, 2.5])
            >>> a.numpy().tolist()
            [1.5, 2.5]
        """
        if isinstance(source, NDArray):
            source = source._np
        try:
            src = np.asarray(source, dtype=self._np.dtype)
        except (TypeError, ValueError) as exc:
            raise ArgumentError(f"copyfrom: cannot convert the source to {self._dtype}: {exc}") from exc
        if src.shape != self._np.shape:
            raise ArgumentError(
                f"copyfrom: shape mismatch: this array has shape {self._np.shape}, the source "
                f"has {src.shape}; reshape the source first"
            )
        np.copyto(self._np, src, casting="unsafe")
        return self

    def copyto(self, target) -> "NDArray":
        """Copy into ``target``: an NDArray (in place) or a Device (a new array there).

        Example::

            >>> a = array([1.0, 2.0], dtype="float32")
            >>> b = a.copyto(cpu(0))
            >>> b.numpy().tolist(), b.numpy() is a.numpy()
            ([1.0, 2.0], False)
        """
        if isinstance(target, NDArray):
            return target.copyfrom(self)
        if isinstance(target, Device):
            return array(self._np, device=target)
        raise ArgumentError(f"copyto: target must be an NDArray or a Device, got {type(target).__name__}")

    def __dlpack__(self, *args, **kwargs):
        """Export through DLPack (delegates to numpy; zero-copy).

        Example::

            >>> np.from_dlpack(array([1, 2], dtype="int64")).tolist()
            [1, 2]
        """
        return self._np.__dlpack__(*args, **kwargs)

    def __dlpack_device__(self):
        """``(device_type, device_id)`` as DLPack expects.

        Example::

            >>> empty((1,), "float32").__dlpack_device__()
            (1, 0)
        """
        return (self._device.device_type, self._device.device_id)

    # ------------------------------------------------------------ C ABI view
    def _dltensor_address(self) -> int:
        """Address of a DLTensor describing this array (kept alive by self)."""
        return self._abi_info()[1]

    def _abi_info(self) -> tuple:
        """``(shape, DLTensor address, data address, c_contiguous)``, built once per shape.

        The DLTensor is rebuilt only if the numpy array's shape was changed in place.
        """
        info = self._abi
        arr = self._np
        if info is not None and info[0] == arr.shape:
            return info
        code, bits, lanes = dtype_to_dlpack(self._dtype)
        ndim = arr.ndim
        buf = (ctypes.c_int64 * (2 * ndim + 1))()  # shape, then strides (in elements)
        for i, d in enumerate(arr.shape):
            buf[i] = d
        t = DLTensor()
        ptr = arr.ctypes.data
        t.data = ptr or None
        t.device.device_type = self._device.device_type
        t.device.device_id = self._device.device_id
        t.ndim = ndim
        t.dtype.code, t.dtype.bits, t.dtype.lanes = code, bits, lanes
        base = ctypes.addressof(buf)
        t.shape = base if ndim else None
        contiguous = bool(arr.flags.c_contiguous)
        if not contiguous:
            item = arr.itemsize
            for i, s in enumerate(arr.strides):
                buf[ndim + i] = s // item if s % item == 0 else 0
            t.strides = base + 8 * ndim
        t.byte_offset = 0
        self._shape_buf = buf
        self._dlt = t
        self._abi = info = (arr.shape, ctypes.addressof(t), ptr, contiguous)
        return info

    # ------------------------------------------------------------ misc
    def __getitem__(self, key):
        return self._np[key]

    def __setitem__(self, key, value):
        if isinstance(value, NDArray):
            value = value._np
        self._np[key] = value

    def __len__(self) -> int:
        return len(self._np)

    def __repr__(self) -> str:
        body = np.array2string(self._np, threshold=20, edgeitems=2, prefix="  ")
        return f"<ingot.NDArray shape={self.shape} dtype={self._dtype} device={self._device}>\n  {body}"


_new_object = object.__new__
_CPU0 = cpu(0)


def array(data, dtype=None, device: Device | None = None) -> NDArray:
    """Copy ``data`` (numpy array, NDArray, nested list, scalar) into a new aligned NDArray.

    Example::

        >>> a = array([[1, 2], [3, 4]], dtype="float32")
        >>> a.shape, a.dtype, a.numpy().ctypes.data % 64
        ((2, 2), 'float32', 0)
    """
    device = _require_cpu(device, "array")
    if isinstance(data, NDArray):
        data = data._np
    npd = None if dtype is None else numpy_dtype(dtype_str(dtype))
    try:
        src = np.asarray(data, dtype=npd)
    except (TypeError, ValueError) as exc:
        raise ArgumentError(f"array: cannot convert {type(data).__name__} to an array: {exc}") from exc
    if npd is None:
        dtype_str(src.dtype)  # raises a clear error for object/str/complex arrays
    out = aligned_empty(src.shape, src.dtype)
    np.copyto(out, src)
    return NDArray(out, device)


def empty(shape, dtype="float32", device: Device | None = None) -> NDArray:
    """A new uninitialized aligned NDArray.

    Example::

        >>> empty((2, 3), "float16").dtype
        'float16'
    """
    device = _require_cpu(device, "empty")
    return NDArray(aligned_empty(_normalize_shape(shape), numpy_dtype(dtype_str(dtype))), device)


def _torch_bfloat16_view(obj):
    """numpy has no DLPack bfloat16: view a torch bfloat16 tensor as int16, then as bfloat16."""
    import torch  # noqa: PLC0415 - only when given a torch tensor

    if isinstance(obj, torch.Tensor) and obj.dtype == torch.bfloat16:
        return np.from_dlpack(obj.view(torch.int16)).view(numpy_dtype("bfloat16"))
    return None


def from_dlpack(obj) -> NDArray:
    """Wrap a DLPack-exporting object (numpy, PyTorch CPU tensor, ...) without copying.

    Example::

        >>> src = np.arange(4, dtype="float32")
        >>> a = from_dlpack(src)
        >>> a.numpy()[0] = 10
        >>> float(src[0])
        10.0
    """
    if isinstance(obj, NDArray):
        return obj
    if isinstance(obj, np.ndarray):
        return NDArray(obj)
    if not hasattr(obj, "__dlpack__"):
        raise ArgumentError(
            f"from_dlpack: {type(obj).__name__} does not implement __dlpack__; pass a numpy "
            "array, a torch.Tensor or another DLPack producer"
        )
    if hasattr(obj, "__dlpack_device__"):
        dev_type, dev_id = obj.__dlpack_device__()
        if int(dev_type) not in (abi.DL_CPU, abi.DL_CUDA_HOST):
            raise IngotRuntimeError(
                f"from_dlpack: the tensor lives on device type {int(dev_type)} (id {dev_id}); "
                "the CPU runtime needs host memory, e.g. tensor.cpu()"
            )
    if type(obj).__module__.startswith("torch"):
        view = _torch_bfloat16_view(obj)
        if view is not None:
            return NDArray(view)
    try:
        arr = np.from_dlpack(obj)
    except (BufferError, TypeError, RuntimeError, ValueError) as exc:
        hint = " (call tensor.detach() first)" if "grad" in str(exc) else ""
        raise ArgumentError(f"from_dlpack: cannot import {type(obj).__name__}: {exc}{hint}") from exc
    return NDArray(arr)
