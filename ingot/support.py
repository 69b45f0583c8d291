"""`ingot.support`: small helpers every layer may use (the bottom of the layer list).

Note: packages keep ``import ingot`` fast by loading heavy parts on first use (PEP 562 module
``__getattr__``). `lazy_exports` writes that ``__getattr__``/``__dir__`` pair once, so each
package lists only what loads lazily.

Example:
    >>> __getattr__, __dir__ = lazy_exports("ingot.codegen", {"generate_c": ("ingot.codegen.c", "generate_c")})
    >>> __getattr__("generate_c").__name__
    'generate_c'
"""
from __future__ import annotations

import gc
import importlib
import os
import sys
import tempfile
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

__all__ = ["lazy_exports", "unlink_quietly", "write_atomic"]


def lazy_exports(package: str, names: "Mapping[str, tuple[str, str | None]]" = (),
                 submodules: Iterable[str] = ()) -> "tuple[Callable[[str], Any], Callable[[], list]]":
    """The module ``__getattr__`` and ``__dir__`` of ``package``, loading on first use each
    ``name`` of ``names`` (``{name: (module, attribute)}``; attribute None: the module itself) and
    each of ``submodules`` (``package.<name>``). A loaded value is stored in the package, so the
    next access is an ordinary attribute.

    Example:
        >>> __getattr__, __dir__ = lazy_exports("ingot.tune", submodules=["database"])
        >>> __getattr__("database").__name__
        'ingot.tune.database'
        >>> __getattr__("nothing")
        Traceback (most recent call last):
        AttributeError: module 'ingot.tune' has no attribute 'nothing'
    """
    names = dict(names)
    submodules = frozenset(submodules)

    def __getattr__(name: str) -> Any:
        if name in names:
            module_name, attr = names[name]
            module = importlib.import_module(module_name)
            value = module if attr is None else getattr(module, attr)
        elif name in submodules:
            value = importlib.import_module(f"{package}.{name}")
        else:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        setattr(sys.modules[package], name, value)
        return value

    def __dir__() -> list:
        return sorted(set(vars(sys.modules[package])) | set(names) | submodules)

    return __getattr__, __dir__


def write_atomic(path: "str | os.PathLike", data: "str | bytes | memoryview") -> None:
    """Write ``data`` (text, or bytes / a memoryview: a big buffer need not be copied into bytes first)
    to ``path`` through a temp file in the same directory and a rename, so readers never see half
    a file and a failure leaves nothing behind.

    Example:
        >>> write_atomic("/tmp/ingot-example.txt", "hello")
    """
    path = Path(path)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=path.name + ".", suffix=".tmp")
    try:
        if isinstance(data, (bytes, bytearray, memoryview)):
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        else:
            with os.fdopen(fd, "w", encoding="utf-8", errors="surrogatepass") as f:
                f.write(data)
        os.replace(tmp, path)
    except BaseException:
        unlink_quietly(tmp)
        raise


def unlink_quietly(path: "str | os.PathLike") -> None:
    """Remove ``path`` if it exists; ignore errors (cleanup of temp files).

    Example:
        >>> unlink_quietly("/nonexistent/ingot-temp-file")
    """
    try:
        os.unlink(path)
    except OSError:
        pass


@contextmanager
def gc_paused():
    """Pause Python's cyclic garbage collector for the block (nested uses are fine).

    Lowering and scheduling allocate hundreds of thousands of short-lived, acyclic IR nodes (freed
    by reference counting); each allocation burst triggers a generation-0 collection that scans
    them for nothing: 10-20% of the lowering time of a GEMM/conv kernel, and ~0.4 s of a ResNet-50
    compile when the collector came back on between kernels. The collector's previous state is
    restored afterwards (cycles made meanwhile are collected by its next run).

    Example:
        >>> import gc
        >>> with gc_paused():
        ...     gc.isenabled()
        False
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if was_enabled:
            gc.enable()
