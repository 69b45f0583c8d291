"""Ingot's on-disk, content-hashed cache: where it lives, how entries are written and found, its size
cap and LRU eviction (compiled libraries and objects, kernel C, CUDA images).

Note: this module owns the cache; its users only compute keys and make what a miss needs.
`ingot.codegen.toolchain` (C libraries, objects, assembly) and `ingot.codegen.cuda.compile`
(nvcc output) go through `compiled_entry`; `ingot.driver.kernel_cache` (kernel C) through
`entry_path`, `touch` and `note_write`. This module imports none of them.

Everything Ingot caches lives under one directory (`cache_dir`:
``cache_dir=``, ``$INGOT_CACHE_DIR`` or ``~/.cache/ingot/kernels``): ``<key[:2]>/<key>.so|.o|.c|.s``
(the compile cache), ``kernel-c/<key[:2]>/<key>.json`` (`ingot.driver.kernel_cache`),
``cuda/<key[:2]>/<key>.*`` and ``package/<key[:2]>/<key>.*`` (whole compiled models,
`ingot.workflow.package_cache`). Without a cap it only grows (3.4 GB, 30k files on the team machine
after four sessions). This module keeps it under `CacheLimits.max_size` (default
`DEFAULT_MAX_SIZE`, 2 GiB), ccache-style:

* **Where the cap is set (one place):** ``<cache dir>/cache-config.json`` (``{"max_size": bytes}``
  and any other `CacheLimits` field), written by `set_max_size` / `configure` / ``ingot cache
  --max-size 5G``; every process using that directory obeys it. Absent: `CacheLimits`' defaults
  (`DEFAULT_MAX_SIZE`). No environment variable (STYLE.md): the directory is the only knob
  ``$INGOT_CACHE_DIR`` names, and the cap goes with it.
* **LRU by last use:** a file's last use is ``max(atime, mtime)``; a cache hit *touches* the file
  (`touch`, one ``utime`` call that replaces the ``exists()`` check) because ``relatime`` mounts do
  not update atime on every read.
* **Cheap, opportunistic check:** writers call `note_write`. Every `CacheLimits.check_every`-th
  write of a process (and its first) reads a tiny usage marker (``.usage.json``: bytes at the last
  scan plus what writers added since) — no directory walk. Only when that estimate exceeds the cap,
  or the marker is older than `CacheLimits.rescan_s`, is the directory walked (~0.5 s for 30k files
  on a loaded 2-core VM) and the least recently used files deleted down to `CacheLimits.low_water`
  of the cap (so the next eviction is a fifth of the cap away, not one write away).
* **Safe with concurrent processes** (two tuners, builder pool workers, a compile beside them):
  entries are written to a temp file and renamed (`ingot.support.write_atomic`), so a
  reader never sees half a file; one process evicts at a time (``flock`` on ``.evict.lock``, taken
  without waiting: a process that finds it held skips its turn); a file used (written or hit)
  within `CacheLimits.min_age_s` (10 min) is never deleted, and each file is stat'ed again just
  before its unlink, so a file another process just hit — and is about to ``dlopen`` or link —
  stays. (On Linux a library already loaded survives its unlink anyway.) Temp files are only
  removed after an hour (a compiler may still be writing one). Directories are never removed (a
  writer may be about to create a file in one).
* **Only Ingot's files:** the walk only looks at bucket directories named by two hex digits (at the
  top, under ``kernel-c/`` and ``cuda/``) and files whose name starts with a 64-hex-digit key, so a
  cache directory pointed at a shared folder never loses anything else.

A cap smaller than what one build writes within ``min_age_s`` is exceeded until those files age.

Example:
    >>> from ingot.codegen import disk_cache
    >>> s = disk_cache.stats("/tmp/ingot-doc-cache")
    >>> s.max_size == disk_cache.DEFAULT_MAX_SIZE or s.max_size > 0
    True
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
import platform
import re
import threading
import time
from functools import lru_cache
from pathlib import Path
from typing import Any, Callable, Iterator

from ingot.ir.error import IngotError
from ingot.support import unlink_quietly, write_atomic

__all__ = ["DEFAULT_MAX_SIZE", "CacheError", "CacheLimits", "CacheStats", "EvictReport", "cache_dir", "clear",
           "compiled_entry", "configure", "entry_path", "evict", "format_size", "host_fingerprint", "limits",
           "maybe_evict", "note_write", "parse_size", "set_max_size", "stats", "touch"]

#: The cap when ``cache-config.json`` sets none: a few thousand models' worth of kernels, small
#: next to a tuning session's needs (a 10-minute model tuning writes ~100-300 MB of candidates).
DEFAULT_MAX_SIZE = 2 * 1024 ** 3

CONFIG_FILE = "cache-config.json"
USAGE_FILE = ".usage.json"
LOCK_FILE = ".evict.lock"
#: Sub-directories holding buckets, besides the top level (C libraries, objects and sources):
#: kernel C (`ingot.driver.kernel_cache`) and nvcc output (`ingot.codegen.cuda.compile`).
KERNEL_C = "kernel-c"
CUDA = "cuda"
#: Compiled model packages (`ingot.workflow.package_cache`): library, weights and manifests per key.
PACKAGE = "package"
SUBCACHES = (KERNEL_C, CUDA, PACKAGE)
_BUCKET = re.compile(r"^[0-9a-f]{2}$")
_ENTRY = re.compile(r"^[0-9a-f]{64}")
_TEMP_MIN_AGE_S = 3600.0


@dataclasses.dataclass(frozen=True)
class CacheLimits:
    """How the cache is kept small (see the module note).

    ``max_size``: bytes; ``low_water``: an eviction deletes down to this fraction of it;
    ``min_age_s``: files used more recently are never deleted; ``check_every``: writes of one
    process between two looks at the usage marker; ``rescan_s``: the directory is walked again at
    least this often (the marker drifts: concurrent writers may lose each other's updates);
    ``min_scan_interval_s``: never walked more often (a cache over its cap only because all its
    files are recent must not be walked at every check). All are read from
    ``cache-config.json`` (`configure`); tests use a tiny cap with ``check_every=1``.

    Example:
        >>> CacheLimits(max_size=1 << 20).low_water
        0.8
    """

    max_size: int = DEFAULT_MAX_SIZE
    low_water: float = 0.8
    min_age_s: float = 600.0
    check_every: int = 32
    rescan_s: float = 3600.0
    min_scan_interval_s: float = 60.0

    def __post_init__(self) -> None:
        if int(self.max_size) < 0 or not 0.0 < self.low_water <= 1.0 or int(self.check_every) < 1:
            raise ValueError(f"CacheLimits: need max_size >= 0, 0 < low_water <= 1, check_every >= 1; got {self}")


@dataclasses.dataclass
class CacheStats:
    """What `stats` found: files and bytes per kind (``library``, ``object``, ``source``,
    ``kernel-c``, ``asm``, ``cuda``, ``package``, ``temp``), totals, the cap, and when the least/most recently
    used file was used (seconds since the epoch; None when empty).

    Example:
        >>> CacheStats("/c", 0, 0, {}, DEFAULT_MAX_SIZE).usage
        0.0
    """

    directory: str
    files: int
    bytes: int
    by_kind: dict
    max_size: int
    oldest_use: "float | None" = None
    newest_use: "float | None" = None

    @property
    def usage(self) -> float:
        """Bytes as a fraction of the cap."""
        return self.bytes / self.max_size if self.max_size else 0.0

    def format(self) -> str:
        """A human-readable summary (what ``ingot cache --show-stats`` prints).

        Example:
            >>> CacheStats("/c", 2, 3 << 20, {"library": [2, 3 << 20]}, 1 << 30).format().splitlines()[1]
            'size            3.0 MiB of 1.0 GiB (0.3%), 2 files'
        """
        lines = [f"cache directory {self.directory}",
                 f"size            {format_size(self.bytes)} of {format_size(self.max_size)} ({100 * self.usage:.1f}%), "
                 f"{self.files} files"]
        for kind, (n, size) in sorted(self.by_kind.items(), key=lambda kv: -kv[1][1]):
            lines.append(f"  {kind:<13} {format_size(size):>10}  {n} files")
        if self.oldest_use is not None:
            lines.append(f"least recently used {_ago(self.oldest_use)}, most recently {_ago(self.newest_use)}")
        return "\n".join(lines)


@dataclasses.dataclass
class EvictReport:
    """What one eviction did: bytes/files before, deleted, and kept because recently used.

    Example:
        >>> EvictReport(bytes_before=10, bytes_after=4, files_removed=1).bytes_removed
        6
    """

    bytes_before: int = 0
    bytes_after: int = 0
    files_removed: int = 0
    files_kept_recent: int = 0
    skipped: bool = False  # another process was evicting

    @property
    def bytes_removed(self) -> int:
        return self.bytes_before - self.bytes_after


class CacheError(IngotError, RuntimeError):
    """The cache directory cannot be created or written.

    Example:
        >>> isinstance(CacheError("read-only"), RuntimeError)
        True
    """


# -- where entries live ------------------------------------------------------------------------------------
def cache_dir(path: "str | os.PathLike | None" = None) -> Path:
    """The cache directory: ``path`` if given, else ``$INGOT_CACHE_DIR``, else
    ``~/.cache/ingot/kernels`` (``$XDG_CACHE_HOME`` respected). Created on demand.

    Example:
        >>> str(cache_dir("/tmp/ingot-doc-cache"))
        '/tmp/ingot-doc-cache'
    """
    if path is None:
        path = os.environ.get("INGOT_CACHE_DIR") or None
    if path is None:
        base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        path = os.path.join(base, "ingot", "kernels")
    p = Path(path).expanduser()
    try:
        p.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise CacheError(
            f"cannot create the kernel cache directory {str(p)!r}: {exc}; set INGOT_CACHE_DIR "
            "to a writable directory"
        ) from exc
    return p


def entry_path(key: str, suffix: str, cache_dir: Any = None, subcache: str = "") -> Path:
    """Where the entry ``<key><suffix>`` lives: ``<cache dir>[/<subcache>]/<key[:2]>/<key><suffix>``
    (``key`` a 64-hex-digit content hash; the bucket directory is not created here).

    Example:
        >>> entry_path("ab" + "0" * 62, ".so", "/tmp/c", KERNEL_C).relative_to("/tmp/c").parts[:2]
        ('kernel-c', 'ab')
    """
    root = _root(cache_dir)
    return (root / subcache if subcache else root) / key[:2] / f"{key}{suffix}"


def compiled_entry(key: str, suffix: str, source: str, source_suffix: str,
                   compile: "Callable[[Path, Path], None]", cache_dir: Any = None, subcache: str = "") -> str:
    """The path of the entry ``<key><suffix>`` made from ``source``: a hit is touched and returned;
    on a miss the source is saved beside it as ``<key><source_suffix>`` (kept: a `CompileError`
    points at it), ``compile(source_path, out_path)`` writes the entry (atomically: see
    `ingot.codegen.toolchain.run_compiler`), and both count toward the size cap.

    Example:
        >>> key = "cd" + "0" * 62
        >>> make = lambda src, out: write_atomic(out, src.read_text().upper())
        >>> open(compiled_entry(key, ".txt", "hi", ".src", make, "/tmp/ingot-doc-cache")).read()
        'HI'
    """
    out = entry_path(key, suffix, cache_dir, subcache)
    if touch(out):  # a hit: marked used now, so eviction keeps it (module note)
        return str(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    src = out.with_suffix(source_suffix)
    if not src.exists():
        write_atomic(src, source)
    compile(src, out)
    size = 0
    for p in (out, src):
        try:
            size += p.stat().st_size
        except OSError:
            pass
    note_write(size, cache_dir)
    return str(out)


@lru_cache(maxsize=1)
def host_fingerprint() -> str:
    """Identifies the host CPU: part of the keys of entries built for it (``-march=native``,
    ``-mcpu`` of the host), so they are not shared across CPUs through a shared cache directory.

    Example:
        >>> len(host_fingerprint())
        16
    """
    parts = [platform.machine(), platform.system()]
    try:
        with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
            for line in f:
                key = line.split(":", 1)[0].strip()
                if key in ("model name", "flags", "Features", "CPU part", "CPU implementer"):
                    parts.append(line.strip())
                if line.strip() == "":  # first processor block is enough
                    break
    except OSError:
        parts.append(platform.processor())
    return hashlib.sha256("\n".join(parts).encode()).hexdigest()[:16]


# -- configuration ---------------------------------------------------------------------------------------
def _root(path: Any) -> Path:
    return cache_dir(path)


def limits(cache_dir: Any = None) -> CacheLimits:
    """The `CacheLimits` of a cache directory: its ``cache-config.json`` over the defaults
    (``max_size`` `DEFAULT_MAX_SIZE`). An unreadable file gives the defaults, never an error.

    Example:
        >>> limits("/tmp/ingot-doc-cache").min_age_s
        600.0
    """
    try:
        with open(_root(cache_dir) / CONFIG_FILE) as f:
            data = json.load(f)
        fields = {f.name for f in dataclasses.fields(CacheLimits)}
        return CacheLimits(**{k: v for k, v in data.items() if k in fields})
    except (OSError, ValueError, KeyError, TypeError):
        return CacheLimits()


def configure(cache_dir: Any = None, **changes: Any) -> CacheLimits:
    """Change the limits of a cache directory (fields of `CacheLimits`; ``max_size`` also as
    ``"5G"``) for every process using it, keeping the fields not given; returns the new limits.

    Example:
        >>> configure("/tmp/ingot-doc-cache", max_size="3G").max_size == 3 * 1024 ** 3
        True
    """
    fields = {f.name for f in dataclasses.fields(CacheLimits)}
    unknown = sorted(set(changes) - fields)
    if unknown:
        raise TypeError(f"disk_cache.configure: unknown limit(s) {unknown}; known: {sorted(fields)}")
    if "max_size" in changes:
        changes["max_size"] = parse_size(changes["max_size"])
    root = _root(cache_dir)
    new = dataclasses.replace(limits(root), **changes)  # validates
    current = {}
    try:
        with open(root / CONFIG_FILE) as f:
            current = {k: v for k, v in json.load(f).items() if k in fields}
    except (OSError, ValueError, AttributeError):
        pass
    write_atomic(root / CONFIG_FILE, json.dumps({**current, **changes}, indent=1) + "\n")
    return new


def set_max_size(size: "int | str", cache_dir: Any = None) -> int:
    """Set the cap of a cache directory (bytes, or a size such as ``"5G"``, ``"500M"``) for every
    process using it (``ingot cache --max-size``); returns it in bytes. The next check evicts.

    Example:
        >>> set_max_size("3G", "/tmp/ingot-doc-cache") == 3 * 1024 ** 3
        True
    """
    return configure(cache_dir, max_size=size).max_size


def parse_size(size: "int | str") -> int:
    """Bytes from ``"2G"``, ``"1.5GiB"``, ``"500M"``, ``"64k"`` or a number (binary units).

    Example:
        >>> parse_size("1.5G"), parse_size("64k"), parse_size(10)
        (1610612736, 65536, 10)
    """
    if isinstance(size, (int, float)) and not isinstance(size, bool):
        value = int(size)
    else:
        m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*", str(size).lower())
        if not m:
            raise ValueError(f"cache size {size!r} not understood; write e.g. '2G', '500M', '64k' or a byte count")
        value = int(float(m.group(1)) * 1024 ** "_kmgt".index(m.group(2) or "_"))
    if value < 0:
        raise ValueError(f"cache size must be >= 0 bytes, got {size!r}")
    return value


# -- hot path: touch on hit, note writes --------------------------------------------------------------------
def touch(path: "str | os.PathLike") -> bool:
    """Mark a cache entry used now (LRU); returns whether it exists. Replaces an ``exists()``
    check on the hit path at the same cost (one system call).

    Example:
        >>> touch("/nonexistent/ingot-entry.so")
        False
    """
    try:
        os.utime(path)
        return True
    except FileNotFoundError:
        return False
    except OSError:  # read-only cache: the entry is there, it just cannot be touched
        return os.path.exists(path)


_lock = threading.Lock()
_pending: dict = {}  # cache root -> [writes noted, bytes not yet added to the marker]
_limits_seen: dict = {}  # cache root -> (config file mtime_ns, CacheLimits): one stat per write


def _current_limits(root: Path) -> CacheLimits:
    try:
        stamp = os.stat(root / CONFIG_FILE).st_mtime_ns
    except OSError:
        stamp = None
    seen = _limits_seen.get(str(root))
    if seen is None or seen[0] != stamp:
        seen = (stamp, limits(root))
        _limits_seen[str(root)] = seen
    return seen[1]


def note_write(nbytes: int, cache_dir: Any = None) -> "EvictReport | None":
    """Tell the cache that ``nbytes`` were just written into it; every `CacheLimits.check_every`-th
    call of a process (and its first) runs `maybe_evict`. Costs a ``stat`` of the config file
    otherwise. Never raises for I/O problems (a cache that cannot be trimmed only costs disk).

    Example:
        >>> note_write(0, "/tmp/ingot-doc-cache") is None or True
        True
    """
    try:
        root = _root(cache_dir)
        lim = _current_limits(root)
    except Exception:  # noqa: BLE001 - an uncreatable cache dir is reported by the writer, not here
        return None
    with _lock:
        state = _pending.setdefault(str(root), [0, 0])
        state[0] += 1
        state[1] += int(nbytes)
        if state[0] != 1 and state[0] % lim.check_every:
            return None
        added, state[1] = state[1], 0
    try:
        return maybe_evict(root, added_bytes=added, limits_=lim)
    except OSError:
        return None


def maybe_evict(cache_dir: Any = None, added_bytes: int = 0,
                limits_: "CacheLimits | None" = None) -> "EvictReport | None":
    """The cheap check of the module note: add ``added_bytes`` to the usage marker; walk and evict
    only when the estimate is over the cap or the marker is older than `CacheLimits.rescan_s`
    (and the last walk is at least `CacheLimits.min_scan_interval_s` old). Returns the
    `EvictReport` when it walked, else None.

    Example:
        >>> maybe_evict("/tmp/ingot-doc-cache") is None or True
        True
    """
    root = _root(cache_dir)
    lim = limits_ or limits(root)
    marker = _read_usage(root)
    if marker is not None:
        estimate = marker["bytes"] + int(added_bytes)
        age = time.time() - marker["scanned"]
        if age < lim.min_scan_interval_s or (estimate <= lim.max_size and age < lim.rescan_s):
            write_atomic(root / USAGE_FILE, json.dumps({**marker, "bytes": estimate}))
            return None
    return evict(root, lim)


# -- the walk and the eviction ------------------------------------------------------------------------------
def _entries(root: Path) -> Iterator[tuple]:
    """(path, size, last use, is_temp) of every Ingot cache file under ``root`` (module note)."""
    tops = [root] + [root / sub for sub in SUBCACHES]
    for top in tops:
        try:
            buckets = [e for e in os.scandir(top) if e.is_dir(follow_symlinks=False) and _BUCKET.match(e.name)]
        except OSError:
            continue
        for bucket in buckets:
            try:
                files = list(os.scandir(bucket.path))
            except OSError:
                continue
            for e in files:
                if not _ENTRY.match(e.name):
                    continue
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:  # removed meanwhile
                    continue
                if not _is_regular(st):
                    continue
                yield e.path, st.st_size, max(st.st_atime, st.st_mtime), e.name.endswith(".tmp")


def _is_regular(st: os.stat_result) -> bool:
    import stat

    return stat.S_ISREG(st.st_mode)


def evict(cache_dir: Any = None, limits_: "CacheLimits | None" = None, *, max_size: "int | None" = None,
          min_age_s: "float | None" = None) -> EvictReport:
    """Walk the cache and delete the least recently used files until it is under
    ``low_water x max_size`` (see the module note for what is never deleted). ``max_size`` /
    ``min_age_s`` override the directory's limits for this call. One process at a time: when
    another holds the lock, returns at once with ``skipped=True``.

    Example:
        >>> evict("/tmp/ingot-doc-cache").skipped in (True, False)
        True
    """
    root = _root(cache_dir)
    lim = limits_ or limits(root)
    if max_size is not None:
        lim = dataclasses.replace(lim, max_size=parse_size(max_size))
    if min_age_s is not None:
        lim = dataclasses.replace(lim, min_age_s=float(min_age_s))
    with _evict_lock(root) as held:
        if not held:
            return EvictReport(skipped=True)
        return _evict_locked(root, lim)


def _evict_locked(root: Path, lim: CacheLimits) -> EvictReport:
    # Step 1: measure.
    entries = list(_entries(root))
    total = sum(size for _, size, _, _ in entries)
    report = EvictReport(bytes_before=total, bytes_after=total)
    now = time.time()
    # Step 2: delete the least recently used until under the low-water mark.
    if total > lim.max_size:
        goal = int(lim.max_size * lim.low_water)
        for path, size, _, is_temp in sorted(entries, key=lambda e: e[2]):
            if report.bytes_after <= goal:
                break
            try:  # stat again: another process may have hit (touched) it since the walk
                st = os.stat(path)
            except OSError:
                report.bytes_after -= size
                continue
            if now - max(st.st_atime, st.st_mtime) < (max(lim.min_age_s, _TEMP_MIN_AGE_S) if is_temp
                                                      else lim.min_age_s):
                report.files_kept_recent += 1
                continue
            unlink_quietly(path)
            report.bytes_after -= size
            report.files_removed += 1
    # Step 3: the marker the cheap checks read.
    try:
        write_atomic(root / USAGE_FILE, json.dumps({"bytes": report.bytes_after, "scanned": now}))
    except OSError:
        pass
    return report


class _evict_lock:
    """``flock`` on ``<root>/.evict.lock`` without waiting; yields whether it was taken."""

    def __init__(self, root: Path):
        self.path = root / LOCK_FILE
        self.fd: "int | None" = None

    def __enter__(self) -> bool:
        try:
            import fcntl
        except ImportError:  # not POSIX: no lock, evictions may overlap (unlinks are idempotent)
            return True
        try:
            self.fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            return True
        except OSError:
            if self.fd is not None:
                os.close(self.fd)
                self.fd = None
            return False

    def __exit__(self, *exc: Any) -> bool:
        if self.fd is not None:
            os.close(self.fd)  # releases the flock
        return False


def _read_usage(root: Path) -> "dict | None":
    try:
        with open(root / USAGE_FILE) as f:
            data = json.load(f)
        return {"bytes": int(data["bytes"]), "scanned": float(data["scanned"])}
    except (OSError, ValueError, KeyError, TypeError):
        return None


# -- user commands ------------------------------------------------------------------------------------------
_KINDS = {".so": "library", ".dylib": "library", ".dll": "library", ".o": "object", ".c": "source",
          ".json": "kernel-c", ".s": "asm"}


def stats(cache_dir: Any = None) -> CacheStats:
    """Walk the cache directory: files and bytes per kind (``package``: compiled models), the cap,
    least/most recent use
    (``ingot cache --show-stats``).

    Example:
        >>> stats("/tmp/ingot-doc-cache").directory.endswith("ingot-doc-cache")
        True
    """
    root = _root(cache_dir)
    by_kind: dict = {}
    files = size_all = 0
    uses: list = []
    for path, size, used, is_temp in _entries(root):
        rel = Path(path).relative_to(root).parts
        kind = ("temp" if is_temp else rel[0] if rel[0] in (CUDA, PACKAGE)
                else _KINDS.get(Path(path).suffix, "other"))
        n, b = by_kind.get(kind, (0, 0))
        by_kind[kind] = (n + 1, b + size)
        files += 1
        size_all += size
        uses.append(used)
    return CacheStats(str(root), files, size_all, {k: list(v) for k, v in by_kind.items()}, limits(root).max_size,
                      min(uses) if uses else None, max(uses) if uses else None)


def clear(cache_dir: Any = None, min_age_s: float = 0.0) -> EvictReport:
    """Delete every cache entry (``ingot cache --clear``); the cap setting stays. ``min_age_s`` > 0
    keeps files used within that many seconds (safe beside running compiles; 0 deletes all, and a
    process that was about to load one of them recompiles it on its next build).

    Example:
        >>> clear("/tmp/ingot-doc-cache-empty").files_removed
        0
    """
    root = _root(cache_dir)
    with _evict_lock(root):  # waits for nobody: clearing beside an eviction only races on unlinks
        return _evict_locked(root, CacheLimits(max_size=0, low_water=1.0, min_age_s=float(min_age_s)))


def format_size(n: float) -> str:
    """``n`` bytes for people (binary units).

    Example:
        >>> format_size(512), format_size(3 << 20)
        ('512 B', '3.0 MiB')
    """
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} GiB"


def _ago(t: float) -> str:
    s = max(0.0, time.time() - t)
    return f"{s:.0f} s ago" if s < 120 else f"{s / 60:.0f} min ago" if s < 7200 else (
        f"{s / 3600:.1f} h ago" if s < 172800 else f"{s / 86400:.1f} days ago")
