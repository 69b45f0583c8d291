"""Huge-page-backed host buffers for the long-lived memory a compiled model owns (weights blob,
workspace arena).

Why: with 4 KiB pages, where a 100 MB weights blob or a multi-MB arena lands in *physical* memory
is random from one allocation to the next, and the L2 is physically indexed (page colouring). numpy's
allocator madvises arrays >= 4 MiB for huge pages but never aligns them to 2 MiB, so the head and tail
of each buffer (and all smaller ones) stay on 4 KiB pages. Here a buffer is an anonymous mapping whose
data starts on a 2 MiB boundary and is advised MADV_HUGEPAGE: with transparent huge pages in
``madvise`` or ``always`` mode every 2 MiB of it is one physically contiguous page, so the cache
placement is the same in every compile, whatever numpy's policy. Measured (BENCHMARKS.md, "Session 7:
placement noise"): neither faster nor slower than numpy memory on ResNet-50 / MobileNetV2, and the
1-3% compile-to-compile gaps seen earlier were the 2-thread timing method's own noise, not placement.
Where huge pages are unavailable (no THP, no ``mmap.madvise``, a non-Linux host) the buffer silently
falls back to ordinary aligned memory.
"""

from __future__ import annotations

import mmap
from math import prod

import numpy as np

__all__ = ["HUGE_PAGE", "huge_empty", "is_huge_backed"]

#: The transparent huge page size on x86-64 / aarch64 Linux (bytes).
HUGE_PAGE = 2 * 1024 * 1024

#: Buffers smaller than this stay ordinary numpy memory: a huge page for a few KiB wastes memory.
DEFAULT_MIN_BYTES = 256 * 1024


def _huge_mapping(nbytes: int) -> "np.ndarray | None":
    """A uint8 array of ``nbytes`` starting on a 2 MiB boundary inside a MADV_HUGEPAGE mapping,
    or None where the host cannot provide one."""
    madv = getattr(mmap, "MADV_HUGEPAGE", None)
    if madv is None or not hasattr(mmap.mmap, "madvise"):
        return None
    # Step 1: over-allocate by one huge page so a 2 MiB-aligned start exists inside the mapping
    # (mmap only guarantees 4 KiB alignment); the length is rounded up to whole huge pages so the
    # tail page is huge too.
    span = -(-nbytes // HUGE_PAGE) * HUGE_PAGE
    try:
        mm = mmap.mmap(-1, span + HUGE_PAGE, flags=mmap.MAP_PRIVATE | mmap.MAP_ANONYMOUS)
    except (OSError, ValueError):
        return None
    raw = np.frombuffer(mm, dtype=np.uint8)  # keeps ``mm`` alive as long as any view of it
    offset = (-raw.ctypes.data) % HUGE_PAGE
    # Step 2: advise the aligned part; an error (THP "never", an old kernel) is not fatal: the
    # memory is still valid, ordinary pages.
    try:
        mm.madvise(madv, offset, span)
    except (OSError, ValueError):
        pass
    return raw[offset:offset + nbytes]


def huge_empty(shape, dtype, min_bytes: int = DEFAULT_MIN_BYTES) -> np.ndarray:
    """An uninitialized C-contiguous array whose data starts on a 2 MiB boundary in memory advised
    for transparent huge pages; arrays under ``min_bytes`` (and hosts without ``madvise``) get
    ordinary 64-byte-aligned memory (`ingot.runtime.ndarray.aligned_empty`).

    Example::

        >>> a = huge_empty((1024, 1024), "float32")
        >>> a.ctypes.data % 64, a.shape
        (0, (1024, 1024))
    """
    from .dtype import dtype_str, numpy_dtype
    from .ndarray import _normalize_shape, aligned_empty

    npd = dtype if isinstance(dtype, np.dtype) else numpy_dtype(dtype_str(dtype))
    shape = _normalize_shape(shape)
    nbytes = prod(shape) * npd.itemsize
    raw = _huge_mapping(nbytes) if nbytes >= max(min_bytes, 1) else None
    if raw is None:
        return aligned_empty(shape, npd)
    return raw.view(npd).reshape(shape)


def is_huge_backed(array: np.ndarray) -> bool:
    """Whether ``array``'s first byte lies in a 2 MiB-aligned huge-page mapping made by `huge_empty`
    (the kernel may still have backed it with 4 KiB pages: see ``/proc/self/smaps`` AnonHugePages).

    Example::

        >>> is_huge_backed(huge_empty((1 << 20,), "float32"))
        True
    """
    base = array
    while isinstance(base, np.ndarray) and base.base is not None:
        base = base.base
    if isinstance(base, memoryview):  # np.frombuffer(mmap) keeps the mmap behind a memoryview
        base = base.obj
    return isinstance(base, mmap.mmap) and array.ctypes.data % HUGE_PAGE == 0
