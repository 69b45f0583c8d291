"""The kernel source cache: the C of a scheduled kernel, keyed by what determines it *before* lowering.

Note: the compile cache (`ingot.codegen.toolchain`) is keyed by the C source, so a warm compile
of a model still lowered every kernel (the Python lowering passes: ~2.5 s for ResNet-50) only to
find the library in the cache. This cache stores each kernel's generated C (a
`ingot.codegen.build.KernelSource`) under a key computed from the scheduled PrimFunc, so a hit
skips lowering and C printing altogether. The key hashes:

* the scheduled PrimFunc's structure, *with* the names of its variables and buffers (the
  ordinary `structural_hash` ignores names, but the C text carries them: identifiers, error
  messages, metadata parameter names);
* the kernel's module key, exported name and C symbols (they appear in the text);
* the target string and the host CPU fingerprint (``-mcpu=native`` targets query the host);
* the pass context (opt level, required/disabled passes); contexts with a ``config`` or
  instruments (user lowering passes, debug dumps) bypass the cache entirely, as do modules
  with attributes;
* the *code fingerprint*: SHA-256 of every source file of the packages that lowering and C
  generation run (``ingot.ir``, ``arith``, ``tir``, ``codegen``, ``driver``, ``runtime``,
  ``target``), plus `CACHE_VERSION` and the Python version.

Why the source fingerprint and not only a version constant: a stale entry would silently give
old code for a kernel after a pass changed, the worst outcome a cache can have, and a constant
relies on every engineer remembering to bump it. Hashing the sources invalidates on any edit of
those packages (an installed release never edits them, so users always hit); the price, one
re-lowering after an edit, is small. `CACHE_VERSION` remains for changes the sources do not
show (e.g. the entry format). A test checks that lowering and printing a kernel import no
``ingot`` package outside the fingerprinted set.

Entries live in ``<cache dir>/kernel-c/<key[:2]>/<key>.json`` (`ingot.codegen.disk_cache` owns the
directory and its layout; this module computes keys and reads and writes its entries:
``cache_dir=``, ``$INGOT_CACHE_DIR`` or ``~/.cache/ingot/kernels``), written to a temp file and
renamed (concurrent processes never see half an entry). Each entry records its key and the
SHA-256 of its payload: a truncated, corrupt or foreign file is a miss (and is rewritten),
never an error. Entries share the compile cache's size cap and LRU eviction
(`ingot.codegen.disk_cache`: a hit touches the entry, a store counts toward the cap); `stats()`
and `clear()` here are that module's, for the whole directory (``ingot cache``).

Example:
    >>> from ingot.driver.kernel_cache import kernel_source
    >>> k = kernel_source(scheduled_func, "main", "main", "ingot_main", "ingot_kernel_main",
    ...                   "llvm")                                        # doctest: +SKIP
    >>> "INGOT_EXPORT int32_t ingot_main(" in k.text                    # doctest: +SKIP
    True
"""
from __future__ import annotations

import hashlib
import json
import sys
import threading
from functools import lru_cache
from pathlib import Path
from typing import Any

from ingot.codegen import disk_cache
from ingot.ir.structural import _Hasher
from ingot.support import write_atomic

__all__ = ["CACHE_VERSION", "FINGERPRINTED", "cache_stats", "clear", "code_fingerprint", "kernel_cache_key",
           "kernel_source", "source_fingerprint", "stats"]

#: Bump when the entry format or the key's meaning changes (source edits invalidate on their own).
CACHE_VERSION = 1

#: Packages (under ``ingot/``) whose sources determine a kernel's lowered C.
FINGERPRINTED = ("ir", "arith", "tir", "codegen", "driver", "runtime", "target.py", "cpu_model.py", "__init__.py")

_stats_lock = threading.Lock()
_stats = {"hits": 0, "misses": 0, "bypassed": 0, "corrupt": 0}


def cache_stats() -> dict:
    """Counters of this process: ``hits``, ``misses`` (lowered and stored), ``bypassed`` (not
    cacheable: a pass context with config/instruments) and ``corrupt`` (unreadable entries).

    Example:
        >>> sorted(cache_stats())
        ['bypassed', 'corrupt', 'hits', 'misses']
    """
    with _stats_lock:
        return dict(_stats)


def stats(cache_dir: Any = None) -> "disk_cache.CacheStats":
    """On-disk usage of the whole kernel cache directory (kernel C, libraries, objects) and its cap
    (`ingot.codegen.disk_cache.stats`; `cache_stats` counts this process's hits instead).

    Example:
        >>> print(stats().format())                                     # doctest: +SKIP
        cache directory /root/.cache/ingot/kernels
        size            1.2 GiB of 2.0 GiB (61.0%), 14210 files
    """
    return disk_cache.stats(cache_dir)


def clear(cache_dir: Any = None, min_age_s: float = 0.0) -> "disk_cache.EvictReport":
    """Delete every entry of the kernel cache directory (`ingot.codegen.disk_cache.clear`;
    ``min_age_s`` keeps recently used files, for use beside running compiles).

    Example:
        >>> clear("/tmp/ingot-doc-cache-empty").files_removed
        0
    """
    return disk_cache.clear(cache_dir, min_age_s)


def _count(what: str) -> None:
    with _stats_lock:
        _stats[what] += 1


class _NamedHasher(_Hasher):
    """`structural_hash` that also hashes the names of variables and buffers (they are in the C)."""

    def visit_var(self, var: Any, defining: bool) -> None:
        self.token("name", var.name)
        super().visit_var(var, defining)

    def visit_buffer(self, buf: Any) -> None:
        self.token("bname", buf.name)
        super().visit_buffer(buf)


@lru_cache(maxsize=1)
def code_fingerprint() -> str:
    """SHA-256 of the sources of the packages that lower and print kernels (see the module note).

    Example:
        >>> len(code_fingerprint())
        64
    """
    return source_fingerprint(FINGERPRINTED, f"kernel-c {CACHE_VERSION}")


def source_fingerprint(entries: "tuple[str, ...]", salt: str) -> str:
    """SHA-256 of ``salt``, the Python version and every ``.py`` file of ``entries`` (packages or
    files under ``ingot/``), paths included: a cache keyed on it misses after any edit of them.

    Example:
        >>> source_fingerprint(("support.py",), "x") != source_fingerprint(("support.py",), "y")
        True
    """
    root = Path(__file__).resolve().parent.parent
    h = hashlib.sha256(f"{salt} python {sys.version_info[:2]}".encode())
    files: list[Path] = []
    for entry in entries:
        path = root / entry
        files.extend(sorted(path.rglob("*.py")) if path.is_dir() else [path])
    for path in files:
        h.update(str(path.relative_to(root)).encode() + b"\0")
        h.update(path.read_bytes())
        h.update(b"\1")
    return h.hexdigest()


def kernel_cache_key(func: Any, module_key: str, name: str, symbol: str, kernel_symbol: str,
                     target: Any) -> "str | None":
    """The cache key of ``func``'s C, or None when the current pass context makes it uncacheable.

    Example:
        >>> from ingot.ir import decl_buffer
        >>> from ingot.tir import PrimFunc, Evaluate
        >>> f = PrimFunc([decl_buffer((2,), "int8", "x")], Evaluate(0))
        >>> len(kernel_cache_key(f, "main", "main", "ingot_main", "ingot_kernel_main", "llvm"))
        64
    """
    from ingot.ir.transform import PassContext
    from ingot.target import as_target

    ctx = PassContext.current()
    if ctx.config or ctx.instruments:
        return None
    hasher = _NamedHasher(map_free_vars=False)
    hasher.visit(func)
    h = hashlib.sha256()
    for part in (hasher.digest.hexdigest(), module_key, name, symbol, kernel_symbol, str(as_target(target)),
                 disk_cache.host_fingerprint(), code_fingerprint(), ctx.opt_level, ",".join(sorted(ctx.required_pass)),
                 ",".join(sorted(ctx.disabled_pass))):
        h.update(str(part).encode("utf-8", "surrogatepass") + b"\0")
    return h.hexdigest()


def entry_path(key: str, cache_dir: Any = None) -> Path:
    """Where the entry of ``key`` lives.

    Example:
        >>> entry_path("ab" + "0" * 62, "/tmp/c").parent.name
        'ab'
    """
    return disk_cache.entry_path(key, ".json", cache_dir, disk_cache.KERNEL_C)


def _load(key: str, cache_dir: Any):
    """The cached `KernelSource` of ``key``, or None (absent, truncated, corrupt, foreign)."""
    from ingot.codegen.build import KernelSource

    path = entry_path(key, cache_dir)
    if not disk_cache.touch(path):  # a hit is marked used now (LRU eviction: disk_cache's note)
        return None
    try:
        with open(path, "rb") as f:
            entry = json.loads(f.read().decode("utf-8", "surrogatepass"))
    except FileNotFoundError:  # evicted between the touch and the open
        return None
    except (OSError, ValueError):
        _count("corrupt")
        return None
    try:
        payload = entry["payload"]
        if (entry.get("format") != CACHE_VERSION or entry.get("key") != key
                or hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest() != entry.get("sha256")):
            raise ValueError("key or checksum mismatch")
        return KernelSource.from_json(json.loads(payload))
    except (KeyError, TypeError, ValueError, AttributeError):
        _count("corrupt")
        return None


def _store(key: str, piece: Any, cache_dir: Any) -> None:
    payload = json.dumps(piece.to_json(), ensure_ascii=False, separators=(",", ":"))
    entry = {"format": CACHE_VERSION, "key": key,
             "sha256": hashlib.sha256(payload.encode("utf-8", "surrogatepass")).hexdigest(), "payload": payload}
    path = entry_path(key, cache_dir)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        text = json.dumps(entry, ensure_ascii=False)
        write_atomic(path, text)
        disk_cache.note_write(len(text), cache_dir)
    except OSError:  # a read-only or full cache costs the next compile a lowering, nothing more
        pass


def kernel_source(func: Any, module_key: str, name: str, symbol: str, kernel_symbol: str, target: Any, *,
                  mod_attrs: "dict | None" = None, cache_dir: Any = None, use_cache: bool = True):
    """The C (`ingot.codegen.build.KernelSource`) of scheduled kernel ``func``: from the cache, or
    lowered (`ingot.driver.build.lower`, which leaves a lowered function as is), printed and stored.

    ``module_key`` is the kernel's key in its module, ``name`` its exported name, ``symbol`` and
    ``kernel_symbol`` its C symbols (`ingot.codegen.build.kernel_symbols`). ``mod_attrs`` (the
    module's attributes, seen by module-level passes) make the call uncacheable when non-empty.
    Raises what lowering or C generation raise (nothing is stored then).

    Example:
        >>> from ingot.ir import decl_buffer
        >>> from ingot.tir import PrimFunc, Evaluate
        >>> f = PrimFunc([decl_buffer((2,), "int8", "x")], Evaluate(0))
        >>> kernel_source(f, "main", "main", "ingot_main", "ingot_kernel_main", "llvm",
        ...               use_cache=False).symbol
        'ingot_main'
    """
    from ingot.codegen.build import emit_kernel_source
    from ingot.ir.module import IRModule
    from ingot.target import as_target

    target = as_target(target)
    key = kernel_cache_key(func, module_key, name, symbol, kernel_symbol, target) \
        if use_cache and not mod_attrs else None
    if key is not None:
        hit = _load(key, cache_dir)
        if hit is not None and (hit.name, hit.symbol, hit.kernel_symbol) == (name, symbol, kernel_symbol):
            _count("hits")
            return hit
        _count("misses")
    else:
        _count("bypassed")
    # Imported here, not at the top: the attribute is read at each call (benchmarks and tests wrap it).
    from ingot.driver.build import lower

    with target:
        lowered = lower(IRModule({module_key: func}, mod_attrs or {}))
    [(_, lowered_func)] = list(lowered.items())
    piece = emit_kernel_source(lowered_func, name, symbol, kernel_symbol)
    if key is not None:
        _store(key, piece, cache_dir)
    return piece
