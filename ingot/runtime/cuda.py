"""CUDA runtime: device arrays and modules of generated kernels, through the CUDA driver API
(``libcuda.so.1``) with ctypes — no CUDA Python package needed (TVM's ``CUDAModule``).

Note: a `CUDAModule` holds the fatbin (SASS + PTX) that ``nvcc`` made at build time and the
launch metadata of `ingot.codegen.cuda.codegen` (parameters, workspaces, per kernel its symbol,
arguments, and grid/block dimensions as expressions of the scalar parameters and symbolic
dimensions). Calling ``mod["main"](a, b)``:

* Step 1. checks the arguments in Python as the CPU runtime does (count, tensor vs scalar,
  dtype, ndim, static dims, symbolic dims bound by their first occurrence, one device) and
  binds the symbols;
* Step 2. loads the module on the arguments' device (``cuModuleLoadData``, once per device,
  on the device's primary context, which PyTorch shares) and allocates the workspaces;
* Step 3. evaluates each kernel's grid/block dimensions, checks them against CUDA's limits and
  launches it (``cuLaunchKernel``) on the default stream;
* Step 4. synchronizes, so a failing kernel raises `KernelError` here, and frees the workspaces.

Arrays: `CUDAArray` owns ``cuMemAlloc`` memory (``array``/``empty``/``.numpy()``/``copyfrom``);
arguments may also be any object with ``__cuda_array_interface__`` (PyTorch CUDA tensors,
CuPy), used in place. Host numpy arrays are refused with the fix in the message.

All driver calls go through one `Driver` object; tests swap in a fake (`set_driver`) to check
argument handling and launch dimensions on machines without a GPU.

Name clash: ``ingot.runtime.cuda`` is also the device constructor (``ingot.runtime.cuda(0)``)
exported by the package, and importing this submodule makes the package attribute the module.
So that both spellings keep working, this module is *callable*: ``ingot.runtime.cuda(0)`` still
returns the device. Import it as ``importlib.import_module("ingot.runtime.cuda")`` or
``from ingot.runtime.cuda import array`` (``from ingot.runtime import cuda`` may give the
device function when the submodule was not imported yet).

Example:
    >>> import numpy as np, ingot
    >>> from ingot.runtime import cuda as rt_cuda
    >>> if rt_cuda.is_available():                                    # doctest: +SKIP
    ...     lib = ingot.build(func, "cuda")
    ...     a = rt_cuda.array(np.ones(1024, "float32")); b = rt_cuda.empty((1024,), "float32")
    ...     lib["main"](a, b); b.numpy()[:2]
"""
from __future__ import annotations

import ctypes
import sys
import threading
import types
from math import prod
from typing import Any, Sequence

import numpy as np

from . import abi
from .device import Device, cuda as cuda_device
from .dtype import dtype_str, numpy_dtype
from .errors import ArgumentError, FunctionNotFoundError, IngotRuntimeError, KernelError, ModuleLoadError
from .ndarray import aligned_empty

__all__ = [
    "CUDAError", "Driver", "get_driver", "set_driver", "is_available", "device_count", "compute_capability",
    "CUDAArray", "array", "empty", "CUDAModule", "CUDAFunction", "eval_launch_expr", "METADATA_FORMAT",
]

METADATA_FORMAT = "ingot-cuda-1"
_MAX_GRID = (2**31 - 1, 65535, 65535)
_MAX_BLOCK = (1024, 1024, 64)


class CUDAError(IngotRuntimeError):
    """A CUDA driver call failed (the message names the call and the driver's error)."""


# ------------------------------------------------------------------------------------------------
# The driver API
# ------------------------------------------------------------------------------------------------

_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
_CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76


class Driver:
    """The CUDA driver API functions Ingot uses, bound with ctypes from ``libcuda.so.1``.

    Methods take and return plain Python ints for handles and device pointers. Every failing
    call raises `CUDAError` naming the call and the driver's error name and text.

    Example:
        >>> d = Driver()                  # doctest: +SKIP
        >>> d.device_count()              # doctest: +SKIP
        1
    """

    def __init__(self, library: str = "libcuda.so.1") -> None:
        try:
            self._lib = ctypes.CDLL(library)
        except OSError as exc:
            raise CUDAError(
                f"cannot load the CUDA driver library {library!r} ({exc}); this machine has no NVIDIA "
                "driver: run on a machine with a GPU, or build for 'llvm' to run on the CPU"
            ) from exc
        lib = self._lib
        vp, u, i, sz = ctypes.c_void_p, ctypes.c_uint, ctypes.c_int, ctypes.c_size_t
        u64 = ctypes.c_uint64
        sigs = {
            "cuInit": [u], "cuDeviceGetCount": [ctypes.POINTER(i)], "cuDeviceGet": [ctypes.POINTER(i), i],
            "cuDeviceGetAttribute": [ctypes.POINTER(i), i, i],
            "cuDevicePrimaryCtxRetain": [ctypes.POINTER(vp), i], "cuCtxSetCurrent": [vp],
            "cuCtxSynchronize": [], "cuMemAlloc_v2": [ctypes.POINTER(u64), sz], "cuMemFree_v2": [u64],
            "cuMemcpyHtoD_v2": [u64, vp, sz], "cuMemcpyDtoH_v2": [vp, u64, sz], "cuMemcpyDtoD_v2": [u64, u64, sz],
            "cuModuleLoadData": [ctypes.POINTER(vp), ctypes.c_char_p],
            "cuModuleGetFunction": [ctypes.POINTER(vp), vp, ctypes.c_char_p],
            "cuLaunchKernel": [vp, u, u, u, u, u, u, u, vp, ctypes.POINTER(vp), ctypes.POINTER(vp)],
            "cuGetErrorName": [i, ctypes.POINTER(ctypes.c_char_p)],
            "cuGetErrorString": [i, ctypes.POINTER(ctypes.c_char_p)],
        }
        for name, argtypes in sigs.items():
            fn = getattr(lib, name)
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int
        self._contexts: dict[int, int] = {}
        self._lock = threading.Lock()
        self._check(lib.cuInit(0), "cuInit")

    def _check(self, result: int, call: str) -> None:
        if result == 0:
            return
        name, text = ctypes.c_char_p(), ctypes.c_char_p()
        self._lib.cuGetErrorName(result, ctypes.byref(name))
        self._lib.cuGetErrorString(result, ctypes.byref(text))
        raise CUDAError(f"{call} failed with CUDA error {result} "
                        f"({(name.value or b'?').decode()}: {(text.value or b'unknown').decode()})")

    def device_count(self) -> int:
        n = ctypes.c_int()
        self._check(self._lib.cuDeviceGetCount(ctypes.byref(n)), "cuDeviceGetCount")
        return n.value

    def compute_capability(self, device_id: int) -> "tuple[int, int]":
        dev, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        self._check(self._lib.cuDeviceGet(ctypes.byref(dev), device_id), "cuDeviceGet")
        self._check(self._lib.cuDeviceGetAttribute(ctypes.byref(major), _CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR,
                                                   dev), "cuDeviceGetAttribute")
        self._check(self._lib.cuDeviceGetAttribute(ctypes.byref(minor), _CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR,
                                                   dev), "cuDeviceGetAttribute")
        return major.value, minor.value

    def activate(self, device_id: int) -> None:
        """Make the primary context of ``device_id`` current on this thread."""
        with self._lock:
            ctx = self._contexts.get(device_id)
            if ctx is None:
                count = self.device_count()
                if not 0 <= device_id < count:
                    raise CUDAError(f"cuda({device_id}) does not exist: this machine has {count} CUDA device(s)")
                dev, handle = ctypes.c_int(), ctypes.c_void_p()
                self._check(self._lib.cuDeviceGet(ctypes.byref(dev), device_id), "cuDeviceGet")
                self._check(self._lib.cuDevicePrimaryCtxRetain(ctypes.byref(handle), dev), "cuDevicePrimaryCtxRetain")
                ctx = self._contexts[device_id] = handle.value
        self._check(self._lib.cuCtxSetCurrent(ctypes.c_void_p(ctx)), "cuCtxSetCurrent")

    def mem_alloc(self, nbytes: int) -> int:
        ptr = ctypes.c_uint64()
        self._check(self._lib.cuMemAlloc_v2(ctypes.byref(ptr), nbytes), f"cuMemAlloc({nbytes} bytes)")
        return ptr.value

    def mem_free(self, ptr: int) -> None:
        self._check(self._lib.cuMemFree_v2(ptr), "cuMemFree")

    def memcpy_htod(self, dst: int, src: int, nbytes: int) -> None:
        self._check(self._lib.cuMemcpyHtoD_v2(dst, ctypes.c_void_p(src), nbytes), "cuMemcpyHtoD")

    def memcpy_dtoh(self, dst: int, src: int, nbytes: int) -> None:
        self._check(self._lib.cuMemcpyDtoH_v2(ctypes.c_void_p(dst), src, nbytes), "cuMemcpyDtoH")

    def memcpy_dtod(self, dst: int, src: int, nbytes: int) -> None:
        self._check(self._lib.cuMemcpyDtoD_v2(dst, src, nbytes), "cuMemcpyDtoD")

    def module_load(self, image: bytes) -> int:
        handle = ctypes.c_void_p()
        self._check(self._lib.cuModuleLoadData(ctypes.byref(handle), image), "cuModuleLoadData")
        return handle.value

    def module_get_function(self, module: int, name: str) -> int:
        handle = ctypes.c_void_p()
        self._check(self._lib.cuModuleGetFunction(ctypes.byref(handle), ctypes.c_void_p(module), name.encode()),
                    f"cuModuleGetFunction({name!r})")
        return handle.value

    def launch(self, function: int, grid: Sequence[int], block: Sequence[int], shared_bytes: int,
               args: "Sequence[ctypes._SimpleCData]") -> None:
        params = (ctypes.c_void_p * max(len(args), 1))(*[ctypes.addressof(a) for a in args])
        self._check(self._lib.cuLaunchKernel(ctypes.c_void_p(function), *grid, *block, shared_bytes, None,
                                             params, None), "cuLaunchKernel")

    def synchronize(self) -> None:
        self._check(self._lib.cuCtxSynchronize(), "cuCtxSynchronize (a kernel failed)")


_driver: "Driver | None" = None
_driver_error: "CUDAError | None" = None
_driver_lock = threading.Lock()


def get_driver() -> Driver:
    """The process-wide `Driver` (created on first use; raises `CUDAError` without a driver).

    Example:
        >>> get_driver().device_count()        # doctest: +SKIP
        1
    """
    global _driver, _driver_error
    with _driver_lock:
        if _driver is None:
            if _driver_error is not None:
                raise _driver_error
            try:
                _driver = Driver()
            except CUDAError as exc:
                _driver_error = exc
                raise
        return _driver


def set_driver(driver: Any) -> Any:
    """Replace the process-wide driver (tests use a fake); returns the previous one.

    Example:
        >>> old = set_driver(None); _ = set_driver(old)
    """
    global _driver, _driver_error
    with _driver_lock:
        old, _driver, _driver_error = _driver, driver, None
    return old


def is_available() -> bool:
    """Whether a CUDA driver and at least one GPU are present.

    Example:
        >>> isinstance(is_available(), bool)
        True
    """
    try:
        return get_driver().device_count() > 0
    except CUDAError:
        return False


def device_count() -> int:
    """Number of CUDA devices (0 without a driver).

    Example:
        >>> device_count() >= 0
        True
    """
    try:
        return get_driver().device_count()
    except CUDAError:
        return 0


def compute_capability(device_id: int = 0) -> "tuple[int, int]":
    """``(major, minor)`` of ``cuda(device_id)``, e.g. ``(9, 0)`` for an H100.

    Example:
        >>> compute_capability(0)          # doctest: +SKIP
        (9, 0)
    """
    return get_driver().compute_capability(device_id)


# ------------------------------------------------------------------------------------------------
# Device arrays
# ------------------------------------------------------------------------------------------------


def _as_cuda_device(device: Any, what: str) -> Device:
    if device is None:
        return cuda_device(0)
    if not isinstance(device, Device) or device.device_type != abi.DL_CUDA:
        raise ArgumentError(f"{what}: device must be ingot.cuda(i), got {device!r}")
    return device


class CUDAArray:
    """An n-dimensional array in GPU memory (C-contiguous, owned: freed with the object).

    Example:
        >>> a = array(np.arange(4, dtype="float32"))      # doctest: +SKIP
        >>> a.shape, a.dtype, a.device, a.numpy()[1]      # doctest: +SKIP
        ((4,), 'float32', cuda(0), 1.0)
    """

    __slots__ = ("_ptr", "_shape", "_dtype", "_device", "_nbytes", "_driver", "__weakref__")

    def __init__(self, shape: Sequence[int], dtype: str, device: "Device | None" = None) -> None:
        self._device = _as_cuda_device(device, "CUDAArray")
        self._dtype = dtype_str(dtype)
        self._shape = tuple(int(d) for d in shape)
        if any(d < 0 for d in self._shape):
            raise ArgumentError(f"CUDAArray: negative dimension in shape {self._shape}")
        self._nbytes = prod(self._shape) * numpy_dtype(self._dtype).itemsize
        self._ptr = 0
        self._driver = get_driver()
        self._driver.activate(self._device.device_id)
        if self._nbytes:
            self._ptr = self._driver.mem_alloc(self._nbytes)

    shape = property(lambda self: self._shape, doc="Shape as a tuple of ints.")
    dtype = property(lambda self: self._dtype, doc="Element type (``'float32'`` ...).")
    device = property(lambda self: self._device, doc="The GPU holding the data.")
    nbytes = property(lambda self: self._nbytes, doc="Bytes of data.")
    data_ptr = property(lambda self: self._ptr, doc="Device address of the first element.")
    ndim = property(lambda self: len(self._shape), doc="Number of dimensions.")
    size = property(lambda self: prod(self._shape), doc="Number of elements.")

    def numpy(self) -> np.ndarray:
        """A host copy of the data (synchronous).

        Example:
            >>> array([1, 2], dtype="int32").numpy().tolist()    # doctest: +SKIP
            [1, 2]
        """
        out = aligned_empty(self._shape, numpy_dtype(self._dtype))
        if self._nbytes:
            self._driver.activate(self._device.device_id)
            self._driver.memcpy_dtoh(out.ctypes.data, self._ptr, self._nbytes)
        return out

    asnumpy = numpy

    def copyfrom(self, source: Any) -> "CUDAArray":
        """Copy ``source`` (numpy array, list, `CUDAArray`) into this array, in place.

        Example:
            >>> empty((2,), "float32").copyfrom([1.5, 2.5]).numpy().tolist()   # doctest: +SKIP
            [1.5, 2.5]
        """
        self._driver.activate(self._device.device_id)
        if isinstance(source, CUDAArray):
            if source.shape != self._shape or source.dtype != self._dtype:
                raise ArgumentError(f"copyfrom: source is {source.dtype}{list(source.shape)}, this array is "
                                    f"{self._dtype}{list(self._shape)}")
            if self._nbytes:
                self._driver.memcpy_dtod(self._ptr, source.data_ptr, self._nbytes)
            return self
        host = np.ascontiguousarray(np.asarray(source, dtype=numpy_dtype(self._dtype)))
        if host.shape != self._shape:
            raise ArgumentError(f"copyfrom: shape mismatch: this array has shape {self._shape}, the source "
                                f"has {host.shape}; reshape the source first")
        if self._nbytes:
            self._driver.memcpy_htod(self._ptr, host.ctypes.data, self._nbytes)
        return self

    def copyto(self, target: Any) -> Any:
        """Copy into a `CUDAArray` (in place) or onto a `Device` (``cpu(0)``: an ingot NDArray).

        Example:
            >>> a.copyto(ingot.cpu(0)).numpy()      # doctest: +SKIP
        """
        if isinstance(target, CUDAArray):
            return target.copyfrom(self)
        if isinstance(target, Device):
            if target.device_type == abi.DL_CUDA:
                return CUDAArray(self._shape, self._dtype, target).copyfrom(self.numpy())
            from .ndarray import NDArray

            return NDArray(self.numpy())
        raise ArgumentError(f"copyto: target must be a CUDAArray or a Device, got {type(target).__name__}")

    @property
    def __cuda_array_interface__(self) -> dict:
        """Zero-copy view for PyTorch/CuPy/Numba (``torch.as_tensor(a, device="cuda")``)."""
        return {"shape": self._shape, "typestr": numpy_dtype(self._dtype).str, "data": (self._ptr, False),
                "version": 3, "strides": None}

    def __dlpack_device__(self) -> "tuple[int, int]":
        return (abi.DL_CUDA, self._device.device_id)

    def __del__(self) -> None:
        ptr, self._ptr = getattr(self, "_ptr", 0), 0
        if ptr:
            try:
                self._driver.activate(self._device.device_id)
                self._driver.mem_free(ptr)
            except Exception:  # noqa: BLE001 - interpreter shutdown or a dead context: nothing to do
                pass

    def __repr__(self) -> str:
        return f"<ingot.runtime.cuda.CUDAArray shape={self._shape} dtype={self._dtype} device={self._device}>"


def array(data: Any, dtype: "str | None" = None, device: "Device | None" = None) -> CUDAArray:
    """Copy host ``data`` (numpy array, list, NDArray) to a new `CUDAArray` on ``device``
    (default ``ingot.cuda(0)``).

    Example:
        >>> a = array(np.ones((2, 3), "float32"), device=ingot.cuda(0))   # doctest: +SKIP
    """
    host = np.asarray(data, dtype=None if dtype is None else numpy_dtype(dtype_str(dtype)))
    return CUDAArray(host.shape, dtype_str(host.dtype), device).copyfrom(host)


def empty(shape: Any, dtype: str = "float32", device: "Device | None" = None) -> CUDAArray:
    """A new uninitialised `CUDAArray`.

    Example:
        >>> empty((4, 4), "float16").nbytes      # doctest: +SKIP
        32
    """
    shape = (int(shape),) if isinstance(shape, (int, np.integer)) else tuple(shape)
    return CUDAArray(shape, dtype, device)


# ------------------------------------------------------------------------------------------------
# Launch expressions
# ------------------------------------------------------------------------------------------------


def _trunc_div(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b >= 0) else -q


_OPS = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
    "floordiv": lambda a, b: a // b, "floormod": lambda a, b: a % b, "min": min, "max": max,
    "div": _trunc_div, "mod": lambda a, b: a - _trunc_div(a, b) * b,
}


def eval_launch_expr(expr: Any, env: "dict[str, int]") -> int:
    """Evaluate a launch expression of the metadata (int, ``{"var": n}``, ``[op, a, b]``).

    Example:
        >>> eval_launch_expr(["floordiv", ["add", {"var": "n"}, 127], 128], {"n": 1000})
        8
    """
    if isinstance(expr, bool):
        raise ValueError(f"malformed launch expression {expr!r}")
    if isinstance(expr, int):
        return expr
    if isinstance(expr, dict) and "var" in expr:
        name = expr["var"]
        if name not in env:
            raise KeyError(f"launch expression uses {name!r}, which no argument bound")
        return int(env[name])
    if isinstance(expr, (list, tuple)) and len(expr) == 3 and expr[0] in _OPS:
        a, b = eval_launch_expr(expr[1], env), eval_launch_expr(expr[2], env)
        if expr[0] in ("floordiv", "floormod", "div", "mod") and b == 0:
            raise ZeroDivisionError(f"division by zero in launch expression {expr!r} with {env}")
        return _OPS[expr[0]](a, b)
    raise ValueError(f"malformed launch expression {expr!r}")


# ------------------------------------------------------------------------------------------------
# Modules and functions
# ------------------------------------------------------------------------------------------------

_SCALAR_CTYPES = {
    "int8": ctypes.c_int8, "int16": ctypes.c_int16, "int32": ctypes.c_int32, "int64": ctypes.c_int64,
    "uint8": ctypes.c_uint8, "uint16": ctypes.c_uint16, "uint32": ctypes.c_uint32, "uint64": ctypes.c_uint64,
    "float32": ctypes.c_float, "float64": ctypes.c_double, "bfloat16": ctypes.c_float, "bool": ctypes.c_int32,
}
_INT_RANGE = {"int8": 7, "int16": 15, "int32": 31, "int64": 63}
_UINT_RANGE = {"uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64}


def _scalar_value(dtype: str, value: Any) -> "ctypes._SimpleCData":
    """The kernel argument for a scalar (half is passed as its 16 bits)."""
    if dtype == "float16":
        return ctypes.c_uint16(int(np.array(value, dtype=np.float16).view(np.uint16)))
    ctype = _SCALAR_CTYPES.get(dtype)
    if ctype is None:
        raise ArgumentError(f"scalar kernel arguments of dtype {dtype} are not supported")
    return ctype(value)


class CUDAFunction:
    """A compiled function of a `CUDAModule`: call it with device arrays (written in place).

    Example:
        >>> lib["main"](a_gpu, b_gpu)            # doctest: +SKIP
    """

    def __init__(self, module: "CUDAModule", name: str, info: dict) -> None:
        self.module = module
        self.name = name
        self.params = list(info["params"])
        self.workspaces = list(info.get("workspaces", ()))
        self.kernels = list(info["kernels"])

    def _fail(self, message: str) -> ArgumentError:
        return ArgumentError(f"{self.name}: {message}")

    # Step 1. Check and bind the arguments.
    def _bind(self, args: Sequence[Any]) -> "tuple[list[tuple[int, str]], dict[str, int], int]":
        if len(args) != len(self.params):
            raise self._fail(f"expects {len(self.params)} arguments, got {len(args)}")
        env: dict[str, int] = {}
        scalars: dict[str, Any] = {}
        for spec, arg in zip(self.params, args):
            if spec["kind"] == "scalar":
                env_value = self._scalar(spec, arg)
                scalars[spec["symbol"]] = env_value
                if isinstance(env_value, int):
                    env[spec["symbol"]] = env_value
            elif spec["kind"] != "tensor":
                raise NotImplementedError(f"{self.name}: parameter {spec['name']!r} of kind {spec['kind']!r} "
                                          "is not supported by the CUDA runtime")
        pointers: list[tuple[int, str]] = []
        device_id = None
        for spec, arg in zip(self.params, args):
            if spec["kind"] != "tensor":
                pointers.append((0, ""))
                continue
            ptr, shape, dtype, dev = self._tensor(spec, arg)
            if dev is not None:
                if device_id is not None and dev != device_id:
                    raise self._fail(f"argument {spec['name']!r} is on cuda({dev}), an earlier one on "
                                     f"cuda({device_id}); put all arguments on one GPU")
                device_id = dev
            for d, (want, got) in enumerate(zip(spec["shape"], shape)):
                if isinstance(want, int) and want != got:
                    raise self._fail(f"argument {spec['name']!r} dimension {d} expects {want}, got {got}")
                if isinstance(want, str):
                    if want in env and env[want] != got:
                        raise self._fail(f"argument {spec['name']!r} dimension {d} expects {want} = {env[want]} "
                                         f"(bound by an earlier argument), got {got}")
                    env.setdefault(want, got)
            pointers.append((ptr, dtype))
        env.update({k: v for k, v in scalars.items() if k not in env})
        return pointers, env, 0 if device_id is None else device_id

    def _scalar(self, spec: dict, arg: Any) -> Any:
        dtype = spec["dtype"]
        if isinstance(arg, np.generic):
            arg = arg.item()
        if dtype.startswith(("float", "bfloat")):
            if not isinstance(arg, (int, float)) or isinstance(arg, bool):
                raise self._fail(f"argument {spec['name']!r} expects a float scalar, got {type(arg).__name__}")
            return float(arg)
        if not isinstance(arg, int):
            raise self._fail(f"argument {spec['name']!r} expects an int scalar, got {type(arg).__name__}")
        if dtype in _INT_RANGE and not -(2 ** _INT_RANGE[dtype]) <= arg < 2 ** _INT_RANGE[dtype]:
            raise self._fail(f"argument {spec['name']!r} value {arg} does not fit in {dtype}")
        if dtype in _UINT_RANGE and not 0 <= arg < 2 ** _UINT_RANGE[dtype]:
            raise self._fail(f"argument {spec['name']!r} value {arg} does not fit in {dtype}")
        return int(arg)

    def _tensor(self, spec: dict, arg: Any) -> "tuple[int, tuple, str, int | None]":
        name = spec["name"]
        if isinstance(arg, CUDAArray):
            ptr, shape, dtype, dev = arg.data_ptr, arg.shape, arg.dtype, arg.device.device_id
        elif hasattr(arg, "__cuda_array_interface__"):
            cai = arg.__cuda_array_interface__
            shape = tuple(int(d) for d in cai["shape"])
            dtype = dtype_str(np.dtype(cai["typestr"]))
            itemsize = np.dtype(cai["typestr"]).itemsize
            strides = cai.get("strides")
            if strides is not None:
                expect, acc = [], itemsize
                for d in reversed(shape):
                    expect.append(acc)
                    acc *= d
                if any(s != e and d != 1 for s, e, d in zip(strides, reversed(expect), shape)):
                    raise self._fail(f"argument {name!r} must be a contiguous (row-major) tensor; call .contiguous()")
            ptr = int(cai["data"][0])
            index = getattr(getattr(arg, "device", None), "index", None)
            dev = int(index) if isinstance(index, int) else None
        elif isinstance(arg, np.ndarray) or hasattr(arg, "numpy"):
            raise self._fail(f"argument {name!r} is in host memory ({type(arg).__name__}); copy it to the GPU "
                             "first: ingot.runtime.cuda.array(x, device=ingot.cuda(0))")
        else:
            raise self._fail(f"argument {name!r} expects a tensor on the GPU, got {type(arg).__name__}")
        if dtype != spec["dtype"]:
            raise self._fail(f"argument {name!r} expects dtype {spec['dtype']}, got {dtype}")
        if len(shape) != len(spec["shape"]):
            raise self._fail(f"argument {name!r} expects ndim {len(spec['shape'])}, got {len(shape)}")
        return ptr, shape, dtype, dev

    def __call__(self, *args: Any) -> None:
        pointers, env, device_id = self._bind(args)
        driver = get_driver()
        driver.activate(device_id)
        # Step 2. Module on this device; workspaces.
        functions = self.module._load(device_id)
        workspaces: list[int] = []
        try:
            for ws in self.workspaces:
                nbytes = eval_launch_expr(ws["nbytes"], env)
                workspaces.append(driver.mem_alloc(nbytes) if nbytes > 0 else 0)
            # Step 3. Launch each kernel.
            for kernel in self.kernels:
                grid = [eval_launch_expr(e, env) for e in kernel["grid"]]
                block = [eval_launch_expr(e, env) for e in kernel["block"]]
                if min(grid) <= 0 or min(block) <= 0:
                    continue  # an empty iteration space (a zero-sized dimension): nothing to run
                for axis, (g, lim) in enumerate(zip(grid, _MAX_GRID)):
                    if g > lim:
                        raise self._fail(f"kernel {kernel['symbol']} needs gridDim.{'xyz'[axis]} = {g}, above CUDA's "
                                         f"limit {lim}; split its blockIdx loop further")
                if prod(block) > 1024 or any(b > lim for b, lim in zip(block, _MAX_BLOCK)):
                    raise self._fail(f"kernel {kernel['symbol']} needs a block of {block} threads, above CUDA's "
                                     "limits (1024 per block)")
                values = []
                for a in kernel["args"]:
                    if a["kind"] == "tensor":
                        values.append(ctypes.c_uint64(pointers[a["param"]][0]))
                    elif a["kind"] == "workspace":
                        values.append(ctypes.c_uint64(workspaces[a["index"]]))
                    else:
                        values.append(_scalar_value(a["dtype"], env[a["name"]]))
                driver.launch(functions[kernel["symbol"]], grid, block, 0, values)
            # Step 4. Wait, so that a failing kernel is reported by this call.
            try:
                driver.synchronize()
            except CUDAError as exc:
                raise KernelError(f"{self.name}: {exc}") from exc
        finally:
            for ptr in workspaces:
                if ptr:
                    driver.mem_free(ptr)


class CUDAModule:
    """Kernels compiled for the GPU plus their launch metadata; ``mod["name"]`` is a `CUDAFunction`.

    ``image`` is a fatbin/cubin/PTX (what ``cuModuleLoadData`` accepts), ``metadata`` the dict of
    `ingot.codegen.cuda.generate_cuda`, ``source`` the CUDA text (``get_source()``).

    Example:
        >>> lib = ingot.build(func, "cuda -arch=sm_90")      # doctest: +SKIP
        >>> print(lib.get_source()[:60])                      # doctest: +SKIP
    """

    def __init__(self, image: bytes, metadata: dict, source: str = "") -> None:
        if not isinstance(metadata, dict) or metadata.get("format") != METADATA_FORMAT:
            raise ModuleLoadError(f"CUDA module metadata must have format {METADATA_FORMAT!r}, got "
                                  f"{metadata.get('format') if isinstance(metadata, dict) else type(metadata).__name__!r}")
        self.image = bytes(image)
        self.metadata = metadata
        self.source = source
        self.type_key = "cuda"
        self._loaded: dict[int, dict[str, int]] = {}
        self._lock = threading.Lock()

    def get_source(self, fmt: str = "cu") -> str:
        """The CUDA C++ source of the kernels.

        Example:
            >>> "__global__" in lib.get_source()      # doctest: +SKIP
            True
        """
        return self.source

    @property
    def function_names(self) -> "list[str]":
        """Names of the callable functions."""
        return list(self.metadata["functions"])

    def __contains__(self, name: str) -> bool:
        return name in self.metadata["functions"]

    def get_function(self, name: str) -> CUDAFunction:
        """The function ``name`` (`FunctionNotFoundError` lists the available ones).

        Example:
            >>> f = lib.get_function("main")      # doctest: +SKIP
        """
        info = self.metadata["functions"].get(name)
        if info is None:
            raise FunctionNotFoundError(f"no function {name!r} in this CUDA module; available: "
                                        f"{', '.join(self.function_names) or '(none)'}")
        return CUDAFunction(self, name, info)

    __getitem__ = get_function

    def _load(self, device_id: int) -> "dict[str, int]":
        with self._lock:
            functions = self._loaded.get(device_id)
            if functions is None:
                driver = get_driver()
                driver.activate(device_id)
                handle = driver.module_load(self.image)
                functions = {}
                for info in self.metadata["functions"].values():
                    for kernel in info["kernels"]:
                        functions[kernel["symbol"]] = driver.module_get_function(handle, kernel["symbol"])
                self._loaded[device_id] = functions
        return functions

    def __repr__(self) -> str:
        return f"<ingot.runtime.cuda.CUDAModule functions={self.function_names}>"


class _CallableModule(types.ModuleType):
    """This module's class: calling it makes a CUDA device, like the function it shadows."""

    def __call__(self, device_id: int = 0) -> Device:
        return cuda_device(device_id)


sys.modules[__name__].__class__ = _CallableModule
