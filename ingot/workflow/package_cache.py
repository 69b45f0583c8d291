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
— the signature, the reports and each file's size, SHA-256 and stamp — written last: it commits
the entry. Every file is written to a temp file and renamed, so a killed process leaves at most an
uncommitted entry (a miss). Concurrent compiles of one model write identical files; whichever
rename lands last wins and the checksums still hold. The files count toward the directory's size
cap and LRU eviction and ``ingot cache --clear`` removes them (`ingot.codegen.disk_cache`).

Note: what a hit trusts without reading. A big model's warm compile was mostly hashing: the model
file for its key, then the stored weights to check them (GPT-2: 2 x 650 MB). Now:

* the model file's digest comes from a memo keyed by its stat (`file_digest`: path, size, mtime,
  ctime, inode, device; files changed in the last 2 s are not memoized, "racy git");
* each entry file is stamped when stored (`_stamp`: its mtime set one second back, a time no later
  write can produce) and a hit compares size and stamp (`_check_file`): an unchanged file is not
  hashed and the weights are memory-mapped (`load_executable(map_weights=True)`); a changed size is
  corrupt, a changed stamp means hashing (the weights against the manifest's SHA-256). A corrupt
  entry warns (`PackageCacheWarning`), is deleted and rebuilt.

``<key>.model.json`` files (`remember_model`) record the signature of a model file that imported
successfully: `ingot.load` of the same bytes then defers the import until something needs the
graph, so ``ingot.load`` → ``ingot.compile`` on a warm cache never imports the model (nor reads
its file, when the memo knows it). `lookup` and `recall_model` are one reader (`_recall`).

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
import time
import warnings
from functools import lru_cache
from pathlib import Path
from typing import Any

from ingot.codegen import disk_cache
from ingot.support import unlink_quietly, write_atomic

__all__ = ["CACHE_VERSION", "PackageCacheWarning", "cache_stats", "compile_key", "file_digest", "lookup", "model_key",
           "recall_model", "remember_model", "store", "verify"]

#: Bump when the entry format or the key's meaning changes (source edits invalidate on their own).
CACHE_VERSION = 2
_FILES = (".so", ".weights.bin", ".json")  # what `ingot.graph.artifact.export_executable` writes
_COMMIT = ".package.json"
_MODEL = ".model.json"
_DIGEST = ".digest.json"  # `file_digest`
_SETTLED_NS = 2_000_000_000  # `file_digest`: a file changed this recently is not memoized

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


def model_key(data: "bytes | None", load_args: dict, digest: "str | None" = None) -> str:
    """The content key of a model file's ``data`` imported with ``load_args`` (``shape_dict``,
    ``dtype_dict``, ``fallback``) by this Ingot: it names the model in `compile_key` and in
    `remember_model`. Hashes the bytes once (a 100 MB ONNX file: ~0.1 s), unless their SHA-256
    ``digest`` is given (`file_digest`).

    Example:
        >>> model_key(b"x", {"shape_dict": {"a": [1]}}) != model_key(b"x", {"shape_dict": {"a": [2]}})
        True
        >>> model_key(b"x", {}) == model_key(None, {}, hashlib.sha256(b"x").hexdigest())
        True
    """
    args = json.dumps(load_args, sort_keys=True, default=str)
    return _sha256("model", digest or hashlib.sha256(data).hexdigest(), args, _code_fingerprint())


def file_digest(path: "str | os.PathLike", cache_dir: Any = None) -> "tuple[str, bytes | None]":
    """``(SHA-256 of the file's bytes, the bytes or None)``. The digest of a file read before comes
    from a memo in the cache directory (``<key>.digest.json`` under ``package/``) when the file's
    path, size, mtime, ctime, inode and device are those it had then: the bytes are not read
    (None). Else the file is read once, hashed, and the bytes returned for the caller to parse.

    Note: any write changes the mtime and the ctime (which no program can set back), a replacement
    the inode. A write within the same clock tick as the stat would not, so a file is memoized only
    when its last change is `_SETTLED_NS` older than the moment it was read ("racy git").

    Example:
        >>> import tempfile
        >>> with tempfile.NamedTemporaryFile(suffix=".onnx") as f:
        ...     _ = f.write(b"model"); f.flush()
        ...     file_digest(f.name, "/tmp/ingot-doc-cache") == (hashlib.sha256(b"model").hexdigest(), b"model")
        True
    """
    real = os.path.realpath(path)
    memo = _path(_sha256("digest", real), _DIGEST, cache_dir)
    before = os.stat(real)
    stat = [real, before.st_size, before.st_mtime_ns, before.st_ctime_ns, before.st_ino, before.st_dev]
    try:
        with open(memo, "rb") as f:
            record = json.loads(f.read())
        if record.get("format") == CACHE_VERSION and record.get("stat") == stat:
            disk_cache.touch(memo)
            return record["sha256"], None
    except (OSError, ValueError, AttributeError):  # no memo (or a broken one): read the file
        pass
    read_at = time.time_ns()
    with open(real, "rb") as f:
        data = f.read()
    digest = hashlib.sha256(data).hexdigest()
    after = os.stat(real)
    settled = read_at - max(after.st_mtime_ns, after.st_ctime_ns) > _SETTLED_NS
    if settled and [after.st_size, after.st_mtime_ns, after.st_ctime_ns, after.st_ino] == stat[1:5]:
        text = json.dumps({"format": CACHE_VERSION, "stat": stat, "sha256": digest})
        try:
            memo.parent.mkdir(parents=True, exist_ok=True)
            write_atomic(memo, text)
            disk_cache.note_write(len(text), cache_dir)
        except OSError:  # a read-only cache: the next load hashes the file again
            pass
    return digest, data


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
    return _recall(key, _COMMIT, cache_dir, _package_of)


def recall_model(key: str, cache_dir: Any = None) -> "tuple[list, list] | None":
    """The ``(inputs, outputs)`` recorded by `remember_model` for ``key``, or None.

    Example:
        >>> recall_model("cd" * 32, "/tmp/ingot-doc-cache") is None
        True
    """
    return _recall(key, _MODEL, cache_dir, _signature_of)


def _recall(key: str, suffix: str, cache_dir: Any, build: Any) -> Any:
    """``build(key, entry, cache_dir)`` of the committed entry file ``<key><suffix>``, or None
    when there is none. A package entry that fails (unreadable JSON, a file missing, truncated or
    changed, a library that does not load) warns, is deleted and is a miss; a model record that
    fails is only a miss (it costs the next load an import, and that import rewrites it)."""
    path = _path(key, suffix, cache_dir)
    if not disk_cache.touch(path):
        return None
    try:
        return build(key, _read_entry(path, key), cache_dir)
    except FileNotFoundError as exc:  # evicted between the touch and the read: an ordinary miss
        if exc.filename == str(path):
            return None
        reason = f"{os.path.basename(exc.filename or '?')} is missing"
    except Exception as exc:  # noqa: BLE001 - whatever is wrong with the entry, rebuilding fixes it
        reason = f"{type(exc).__name__}: {exc}"
    if suffix != _COMMIT:
        return None
    count("corrupt")
    warnings.warn(f"ingot.compile: the package cache entry {path} is unreadable ({reason}); deleting it and "
                  f"compiling again", PackageCacheWarning, stacklevel=4)
    _drop(key, cache_dir)
    return None


def _signature_of(key: str, entry: dict, cache_dir: Any) -> "tuple[list, list]":
    from .model import TensorInfo

    return ([TensorInfo.from_json(i) for i in entry["inputs"]], [TensorInfo.from_json(o) for o in entry["outputs"]])


def _package_of(key: str, entry: dict, cache_dir: Any) -> Any:
    """Step 1: check each file against its record (`_check_file`); Step 2: load the executable,
    memory-mapping the weights when their file is the one written (else reading and hashing them)."""
    from ingot.graph.artifact import load_executable

    from .model import Package

    unchanged = {suffix: _check_file(_path(key, suffix, cache_dir), record, suffix != ".weights.bin")
                 for suffix, record in entry["files"].items()}
    executable = load_executable(str(_path(key, ".so", cache_dir)), map_weights=unchanged[".weights.bin"])
    if not all(unchanged.values()):  # content verified though the stat changed (a copied cache): stamp again
        _restamp(key, entry, cache_dir)
    inputs, outputs = _signature_of(key, entry, cache_dir)
    package = Package(executable, inputs, outputs, entry["target"], entry["source"])
    package.partition_report = entry.get("partition_report", [])
    package.schedule_summary = entry.get("schedule_summary")
    return package


def _check_file(path: Path, record: list, hash_if_changed: bool) -> bool:
    """Whether entry file ``path`` is untouched since it was written: its size, inode and mtime
    are those recorded (`_stamp`: the mtime was set one second into the past, so any later write,
    truncation or replacement changes it). A changed stat with the right size is checked by
    SHA-256 when ``hash_if_changed`` (the weights are checked by `load_executable` instead);
    ValueError when the content is wrong. Marks the file used (LRU) by its access time only."""
    size, digest, stamp = record
    st = os.stat(path)
    if st.st_size != size:
        raise ValueError(f"{path.name} has {st.st_size} bytes, the entry says {size} (truncated?)")
    unchanged = [st.st_mtime_ns, st.st_ino] == stamp
    if not unchanged and hash_if_changed and _file_sha256(path) != digest:
        raise ValueError(f"{path.name} does not match its SHA-256")
    _touch_keeping_mtime(path, st.st_mtime_ns)
    return unchanged


def _touch_keeping_mtime(path: Path, mtime_ns: int) -> None:
    try:  # LRU eviction reads max(atime, mtime): the access time marks the use, the mtime stays the stamp
        os.utime(path, ns=(time.time_ns(), mtime_ns))
    except OSError:  # a read-only cache
        pass


def _stamp(path: Path) -> list:
    """Set ``path``'s mtime one second into the past and return ``[mtime_ns, inode]`` (`_check_file`).

    Note: a file's mtime has the granularity of the kernel's clock tick; a write in the same tick
    as ours would leave the mtime unchanged. No write can produce a time in the past, so after
    this stamp every change of the content changes the mtime (or the inode, for a replacement)."""
    st = os.stat(path)
    mtime_ns = st.st_mtime_ns - 1_000_000_000
    os.utime(path, ns=(time.time_ns(), mtime_ns))
    return [mtime_ns, st.st_ino]


def _restamp(key: str, entry: dict, cache_dir: Any) -> None:
    try:
        for suffix, record in entry["files"].items():
            record[2] = _stamp(_path(key, suffix, cache_dir))
        write_atomic(_path(key, _COMMIT, cache_dir), json.dumps(entry))
    except OSError:  # a read-only cache: every hit checks the content
        pass


def _read_entry(path: Path, key: str) -> dict:
    """The JSON of an entry file, checked to be of this format and for ``key`` (else ValueError)."""
    with open(path, "rb") as f:
        entry = json.loads(f.read())
    if not isinstance(entry, dict) or entry.get("format") != CACHE_VERSION or entry.get("key") != key:
        raise ValueError(f"{path.name}: format or key does not match")
    return entry


def verify(cache_dir: Any = None) -> "tuple[int, list[str]]":
    """Hash every file of every committed entry in full — what a hit skips when a file's stamp
    matches (it would not see a change that also put the mtime back, nor bit rot) — and delete the
    entries that fail. Returns ``(entries checked, keys deleted)`` (CLI: ``ingot cache --verify``).

    Example:
        >>> verify("/tmp/ingot-doc-cache")[0] >= 0
        True
    """
    from ingot.graph.artifact import read_manifest

    checked, deleted = 0, []
    for commit in sorted((disk_cache.cache_dir(cache_dir) / disk_cache.PACKAGE).glob(f"??/*{_COMMIT}")):
        key = commit.name[:-len(_COMMIT)]
        checked += 1
        try:
            for suffix, (size, digest, _) in _read_entry(commit, key)["files"].items():
                path = _path(key, suffix, cache_dir)
                if digest is None:  # the weights: their SHA-256 is in the manifest
                    digest = read_manifest(str(_path(key, ".json", cache_dir)))["weights_sha256"]
                if path.stat().st_size != size or _file_sha256(path) != digest:
                    raise ValueError(path.name)
        except FileNotFoundError as exc:
            if exc.filename == str(commit):  # evicted meanwhile
                continue
            deleted.append(key)
        except Exception:  # noqa: BLE001 - any failure: the next compile rebuilds the entry
            deleted.append(key)
        else:
            continue
        _drop(key, cache_dir)
    return checked, deleted


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
            # The weights' SHA-256 is in the executable manifest (`load_executable` checks it when the
            # stamp does not match): hashing them again here would cost ~0.1 s per 100 MB.
            files[suffix] = [path.stat().st_size, None if suffix == ".weights.bin" else _file_sha256(path),
                             _stamp(path)]
        entry = {"format": CACHE_VERSION, "key": key, "files": files, "target": package.target,
                 "source": package.source, "inputs": [i.to_json() for i in package.inputs],
                 "outputs": [o.to_json() for o in package.outputs], **reports}
        text = json.dumps(entry)
        write_atomic(_path(key, _COMMIT, cache_dir), text)
        disk_cache.note_write(sum(size for size, _, _ in files.values()) + len(text), cache_dir)
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
    if recall_model(key, cache_dir) is not None:  # recorded (and touched) already; an unreadable record is rewritten
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text)
        disk_cache.note_write(len(text), cache_dir)
    except OSError:  # a read-only cache only costs the next load its import
        pass
