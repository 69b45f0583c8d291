"""Function: a callable compiled entry point of a Module.

Note (the call path): a call checks its arguments in Python against the parameter list from
the module metadata (count, tensor vs scalar, dtype, ndim, static dims, contiguity,
alignment) so the error names the parameter and says what was expected; then it fills a
preallocated ``IngotValue[]`` (per function; a small pool makes concurrent calls from
several threads safe) and calls the C entry, which checks again (symbolic dims included) and
returns an error code and message instead of crashing. Tensors are passed by pointer and
written in place (destination-passing style). An ``NDArray`` carries a ready ``DLTensor``; a
numpy array gets one of the function's preallocated ``DLTensor`` structs per call; any other
DLPack producer (e.g. a torch CPU tensor) is wrapped without copying. Arrays are never
copied silently: a non-contiguous or misaligned array is an error.

Example::

    >>> f = mod["main"]                                 # doctest: +SKIP
    >>> f(a, b, c)          # c written in place        # doctest: +SKIP
"""

from __future__ import annotations

import ctypes
import threading
from collections import namedtuple
from typing import Any, Sequence

import numpy as np

from . import abi
from ._ffi import DLTensor
from .dtype import dtype_to_dlpack, numpy_dtype
from .errors import ArgumentError, IngotRuntimeError, KernelError
from .ndarray import NDArray, aligned_empty, from_dlpack

__all__ = ["Function", "ParamSpec", "StaticCaller"]

_K_TENSOR, _K_INT, _K_FLOAT, _K_HANDLE = 0, 1, 2, 3
_INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1), "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1),
    "uint8": (0, 2**8 - 1), "uint16": (0, 2**16 - 1), "uint32": (0, 2**32 - 1),
    "uint64": (0, 2**63 - 1),  # passed through int64_t
    "bool": (0, 1),
}
_c_char_from_buffer = ctypes.c_char.from_buffer
_addressof = ctypes.addressof

ParamSpec = namedtuple("ParamSpec", ["name", "kind", "dtype", "shape", "output"])
ParamSpec.__doc__ = """One parameter of a compiled function, from the module metadata.

``kind`` is ``"tensor"``, ``"scalar"`` or ``"handle"``; ``shape`` (tensors) holds ints
(static), strs (symbolic) or ``None`` (any).

Example::

    >>> ParamSpec("A", "tensor", "float32", (128, "n"), False).shape
    (128, 'n')
"""


def _describe(value) -> str:
    """A short description of a wrong argument for error messages."""
    if isinstance(value, NDArray):
        return f"NDArray(shape={value.shape}, dtype={value.dtype})"
    if isinstance(value, np.ndarray):
        return f"numpy.ndarray(shape={value.shape}, dtype={value.dtype})"
    if value is None:
        return "None"
    if isinstance(value, (bool, int, float, np.generic)):
        return f"{type(value).__name__} {value!r}"
    return type(value).__name__


class Function:
    """A compiled function of a :class:`~ingot.runtime.module.Module`; call it with arrays.

    Arguments: ``NDArray``, numpy arrays or DLPack tensors for tensor parameters (not copied;
    outputs are written in place), Python or numpy ints/floats for scalar parameters.

    Example::

        >>> f = mod["add"]                                       # doctest: +SKIP
        >>> f(ingot.runtime.array(a), b_numpy, out_numpy)        # doctest: +SKIP
        >>> f.param_names                                        # doctest: +SKIP
        ['A', 'B', 'C']
    """

    def __init__(self, module, name: str, symbol: str, cfunc, params: list[dict] | None):
        self.module = module
        self.name = name
        self.symbol = symbol
        self._cfunc = cfunc
        self._cfunc.restype = ctypes.c_int32
        self._cfunc.argtypes = None  # ctypes arrays pass as pointers, ints as int
        self._pool: list = []
        if params is None:
            self.params = None
            self._nparams = -1
            self._specs = ()
        else:
            self.params = [self._param_spec(p) for p in params]
            self._nparams = len(self.params)
            self._specs = tuple(self._compile_spec(i, p) for i, p in enumerate(self.params))
        self._codes_template = [self._type_code(s) for s in self._specs]

    # ------------------------------------------------------------ metadata
    @staticmethod
    def _param_spec(p: dict) -> ParamSpec:
        shape = tuple(p["shape"]) if p.get("kind") == "tensor" else None
        return ParamSpec(p["name"], p["kind"], p.get("dtype"), shape, bool(p.get("output", False)))

    def _compile_spec(self, index: int, p: ParamSpec) -> tuple:
        """A flat tuple the hot path unpacks (no attribute lookups per call)."""
        if p.kind == "tensor":
            npd = numpy_dtype(p.dtype)
            static = tuple((d, e) for d, e in enumerate(p.shape) if isinstance(e, int))
            full = p.shape if len(static) == len(p.shape) else None
            return (_K_TENSOR, index, p.name, p.dtype, npd, len(p.shape), static,
                    max(1, npd.itemsize), p.output, full)
        if p.kind == "scalar":
            code, _, _ = dtype_to_dlpack(p.dtype)
            if code in (0, 1, 6):  # int, uint, bool
                lo, hi = _INT_RANGES.get(p.dtype, (-(2**63), 2**63 - 1))
                return (_K_INT, index, p.name, p.dtype, lo, hi)
            return (_K_FLOAT, index, p.name, p.dtype)
        return (_K_HANDLE, index, p.name)

    @staticmethod
    def _type_code(spec: tuple) -> int:
        return {_K_TENSOR: abi.ARG_TENSOR, _K_INT: abi.ARG_INT, _K_FLOAT: abi.ARG_FLOAT,
                _K_HANDLE: abi.ARG_NULL}[spec[0]]

    @property
    def param_names(self) -> list[str] | None:
        """Parameter names in call order (``None`` for a function without metadata).

        Example::

            >>> mod["main"].param_names          # doctest: +SKIP
            ['A', 'B', 'n']
        """
        return None if self.params is None else [p.name for p in self.params]

    # ------------------------------------------------------------ buffers
    def _new_buffers(self, n: int):
        vals = (ctypes.c_int64 * max(n, 1))()
        dbls = (ctypes.c_double * max(n, 1)).from_buffer(vals)
        codes = (ctypes.c_int32 * max(n, 1))(*self._codes_template)
        err = ctypes.create_string_buffer(abi.ERR_BUFFER_SIZE)
        tensors = [None] * max(n, 1)
        for spec in self._specs:
            if spec[0] == _K_TENSOR:
                ndim = spec[5]
                shape = (ctypes.c_int64 * max(ndim, 1))()  # owned by this slot
                t = DLTensor()
                t.device.device_type, t.device.device_id = abi.DL_CPU, 0
                t.ndim = ndim
                t.dtype.code, t.dtype.bits, t.dtype.lanes = dtype_to_dlpack(spec[3])
                t.shape = _addressof(shape) if ndim else None
                tensors[spec[1]] = (t, _addressof(t), shape)
        # (values, same memory as doubles, type codes, error buffer, per-param
        #  (DLTensor, its address, its shape array), objects kept alive during the call,
        #  last shape written per DLTensor)
        return (vals, dbls, codes, err, tensors, [], [None] * max(n, 1))

    # ------------------------------------------------------------ marshaling
    def _fail(self, param: str, message: str):
        raise ArgumentError(f"{self.name}: argument '{param}' {message}")

    def _marshal(self, args: tuple, bufs) -> None:
        """Check ``args`` and store them into ``bufs``; raise ArgumentError on a mismatch.

        This is the hot path of every call: keep it flat (no helper calls on success).
        """
        vals, dbls, _codes, _err, tensors, keep, last_shapes = bufs
        if len(args) != self._nparams:
            self._arg_count_error(args)
        for spec in self._specs:
            kind = spec[0]
            i = spec[1]
            a = args[i]
            if kind == _K_TENSOR:
                _, _, name, dtype, npd, ndim, static, align, output, full = spec
                tp = type(a)
                if tp is NDArray:
                    info = a._abi
                    arr = a._np
                    if info is None or info[0] != arr.shape:
                        info = a._abi_info()
                    shape = info[0]
                    if a._dtype != dtype:
                        self._fail(name, f"expects dtype {dtype}, got {a._dtype}")
                    if full is None or shape != full:
                        self._check_shape(name, shape, ndim, static)
                    if not info[3]:
                        self._fail(name, "must be a contiguous (row-major) tensor; copy it with "
                                         "ingot.runtime.array(x)")
                    if info[2] % align:
                        self._misaligned(name, info[2], align, dtype)
                    if output and not arr.flags.writeable:
                        self._fail(name, "is an output but its array is read-only")
                    vals[i] = info[1]
                    continue
                if tp is not np.ndarray and not isinstance(a, np.ndarray):
                    vals[i] = self._marshal_foreign_tensor(a, spec, keep)
                    continue
                if a.dtype != npd:
                    self._fail(name, f"expects dtype {dtype}, got {_np_dtype_name(a.dtype)}")
                shape = a.shape
                if full is None or shape != full:
                    self._check_shape(name, shape, ndim, static)
                if not a.flags.c_contiguous:
                    self._fail(name, "must be a contiguous (row-major) tensor; pass "
                                     "np.ascontiguousarray(x) (copies) instead")
                try:
                    ptr = _addressof(_c_char_from_buffer(a))
                except (TypeError, ValueError, BufferError):
                    ptr = a.ctypes.data  # read-only or empty arrays
                    if output and not a.flags.writeable:
                        self._fail(name, "is an output but the array is read-only")
                if ptr % align:
                    self._misaligned(name, ptr, align, dtype)
                t, taddr, shape_buf = tensors[i]
                t.data = ptr
                if last_shapes[i] != shape:
                    shape_buf[:ndim] = shape
                    last_shapes[i] = shape
                vals[i] = taddr
            elif kind == _K_INT:
                if type(a) is not int:
                    a = self._coerce_int(a, spec)
                if not spec[4] <= a <= spec[5]:
                    self._fail(spec[2], f"value {a} does not fit in {spec[3]}")
                vals[i] = a
            elif kind == _K_FLOAT:
                if type(a) is not float:
                    a = self._coerce_float(a, spec)
                dbls[i] = a
            else:
                self._marshal_handle(a, spec, bufs)

    # Slow paths of _marshal (errors and conversions), kept out of the loop body.
    def _arg_count_error(self, args: tuple):
        n = self._nparams
        raise ArgumentError(
            f"{self.name}: expects {n} argument{'s' if n != 1 else ''}, got {len(args)}"
            f" (parameters: {', '.join(self.param_names)})"
        )

    def _check_shape(self, name: str, shape: tuple, ndim: int, static: tuple) -> None:
        if len(shape) != ndim:
            self._fail(name, f"expects ndim {ndim}, got {len(shape)} (shape {shape})")
        for d, e in static:
            if shape[d] != e:
                self._fail(name, f"dimension {d} expects {e}, got {shape[d]} (shape {shape})")

    def _misaligned(self, name: str, ptr: int, align: int, dtype: str):
        self._fail(name, f"data pointer 0x{ptr:x} is not aligned to {align} bytes (the size of "
                         f"{dtype}); copy it with ingot.runtime.array(x)")

    def _marshal_foreign_tensor(self, a, spec: tuple, keep: list) -> int:
        """A DLPack producer (torch tensor, ...): wrap without copying, then check as NDArray."""
        if not hasattr(a, "__dlpack__") or isinstance(a, type):
            self._fail(spec[2], f"expects a tensor (NDArray, numpy array or DLPack tensor) of "
                                f"dtype {spec[3]}, got {_describe(a)}")
        nd = from_dlpack(a)
        keep.append(nd)
        return self._check_ndarray(nd, spec)

    def _check_ndarray(self, nd: NDArray, spec: tuple) -> int:
        """The NDArray branch of _marshal as a function; returns the DLTensor address."""
        _, _, name, dtype, _npd, ndim, static, align, output, _full = spec
        if nd._dtype != dtype:
            self._fail(name, f"expects dtype {dtype}, got {nd._dtype}")
        _, addr, ptr, contiguous = info = nd._abi_info()
        self._check_shape(name, info[0], ndim, static)
        if not contiguous:
            self._fail(name, "must be a contiguous (row-major) tensor; copy it with "
                             "ingot.runtime.array(x)")
        if ptr % align:
            self._misaligned(name, ptr, align, dtype)
        if output and not nd._np.flags.writeable:
            self._fail(name, "is an output but its array is read-only")
        return addr

    def _coerce_int(self, a, spec: tuple) -> int:
        if isinstance(a, (int, np.integer)) or (
            isinstance(a, np.ndarray) and a.ndim == 0 and a.dtype.kind in "iub"
        ):
            return int(a)
        self._fail(spec[2], f"expects an int scalar ({spec[3]}), got {_describe(a)}")

    def _coerce_float(self, a, spec: tuple) -> float:
        if isinstance(a, (int, float, np.integer, np.floating)) and not isinstance(a, bool):
            return float(a)
        if isinstance(a, np.ndarray) and a.ndim == 0 and a.dtype.kind in "iuf":
            return float(a)
        self._fail(spec[2], f"expects a float scalar ({spec[3]}), got {_describe(a)}")

    def _marshal_handle(self, a, spec, bufs) -> None:
        vals, codes = bufs[0], bufs[2]
        i = spec[1]
        if a is None:
            codes[i], vals[i] = abi.ARG_NULL, 0
        elif isinstance(a, int) and not isinstance(a, bool):
            codes[i], vals[i] = abi.ARG_HANDLE, a
        elif isinstance(a, (ctypes._Pointer, ctypes.c_void_p, ctypes.Array, ctypes.Structure)):
            addr = ctypes.cast(a, ctypes.c_void_p).value if not isinstance(
                a, (ctypes.Array, ctypes.Structure)) else ctypes.addressof(a)
            codes[i], vals[i] = abi.ARG_HANDLE, addr or 0
        else:
            self._fail(spec[2], f"expects an opaque handle (int address, ctypes pointer or None), "
                                f"got {_describe(a)}")

    def _marshal_unchecked(self, args: tuple, bufs) -> None:
        """Without metadata: infer type codes from the Python values."""
        vals, dbls, codes, _err, _tensors, keep, _shapes = bufs
        for i, a in enumerate(args):
            if isinstance(a, NDArray) or hasattr(a, "__dlpack__"):
                nd = a if isinstance(a, NDArray) else from_dlpack(a)
                keep.append(nd)
                codes[i], vals[i] = abi.ARG_TENSOR, nd._dltensor_address()
            elif isinstance(a, (bool, int, np.integer)):
                codes[i], vals[i] = abi.ARG_INT, int(a)
            elif isinstance(a, (float, np.floating)):
                codes[i] = abi.ARG_FLOAT
                dbls[i] = float(a)
            else:
                self._marshal_handle(a, (_K_HANDLE, i, f"#{i}"), bufs)

    def _acquire(self, n: int):
        try:
            bufs = self._pool.pop()
        except IndexError:
            bufs = self._new_buffers(max(n, self._nparams))
        if self._nparams < 0 and len(bufs[0]) < n:
            bufs = self._new_buffers(n)
        return bufs

    def _release(self, bufs) -> None:
        if bufs[5]:
            bufs[5].clear()
        self._pool.append(bufs)

    def _raise_from_code(self, rc: int, err) -> None:
        msg = err.value.decode("utf-8", "replace") or f"{self.name}: failed with error code {rc}"
        if rc == abi.ERR_ARGUMENT:
            raise ArgumentError(msg)
        raise KernelError(msg)

    # ------------------------------------------------------------ calling
    def __call__(self, *args) -> None:
        try:
            bufs = self._pool.pop()
        except IndexError:
            bufs = self._acquire(len(args))
        try:
            if self._nparams >= 0:
                self._marshal(args, bufs)
            else:
                if len(bufs[0]) < len(args):
                    bufs = self._new_buffers(len(args))
                self._marshal_unchecked(args, bufs)
            rc = self._cfunc(bufs[0], bufs[2], len(args), bufs[3], abi.ERR_BUFFER_SIZE)
            if rc:
                self._raise_from_code(rc, bufs[3])
        finally:
            self._release(bufs)

    def static_caller(self, *bound) -> "StaticCaller | None":
        """A :class:`StaticCaller`: this function with its leading handle/scalar arguments bound.

        Worth it when the same function runs many times with tensors of one fixed signature (an
        executor's AOT entry). Returns ``None`` when the function has no metadata or a parameter
        after ``bound`` is not a tensor with a fully static shape (call the Function then).

        Example::

            >>> call = mod["graph.main"].static_caller(weights_ptr, workspace_ptr)  # doctest: +SKIP
            >>> (y,) = call.run(x)              # y allocated, 64-byte aligned   # doctest: +SKIP
        """
        return StaticCaller.create(self, bound)

    def time(self, args: tuple, number: int, repeat: int, min_repeat_ms: int, *,
             cache_flush: "bool | Sequence[int]" = False) -> list[float]:
        """Seconds per call for each repeat, measured in C (``ingot_time_function``; with
        ``cache_flush`` ``ingot_time_function_flushed``: ``True`` flushes every argument but the
        first from the caches before each call, a sequence of indices flushes those, see
        `Module.time_evaluator`).

        Example::

            >>> mod["main"].time((a, b, c), number=10, repeat=3, min_repeat_ms=0)  # doctest: +SKIP
            [1.2e-06, 1.1e-06, 1.1e-06]
            >>> mod["main"].time((a, b, c), 1, 3, 0, cache_flush=[1])              # doctest: +SKIP
            [3.4e-06, 3.1e-06, 3.2e-06]
        """
        cache_flush = normalize_cache_flush(cache_flush, self)
        timer = self.module._time_function_ptr(cache_flush is not False)
        bufs = self._acquire(len(args))
        try:
            if self._nparams >= 0:
                self._marshal(args, bufs)
            else:
                self._marshal_unchecked(args, bufs)
            out = (ctypes.c_double * repeat)()
            fn_addr = ctypes.cast(self._cfunc, ctypes.c_void_p).value
            head = (ctypes.c_void_p(fn_addr), bufs[0], bufs[2], ctypes.c_int32(len(args)))
            if cache_flush is not False:
                mask = (ctypes.c_int8 * max(len(args), 1))()
                for i in flush_indices(cache_flush, len(args), self.name):
                    # True is TVM's "every tensor argument but the first": it skips scalars, where
                    # an explicit index must name a tensor (the C timer refuses it otherwise)
                    mask[i] = cache_flush is not True or bufs[2][i] == abi.ARG_TENSOR
                head += (mask,)
            rc = timer(*head, ctypes.c_int32(number), ctypes.c_int32(repeat),
                       ctypes.c_int32(min_repeat_ms), out, bufs[3],
                       ctypes.c_int32(abi.ERR_BUFFER_SIZE))
            if rc:
                self._raise_from_code(rc, bufs[3])
            return list(out)
        finally:
            self._release(bufs)

    def __repr__(self) -> str:
        if self.params is None:
            return f"<ingot.Function {self.name} (symbol {self.symbol}, no signature)>"
        sig = ", ".join(
            f"{p.name}: {p.dtype}{list(p.shape)}" if p.kind == "tensor" else f"{p.name}: {p.dtype}"
            for p in self.params
        )
        return f"<ingot.Function {self.name}({sig})>"


def _np_dtype_name(npd: np.dtype) -> str:
    try:
        from .dtype import dtype_str

        return dtype_str(npd)
    except (TypeError, ValueError):
        return str(npd)


def check_int(value, what: str) -> int:
    """Validate a positive integer option (used by time_evaluator).

    Example::

        >>> check_int(3, "number")
        3
    """
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 0:
        raise IngotRuntimeError(f"{what} must be a non-negative int, got {value!r}")
    return int(value)


_np_empty = np.empty
_np_ndarray = np.ndarray
_UINT8 = np.dtype("uint8")
_OUT_ALIGN = 64  # like ingot.runtime.ndarray.ALIGNMENT (the outputs ``run`` allocates)
_SLAB_BYTES = 16384  # outputs of up to _SLAB_MAX_STRIDE bytes per call share slabs of this size
_SLAB_MAX_STRIDE = 1024


class StaticCaller:
    """A Function with leading handle/scalar arguments bound, for tensors of one static signature.

    Note (why): a small model's time is mostly the per-call work in Python (DESIGN.md "Executor
    overhead"). This caller owns one argument block with a ``DLTensor`` per tensor parameter
    whose shape and dtype are written once; a call only checks that each argument has exactly
    the cached signature (numpy array or NDArray, same dtype object, same shape, C-contiguous,
    aligned) and patches data pointers. Any other argument (a wrong dtype or shape, a read-only
    or strided array, a torch tensor, ...) takes the Function's full path, which converts it or
    raises the usual error naming the parameter; the C entry checks everything again. When the
    block is in use by another thread the call takes the full path too, so the caller is
    thread-safe. Make one with :meth:`Function.static_caller`.

    Example::

        >>> call = mod["graph.main"].static_caller(weights_ptr, 0)   # doctest: +SKIP
        >>> call(x, y)                  # like mod["graph.main"](weights_ptr, 0, x, y)  # doctest: +SKIP
        >>> (y,) = call.run(x)          # outputs allocated per call (never reused)   # doctest: +SKIP
    """

    __slots__ = ("function", "bound", "num_inputs", "output_specs", "call", "run")

    @classmethod
    def create(cls, function: Function, bound: tuple) -> "StaticCaller | None":
        """The caller, or ``None`` when the signature is not static (see `Function.static_caller`).

        Example::

            >>> StaticCaller.create(mod["graph.main"], (w, ws))   # doctest: +SKIP
        """
        specs = function._specs
        if function._nparams < 0 or len(bound) > len(specs):
            return None
        rest = specs[len(bound):]
        if any(s[0] != _K_TENSOR or s[9] is None for s in rest):
            return None
        if any(s[0] == _K_TENSOR for s in specs[:len(bound)]):
            return None
        return cls(function, tuple(bound))

    def __init__(self, function: Function, bound: tuple):
        self.function = function
        self.bound = bound
        nb = len(bound)
        specs = function._specs
        rest = specs[nb:]
        outs = [k for k, s in enumerate(rest) if s[8]]
        # ``run`` allocates the trailing output parameters (the AOT layout: inputs, then outputs).
        n_in = len(rest) - len(outs) if outs == list(range(len(rest) - len(outs), len(rest))) else None
        self.num_inputs = n_in
        self.output_specs = [] if n_in is None else [(s[9], s[4]) for s in rest[n_in:]]

        # Step 1: one argument block; the bound arguments are stored into it once, through the
        # Function's own checks (so a wrong bound value raises the usual error now).
        nargs = len(specs)
        bufs = function._new_buffers(nargs)
        vals, dbls, codes, err, tensors = bufs[:5]
        for spec, a in zip(specs[:nb], bound):
            if spec[0] == _K_HANDLE:
                function._marshal_handle(a, spec, bufs)
            elif spec[0] == _K_INT:
                a = a if type(a) is int else function._coerce_int(a, spec)
                if not spec[4] <= a <= spec[5]:
                    function._fail(spec[2], f"value {a} does not fit in {spec[3]}")
                vals[spec[1]] = a
            else:
                dbls[spec[1]] = a if type(a) is float else function._coerce_float(a, spec)
        for spec in rest:  # static shapes: written once, never patched
            t, taddr, shape_buf = tensors[spec[1]]
            shape_buf[:spec[5]] = spec[9]
            vals[spec[1]] = taddr
        # (index, numpy dtype, dtype name, shape, alignment, DLTensor, its address) per tensor
        flat = tuple((s[1], s[4], s[3], s[9], s[7], tensors[s[1]][0], tensors[s[1]][1]) for s in rest)
        lock = threading.Lock()
        acquire, release = lock.acquire, lock.release
        cfunc, fail_code = function._cfunc, function._raise_from_code
        full_call = function.__call__
        ndarray_t, errlen = np.ndarray, abi.ERR_BUFFER_SIZE

        def patch(tensors: tuple) -> bool:
            """Patch the pointers of ``tensors`` (the first parameters after the bound ones);
            False when one is not of the cached signature."""
            for a, (i, npd, dtype, shape, align, dlt, taddr) in zip(tensors, flat):
                if type(a) is ndarray_t:
                    if a.dtype is not npd or a.shape != shape:
                        return False
                    try:  # succeeds only for writable C-contiguous buffers
                        ptr = _addressof(_c_char_from_buffer(a))
                    except (TypeError, ValueError, BufferError):
                        return False
                    if ptr % align:
                        return False
                    dlt.data = ptr
                    vals[i] = taddr
                elif type(a) is NDArray:
                    info = a._abi
                    if info is None or info[0] != a._np.shape:
                        info = a._abi_info()
                    if a._dtype != dtype or info[0] != shape or not info[3] or info[2] % align:
                        return False
                    if not a._np.flags.writeable:
                        return False  # (the full path says whether that is an error)
                    vals[i] = info[1]
                else:
                    return False
            return True

        def invoke() -> None:
            rc = cfunc(vals, codes, nargs, err, errlen)
            _ = bufs  # keeps the shape arrays the DLTensors point to alive
            if rc:
                fail_code(rc, err)

        def call(*tensors) -> None:
            if len(tensors) == len(flat) and acquire(False):
                try:
                    if patch(tensors):
                        invoke()
                        return
                finally:
                    release()
            full_call(*bound, *tensors)

        self.call = call  # ``caller(*tensors)`` too (see __call__)
        self.run = self._make_run(patch, invoke, acquire, release, full_call, flat, vals)

    def _make_run(self, patch, invoke, acquire, release, full_call, flat, vals):
        """``run(*inputs) -> tuple of new output arrays`` (one aligned allocation per call)."""
        n_in, bound = self.num_inputs, self.bound
        if n_in is None:
            def unsupported(*inputs):
                raise IngotRuntimeError(
                    f"{self.function.name}: StaticCaller.run needs the output parameters last; "
                    f"allocate the outputs and use the caller itself, call(*inputs, *outputs)")
            return unsupported
        # Step 2: the outputs' places in one block, each at a 64-byte aligned offset; they are
        # made here with the signature's dtype and shape, so only their pointers are patched.
        layout, slots, stride = [], [], 0
        for (shape, npd), (i, *_, dlt, taddr) in zip(self.output_specs, flat[n_in:]):
            layout.append((shape, npd, stride))
            slots.append((dlt, i, taddr, stride))
            nbytes = max(1, _prod(shape)) * npd.itemsize
            stride += -(-nbytes // _OUT_ALIGN) * _OUT_ALIGN
        # Step 3: small outputs are carved from a slab holding several calls' worth (one numpy
        # allocation and one address lookup per slab, not per call). Blocks are never handed out
        # twice, so a result stays valid however long it is kept; it keeps its slab alive, which
        # the size limit keeps cheap (at most _SLAB_BYTES per slab).
        per_slab = max(1, _SLAB_BYTES // stride) if stride <= _SLAB_MAX_STRIDE else 1
        # [uint8 array, offset of its first 64-byte aligned byte, that byte's address, next block]
        slab = [None, 0, 0, per_slab]

        def new_block() -> tuple:
            """(slab array, byte offset, address) of a fresh output block."""
            k = slab[3]
            if k == per_slab:
                raw = _np_empty(stride * per_slab + _OUT_ALIGN, _UINT8)
                base = _addressof(_c_char_from_buffer(raw))
                start = -base % _OUT_ALIGN
                slab[0], slab[1], slab[2], k = raw, start, base + start, 0
            slab[3] = k + 1
            off = k * stride
            return slab[0], slab[1] + off, slab[2] + off

        single = len(layout) == 1
        shape0, npd0, _ = layout[0] if layout else ((), _UINT8, 0)

        def run(*inputs) -> tuple:
            if len(inputs) == n_in and acquire(False):
                try:  # the slab is only touched under the lock (two calls never share a block)
                    raw, off, addr = new_block()
                    if single:
                        outs = (_np_ndarray(shape0, npd0, raw, off),)
                    else:
                        outs = tuple([_np_ndarray(sh, d, raw, off + o) for sh, d, o in layout])
                    if patch(inputs):
                        for dlt, i, taddr, o in slots:
                            dlt.data = addr + o
                            vals[i] = taddr
                        invoke()
                        return outs
                finally:
                    release()
            outs = tuple(aligned_empty(sh, d) for sh, d, _ in layout)
            full_call(*bound, *inputs, *outs)
            return outs

        return run

    def __call__(self, *tensors) -> None:
        """Call with every tensor argument (inputs and outputs) after the bound ones.

        Example::

            >>> call(x, y)          # doctest: +SKIP
        """
        self.call(*tensors)

    def __repr__(self) -> str:
        return f"<ingot.StaticCaller {self.function.name} bound={len(self.bound)}>"


def _prod(shape: tuple) -> int:
    """The product of a static shape (1 for a scalar)."""
    n = 1
    for d in shape:
        n *= d
    return n


def normalize_cache_flush(cache_flush: Any, function: "Function | None" = None) -> "bool | tuple[int, ...]":
    """``cache_flush`` of `Module.time_evaluator` checked: ``False``, ``True`` (every argument but
    the first) or a tuple of argument indices; with a ``function`` whose signature is known, each
    index must name one of its tensor parameters.

    Example::

        >>> normalize_cache_flush([2, 1])
        (2, 1)
        >>> normalize_cache_flush(True)
        True
    """
    if isinstance(cache_flush, (bool, np.bool_)):
        return bool(cache_flush)
    if isinstance(cache_flush, (str, bytes)) or not hasattr(cache_flush, "__iter__"):
        raise IngotRuntimeError(f"time_evaluator: cache_flush must be True, False or a list of argument indices "
                                f"to flush, got {cache_flush!r}")
    indices = []
    for i in cache_flush:
        if isinstance(i, (bool, np.bool_)) or not isinstance(i, (int, np.integer)):
            raise IngotRuntimeError(f"time_evaluator: cache_flush index {i!r} is not an integer; pass argument "
                                    "positions, e.g. cache_flush=[1, 2]")
        indices.append(int(i))
    params = getattr(function, "params", None)
    if params is not None:
        for i in flush_indices(indices, len(params), function.name):
            if params[i].kind != "tensor":
                raise IngotRuntimeError(f"time_evaluator: cache_flush index {i} names parameter {params[i].name!r} "
                                        f"of {function.name}, a {params[i].kind}; only tensor arguments can be flushed")
    return tuple(indices)


def flush_indices(cache_flush: "bool | Sequence[int]", n: int, name: str = "function") -> "list[int]":
    """The argument positions (0..n-1) a normalized ``cache_flush`` selects for ``n`` arguments.

    Example::

        >>> flush_indices(True, 3), flush_indices((0, -1), 3)
        ([1, 2], [0, 2])
    """
    if cache_flush is True:
        return list(range(1, n))
    if cache_flush is False:
        return []
    out = []
    for i in cache_flush:
        if not -n <= i < n:
            raise IngotRuntimeError(f"time_evaluator: cache_flush index {i} is out of range for {name}, which takes "
                                    f"{n} argument(s) (valid: 0..{n - 1}, or -{n}..-1 from the end)")
        out.append(i % n)
    return out

