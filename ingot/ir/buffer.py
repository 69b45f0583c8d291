"""Buffers: multi-dimensional views of memory, and regions of them.

Note: a `Buffer` is a definition (compared by identity like a `Var`). Its ``data`` variable is
the pointer; ``strides`` empty means compact row-major; ``scope`` is the memory level
(``"global"``, ``"local"`` for registers/stack, ``"shared"`` for GPU shared memory).

Example:
    >>> A = decl_buffer((128, 64), "float32", "A")
    >>> str(A[3, 4])
    'A[3, 4]'
    >>> str(A[0:16, 4])
    'A[0:16, 4]'
"""
from __future__ import annotations

from typing import Any, Sequence

from .dtype import DataType
from .expr import BufferLoad, IntImm, PrimExpr, Range, Var, convert, _promote
from .node import Node


class Buffer(Node):
    """A typed, shaped view of memory.

    Example:
        >>> n = Var("n")
        >>> B = decl_buffer((n, 4), "float16", "B")
        >>> B.ndim, str(B.dtype)
        (2, 'float16')
    """

    __slots__ = ("name", "data", "shape", "dtype", "strides", "elem_offset", "scope")
    _fields = ("name", "data", "shape", "dtype", "strides", "elem_offset", "scope")
    _attr_fields = ("dtype", "scope")
    _ignored_fields = ("name",)
    _def_fields = ("data",)

    def __init__(
        self,
        data: Var,
        dtype: "str | DataType",
        shape: Sequence[Any],
        strides: Sequence[Any] = (),
        elem_offset: Any = 0,
        name: str = "buffer",
        scope: str = "global",
    ):
        shape = tuple(convert(s) for s in shape)
        for dim in shape:
            if not (dim.dtype.is_integer and dim.dtype.lanes == 1):
                raise TypeError(f"buffer {name!r}: shape entries must be scalar integers, got {dim} ({dim.dtype})")
        self._init(
            name=str(name),
            data=data,
            shape=shape,
            dtype=DataType(dtype),
            strides=tuple(convert(s) for s in strides),
            elem_offset=convert(elem_offset),
            scope=str(scope),
        )

    @property
    def ndim(self) -> int:
        return len(self.shape)

    def __getitem__(self, indices: Any):
        if not isinstance(indices, tuple):
            indices = (indices,)
        if any(isinstance(i, slice) for i in indices):
            region = []
            for i in indices:
                if isinstance(i, slice):
                    if i.step not in (None, 1):
                        raise ValueError(f"buffer {self.name!r}: region slices take no step, got {i}")
                    start = 0 if i.start is None else i.start
                    stop = i.stop
                    if stop is None:
                        raise ValueError(f"buffer {self.name!r}: a region slice needs an explicit end")
                    region.append(Range(start, stop))
                else:
                    region.append(Range.from_min_extent(i, 1))
            return BufferRegion(self, region)
        if len(indices) != self.ndim:
            raise IndexError(f"buffer {self.name!r} has {self.ndim} dimensions, indexed with {len(indices)}")
        return BufferLoad(self, indices)

    def load(self, indices: Sequence[Any]) -> BufferLoad:
        """``self[indices]`` as an expression."""
        return BufferLoad(self, indices)

    def compact_strides(self) -> tuple[PrimExpr, ...]:
        """Row-major strides of the shape (in elements), or ``strides`` when explicit.

        Example:
            >>> [s.value for s in decl_buffer((2, 3, 4), "int8").compact_strides()]
            [12, 4, 1]
        """
        if self.strides:
            return self.strides
        strides: list[PrimExpr] = []
        acc: PrimExpr = IntImm(self.shape[-1].dtype if self.shape else "int32", 1)
        for dim in reversed(self.shape):
            strides.append(acc)
            acc = acc * dim
        return tuple(reversed(strides))

    def is_compact(self) -> bool:
        return not self.strides


def decl_buffer(
    shape: Sequence[Any],
    dtype: "str | DataType" = "float32",
    name: str = "buffer",
    scope: str = "global",
    strides: Sequence[Any] = (),
    elem_offset: Any = 0,
    data: "Var | None" = None,
) -> Buffer:
    """Declare a new buffer (with a fresh data pointer variable).

    Example:
        >>> A = decl_buffer((16,), "int32", "A", scope="local")
        >>> A.scope
        'local'
    """
    if isinstance(shape, (int, PrimExpr)):
        shape = (shape,)
    data = data if data is not None else Var(name, "handle")
    return Buffer(data, dtype, shape, strides, elem_offset, name, scope)


class BufferRegion(Node):
    """A box ``buffer[min0:min0+extent0, ...]`` (what a block reads or writes).

    Example:
        >>> A = decl_buffer((8, 8), "float32", "A")
        >>> r = BufferRegion.full(A)
        >>> [x.extent.value for x in r.region]
        [8, 8]
    """

    __slots__ = ("buffer", "region")
    _fields = ("buffer", "region")

    def __init__(self, buffer: Buffer, region: Sequence[Range]):
        if len(region) != buffer.ndim:
            raise ValueError(f"region of buffer {buffer.name!r} has {len(region)} ranges, buffer has {buffer.ndim} dims")
        self._init(buffer=buffer, region=tuple(region))

    @staticmethod
    def full(buffer: Buffer) -> "BufferRegion":
        """The region covering the whole buffer."""
        return BufferRegion(buffer, [Range.from_min_extent(IntImm(d.dtype, 0), d) for d in buffer.shape])

    @staticmethod
    def from_point(buffer: Buffer, indices: Sequence[Any]) -> "BufferRegion":
        """The one-element region at ``indices``."""
        ranges = []
        for i in indices:
            i = convert(i)
            ranges.append(Range.from_min_extent(i, IntImm(i.dtype, 1)))
        return BufferRegion(buffer, ranges)


class MatchBufferRegion(Node):
    """Binds ``buffer`` (declared inside a block) to a region of an outer buffer (used by tensorize)."""

    __slots__ = ("buffer", "source")
    _fields = ("buffer", "source")
    _def_fields = ("buffer",)

    def __init__(self, buffer: Buffer, source: BufferRegion):
        self._init(buffer=buffer, source=source)


__all__ = ["Buffer", "BufferRegion", "MatchBufferRegion", "decl_buffer", "_promote"]
