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
from .function import Function, ParamSpec, StaticCaller
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


def Executor(executable, device=None):  # noqa: N802 - TVM's spelling (relax.VirtualMachine)
    """An executor for a compiled model (from ``ingot.compile``/``ingot.graph.build`` or
    `load_module` of an exported model): ``Executor(ex, ingot.cpu())["main"](data)``.

    The graph layer registers the executor (the runtime does not import it); loading or building a
    model imports the graph layer, so the registration is there whenever an executable exists.

    Example:
        >>> vm = Executor(load_module("/tmp/model.so"), cpu())  # doctest: +SKIP
        >>> out = vm["main"](data)  # doctest: +SKIP
    """
    factory = get_global_func("ingot.graph.Executor", allow_missing=True)
    if factory is None:
        raise IngotRuntimeError(
            "no executor is registered: build or load a model first (ingot.compile, ingot.graph.build, "
            "or ingot.runtime.load_module of an exported model)"
        )
    return factory(executable, device)


__all__ += ["Executor", "StaticCaller"]
