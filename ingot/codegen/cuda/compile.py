"""Compiling CUDA source with ``nvcc``, cached by content (the CUDA side of
`ingot.codegen.toolchain`).

Note: one ``nvcc`` call per module. The default output is a *fatbin* holding the SASS for the
target's ``-arch`` and its PTX, so the driver loads it on that GPU directly and JIT-compiles the
PTX on newer ones (``-gencode arch=compute_90,code=[sm_90,compute_90]``). ``cubin``, ``ptx``
and ``obj`` (``nvcc -c``) are there for tests and inspection. The cache key is the sha256 of the
source, the command (output path abstracted) and ``nvcc --version``; files land in
``<cache>/cuda/<key[:2]>/<key>.<ext>`` (`ingot.codegen.disk_cache.compiled_entry`) through a temp
file and ``os.replace``. ``$NVCC`` may
point at the compiler; else ``nvcc`` on ``PATH``, else ``/usr/local/cuda/bin/nvcc``.

Example:
    >>> compile_cuda('extern "C" __global__ void k(float* x) { x[threadIdx.x] = 1.0f; }', "sm_80")  # doctest: +SKIP
    '/home/me/.cache/ingot/kernels/cuda/3f/3f...fatbin'
"""
from __future__ import annotations

import functools
import hashlib
import os
import re
import shlex
import shutil
import subprocess

from ingot.codegen import disk_cache
from ingot.codegen.toolchain import ToolchainError, run_compiler

__all__ = ["find_nvcc", "nvcc_version", "compile_cuda", "normalize_arch", "DEFAULT_ARCH", "OUTPUT_KINDS"]

#: Architecture used when the target names none and no GPU can be asked (PTX of it JITs forward).
DEFAULT_ARCH = "sm_80"
#: output kind -> (nvcc flag, file suffix)
OUTPUT_KINDS = {"fatbin": ("--fatbin", ".fatbin"), "cubin": ("--cubin", ".cubin"), "ptx": ("--ptx", ".ptx"),
                "obj": ("-c", ".o")}


def find_nvcc() -> str:
    """Path of the CUDA compiler (``$NVCC``, ``nvcc`` on PATH, ``/usr/local/cuda/bin/nvcc``).

    Example:
        >>> find_nvcc()            # doctest: +SKIP
        '/usr/local/bin/nvcc'
    """
    env = os.environ.get("NVCC")
    candidates = [env] if env else []
    candidates += [shutil.which("nvcc"), "/usr/local/cuda/bin/nvcc"]
    for c in candidates:
        if c and os.path.isfile(c) and os.access(c, os.X_OK):
            return c
    raise ToolchainError(
        "no CUDA compiler found: install the CUDA toolkit (nvcc) or set NVCC to its path; "
        "the CUDA backend compiles kernels with nvcc at build time"
    )


@functools.lru_cache(maxsize=4)
def nvcc_version(nvcc: "str | None" = None) -> str:
    """``nvcc --version`` text (part of the cache key).

    Example:
        >>> "release" in nvcc_version()        # doctest: +SKIP
        True
    """
    nvcc = nvcc or find_nvcc()
    try:
        proc = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False)
    except OSError as exc:
        raise ToolchainError(f"cannot run the CUDA compiler {nvcc!r}: {exc}") from exc
    return proc.stdout.strip()


def normalize_arch(arch: "str | None") -> str:
    """``"sm_90"`` from ``"sm_90"``, ``"90"``, ``"compute_90"`` or ``None`` (`DEFAULT_ARCH`).

    Example:
        >>> normalize_arch("compute_86"), normalize_arch(None), normalize_arch("sm_90a")
        ('sm_86', 'sm_80', 'sm_90a')
    """
    if arch is None:
        return DEFAULT_ARCH
    text = str(arch).strip()
    m = re.fullmatch(r"(?:sm_|compute_)?(\d{2,3}[a-z]?)", text)
    if not m:
        raise ValueError(f"CUDA architecture {arch!r} is not like 'sm_90' (or 'sm_80', 'sm_90a', '86')")
    return f"sm_{m.group(1)}"


def compile_cuda(source: str, arch: "str | None" = None, output: str = "fatbin", *,
                 options: "tuple[str, ...]" = (), cache: "str | os.PathLike | None" = None) -> str:
    """Compile CUDA ``source`` for ``arch`` and return the path of the cached result.

    ``output``: ``"fatbin"`` (SASS + PTX; what the runtime loads), ``"cubin"``, ``"ptx"`` or
    ``"obj"`` (``nvcc -c``). ``options`` are extra nvcc flags. A rejected source raises
    `CompileError` with the command and nvcc's output.

    Example:
        >>> path = compile_cuda(src.code, "sm_90", "cubin")      # doctest: +SKIP
    """
    if output not in OUTPUT_KINDS:
        raise ValueError(f"output must be one of {sorted(OUTPUT_KINDS)}, got {output!r}")
    nvcc = find_nvcc()
    sm = normalize_arch(arch)
    number = sm[3:]
    flag, suffix = OUTPUT_KINDS[output]
    if output == "fatbin":
        arch_flags = ["-gencode", f"arch=compute_{number},code=[sm_{number},compute_{number}]"]
    elif output == "ptx":
        arch_flags = [f"-arch=compute_{number}"]
    else:
        arch_flags = [f"-arch=sm_{number}"]
    flags = ["-O3", "-std=c++17", *arch_flags, flag, *options]
    key_src = "\0".join([source, shlex.join([nvcc, *flags, "-o", "<out>", "<src>"]), nvcc_version(nvcc)])
    key = hashlib.sha256(key_src.encode("utf-8", "surrogatepass")).hexdigest()
    return disk_cache.compiled_entry(
        key, suffix, source, ".cu",
        lambda src, out: run_compiler([nvcc, *flags, "-o", "<out>", str(src)], out, source_path=str(src),
                                      language="CUDA"),
        cache, disk_cache.CUDA)
