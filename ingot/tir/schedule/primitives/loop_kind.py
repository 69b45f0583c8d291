"""Loop kinds: `parallel`, `vectorize`, `unroll`, `bind` (GPU thread axes).

Note: these only change a loop's `ForKind` (and thread tag); lowering and codegen give them
meaning (OpenMP, SIMD vectors / ``#pragma omp simd``, unrolling, CUDA thread indices).
`parallel`, `vectorize` and `bind` change the execution order of the iterations, so
(TENSORIR.md §2) the subtree must have compact dataflow and every block iteration variable
bound to the loop must be spatial — a reduce loop would race on its output (use rfactor).
`unroll` is always legal.

Example (before/after)::

    for i in T.serial(128):      sch.parallel(i)  →   for i in T.parallel(128):
"""
from __future__ import annotations

from typing import Any

from ingot.tir.stmt import ForKind

from ..analysis import check_compact_dataflow, check_spatial_binding
from ..instruction import InstructionKind, LoopRV

PARALLEL = InstructionKind("parallel", inputs=("loop",))
VECTORIZE = InstructionKind("vectorize", inputs=("loop",))
UNROLL = InstructionKind("unroll", inputs=("loop",))
BIND = InstructionKind("bind", inputs=("loop",), attrs=("thread_axis",))

THREAD_AXES = (
    "blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z",
    "vthread", "vthread.x", "vthread.y", "vthread.z",
)


def _set_kind(sch: Any, loop: LoopRV, kind: str, primitive: str, thread: "str | None" = None) -> None:
    sref = sch._loop(loop, primitive)
    node = sref.stmt
    if node.kind == ForKind.THREAD_BINDING and kind != ForKind.THREAD_BINDING:
        sch._raise(f"{primitive}: loop {node.loop_var.name!r} is already bound to {node.thread_binding}",
                   "a thread-bound loop cannot also be parallel/vectorized/unrolled", sref.func_name, [node])
    if primitive != "unroll" and sch.enable_check:
        check_compact_dataflow(sch, sref, primitive)
        check_spatial_binding(sch, sref, primitive)
    sch.state.replace(sref.func_name, node, node.replace(kind=kind, thread_binding=thread))


def parallel(sch: Any, loop: LoopRV) -> None:
    """Run the iterations of ``loop`` in parallel (OpenMP on CPUs).

    Example:
        >>> # sch.parallel(i)                 # trace: sch.parallel(loop=l1)
    """
    _set_kind(sch, loop, ForKind.PARALLEL, "parallel")
    sch._record(PARALLEL, [loop], [], [])


def vectorize(sch: Any, loop: LoopRV) -> None:
    """Run ``loop`` as SIMD vector code (vector expressions when the extent is a small constant).

    Example:
        >>> # sch.vectorize(j1)               # trace: sch.vectorize(loop=l5)
    """
    _set_kind(sch, loop, ForKind.VECTORIZED, "vectorize")
    sch._record(VECTORIZE, [loop], [], [])


def unroll(sch: Any, loop: LoopRV) -> None:
    """Unroll ``loop`` (always legal).

    Example:
        >>> # sch.unroll(k1)                  # trace: sch.unroll(loop=l6)
    """
    _set_kind(sch, loop, ForKind.UNROLLED, "unroll")
    sch._record(UNROLL, [loop], [], [])


def bind(sch: Any, loop: LoopRV, thread_axis: str) -> None:
    """Bind ``loop`` to a GPU thread axis (``"blockIdx.x"``, ``"threadIdx.y"``, ``"vthread"``...).

    Example:
        >>> # sch.bind(i0, "blockIdx.x")      # trace: sch.bind(loop=l1, thread_axis="blockIdx.x")
    """
    if thread_axis not in THREAD_AXES:
        raise ValueError(f"bind: unknown thread axis {thread_axis!r}; use one of {THREAD_AXES}")
    _set_kind(sch, loop, ForKind.THREAD_BINDING, "bind", thread_axis)
    sch._record(BIND, [loop], [thread_axis], [])
