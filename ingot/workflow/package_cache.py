"""The compiled-package cache: ``ingot.compile`` of a model it has compiled before loads the stored
package (library + weights + manifests) instead of importing, lowering and planning again.

Note: the kernel caches (`ingot.driver.kernel_cache`, the compile cache of
`ingot.codegen.toolchain`) skip lowering and gcc per kernel, but a warm ``ingot.compile`` still
imported the model, ran the graph passes, scheduled every kernel and planned memory (ResNet-50:
~5 s of a 16 s cold compile). This cache keys the *whole* compile on what decides its result:

* the model: for a file or bytes (`ingot.load`), SHA-256 of its bytes and the load arguments
  (``shape_dict``, ``dtype_dict``, ``fallback``), computed before any import (`model_key`); for
  an IRModule or a model whose ``mod``/``params`` were handed out (they may have been edited), the
  structural hash of the graph (constants by content) and a digest of the params, plus the
  input/output signature (names are not part of the structural hash);
* the target string and the host CPU fingerprint (`ingot.codegen.disk_cache.host_fingerprint`);
* the compile options (``opt_level``, ``layout``, ``byoc``, ``byoc_policy``, ``fallback``) and the
  pass context (a context with ``config`` or instruments bypasses the cache, as for kernels);
* the tuning records: the bytes of the records file, or of every file of a tuning work directory
  (a records *object* bypasses the cache: its content has no cheap digest);
* the sources of all of Ingot (`ingot.driver.kernel_cache.source_fingerprint`: any edit misses;
  an installed release never edits them), `CACHE_VERSION`, and the C compiler and its version.

Entries live beside the kernel cache (`ingot.codegen.disk_cache.cache_dir`: ``cache_dir=``,
``$INGOT_CACHE_DIR`` or ``~/.cache/ingot/kernels``) as ``package/<key[:2]>/<key>.so``,
``<key>.weights.bin``, ``<key>.json`` (`ingot.graph.artifact`'s layout) and ``<key>.package.json``
— the signature, the reports and each file's size and SHA-256 — written last: it commits the
entry. Every file is written to a temp file and renamed, so a killed process leaves at most an
uncommitted entry (a miss). A hit checks sizes and checksums (`ingot.graph.artifact.load_executable`
checks the weights' own SHA-256); a truncated or corrupt entry warns (`PackageCacheWarning`), is
deleted and rebuilt. Concurrent compiles of one model write identical files; whichever rename
lands last wins and the checksums still hold. The files count toward the directory's size cap and
LRU eviction and ``ingot cache --clear`` removes them (`ingot.codegen.disk_cache`).

``<key>.model.json`` files (`remember_model`) record the signature of a model file that imported
successfully: `ingot.load` of the same bytes then defers the import until something needs the
graph, so ``ingot.load`` → ``ingot.compile`` on a warm cache never imports the model.

Example:
    >>> from ingot.workflow import package_cache
    >>> len(package_cache.model_key(b"onnx bytes", {"shape_dict": None}))
    64
"""
from __future__ import annotations

import hashlib
import json
import os
import threading
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

from ingot.codegen import disk_cache
from ingot.support import unlink_quietly, write_atomic

__all__ = ["CACHE_VERSION", "PackageCacheWarning", "cache_stats", "compile_key", "lookup", "model_key",
           "recall_model", "remember_model", "store"]

#: Bump when the entry format or the key's meaning changes (source edits invalidate on their own).
CACHE_VERSION = 1
_FILES = (".so", ".weights.bin", ".json")  # what `ingot.graph.artifact.export_executable` writes
_COMMIT = ".package.json"
_MODEL = ".model.json"

_stats_lock = threading.Lock()
_stats = {"hits": 0, "misses": 0, "bypassed": 0, "corrupt": 0}


class PackageCacheWarning(RuntimeWarning):
    """A package cache entry was unreadable (truncated, corrupt, partly evicted) and is rebuilt."""


def cache_stats() -> dict:
    """Counters of this process: ``hits``, ``misses`` (compiled and stored), ``bypassed`` (not
    cacheable: ``cache=False``, a records object, a pass context with config) and ``corrupt``.

    Example:
        >>> sorted(cache_stats())
        ['bypassed', 'corrupt', 'hits', 'misses']
    """
    with _stats_lock:
        return dict(_stats)


def count(what: str) -> None:
    """Add one to counter ``what`` of `cache_stats` (``compile`` counts its bypasses here).

    Example:
        >>> count("bypassed")
    """
    with _stats_lock:
        _stats[what] += 1


def _sha256(*parts: Any) -> str:
    h = hashlib.sha256()
    for part in parts:
        h.update(part if isinstance(part, bytes) else str(part).encode("utf-8", "surrogatepass"))
        h.update(b"\0")
    return h.hexdigest()


@lru_cache(maxsize=1)
def _code_fingerprint() -> str:
    """SHA-256 of all of Ingot's sources (~300 files, a few ms; once per process)."""
    from ingot.driver.kernel_cache import source_fingerprint

    return source_fingerprint((".",), f"package {CACHE_VERSION}")


def model_key(data: bytes, load_args: dict) -> str:
    """The content key of a model file's ``data`` imported with ``load_args`` (``shape_dict``,
    ``dtype_dict``, ``fallback``) by this Ingot: it names the model in `compile_key` and in
    `remember_model`. Hashes the bytes once (a 100 MB ONNX file: ~0.1 s).

    Example:
        >>> model_key(b"x", {"shape_dict": {"a": [1]}}) != model_key(b"x", {"shape_dict": {"a": [2]}})
        True
    """
    args = json.dumps(load_args, sort_keys=True, default=str)
    return _sha256("model", hashlib.sha256(data).hexdigest(), args, _code_fingerprint())


def ir_key(mod: Any, params: "dict | None", signature: Any) -> str:
    """The content key of an in-memory model: the graph's structural hash (constants hash by
    content), the params' names/dtypes/shapes/bytes, and the input/output ``signature`` (names are
    not in the structural hash).

    Example:
        >>> from ingot import graph as G
        >>> bb = G.BlockBuilder()
        >>> x = G.Var("x", G.TensorStructInfo((2,), "float32"))
        >>> with bb.function("main", [x]):
        ...     bb.emit_func_output(bb.emit(G.op.relu(x)))
        >>> len(ir_key(bb.get(), {}, ["x"]))
        64
    """
    import numpy as np

    from ingot.ir import structural_hash

    h = hashlib.sha256(structural_hash(mod, map_free_vars=True).encode())
    for name in sorted(params or {}):
        a = params[name]
        a = a.numpy() if hasattr(a, "numpy") and not isinstance(a, np.ndarray) else np.asarray(a)
        h.update(f"{name}\0{a.dtype}\0{a.shape}\0".encode())
        h.update(np.ascontiguousarray(a).tobytes())
    return _sha256("ir", h.hexdigest(), json.dumps(signature, default=str), _code_fingerprint())


def records_digest(records: Any) -> "str | None":
    """A digest of tuning records: ``"none"`` for None; the bytes of a records file (with its
    SQLite ``-wal`` beside it) or of every file under a work directory; None (not cacheable) for a
    records object or a path that does not exist (the compile then reports it).

    Example:
        >>> records_digest(None), records_digest(object())
        ('none', None)
    """
    if records is None:
        return "none"
    if not isinstance(records, (str, os.PathLike)):
        return None
    path = Path(records)
    if path.is_file():
        files = [path] + [p for p in (Path(f"{path}-wal"),) if p.is_file()]
    elif path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file())
    else:
        return None
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(path.parent if path.is_file() else path)).encode() + b"\0")
        h.update(p.read_bytes())
        h.update(b"\1")
    return h.hexdigest()


def compile_key(model_part: str, target: Any, options: dict, records: str) -> "str | None":
    """The key of one ``ingot.compile``: the model's key (`model_key` / `ir_key`), the target and
    host CPU, ``options``, the records' digest (`records_digest`), the pass context, Ingot's
    sources and the C compiler. None when the pass context makes the compile uncacheable.

    Example:
        >>> a = compile_key("m" * 64, "llvm", {"layout": "auto"}, "none")
        >>> b = compile_key("m" * 64, "llvm", {"layout": "NCHW"}, "none")
        >>> a != b and len(a) == 64
        True
    """
    from ingot.codegen.toolchain import compiler_version, find_compiler
    from ingot.ir.transform import PassContext

    ctx = PassContext.current()
    if ctx.config or ctx.instruments:
        return None
    try:
        compiler = " ".join(find_compiler()) + "\0" + compiler_version()
    except Exception:  # noqa: BLE001 - no compiler: the build reports it with the actionable message
        return None
    return _sha256("package", CACHE_VERSION, model_part, str(target), disk_cache.host_fingerprint(),
                   json.dumps(options, sort_keys=True, default=str), records, ctx.opt_level,
                   ",".join(sorted(ctx.required_pass)), ",".join(sorted(ctx.disabled_pass)), _code_fingerprint(),
                   compiler)


def _path(key: str, suffix: str, cache_dir: Any) -> Path:
    return disk_cache.entry_path(key, suffix, cache_dir, disk_cache.PACKAGE)


def _file_sha256(path: Path) -> str:
    with open(path, "rb") as f:
        return hashlib.file_digest(f, "sha256").hexdigest()


def _drop(key: str, cache_dir: Any) -> None:
    for suffix in (_COMMIT,) + _FILES:  # the commit file first: a reader never sees it without its files
        unlink_quietly(_path(key, suffix, cache_dir))


def lookup(key: str, cache_dir: Any = None) -> "Any | None":
    """The stored `ingot.workflow.Package` of ``key``, or None. An entry that is committed but
    unreadable warns (`PackageCacheWarning`) and is deleted, so the caller rebuilds it.

    Example:
        >>> lookup("0" * 64, "/tmp/ingot-doc-cache") is None
        True
    """
    commit = _path(key, _COMMIT, cache_dir)
    if not disk_cache.touch(commit):
        return None
    try:
        return _load(key, commit, cache_dir)
    except FileNotFoundError as exc:  # evicted between the touch and the read: an ordinary miss
        if exc.filename == str(commit):
            return None
        reason = f"{os.path.basename(exc.filename or '?')} is missing"
    except Exception as exc:  # noqa: BLE001 - whatever is wrong with the entry, rebuilding fixes it
        reason = f"{type(exc).__name__}: {exc}"
    count("corrupt")
    warnings.warn(f"ingot.compile: the package cache entry {commit} is unreadable ({reason}); deleting it and "
                  f"compiling again", PackageCacheWarning, stacklevel=3)
    _drop(key, cache_dir)
    return None


def _load(key: str, commit: Path, cache_dir: Any) -> Any:
    from ingot.graph.artifact import load_executable

    from .model import Package, TensorInfo

    entry = _read_entry(commit, key)
    for suffix, (size, digest) in entry["files"].items():
        path = _path(key, suffix, cache_dir)
        disk_cache.touch(path)  # LRU: the entry's files age together
        if path.stat().st_size != size:
            raise ValueError(f"{path.name} has {path.stat().st_size} bytes, the entry says {size} (truncated?)")
        if digest is not None and _file_sha256(path) != digest:
            raise ValueError(f"{path.name} does not match its SHA-256")
    executable = load_executable(str(_path(key, ".so", cache_dir)))
    package = Package(executable, [TensorInfo.from_json(i) for i in entry["inputs"]],
                      [TensorInfo.from_json(o) for o in entry["outputs"]], entry["target"], entry["source"])
    package.partition_report = entry.get("partition_report", [])
    package.schedule_summary = entry.get("schedule_summary")
    return package


def _read_entry(path: Path, key: str) -> dict:
    """The JSON of an entry file, checked to be of this format and for ``key`` (else ValueError)."""
    with open(path, "rb") as f:
        entry = json.loads(f.read())
    if not isinstance(entry, dict) or entry.get("format") != CACHE_VERSION or entry.get("key") != key:
        raise ValueError(f"{path.name}: format or key does not match")
    return entry


def store(key: str, package: Any, cache_dir: Any = None) -> bool:
    """Write ``package`` as the entry of ``key`` (files first, the commit file last; each through
    a temp file and a rename); returns whether it was stored. A package that cannot be exported
    (no library) or reports that are not JSON, or a read-only/full cache, store nothing.

    Example:
        >>> store("0" * 64, package)  # doctest: +SKIP
        True
    """
    try:
        # The per-kernel schedule report is in the executable's manifest; a tuning report (an object)
        # is kept as the line `compile` prints.
        report = package.schedule_report
        reports = json.loads(json.dumps({"partition_report": package.partition_report,
                                         "schedule_summary": None if isinstance(report, dict) else str(report)}))
    except (TypeError, ValueError):
        return False
    lib = _path(key, ".so", cache_dir)
    try:
        lib.parent.mkdir(parents=True, exist_ok=True)
        package.executable.export_library(str(lib))
        files = {}
        for suffix in _FILES:
            path = _path(key, suffix, cache_dir)
            # The weights' SHA-256 is in the executable manifest (checked by load_executable): hashing
            # them again at each hit would cost ~0.1 s per 100 MB.
            files[suffix] = (path.stat().st_size, None if suffix == ".weights.bin" else _file_sha256(path))
        entry = {"format": CACHE_VERSION, "key": key, "files": files, "target": package.target,
                 "source": package.source, "inputs": [i.to_json() for i in package.inputs],
                 "outputs": [o.to_json() for o in package.outputs], **reports}
        text = json.dumps(entry)
        write_atomic(_path(key, _COMMIT, cache_dir), text)
        disk_cache.note_write(sum(size for size, _ in files.values()) + len(text), cache_dir)
        return True
    except Exception:  # noqa: BLE001 - nothing exportable, or a read-only/full cache: the next compile rebuilds
        return False


def remember_model(key: str, inputs: list, outputs: list, cache_dir: Any = None) -> None:
    """Record that the model of `model_key` ``key`` imports, and its signature (`recall_model`).

    Example:
        >>> from ingot.workflow.model import TensorInfo
        >>> remember_model("ab" * 32, [TensorInfo("x", (1,), "float32")], [], "/tmp/ingot-doc-cache")
        >>> recall_model("ab" * 32, "/tmp/ingot-doc-cache")[0][0].name
        'x'
    """
    path = _path(key, _MODEL, cache_dir)
    text = json.dumps({"format": CACHE_VERSION, "key": key, "inputs": [i.to_json() for i in inputs],
                       "outputs": [o.to_json() for o in outputs]})
    try:
        if path.is_file():
            disk_cache.touch(path)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
        disk_cache.note_write(len(text), cache_dir)
    except OSError:  # a read-only cache only costs the next load its import
        pass


def recall_model(key: str, cache_dir: Any = None) -> "tuple[list, list] | None":
    """The ``(inputs, outputs)`` recorded by `remember_model` for ``key``, or None.

    Example:
        >>> recall_model("cd" * 32, "/tmp/ingot-doc-cache") is None
        True
    """
    from .model import TensorInfo

    path = _path(key, _MODEL, cache_dir)
    if not disk_cache.touch(path):
        return None
    try:
        entry = _read_entry(path, key)
        return ([TensorInfo.from_json(i) for i in entry["inputs"]],
                [TensorInfo.from_json(o) for o in entry["outputs"]])
    except (OSError, ValueError, KeyError, TypeError):
        return None
