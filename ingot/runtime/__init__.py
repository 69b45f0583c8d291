"""Ingot runtime: arrays, devices, compiled modules, timing and the packed-function registry.

The counterpart of ``tvm.runtime``. It knows nothing of the IR: it loads shared libraries
that follow the C ABI of :mod:`ingot.codegen.prelude` and calls them with arrays.

Example::

    >>> import numpy as np
    >>> from ingot import runtime
    >>> a = runtime.array(np.ones((2, 2), "float32"))
    >>> a.device, a.dtype
    (cpu(0), 'float32')
"""

from . import abi, ndarray
from .device import Device, cpu, cuda, device
from .dtype import (
    SUPPORTED_DTYPES,
    DTypeError,
    dlpack_to_dtype,
    dtype_str,
    dtype_to_dlpack,
    numpy_dtype,
)
from .errors import (
    ArgumentError,
    FunctionNotFoundError,
    IngotRuntimeError,
    KernelError,
    ModuleLoadError,
)
from .function import Function, ParamSpec
from .metadata import validate_metadata
from .module import Module, ProfileResult, load_module
from .ndarray import NDArray, array, empty, from_dlpack
from .registry import (
    PackedFunc,
    get_global_func,
    list_global_func_names,
    register_func,
    remove_global_func,
)

__all__ = [
    "abi", "ndarray",
    "Device", "cpu", "cuda", "device",
    "SUPPORTED_DTYPES", "DTypeError", "dlpack_to_dtype", "dtype_str", "dtype_to_dlpack",
    "numpy_dtype",
    "ArgumentError", "FunctionNotFoundError", "IngotRuntimeError", "KernelError",
    "ModuleLoadError",
    "Function", "ParamSpec", "Module", "ProfileResult", "load_module", "validate_metadata",
    "NDArray", "array", "empty", "from_dlpack",
    "PackedFunc", "get_global_func", "list_global_func_names", "register_func",
    "remove_global_func",
]
