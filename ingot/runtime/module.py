"""Module: a compiled shared library loaded with ctypes, and its functions.

Note: a module built by Ingot is one self-contained shared library. Besides its kernels it
exports ``ingot_module_metadata`` (JSON: the functions, their C symbols and parameters; see
:func:`ingot.codegen.prelude.validate_metadata`), optionally ``ingot_module_source`` (the C
source, for ``get_source()`` after loading from disk), and the prelude helpers
``ingot_time_function``, ``ingot_time_function_flushed`` (cold-cache timing; its mask of which
arguments to flush since ABI version 3)
and ``ingot_set_num_threads``. ``export_library`` therefore only
copies the file, and ``load_module`` in a fresh process gets everything back. The library is
opened with ``RTLD_LOCAL`` so the same helper symbols in many modules never clash.

Example::

    >>> import os, tempfile
    >>> import numpy as np, ingot
    >>> from ingot import te
    >>> A = te.placeholder((4,), name="A")
    >>> B = te.compute((4,), lambda i: A[i] + 1.0, name="B")
    >>> path = ingot.build(te.create_prim_func([A, B]), "llvm").export_library(
    ...     os.path.join(tempfile.mkdtemp(), "add.so"))
    >>> mod = load_module(path)
    >>> mod.function_names
    ['main']
    >>> a = np.arange(4, dtype="float32"); b = np.empty_like(a)
    >>> mod["main"](a, b)
    >>> b
    array([1., 2., 3., 4.], dtype=float32)
    >>> mod.time_evaluator("main", ingot.cpu(0), number=100)(a, b).mean > 0
    True
"""

from __future__ import annotations

import ctypes
import difflib
import json
import os
import shutil
import statistics
import tempfile
from collections import namedtuple
from typing import Any, Sequence


from . import abi
from .device import Device
from .errors import FunctionNotFoundError, IngotRuntimeError, ModuleLoadError
from .function import Function, check_int, normalize_cache_flush
from .metadata import validate_metadata

__all__ = ["Module", "ProfileResult", "load_module"]


class ProfileResult(namedtuple("ProfileResult", ["mean", "median", "max", "min", "std", "results"])):
    """Timing of a function (seconds), as returned by ``time_evaluator`` (TVM's fields).

    ``results`` holds the mean seconds per call of each repeat.

    Example::

        >>> r = ProfileResult.from_results([1e-3, 2e-3, 3e-3])
        >>> round(r.mean, 6), round(r.median, 6), r.max
        (0.002, 0.002, 0.003)
    """

    __slots__ = ()

    @classmethod
    def from_results(cls, results) -> "ProfileResult":
        """Summarize per-repeat seconds.

        Example::

            >>> ProfileResult.from_results([0.5]).std
            0.0
        """
        res = tuple(float(r) for r in results)
        if not res:
            raise IngotRuntimeError("ProfileResult needs at least one repeat")
        return cls(
            mean=statistics.fmean(res),
            median=statistics.median(res),
            max=max(res),
            min=min(res),
            std=statistics.pstdev(res) if len(res) > 1 else 0.0,
            results=res,
        )

    def __str__(self) -> str:
        ms = [x * 1e3 for x in (self.mean, self.median, self.max, self.min, self.std)]
        return (
            "Execution time summary:\n"
            "   mean (ms)  median (ms)     max (ms)     min (ms)     std (ms)\n"
            + " ".join(f"{v:12.6f}" for v in ms)
        )


def _read_c_string(lib: ctypes.CDLL, symbol: str) -> str | None:
    try:
        first = ctypes.c_char.in_dll(lib, symbol)
    except ValueError:  # symbol not found
        return None
    return ctypes.string_at(ctypes.addressof(first)).decode("utf-8", "replace")


class Module:
    """A loaded compiled module (a shared library with Ingot metadata).

    ``Module(lib_path)`` loads the library; ``source`` attaches C source for ``get_source()``
    when the library does not embed it (the builder passes it).

    Example::

        >>> mod = Module("/path/to/kernels.so")                # doctest: +SKIP
        >>> "main" in mod, mod["main"]                         # doctest: +SKIP
        (True, <ingot.Function main(A: float32[128], ...)>)
    """

    def __init__(self, lib_path: str | os.PathLike, *, source: str | None = None):
        path = os.path.abspath(os.fspath(lib_path))
        if not os.path.isfile(path):
            raise ModuleLoadError(
                f"cannot load module {path!r}: no such file; build it with ingot.build(...) "
                "and save it with mod.export_library(path)"
            )
        try:
            self._lib = ctypes.CDLL(path, mode=os.RTLD_LOCAL | getattr(os, "RTLD_NOW", 0))
        except OSError as exc:
            raise ModuleLoadError(
                f"cannot load module {path!r}: {exc}. Is it a shared library built for this "
                "machine (same CPU architecture; built with -march=native on another CPU?)"
            ) from exc
        self.lib_path = path
        self._source = source
        self._functions: dict[str, Function] = {}
        self._timers: dict = {}
        text = _read_c_string(self._lib, abi.SYM_METADATA)
        if text is None:
            self.metadata = None
        else:
            try:
                md = json.loads(text)
            except json.JSONDecodeError as exc:
                raise ModuleLoadError(
                    f"module {path!r}: {abi.SYM_METADATA} is not valid JSON ({exc}); the "
                    "generator must emit it with ingot.codegen.prelude.emit_metadata_c"
                ) from exc
            try:
                self.metadata = validate_metadata(md)
            except (TypeError, ValueError) as exc:
                raise ModuleLoadError(f"module {path!r}: {exc}") from exc

    # ------------------------------------------------------------ functions
    @property
    def function_names(self) -> list[str]:
        """Names of the functions described by the module metadata.

        Example::

            >>> mod.function_names          # doctest: +SKIP
            ['main', 'fused_add_relu']
        """
        return [] if self.metadata is None else list(self.metadata["functions"])

    @property
    def target(self) -> str:
        """The target string the module was built for (from the metadata).

        Example::

            >>> mod.target                  # doctest: +SKIP
            'llvm -mcpu=znver4'
        """
        return "" if self.metadata is None else str(self.metadata.get("target", ""))

    def get_function(self, name: str, query_imports: bool = False) -> Function:
        """The function ``name`` (a metadata name, or an exported C symbol without metadata).

        Raises ``FunctionNotFoundError`` (a ``KeyError``) listing the available names.

        Example::

            >>> f = mod.get_function("main")       # doctest: +SKIP
        """
        del query_imports  # a module has no imports: it is one self-contained library
        fn = self._functions.get(name)
        if fn is not None:
            return fn
        funcs = {} if self.metadata is None else self.metadata["functions"]
        if name in funcs:
            desc = funcs[name]
            symbol, params = desc["symbol"], desc["params"]
        elif self.metadata is None and not name.startswith("ingot_module_"):
            symbol, params = name, None  # hand-written library: unchecked packed call
        else:
            symbol = params = None
        cfunc = None
        if symbol is not None:
            try:
                cfunc = getattr(self._lib, symbol)
            except AttributeError:
                cfunc = None
        if cfunc is None:
            if name in funcs:
                raise ModuleLoadError(
                    f"module {self.lib_path!r}: metadata lists function {name!r} with symbol "
                    f"{symbol!r}, but the library does not export it (code generator bug)"
                )
            close = difflib.get_close_matches(name, self.function_names, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise FunctionNotFoundError(
                f"module {os.path.basename(self.lib_path)!r} has no function {name!r}"
                f" (functions: {', '.join(self.function_names) or 'none'}){hint}"
            )
        fn = Function(self, name, symbol, cfunc, params)
        self._functions[name] = fn
        return fn

    def __getitem__(self, name: str) -> Function:
        return self.get_function(name)

    def __contains__(self, name: str) -> bool:
        if self.metadata is not None:
            return name in self.metadata["functions"]
        return hasattr(self._lib, name)

    # ------------------------------------------------------------ source & export
    def get_source(self, fmt: str = "") -> str:
        """The C source of the module (embedded ``ingot_module_source`` or given by the builder).

        Example::

            >>> "ingot_main" in mod.get_source()     # doctest: +SKIP
            True
        """
        if fmt not in ("", "c", "cc"):
            raise IngotRuntimeError(f"get_source: only C source is available, got fmt={fmt!r}")
        text = _read_c_string(self._lib, abi.SYM_SOURCE)
        if text is not None:
            return text
        if self._source is not None:
            return self._source
        raise IngotRuntimeError(
            f"module {self.lib_path!r} has no source: it does not embed ingot_module_source "
            "and was not built in this process; rebuild it with the source included"
        )

    def set_source(self, source: str) -> None:
        """Attach the C source (used by the builder when the library does not embed it).

        Example::

            >>> mod.set_source("/* C */")            # doctest: +SKIP
        """
        self._source = source

    def export_library(self, path: str | os.PathLike) -> str:
        """Copy the self-contained library to ``path`` (atomically); returns the path.

        ``path`` must end with ``.so``: the library is one shared object (kernels, entry points and
        metadata inside), loaded back by `load_module`. TVM's ``.tar``/``.o`` archives of object
        files, for linking elsewhere, are refused rather than written as a mislabelled ELF.

        Example::

            >>> mod.export_library("/tmp/model.so")  # doctest: +SKIP
            '/tmp/model.so'
            >>> mod.export_library("/tmp/model.tar")  # doctest: +SKIP
            Traceback (most recent call last):
            IngotRuntimeError: export_library('/tmp/model.tar'): ...
        """
        dst = os.path.abspath(os.fspath(path))
        suffix = os.path.splitext(dst)[1]
        if suffix != ".so":
            raise IngotRuntimeError(
                f"export_library({os.fspath(path)!r}): the supported suffix is .so (one self-contained shared "
                f"library, loaded with ingot.runtime.load_module); {suffix or 'no suffix'} is not. Ingot does not "
                f"write TVM's .tar/.o archives of object files: export to "
                f"{os.path.splitext(os.fspath(path))[0]}.so")
        parent = os.path.dirname(dst)
        os.makedirs(parent, exist_ok=True)
        if os.path.isdir(dst):
            raise IngotRuntimeError(f"export_library: {dst!r} is a directory; give a file path such as {dst}/lib.so")
        fd, tmp = tempfile.mkstemp(dir=parent, prefix=".ingot-export-", suffix=".tmp")
        os.close(fd)
        try:
            shutil.copyfile(self.lib_path, tmp)
            os.chmod(tmp, 0o755)
            os.replace(tmp, dst)
        except BaseException:
            try:
                os.unlink(tmp)
            except OSError:
                pass
            raise
        return dst

    # ------------------------------------------------------------ timing & threads
    def _time_function_ptr(self, cache_flush: bool = False):
        """The C timer: ``ingot_time_function``, or ``ingot_time_function_flushed`` (mask: ABI 3)."""
        symbol = abi.SYM_TIME_FUNCTION_FLUSHED if cache_flush else abi.SYM_TIME_FUNCTION
        timer = self._timers.get(symbol)
        if timer is None:
            try:
                timer = getattr(self._lib, symbol)
            except AttributeError:
                if cache_flush and hasattr(self._lib, abi.SYM_TIME_FUNCTION):
                    raise IngotRuntimeError(
                        f"module {self.lib_path!r} does not export {symbol}: it was built by an older "
                        f"Ingot (C prelude ABI version {self._abi_version()}, the cold-cache timer needs "
                        f"{abi.ABI_FLUSH_MASK}); rebuild it with this Ingot, or time it with cache_flush=False"
                    ) from None
                raise IngotRuntimeError(
                    f"module {self.lib_path!r} does not export {symbol}; it was "
                    "not built with the Ingot C prelude"
                ) from None
            if cache_flush:
                # ABI 2 exported the same symbol without the flush mask: calling it with the
                # version-3 arguments would shift every argument, so refuse it before any call.
                version = self._abi_version()
                if version is None or version < abi.ABI_FLUSH_MASK:
                    raise IngotRuntimeError(
                        f"module {self.lib_path!r} was built by an older Ingot (C prelude ABI version "
                        f"{version}): its {symbol} has no flush mask, the cold-cache timer needs ABI "
                        f"version {abi.ABI_FLUSH_MASK}; rebuild it with this Ingot, or time it with "
                        "cache_flush=False")
            timer.restype = ctypes.c_int32
            timer.argtypes = None
            self._timers[symbol] = timer
        return timer

    def _abi_version(self) -> "int | None":
        try:
            return int(ctypes.c_int32.in_dll(self._lib, abi.SYM_ABI_VERSION).value)
        except ValueError:
            return None

    def time_evaluator(self, func_name: str, dev: Device, number: int = 10, repeat: int = 1,
                       min_repeat_ms: int = 0, *, cache_flush: "bool | Sequence[int]" = False):
        """A callable that times ``func_name`` (TVM semantics); returns a ProfileResult (seconds).

        One warm-up call; then ``repeat`` measurements of ``number`` back-to-back calls each,
        timed in C with ``CLOCK_MONOTONIC``. With ``min_repeat_ms > 0``, ``number`` grows until
        one repeat lasts at least that long.

        ``cache_flush`` times with cold caches (TVM's ``enable_cpu_cache_flush``): before every
        call, outside the timed region, the cache lines of the selected tensor arguments are
        flushed (clflush, from all cores' caches). ``True`` selects every argument except the
        first (TVM's ``f_preproc=cache_flush_cpu_non_first_arg``); a sequence of argument indices
        (negative ones count from the end) selects exactly those, e.g. a kernel's weights, which
        inside a model come from L3/DRAM while its activations are hot (``[]``: flush nothing,
        but still time each call alone). Unlike TVM, which flushes once per repeat, each of the
        ``number`` calls is flushed and timed alone, so ``number=1, repeat=N`` and ``number=N``
        differ only in how the results are grouped; ``min_repeat_ms`` then counts timed calls only.

        Example::

            >>> ev = mod.time_evaluator("main", ingot.cpu(0), number=100, repeat=3)   # doctest: +SKIP
            >>> ev(a, b, c).mean                                                       # doctest: +SKIP
            2.1e-06
            >>> cold = mod.time_evaluator("main", ingot.cpu(0), number=1, repeat=20,
            ...                           cache_flush=[1])          # flush only b     # doctest: +SKIP
            >>> cold(a, b, c).min > ev(a, b, c).min                                    # doctest: +SKIP
            True
        """
        fn = self.get_function(func_name)
        if not isinstance(dev, Device) or not dev.is_cpu():
            raise IngotRuntimeError(f"time_evaluator: the CPU runtime times on ingot.cpu(0), got {dev!r}")
        number = check_int(number, "number")
        repeat = check_int(repeat, "repeat")
        min_repeat_ms = check_int(min_repeat_ms, "min_repeat_ms")
        if number < 1 or repeat < 1:
            raise IngotRuntimeError(f"time_evaluator: number and repeat must be >= 1, got {number}, {repeat}")
        cache_flush = normalize_cache_flush(cache_flush, fn)
        self._time_function_ptr(cache_flush is not False)  # fail here, not at the first call, on an old library

        def evaluator(*args) -> ProfileResult:
            return ProfileResult.from_results(fn.time(args, number, repeat, min_repeat_ms, cache_flush=cache_flush))

        how = "" if cache_flush is False else (" with cold caches" if cache_flush is True
                                               else f" with arguments {list(cache_flush)} flushed")
        evaluator.__doc__ = f"Time {func_name}(*args){how}; returns ProfileResult (seconds)."
        return evaluator

    def set_num_threads(self, n: "int | None") -> int:
        """Threads for parallel loops of this module, whichever thread calls it (``n`` 0, None
        or negative: the system default, `ingot.runtime.threads.default_num_threads`); returns
        the count.

        Example::

            >>> mod.set_num_threads(2)     # doctest: +SKIP
            2
        """
        if n is None or n <= 0:
            from .threads import default_num_threads

            n = default_num_threads()
        try:
            f = getattr(self._lib, abi.SYM_SET_NUM_THREADS)
        except AttributeError:
            raise IngotRuntimeError(f"module {self.lib_path!r} does not export {abi.SYM_SET_NUM_THREADS}") from None
        f.restype = ctypes.c_int32
        f.argtypes = [ctypes.c_int32]
        return int(f(int(n)))

    def get_num_threads(self) -> int:
        """Threads parallel loops of this module will use.

        Example::

            >>> mod.get_num_threads()      # doctest: +SKIP
            2
        """
        try:
            f = getattr(self._lib, abi.SYM_GET_NUM_THREADS)
        except AttributeError:
            return 1
        f.restype = ctypes.c_int32
        f.argtypes = []
        return int(f())

    def set_adaptive_team(self, on: bool) -> bool:
        """Whether this module's thread pool shrinks its team while joins are late (a thread whose
        core is busy; docs/runtime.md "Threads and concurrent callers"); on by default. Off, every
        parallel loop runs on the full team (the A/B baseline). Returns the previous setting.

        Example::

            >>> mod.set_adaptive_team(False)  # doctest: +SKIP
            True
        """
        if not isinstance(on, bool):
            raise TypeError(f"Module.set_adaptive_team(on): on must be True or False, got {on!r}")
        try:
            f = getattr(self._lib, abi.SYM_SET_ADAPTIVE_TEAM)
        except AttributeError:
            raise IngotRuntimeError(f"module {self.lib_path!r} does not export {abi.SYM_SET_ADAPTIVE_TEAM} "
                                    "(built before the adaptive team); rebuild it") from None
        f.restype = ctypes.c_int32
        f.argtypes = [ctypes.c_int32]
        return bool(f(int(on)))

    def pool_counters(self) -> dict:
        """Counters of this module's thread pool since it was loaded: ``loops`` run on the pool,
        ``late`` joins (a thread came back much later than its tasks take), ``capped`` loops run on
        a smaller team, ``probes`` of the full team, ``late_wait_ns`` (the time callers waited at
        late joins), and the current ``cap`` (0: none). Empty for a library built before the counters.

        Example::

            >>> sorted(mod.pool_counters())  # doctest: +SKIP
            ['cap', 'capped', 'late', 'late_wait_ns', 'loops', 'probes']
        """
        try:
            f = getattr(self._lib, abi.SYM_POOL_COUNTERS)
        except AttributeError:
            return {}
        f.restype = ctypes.c_int32
        f.argtypes = [ctypes.c_void_p, ctypes.c_int32]
        out = (ctypes.c_int64 * 6)()
        n = f(out, 6)
        return dict(zip(("loops", "late", "capped", "probes", "late_wait_ns", "cap"), (int(v) for v in out[:n])))

    def __repr__(self) -> str:
        return f"<ingot.Module {os.path.basename(self.lib_path)} functions={self.function_names}>"


def load_module(path: str | os.PathLike) -> Any:
    """Load a library written by ``Module.export_library`` (works in a fresh process).

    A compiled model (``ex.export_library("model.so")`` at graph level) is a library plus a JSON
    manifest beside it naming its loader; that loader is called and the model's executable is
    returned (run it with ``ingot.graph.Executor(ex, ingot.cpu())``). The loader must be a
    function inside the ``ingot`` package: a manifest is data and never chooses arbitrary code.

    Example::

        >>> mod = load_module("/tmp/kernels.so")     # doctest: +SKIP
        >>> ex = load_module("/tmp/model.so")        # doctest: +SKIP
    """
    manifest = _model_manifest(path)
    if manifest is not None:
        return _call_loader(manifest, path)
    return Module(path)


def _model_manifest(path: "str | os.PathLike") -> "dict | None":
    stem, _ = os.path.splitext(os.fspath(path))
    manifest_path = stem + ".json"
    if not os.path.isfile(manifest_path):
        return None
    try:
        with open(manifest_path) as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return None
    return manifest if isinstance(manifest, dict) and "loader" in manifest else None


def _call_loader(manifest: dict, path: "str | os.PathLike") -> Any:
    import importlib

    loader = str(manifest["loader"])
    module_name, _, func_name = loader.rpartition(".")
    if not module_name.startswith("ingot.") or not func_name.isidentifier():
        raise ModuleLoadError(
            f"{os.fspath(path)}: its manifest names the loader {loader!r}, which is not an ingot function; "
            "re-export the model with ingot"
        )
    try:
        func = getattr(importlib.import_module(module_name), func_name)
    except (ImportError, AttributeError) as err:
        raise ModuleLoadError(f"{os.fspath(path)}: cannot find the loader {loader!r} named by its manifest: {err}") from err
    return func(os.fspath(path))
