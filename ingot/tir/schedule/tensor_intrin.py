"""Tensor intrinsics: a description PrimFunc (what it computes) and an implementation PrimFunc
(how), registered by name for `Schedule.tensorize` (TVM's ``tir.TensorIntrin``).

Note: both functions take the same number of buffer parameters with the same shapes and dtypes.
The description's body is a root block whose body is the loop nest and block that tensorize
matches structurally against the scheduled subtree; the implementation's root block body
replaces that subtree, with its parameter buffers bound (``match_buffers``) to the regions of
the real buffers found by the match. Users extend the registry (it is one of the places where a
string registry is right: intrinsics are a plug-in point).

Built-in CPU intrinsics (registered on import):

* ``"avx512_fma_f32x16"``: ``C[0:16] += A[0] * B[0:16]`` (fp32), implemented with 16-lane
  vector expressions (``Ramp``/``Broadcast``) that the C backend emits as one zmm FMA;
* ``"avx2_fma_f32x8"``: the same with 8 lanes (ymm).

Example:
    >>> intrin = TensorIntrin.get("avx512_fma_f32x16")
    >>> [str(p.shape[0]) for p in intrin.desc.params]
    ['1', '16', '16']
"""
from __future__ import annotations



from ingot.ir.buffer import BufferRegion, decl_buffer
from ingot.ir.expr import Broadcast, BufferLoad, IntImm, IterVar, Ramp, Range, Var
from ingot.tir.function import PrimFunc
from ingot.tir.stmt import Block, BlockRealize, BufferStore, For, ForKind, Stmt

_REGISTRY: dict[str, "TensorIntrin"] = {}


class TensorIntrin:
    """A registered tensor intrinsic: ``desc`` (description) and ``impl`` (implementation) PrimFuncs.

    Example:
        >>> # TensorIntrin.register("my_intrin", desc_func, impl_func)
        >>> # sch.tensorize(loop, "my_intrin")
    """

    def __init__(self, name: str, desc: PrimFunc, impl: PrimFunc):
        self.name, self.desc, self.impl = name, desc, impl

    @staticmethod
    def register(name: str, desc: PrimFunc, impl: PrimFunc, override: bool = False) -> "TensorIntrin":
        """Register ``desc``/``impl`` under ``name`` (checks that their parameters agree).

        Example:
            >>> # TensorIntrin.register("fma8", desc, impl)
        """
        for f, what in ((desc, "description"), (impl, "implementation")):
            if not isinstance(f, PrimFunc):
                raise TypeError(f"TensorIntrin.register({name!r}): the {what} must be a PrimFunc, got {type(f).__name__}")
            if not (isinstance(f.body, BlockRealize) and not f.body.block.iter_vars):
                raise ValueError(f"TensorIntrin.register({name!r}): the {what}'s body must be a root block "
                                 "(BlockRealize of a block without iteration variables)")
        dp, ip = desc.buffer_params, impl.buffer_params
        if len(dp) != len(ip) or any(a.dtype != b.dtype or len(a.shape) != len(b.shape) for a, b in zip(dp, ip)):
            raise ValueError(f"TensorIntrin.register({name!r}): the description and implementation must take the "
                             "same buffers (count, dtypes, ranks)")
        if name in _REGISTRY and not override:
            raise ValueError(f"tensor intrinsic {name!r} is already registered; pass override=True to replace it")
        intrin = TensorIntrin(name, desc, impl)
        _REGISTRY[name] = intrin
        return intrin

    @staticmethod
    def get(name: str) -> "TensorIntrin":
        """The intrinsic registered as ``name`` (KeyError listing the known ones otherwise).

        Example:
            >>> TensorIntrin.get("avx2_fma_f32x8").name
            'avx2_fma_f32x8'
        """
        try:
            return _REGISTRY[name]
        except KeyError:
            raise KeyError(f"no tensor intrinsic {name!r}; registered: {sorted(_REGISTRY)}") from None

    @staticmethod
    def names() -> list[str]:
        """The registered names."""
        return sorted(_REGISTRY)


def _root(body: Stmt, reads: list, writes: list) -> BlockRealize:
    return BlockRealize([], True, Block([], reads, writes, "root", body))


def fma_intrin(lanes: int, dtype: str = "float32") -> tuple[PrimFunc, PrimFunc]:
    """Description and implementation of ``C[0:lanes] += A[0] * B[0:lanes]``.

    Example:
        >>> desc, impl = fma_intrin(4)
        >>> impl.body.block.body.indices[0].lanes
        4
    """
    def buffers():
        return (decl_buffer((1,), dtype, "A"), decl_buffer((lanes,), dtype, "B"), decl_buffer((lanes,), dtype, "C"))

    A, B, C = buffers()
    i, vi = Var("i"), Var("vi")
    update = Block([IterVar(Range.from_min_extent(0, lanes), vi, "S")],
                   [C[vi:vi + 1], A[0:1], B[vi:vi + 1]], [C[vi:vi + 1]], "update",
                   BufferStore(C, C[vi] + A[0] * B[vi], [vi]))
    desc_body = For(i, 0, lanes, ForKind.SERIAL, BlockRealize([i], True, update))
    full = lambda buf: BufferRegion.full(buf)  # noqa: E731
    desc = PrimFunc([A, B, C], _root(desc_body, [full(C), full(A), full(B)], [full(C)]))
    A, B, C = buffers()
    ramp = Ramp(IntImm("int32", 0), IntImm("int32", 1), lanes)
    impl_body = BufferStore(C, BufferLoad(C, [ramp]) + Broadcast(A[0], lanes) * BufferLoad(B, [ramp]), [ramp])
    impl = PrimFunc([A, B, C], _root(impl_body, [full(C), full(A), full(B)], [full(C)]))
    return desc, impl


TensorIntrin.register("avx512_fma_f32x16", *fma_intrin(16))
TensorIntrin.register("avx2_fma_f32x8", *fma_intrin(8))

__all__ = ["TensorIntrin", "fma_intrin"]
