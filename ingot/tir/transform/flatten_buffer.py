"""FlattenBuffer: N-D buffer accesses become 1-D accesses at the element offset.

Note: the C code generator sees each buffer as a pointer. This pass rewrites every access
``A[i, j]`` into ``A_flat[elem_offset + i * stride0 + j * stride1]`` (row-major strides unless the
buffer has explicit ``strides``). The flat buffer shares the original buffer's ``data`` variable,
so a parameter stays the same pointer: `PrimFunc.params` keep the original N-D buffers (the
argument checks use their shapes and dtypes) while the body uses the 1-D views. The element
offset is folded into the index, so every flat buffer has ``elem_offset`` 0 and no strides.
``Allocate`` statements allocate the flat buffer (same scope). A 0-d buffer becomes a 1-element one.
An allocated buffer named in the function attribute ``"buffer_dim_align"`` (`Schedule.storage_align`,
recorded by `ConvertBlocksToLoops`) is flattened with padded strides
(`ingot.tir.transform.storage_align`); the attribute is dropped.

This is the lowered-form contract with codegen (see docs/passes.md).

Example:
    before:  for i, j in T.grid(4, 8): B[i, j] = A[i, j] * 2.0
    after:   for i, j in T.grid(4, 8): B_1[i * 8 + j] = A_1[i * 8 + j] * 2.0
             (A_1 = T.Buffer((32,), data=A.data), B_1 likewise)
"""
from __future__ import annotations

from typing import Any

from ingot.ir.buffer import Buffer
from ingot.ir.dtype import DataType
from ingot.ir.error import IRError
from ingot.ir.expr import BufferLoad, IntImm, PrimExpr, as_const_int
from ingot.ir.functor import Mutator

from ..function import PrimFunc
from ..stmt import Allocate, Block, BlockRealize, BufferStore
from .base import prim_func_pass
from .storage_align import DIM_ALIGN_ATTR, aligned_strides, dim_aligns_by_name

__all__ = ["FlattenBuffer", "flatten_buffer", "flat_index"]


def _index_dtype(buffer: Buffer, indices: "tuple[PrimExpr, ...]") -> Any:
    # Use int64 when any index or dimension already is int64 (large tensors), else int32.
    for e in tuple(indices) + tuple(buffer.shape) + tuple(buffer.strides):
        if isinstance(e, PrimExpr) and e.dtype.bits == 64:
            return "int64"
    return "int32"


def _cast(e: PrimExpr, dtype: Any) -> PrimExpr:
    # Keep the lanes of a vector index (a Ramp from a tensor intrinsic stays a vector).
    dtype = DataType(dtype).with_lanes(e.dtype.lanes)
    return e if e.dtype == dtype else e.astype(dtype)


def flat_index(buffer: Buffer, indices: "tuple[PrimExpr, ...]", strides: "tuple | None" = None) -> PrimExpr:
    """The 1-D element index of ``buffer[indices]`` (strides and elem_offset applied; ``strides``
    overrides the buffer's own, e.g. storage-aligned ones).

    Example:
        >>> from ingot.ir import decl_buffer, Var
        >>> A = decl_buffer((4, 8), "float32", "A")
        >>> str(flat_index(A, (Var("i"), Var("j"))))
        'i * 8 + j'
    """
    dtype = _index_dtype(buffer, indices)
    strides = buffer.compact_strides() if strides is None else tuple(IntImm(dtype, s) if isinstance(s, int) else s
                                                                      for s in strides)
    result: "PrimExpr | None" = None
    for idx, stride in zip(indices, strides):
        term = _cast(idx, dtype) if as_const_int(stride) == 1 else _cast(idx, dtype) * _cast(stride, dtype)
        result = term if result is None else result + term
    if result is None:
        result = IntImm(dtype, 0)
    if as_const_int(buffer.elem_offset) != 0:
        result = _cast(buffer.elem_offset, dtype) + result
    return result


def _flat_size(buffer: Buffer, strides: "tuple | None" = None) -> PrimExpr:
    if not buffer.shape:
        return IntImm("int32", 1)
    if strides is not None:  # storage-aligned (constant strides): the last element's offset + 1
        dims = [as_const_int(d) for d in buffer.shape]
        if None not in dims:
            return IntImm(buffer.shape[0].dtype, 1 + sum((d - 1) * s for d, s in zip(dims, strides)))
        # A run-time leading extent (a batch of per-image planes): the same sum as an expression.
        last: PrimExpr = IntImm(buffer.shape[0].dtype, 1)
        for dim, stride in zip(buffer.shape, strides):
            last = last + (dim - 1) * IntImm(dim.dtype, stride)
        return last
    if not buffer.strides:
        size = buffer.shape[0]
        for dim in buffer.shape[1:]:
            size = size * dim
        return size
    # Explicit strides: the last element's offset + 1.
    last = IntImm(buffer.shape[0].dtype, 1)
    for dim, stride in zip(buffer.shape, buffer.strides):
        last = last + (dim - 1) * stride
    return last


class _Flattener(Mutator):
    def __init__(self, dim_aligns: "dict | None" = None) -> None:
        self.flat: dict[Buffer, Buffer] = {}
        self.dim_aligns = dim_aligns or {}
        self.strides: dict[Buffer, tuple] = {}  # storage-aligned allocations

    def flat_buffer(self, buffer: Buffer) -> Buffer:
        # Already-flat buffers (1-D, compact, no offset) are kept as they are.
        strides = self.strides.get(buffer)
        if buffer.ndim == 1 and not buffer.strides and as_const_int(buffer.elem_offset) == 0 and strides is None:
            return buffer
        flat = self.flat.get(buffer)
        if flat is None:
            size = _flat_size(buffer, strides)
            flat = Buffer(buffer.data, buffer.dtype, (size,), (), 0, buffer.name, buffer.scope)
            self.flat[buffer] = flat
        return flat

    def visit_BufferLoad(self, node: BufferLoad) -> Any:
        node = self.generic_visit(node)
        flat = self.flat_buffer(node.buffer)
        if flat is node.buffer:
            return node
        return BufferLoad(flat, (flat_index(node.buffer, node.indices, self.strides.get(node.buffer)),))

    def visit_BufferStore(self, node: BufferStore) -> Any:
        node = self.generic_visit(node)
        flat = self.flat_buffer(node.buffer)
        if flat is node.buffer:
            return node
        return BufferStore(flat, node.value, (flat_index(node.buffer, node.indices, self.strides.get(node.buffer)),))

    def visit_Allocate(self, node: Allocate) -> Any:
        aligns = self.dim_aligns.get(node.buffer.name)
        if aligns and not node.buffer.strides and as_const_int(node.buffer.elem_offset) == 0:
            strides = aligned_strides(node.buffer.shape, aligns)
            if strides is not None:  # before the body: its accesses use them
                self.strides[node.buffer] = strides
        body = self.visit(node.body)
        return Allocate(self.flat_buffer(node.buffer), body)

    def visit_Block(self, node: Block) -> Any:
        raise IRError(
            f"FlattenBuffer: block {node.name_hint!r} is still present; run ConvertBlocksToLoops "
            "(ingot.tir.transform.ConvertBlocksToLoops) before flattening"
        )

    def visit_BlockRealize(self, node: BlockRealize) -> Any:
        return self.visit_Block(node.block)


def flatten_buffer(func: PrimFunc) -> PrimFunc:
    """``func`` with its body accessing 1-D views of every buffer (params keep their N-D buffers).

    Example:
        >>> from ingot.ir import decl_buffer, Var
        >>> from ingot.tir import PrimFunc, BufferStore, For, ForKind
        >>> A = decl_buffer((4, 8), "float32", "A"); i = Var("i")
        >>> f = flatten_buffer(PrimFunc([A], For(i, 0, 4, ForKind.SERIAL, BufferStore(A, 0.0, [i, 1]))))
        >>> f.body.body.buffer.shape[0].value, f.body.body.buffer.data is A.data
        (32, True)
    """
    aligns = func.attrs.get(DIM_ALIGN_ATTR)
    flattener = _Flattener(dim_aligns_by_name(aligns))
    body = flattener.visit(func.body)
    if aligns is not None:
        func = func.replace(attrs=func.attrs.without(DIM_ALIGN_ATTR))
    return func.with_body(body)


def FlattenBuffer():  # noqa: N802
    """The pass flattening every buffer access to 1-D in every PrimFunc.

    Example:
        >>> FlattenBuffer().info.name
        'FlattenBuffer'
    """
    return prim_func_pass(lambda f, m, c: flatten_buffer(f), opt_level=0, name="FlattenBuffer")
