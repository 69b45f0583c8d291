"""The system C compiler: find it, run it once per module, cache the result by content.

Note: a module is compiled by exactly one compiler call::

    cc -O3 -march=native -ffp-contract=fast -fno-math-errno -fPIC -shared -fopenmp -std=c11 \
       [extra flags] -o <tmp>.so <key>.c -lm

The output lands in the content-addressed cache that `ingot.codegen.disk_cache` owns
(`disk_cache.compiled_entry`): ``key = sha256(source, full command, compiler version, host CPU
when -march=native)``; ``<cache>/<key[:2]>/<key>.so`` is written by compiling to a temporary
file in the same directory and ``os.replace``-ing it (`run_compiler`), so concurrent builders
never see a partial library. The cache directory is ``~/.cache/ingot/kernels``,
``$INGOT_CACHE_DIR`` if set, or an explicit ``cache_dir=`` argument. A hit touches the file and
every write counts toward the directory's size cap (`ingot.codegen.disk_cache`: LRU eviction,
default 2 GiB, ``ingot cache``). ``$CC`` may point at the
compiler (a location override only; flags come from :class:`CompileOptions`).

A large graph module may instead be several translation units
(`compile_shared_library_units`): each compiled to a cached object file, up to `compile_jobs`
compilers at once, then linked into one library cached under a key of the object keys.

``-ffp-contract=fast`` lets the compiler form FMAs under ``-std=c11`` (which otherwise turns
contraction off) and ``-fno-math-errno`` lets it vectorize ``sqrtf`` & co; neither changes
results beyond last-bit rounding. Both are fields of :class:`CompileOptions`.

Example::

    >>> from ingot.codegen.toolchain import CompileOptions, compile_shared_library
    >>> so = compile_shared_library("int answer(void) { return 42; }",
    ...                             CompileOptions())            # doctest: +SKIP
    >>> so.endswith(".so")                                          # doctest: +SKIP
    True
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import threading
from functools import lru_cache
from typing import Any
from pathlib import Path

__all__ = [
    "CompileError",
    "CompileOptions",
    "ToolchainError",
    "cache_dir",
    "compile_count",
    "compile_jobs",
    "compile_object",
    "compile_shared_library",
    "compile_shared_library_units",
    "compile_to_assembly",
    "compiler_version",
    "find_compiler",
    "first_error_lines",
    "run_compiler",
]

from ingot.ir.error import IngotError
from ingot.support import unlink_quietly, write_atomic  # noqa: F401 - importable from here too

from . import disk_cache
# The cache is disk_cache's (location, entries, eviction); these names stay importable from here.
from .disk_cache import cache_dir

_MAX_MESSAGE_STDERR = 8000


class ToolchainError(IngotError, RuntimeError):
    """No usable C compiler (or it cannot be run).

    Example::

        >>> isinstance(ToolchainError("no compiler"), RuntimeError)
        True
    """


class CompileError(IngotError, RuntimeError):
    """The C or CUDA compiler rejected a source (`run_compiler`). Carries ``command``, ``stderr``, ``source_path``.

    Example::

        >>> e = CompileError("failed", command=["cc"], stderr="x.c:1: error", source_path="/tmp/x.c")
        >>> e.source_path
        '/tmp/x.c'
    """

    def __init__(self, message: str, *, command=(), stderr: str = "", source_path: str = "",
                 returncode: int | None = None):
        super().__init__(message)
        self.command = list(command)
        self.stderr = stderr
        self.source_path = source_path
        self.returncode = returncode


@dataclasses.dataclass(frozen=True)
class CompileOptions:
    """How to compile a module. Immutable; part of the cache key through the command line.

    Fields: ``opt_level`` (0-3, or ``"s"``/``"fast"``), ``march`` (``"native"`` by default;
    ``None`` omits it), ``mcpu``/``mtune`` (for targets such as ``-mcpu=znver5`` or ARM
    cores), ``openmp`` (``-fopenmp``; when off, ``-fopenmp-simd`` keeps ``#pragma omp simd``),
    ``std``, ``fp_contract`` (``"fast"``/``"on"``/``"off"``/``None``), ``math_errno``,
    ``debug`` (``-g``), ``extra_flags`` (appended before the source), ``libs`` (after it).

    Example::

        >>> CompileOptions(opt_level=2, openmp=False).compile_flags()[:2]
        ['-O2', '-march=native']
    """

    opt_level: int | str = 3
    march: str | None = "native"
    mcpu: str | None = None
    mtune: str | None = None
    openmp: bool = True
    std: str = "c11"
    fp_contract: str | None = "fast"
    math_errno: bool = False
    debug: bool = False
    extra_flags: tuple[str, ...] = ()
    libs: tuple[str, ...] = ("-lm",)

    def __post_init__(self):
        # Accept lists for convenience, store tuples so the options stay hashable.
        object.__setattr__(self, "extra_flags", tuple(self.extra_flags))
        object.__setattr__(self, "libs", tuple(self.libs))
        if str(self.opt_level) not in ("0", "1", "2", "3", "s", "fast", "g", "z"):
            raise ValueError(
                f"CompileOptions.opt_level must be 0-3, 's', 'z', 'g' or 'fast', got {self.opt_level!r}"
            )

    def replace(self, **changes) -> "CompileOptions":
        """A copy with some fields changed.

        Example::

            >>> CompileOptions().replace(openmp=False).openmp
            False
        """
        return dataclasses.replace(self, **changes)

    def compile_flags(self) -> list[str]:
        """The code-generation flags (without ``-shared``/``-fPIC``, output and source).

        Example::

            >>> "-fopenmp" in CompileOptions().compile_flags()
            True
        """
        flags = [f"-O{self.opt_level}"]
        if self.march:
            flags.append(f"-march={self.march}")
        if self.mcpu:
            flags.append(f"-mcpu={self.mcpu}")
        if self.mtune:
            flags.append(f"-mtune={self.mtune}")
        if self.fp_contract:
            flags.append(f"-ffp-contract={self.fp_contract}")
        if not self.math_errno:
            flags.append("-fno-math-errno")
        if self.debug:
            flags.append("-g")
        flags.append("-fopenmp" if self.openmp else "-fopenmp-simd")
        if self.std:
            flags.append(f"-std={self.std}")
        flags.extend(self.extra_flags)
        return flags


# ------------------------------------------------------------------ compiler

_lock = threading.Lock()
_compile_count = 0


def find_compiler() -> list[str]:
    """The compiler command (as an argv prefix): ``$CC`` if set, else ``cc``, else ``gcc``.

    Raises :class:`ToolchainError` with installation advice when none is found.

    Example::

        >>> find_compiler()                  # doctest: +SKIP
        ['/usr/bin/cc']
    """
    env_cc = os.environ.get("CC", "").strip()
    if env_cc:
        parts = shlex.split(env_cc)
        exe = shutil.which(parts[0])
        if exe is None:
            raise ToolchainError(
                f"CC={env_cc!r} does not name an executable compiler; set CC to the path of "
                "gcc or clang (e.g. CC=/usr/bin/gcc), or unset it to use 'cc' from PATH"
            )
        return [exe, *parts[1:]]
    for name in ("cc", "gcc", "clang"):
        exe = shutil.which(name)
        if exe is not None:
            return [exe]
    raise ToolchainError(
        "no C compiler found: Ingot compiles kernels with the system C compiler. Install one "
        "(Debian/Ubuntu: 'apt-get install gcc'; Fedora: 'dnf install gcc'; macOS: "
        "'xcode-select --install'; conda: 'conda install -c conda-forge c-compiler') or set "
        "CC to the compiler's path"
    )


@lru_cache(maxsize=16)
def _version_of(compiler: tuple[str, ...]) -> str:
    try:
        proc = subprocess.run([*compiler, "--version"], capture_output=True, text=True,
                              timeout=60, check=False)
    except OSError as exc:
        raise ToolchainError(f"cannot run the C compiler {compiler[0]!r}: {exc}") from exc
    text = (proc.stdout or proc.stderr).strip()
    if proc.returncode != 0 or not text:
        raise ToolchainError(
            f"'{shlex.join([*compiler, '--version'])}' failed (exit {proc.returncode}); "
            "check that CC points at a working gcc or clang"
        )
    return text.splitlines()[0].strip()


def compiler_version() -> str:
    """First line of ``<compiler> --version`` (cached per compiler).

    Example::

        >>> compiler_version()            # doctest: +SKIP
        'gcc (Debian 12.2.0-14+deb12u1) 12.2.0'
    """
    return _version_of(tuple(find_compiler()))


@lru_cache(maxsize=64)
def compiler_accepts_cpu(name: str, option: str = "march") -> bool:
    """Whether the C compiler knows the CPU ``name`` as ``-march=<name>`` (gcc 12 predates ``znver4``/``znver5``);
    ``option="mtune"`` asks the same of ``-mtune=``.

    Example::

        >>> compiler_accepts_cpu("x86-64-v2")     # doctest: +SKIP
        True
        >>> compiler_accepts_cpu("no-such-cpu", "mtune")   # doctest: +SKIP
        False
    """
    try:
        proc = subprocess.run([*find_compiler(), f"-{option}={name}", "-x", "c", "-E", "-", "-o", os.devnull],
                              input="", capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError, ToolchainError):
        return False
    return proc.returncode == 0


def march_flags(cpu: Any) -> "tuple[str, tuple[str, ...]]":
    """(``-march`` value, extra ``-m<feature>`` flags) that compile for ``cpu`` (an
    `ingot.cpu_model.CpuModel`) with this compiler: its own name when the compiler knows it, else
    the first known of its fallbacks plus the vector features that one lacks, so ``-mcpu=znver5``
    code still uses AVX-512 VNNI/BF16 on a gcc without ``-march=znver5``.

    Example::

        >>> from ingot.cpu_model import named_cpu
        >>> march_flags(named_cpu("haswell"))
        ('haswell', ())
    """
    from ingot.cpu_model import named_cpu

    if cpu.march == "native" or compiler_accepts_cpu(cpu.march):
        return cpu.march, ()
    for fallback in cpu.march_fallbacks:
        if compiler_accepts_cpu(fallback):
            try:
                known = named_cpu(fallback).features
            except ValueError:
                known = frozenset()
            missing = sorted(f for f in cpu.features - known if f.startswith(("avx", "amx", "fma")))
            return fallback, tuple(f"-m{f}" for f in missing)
    raise ToolchainError(f"the C compiler knows neither -march={cpu.march} nor its fallbacks "
                         f"{', '.join(cpu.march_fallbacks) or '(none)'}; use a newer gcc, or a target "
                         "such as 'llvm -mcpu=x86-64-v3'")


def compile_count() -> int:
    """Number of real compiler invocations in this process (cache hits do not count).

    Example::

        >>> isinstance(compile_count(), int)
        True
    """
    return _compile_count


def _bump_count() -> None:
    global _compile_count
    with _lock:
        _compile_count += 1


def _cache_key(source: str, command: list[str], version: str, options: CompileOptions) -> str:
    h = hashlib.sha256()
    for part in (source, "\0".join(command), version):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x01")
    if options.march == "native" or options.mcpu == "native" or options.mtune == "native":
        h.update(disk_cache.host_fingerprint().encode())
    return h.hexdigest()


def _flags_for(options: CompileOptions, mode: str) -> "tuple[list[str], list[str]]":
    """(flags, libs) of a compiler call in ``mode``: shared library, object file or assembly."""
    flags = options.compile_flags()
    if mode == "shared":
        return [*flags, "-fPIC", "-shared"], list(options.libs)
    if mode == "object":
        return [*flags, "-fPIC", "-c"], []
    return [*flags, "-fPIC", "-S"], []  # assembly


def _build(source: str, options: CompileOptions, mode: str, suffix: str,
           cache: str | os.PathLike | None) -> str:
    compiler = find_compiler()
    version = _version_of(tuple(compiler))
    flags, libs = _flags_for(options, mode)
    # The command with placeholders is what the key hashes (paths vary, content does not).
    key = _cache_key(source, [*compiler, *flags, "-o", "<out>", "<src>", *libs], version, options)
    return disk_cache.compiled_entry(
        key, suffix, source, ".c",
        lambda src, out: _run_compiler([*compiler, *flags, "-o", "<out>", str(src), *libs], out, str(src)),
        cache)


def _run_compiler(command: list[str], out: Path, source_path: str = "") -> None:
    """`run_compiler` for the C compiler, counted by `compile_count`."""
    _bump_count()
    run_compiler(command, out, source_path=source_path)


def run_compiler(command: "list[str]", out: "str | os.PathLike", *, source_path: str = "",
                 language: str = "C") -> None:
    """Run a compiler ``command`` (C or CUDA) whose ``"<out>"`` argument stands for the output: it
    writes a temp file next to ``out``, renamed to ``out`` on success, so a reader never sees half a
    file. A failure raises `CompileError` whose first line names ``source_path`` and the compiler's
    first error lines, followed by the command and the compiler's output (``stderr`` then
    ``stdout``, capped at 8000 characters in the message, whole in ``.stderr``); a compiler that
    cannot be started raises `ToolchainError`. Diagnostics are in the C locale (plain ASCII).

    Example (skipped: it needs a C compiler and a bad source file)::

        >>> run_compiler(["cc", "-c", "-o", "<out>", "/tmp/bad.c"], "/tmp/bad.o",
        ...              source_path="/tmp/bad.c")                    # doctest: +SKIP
        CompileError: C compilation failed (exit 1): /tmp/bad.c
          /tmp/bad.c:1:20: error: 'y' undeclared (first use in this function)
          command: cc -c -o /tmp/bad.o.k2j3.tmp /tmp/bad.c
        ...
    """
    out = Path(out)
    fd, tmp_out = tempfile.mkstemp(dir=out.parent, prefix=f"{out.name}.", suffix=".tmp")
    os.close(fd)
    command = [tmp_out if part == "<out>" else part for part in command]
    try:
        # LC_ALL=C: plain ASCII diagnostics, independent of the user's locale.
        proc = subprocess.run(command, capture_output=True, text=True, errors="replace",
                              check=False, env={**os.environ, "LC_ALL": "C"})
    except OSError as exc:
        unlink_quietly(tmp_out)
        raise ToolchainError(f"cannot run the {language} compiler {command[0]!r}: {exc}") from exc
    if proc.returncode != 0:
        unlink_quietly(tmp_out)
        stderr = (proc.stderr or "") + (proc.stdout or "")
        shown = stderr if len(stderr) <= _MAX_MESSAGE_STDERR else (
            stderr[:_MAX_MESSAGE_STDERR] + f"\n... ({len(stderr) - _MAX_MESSAGE_STDERR} more characters)"
        )
        first = first_error_lines(stderr)
        raise CompileError(
            f"{language} compilation failed (exit {proc.returncode}): {source_path}"
            + "".join(f"\n  {line}" for line in first) + "\n"
            f"  command: {shlex.join(command)}\n"
            f"  source:  {source_path}\n"
            f"{Path(command[0]).name} output:\n{shown.rstrip()}",
            command=command, stderr=stderr, source_path=source_path, returncode=proc.returncode,
        )
    os.replace(tmp_out, out)


def first_error_lines(output: str, limit: int = 3) -> "list[str]":
    """The first ``limit`` lines of compiler ``output`` that report an error (``error:`` in gcc's,
    clang's and nvcc's diagnostics), else its first non-blank lines: a `CompileError`'s summary.

    Example:
        >>> first_error_lines("x.c: In function 'f':" + chr(10) + "x.c:1:20: error: 'y' undeclared")
        ["x.c:1:20: error: 'y' undeclared"]
    """
    lines = [ln.rstrip() for ln in output.splitlines() if ln.strip()]
    errors = [ln for ln in lines if re.search(r"\berror\b:", ln, re.IGNORECASE)]
    return (errors or lines)[:limit]


def compile_jobs() -> int:
    """How many compiler processes a multi-unit build runs at once: the CPUs this process may use.

    Example::

        >>> compile_jobs() >= 1
        True
    """
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # not on Linux
        return max(1, os.cpu_count() or 1)


def compile_object(source: str, options: CompileOptions | None = None, *,
                   cache_dir: str | os.PathLike | None = None) -> str:
    """Compile C ``source`` to a position-independent object file (``-fPIC -c``), cached by
    content like a library; return its path. `compile_shared_library_units` links such objects;
    compiling a unit here ahead of time (`ingot.codegen.build.OverlappedLink`, while the next
    kernels are lowered) leaves exactly the cache entry that call would make, so it only links.

    Example::

        >>> compile_object("int one(void) { return 1; }").endswith(".o")   # doctest: +SKIP
        True
    """
    options = options or CompileOptions()
    compiler = find_compiler()
    version = _version_of(tuple(compiler))
    obj_flags, _ = _flags_for(options, "object")
    key = _cache_key(source, [*compiler, *obj_flags, "-o", "<out>", "<src>"], version, options)
    return disk_cache.compiled_entry(
        key, ".o", source, ".c",
        lambda src, obj: _run_compiler([*compiler, *obj_flags, "-o", "<out>", str(src)], obj, str(src)),
        cache_dir)


def compile_shared_library_units(sources: "list[str]", options: CompileOptions | None = None, *,
                                 cache_dir: str | os.PathLike | None = None, jobs: int | None = None) -> str:
    """Compile several C translation units into one shared library; return its path.

    Each unit becomes an object file, cached by its own key (source, command, compiler), so a
    unit that did not change is not compiled again; up to ``jobs`` (default `compile_jobs`)
    compilers run at once (threads waiting on compiler processes: no process pool to start).
    The objects are linked (``cc <flags> -fPIC -shared -o lib.so a.o b.o -lm``) into a library
    cached under the key of the object keys and the link command; when it is in the cache,
    nothing is compiled. Symbols exported by two units clash at link time (`CompileError`),
    except weak ones such as the prelude's helpers.

    Example::

        >>> path = compile_shared_library_units(["int one(void) { return 1; }",
        ...                                      "int two(void) { return 2; }"])   # doctest: +SKIP
        >>> import ctypes; ctypes.CDLL(path).two()                                  # doctest: +SKIP
        2
    """
    if not sources or not all(isinstance(s, str) for s in sources):
        raise TypeError("compile_shared_library_units: sources must be a non-empty list of C source strings")
    options = options or CompileOptions()
    if len(sources) == 1:
        return compile_shared_library(sources[0], options, cache_dir=cache_dir)
    compiler = find_compiler()
    version = _version_of(tuple(compiler))
    obj_flags, _ = _flags_for(options, "object")
    link_flags, libs = _flags_for(options, "shared")
    # Step 1: the keys: one per object, one for the library (hashes the objects' keys, in order).
    obj_command = [*compiler, *obj_flags, "-o", "<out>", "<src>"]
    keys = [_cache_key(s, obj_command, version, options) for s in sources]
    link_command = [*compiler, *link_flags, "-o", "<out>", *(f"<{k}.o>" for k in keys), *libs]
    lib_key = _cache_key("units\0" + "\0".join(keys), link_command, version, options)
    suffix = ".dll" if sys.platform == "win32" else (".dylib" if sys.platform == "darwin" else ".so")
    out = disk_cache.entry_path(lib_key, suffix, cache_dir)
    if disk_cache.touch(out):
        return str(out)
    out.parent.mkdir(parents=True, exist_ok=True)

    # Step 2: compile the objects not in the cache, in parallel (a hit is touched: used now,
    # eviction leaves it until the link below is long done).
    def compile_one(k: int) -> str:
        return compile_object(sources[k], options, cache_dir=cache_dir)

    todo = [k for k in range(len(sources)) if not disk_cache.entry_path(keys[k], ".o", cache_dir).exists()]
    workers = min(len(todo), max(1, jobs or compile_jobs()))
    if workers > 1:
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="ingot-cc") as pool:
            list(pool.map(compile_one, todo))  # re-raises the first CompileError
    objects = [compile_one(k) for k in range(len(sources))]
    # Step 3: link.
    _run_compiler([*compiler, *link_flags, "-o", "<out>", *objects, *libs], out,
                  source_path=" ".join(objects))
    disk_cache.note_write(out.stat().st_size, cache_dir)
    return str(out)


def compile_shared_library(source: str, options: CompileOptions | None = None, *,
                           cache_dir: str | os.PathLike | None = None) -> str:
    """Compile C ``source`` into a shared library (one compiler call); return its path.

    A library already in the cache for the same source, command and compiler is returned
    without compiling. Raises :class:`CompileError` (command, stderr, saved source path) when
    the compiler fails and :class:`ToolchainError` when there is no compiler.

    Example::

        >>> path = compile_shared_library("int one(void) { return 1; }")   # doctest: +SKIP
        >>> import ctypes; ctypes.CDLL(path).one()                          # doctest: +SKIP
        1
    """
    if not isinstance(source, str):
        raise TypeError(f"compile_shared_library: source must be str, got {type(source).__name__}")
    suffix = ".dll" if sys.platform == "win32" else (".dylib" if sys.platform == "darwin" else ".so")
    return _build(source, options or CompileOptions(), "shared", suffix, cache_dir)


def compile_to_assembly(source: str, options: CompileOptions | None = None, *,
                        cache_dir: str | os.PathLike | None = None) -> str:
    """Compile C ``source`` to assembly (``-S``) with the same flags; return the assembly text.

    Used by tests that check for SIMD instructions (e.g. ``vfmadd`` with AVX2).

    Example::

        >>> asm = compile_to_assembly("float f(float a, float b) { return a * b; }")  # doctest: +SKIP
        >>> "mul" in asm                                                                 # doctest: +SKIP
        True
    """
    if not isinstance(source, str):
        raise TypeError(f"compile_to_assembly: source must be str, got {type(source).__name__}")
    path = _build(source, options or CompileOptions(), "asm", ".s", cache_dir)
    with open(path, encoding="utf-8", errors="replace") as f:
        return f.read()
