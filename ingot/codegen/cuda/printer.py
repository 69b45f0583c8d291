"""Printing kernel bodies as CUDA C++: the C printer with the GPU differences overridden.

Note: `CUDAPrinter` subclasses `ingot.codegen.c.printer.CPrinter` and changes only what differs
on the device:

* thread indices are variables initialised from ``blockIdx.x`` / ``threadIdx.x`` (the kernel
  split replaced the thread-bound loops by them, `ingot.codegen.cuda.split`);
* ``Allocate`` of scope ``shared`` is a ``__shared__`` array, any other scope a per-thread array
  (registers or local memory); both need a constant size;
* ``tvm_storage_sync("shared")`` is ``__syncthreads()``;
* loops of kind parallel/vectorized are plain loops inside a thread (the thread grid is the
  parallelism), unrolled loops get ``#pragma unroll``;
* intrinsics go through `CUDA_INTRINSICS`: the C table with CUDA's integer builtins
  (``__popc``, ``__clz``) and, with ``fast_math``, the hardware approximations ``__expf``,
  ``__logf``, ``__sinf``, ``__cosf``, ``__powf``, ``__fdividef``;
* ``float16`` is cuda_fp16.h's ``__half``: the shared printer spells half as ``_Float16``, and
  the finished kernel text maps that reserved spelling (no sanitized identifier can contain it,
  names never start with ``_``) to ``__half``, which has the same conversions (to and from
  float) and operators on sm_53+;
* vector values (lanes > 1) and in-kernel assertions are not supported (`NotImplementedError`):
  the CUDA build lowers with ``tir.disable_vectorize``.

Example:
    >>> from ingot.ir import Var, decl_buffer
    >>> from ingot.codegen.sanitize import NameTable
    >>> A = decl_buffer((8,), "float32", "A")
    >>> tx = Var("threadIdx_x", "int32")
    >>> p = CUDAPrinter(CUDAHelpers(), NameTable(reserved=CUDA_RESERVED), "main")
    >>> _ = p.bind_buffer(A); _ = p.bind_thread_var(tx, "threadIdx.x")
    >>> p.print_stmt(BufferStore(A, A[tx] * 2.0, [tx]))
    >>> print(p.writer.text(), end="")
    A[threadIdx_x] = (A[threadIdx_x] * 2.0f);
"""
from __future__ import annotations

from typing import Any, Sequence

from ingot.codegen.c.intrinsics import INTRINSICS, _float_dtype
from ingot.codegen.c.printer import CodegenError, CPrinter, _resolve_method
from ingot.codegen.c.types import CHelpers, storage_type
from ingot.ir.dtype import DataType
from ingot.ir.expr import Broadcast, Call, PrimExpr, Ramp, StringImm, Var, as_const_int
from ingot.tir.stmt import Allocate, AssertStmt, BufferStore, Evaluate, For, ForKind

from .split import SYNC_OP

__all__ = ["CUDAPrinter", "CUDAHelpers", "CUDA_INTRINSICS", "FAST_MATH", "CUDA_RESERVED", "to_cuda_types"]

#: Identifiers generated code must not shadow (CUDA builtins and C++ keywords).
CUDA_RESERVED = tuple("""
threadIdx blockIdx blockDim gridDim warpSize half __half half2 __half2 nv_bfloat16 min max
class new delete template typename namespace this public private protected virtual operator friend
using try catch throw explicit export mutable nullptr decltype constexpr static_assert thread_local
noexcept char16_t char32_t wchar_t and or not xor bitand bitor compl and_eq or_eq xor_eq not_eq
dynamic_cast static_cast reinterpret_cast const_cast typeid concept requires co_await co_yield
co_return __syncthreads __shared__ __global__ __device__ __restrict__ __forceinline__ __launch_bounds__
rsqrtf __expf __logf __sinf __cosf __powf __fdividef __popc __popcll __clz __clzll exp10f
""".split())

#: ``fast_math`` replacements for float32 (hardware approximations, a few ulp).
FAST_MATH = {"exp": "__expf", "log": "__logf", "sin": "__sinf", "cos": "__cosf", "tan": "__tanf",
             "pow": "__powf", "exp10": "__exp10f", "log2": "__log2f", "log10": "__log10f"}


def _int_builtin(name32: str, name64: str):
    def emit(ctx, call: Call, args: Sequence[str]) -> str:
        dtype = call.args[0].dtype.element_of()
        out = ctx.value_type(call.dtype.element_of())
        if dtype.bits == 64:
            return f"(({out}){name64}((unsigned long long)({args[0]})))"
        if name32 == "__clz" and dtype.bits < 32:
            return f"(({out})(__clz((int)(uint{dtype.bits}_t)({args[0]})) - {32 - dtype.bits}))"
        cast_to = f"(unsigned int)(uint{dtype.bits}_t)" if dtype.bits < 32 else "(unsigned int)"
        return f"(({out}){name32}({cast_to}({args[0]})))"

    return emit


#: The C intrinsic table with the CUDA differences.
CUDA_INTRINSICS = {
    **INTRINSICS,
    "popcount": _int_builtin("__popc", "__popcll"),
    "clz": _int_builtin("__clz", "__clzll"),
}


def to_cuda_types(text: str) -> str:
    """Map the C printer's half type to CUDA's (see the module note).

    Example:
        >>> to_cuda_types("((_Float16)expf((float)(x)))")
        '((__half)expf((float)(x)))'
    """
    return text.replace("_Float16", "__half")


class CUDAHelpers(CHelpers):
    """`CHelpers` whose inline functions are device functions.

    Example:
        >>> h = CUDAHelpers(); _ = h.require("min", "float32", "float")
        >>> "static __device__ __forceinline__ float ingot_min_float32" in h.render()
        True
    """

    def vector_type(self, dtype: DataType, unaligned: bool = False) -> str:
        raise NotImplementedError(
            f"vector dtype {dtype} in a CUDA kernel: the CUDA backend prints scalar code only; lower with "
            "the tir.disable_vectorize config (ingot.build does) or keep the loop a serial loop"
        )

    def render(self) -> str:
        return super().render().replace("static inline ", "static __device__ __forceinline__ ")


class CUDAPrinter(CPrinter):
    """Prints one kernel body as CUDA C++ (see the module note).

    ``fast_math`` selects the hardware approximations of `FAST_MATH` for float32 math.
    """

    _expr_cache: dict = {}
    _stmt_cache: dict = {}

    def __init__(self, helpers: CHelpers, names, func_name: str, fast_math: bool = False,
                 max_shared_bytes: int = 48 * 1024) -> None:
        super().__init__(helpers, names, func_name)
        self.fast_math = fast_math
        self.max_shared_bytes = max_shared_bytes
        self.shared_bytes = 0
        self.thread_inits: list[str] = []

    def bind_thread_var(self, var: Var, tag: str) -> str:
        """Name the variable holding thread index ``tag`` and record its initialisation.

        Example:
            >>> # p.bind_thread_var(tx, "threadIdx.x") -> "threadIdx_x"; p.thread_inits[0]:
            >>> # "const int32_t threadIdx_x = (int32_t)threadIdx.x;"
        """
        name = self.bind_var(var, nonneg=True)
        self.thread_inits.append(f"const {self.value_type(var.dtype)} {name} = ({self.value_type(var.dtype)}){tag};")
        return name

    # -- dispatch ------------------------------------------------------------------------------
    # CPrinter.expr/print_stmt cache the resolved method per node class in CPrinter's own tables,
    # shared by every subclass: whichever printer ran first would win. Resolve through our tables.
    def expr(self, node: PrimExpr) -> str:
        method = _resolve_method(CUDAPrinter._expr_cache, type(self), type(node), "expr_")
        if method is None:
            raise CodegenError(f"{self.func_name}: the CUDA backend cannot print {type(node).__name__} `{node}`")
        return method(self, node)

    def print_stmt(self, node: Any) -> None:
        method = _resolve_method(CUDAPrinter._stmt_cache, type(self), type(node), "stmt_")
        if method is None:
            raise CodegenError(f"{self.func_name}: the CUDA backend cannot print statement {type(node).__name__}")
        method(self, node)

    # -- expressions ---------------------------------------------------------------------------
    def _no_vectors(self, node: Any) -> NotImplementedError:
        return NotImplementedError(
            f"{self.func_name}: vector value `{node}` in a CUDA kernel; the CUDA backend prints scalar code "
            "(lower with the tir.disable_vectorize config, as ingot.build does for CUDA)"
        )

    def expr_Ramp(self, node: Ramp) -> str:
        raise self._no_vectors(node)

    def expr_Broadcast(self, node: Broadcast) -> str:
        raise self._no_vectors(node)

    def expr_Call(self, node: Call) -> str:
        if node.dtype.lanes > 1:
            raise self._no_vectors(node)
        if node.op == SYNC_OP:
            raise CodegenError(f"{self.func_name}: `{node}` is a statement (T.evaluate), not a value")
        args = [self._string(a) if isinstance(a, StringImm) else self.expr(a) for a in node.args]
        dtype = _float_dtype(node) if node.args else node.dtype
        if self.fast_math and node.op in FAST_MATH and dtype == DataType("float32"):
            return f"{FAST_MATH[node.op]}({', '.join(args)})"
        if self.fast_math and node.op == "sigmoid" and dtype == DataType("float32"):
            return f"(1.0f / (1.0f + __expf(-({args[0]}))))"
        emit = CUDA_INTRINSICS.get(node.op)
        if emit is None:
            raise NotImplementedError(
                f"the CUDA backend has no rule for intrinsic {node.op!r} (in `{node}`); known intrinsics: "
                f"{', '.join(sorted(CUDA_INTRINSICS))}"
            )
        return emit(self, node, args)

    def _string(self, s: StringImm) -> str:
        from ingot.codegen.prelude import c_string_literal

        return c_string_literal(s.value)

    # -- statements ----------------------------------------------------------------------------
    def stmt_Evaluate(self, node: Evaluate) -> None:
        if isinstance(node.value, Call) and node.value.op == SYNC_OP:
            self.writer.line("__syncthreads();")
            return
        super().stmt_Evaluate(node)

    def stmt_BufferStore(self, node: BufferStore) -> None:
        if node.value.dtype.lanes > 1 or any(i.dtype.lanes > 1 for i in node.indices):
            raise self._no_vectors(node)
        super().stmt_BufferStore(node)

    def stmt_AssertStmt(self, node: AssertStmt) -> None:
        raise NotImplementedError(
            f"{self.func_name}: an assertion inside a CUDA kernel (`{node.message}`) is not supported: a kernel "
            "cannot return an error message; check the condition on the host or drop the assertion"
        )

    def stmt_For(self, node: For) -> None:
        if node.kind == ForKind.THREAD_BINDING:
            raise CodegenError(
                f"{self.func_name}: loop {node.loop_var.name!r} bound to {node.thread_binding} reached the printer; "
                "kernels are printed after ingot.codegen.cuda.split_host_device replaced thread loops"
            )
        lo = self.expr(node.min)
        ext = self.expr(node.extent)
        name = self.bind_var(node.loop_var, nonneg=self.is_nonneg(node.min))
        end = ext if as_const_int(node.min) == 0 else f"({lo} + {ext})"
        if node.kind == ForKind.UNROLLED:
            extent = as_const_int(node.extent)
            self.writer.line(f"#pragma unroll{f' {extent}' if extent is not None and 0 < extent <= 1024 else ''}")
        # Parallel and vectorized loops run serially inside one thread: the grid is the parallelism.
        self.writer.line(f"for ({self.value_type(node.loop_var.dtype)} {name} = {lo}; {name} < {end}; ++{name}) {{")
        self._block(node.body)
        self.writer.line("}")

    def stmt_Allocate(self, node: Allocate) -> None:
        buffer = node.buffer
        count = 1
        for dim in buffer.shape:
            value = as_const_int(dim)
            if value is None:
                raise NotImplementedError(
                    f"{self.func_name}: buffer {buffer.name!r} (scope {buffer.scope!r}) inside a CUDA kernel has the "
                    f"symbolic shape {list(map(str, buffer.shape))}; kernel-local and shared buffers need a constant "
                    "size (tile the loops with constant factors, or allocate it at the top level as a global buffer)"
                )
            count *= value
        count = max(count, 1)
        name = self.bind_buffer(buffer)
        elem = storage_type(buffer.dtype)
        if buffer.scope == "shared":
            nbytes = count * max(buffer.dtype.bits, 8) // 8
            self.shared_bytes += nbytes
            if self.shared_bytes > self.max_shared_bytes:
                raise CodegenError(
                    f"{self.func_name}: shared buffer {buffer.name!r} ({buffer.dtype}[{count}]) brings the kernel's "
                    f"static shared memory to {self.shared_bytes} bytes, above the {self.max_shared_bytes}-byte limit "
                    "of a block; use smaller tiles (or raise -max_shared_memory_per_block in the target)"
                )
            self.writer.line("{")
            self.writer.line(f"  __shared__ __align__(16) {elem} {name}[{count}];")
        else:
            self.writer.line("{")
            self.writer.line(f"  {elem} {name}[{count}];")
        self._block(node.body)
        self.writer.line("}")
