import os
import platform
import re

import pytest

from ingot.codegen import toolchain
from ingot.codegen.prelude import C_PRELUDE
from ingot.codegen.toolchain import (
    CompileError,
    CompileOptions,
    ToolchainError,
    compile_count,
    compile_shared_library,
    compile_to_assembly,
    find_compiler,
)

pytestmark = pytest.mark.compiler

SRC = C_PRELUDE + "INGOT_EXPORT int32_t forty_two(void) { return 42; }\n"


def test_find_compiler_and_version():
    cc = find_compiler()
    assert os.path.isfile(cc[0])
    assert toolchain.compiler_version()


def test_cc_override_must_exist(monkeypatch):
    monkeypatch.setenv("CC", "/nonexistent/bin/my-cc")
    with pytest.raises(ToolchainError, match="CC=.*does not name an executable"):
        find_compiler()


def test_no_compiler_message(monkeypatch):
    monkeypatch.delenv("CC", raising=False)
    monkeypatch.setenv("PATH", "/nonexistent")
    with pytest.raises(ToolchainError, match="no C compiler found.*apt-get install gcc"):
        find_compiler()


def test_cache_dir_env_and_argument(cache_dir, tmp_path):
    assert toolchain.cache_dir() == cache_dir
    explicit = tmp_path / "explicit"
    assert toolchain.cache_dir(explicit) == explicit and explicit.is_dir()


def test_compiles_once_then_hits_cache(cache_dir):
    import ctypes

    before = compile_count()
    p1 = compile_shared_library(SRC, CompileOptions())
    p2 = compile_shared_library(SRC, CompileOptions())
    assert p1 == p2
    assert compile_count() == before + 1
    assert p1.startswith(str(cache_dir))
    assert ctypes.CDLL(p1).forty_two() == 42
    # no temporary files left behind; the source is kept next to the library
    files = sorted(os.listdir(os.path.dirname(p1)))
    assert not [f for f in files if f.endswith(".tmp")]
    assert any(f.endswith(".c") for f in files)


def test_changed_flag_or_source_recompiles(cache_dir):
    before = compile_count()
    p1 = compile_shared_library(SRC, CompileOptions())
    p2 = compile_shared_library(SRC, CompileOptions(opt_level=2))
    p3 = compile_shared_library(SRC, CompileOptions(openmp=False))
    p4 = compile_shared_library(SRC + "\n", CompileOptions())
    assert len({p1, p2, p3, p4}) == 4
    assert compile_count() == before + 4


def test_explicit_cache_dir_argument(tmp_path):
    p = compile_shared_library(SRC, CompileOptions(), cache_dir=tmp_path / "c")
    assert p.startswith(str(tmp_path / "c"))


def test_compile_error_has_command_stderr_and_source(cache_dir):
    bad = "int broken(void) { return undefined_symbol_xyz; }\n"
    with pytest.raises(CompileError) as info:
        compile_shared_library(bad, CompileOptions())
    e = info.value
    assert "undefined_symbol_xyz" in e.stderr
    assert "undefined_symbol_xyz" in str(e)
    assert "-shared" in e.command and "-fPIC" in e.command
    assert os.path.isfile(e.source_path)
    with open(e.source_path) as f:
        assert f.read() == bad
    assert e.source_path in str(e)
    assert "command:" in str(e)
    # one-line summary first: the source file, then the compiler's first error line
    head = str(e).splitlines()
    assert head[0].startswith("C compilation failed") and head[0].endswith(e.source_path)
    assert "error" in head[1] and "undefined_symbol_xyz" in head[1]


def test_flags():
    flags = CompileOptions().compile_flags()
    assert flags[:2] == ["-O3", "-march=native"]
    assert "-fopenmp" in flags and "-std=c11" in flags
    no_omp = CompileOptions(openmp=False, march=None, mcpu="cortex-a72").compile_flags()
    assert "-fopenmp" not in no_omp and "-fopenmp-simd" in no_omp and "-mcpu=cortex-a72" in no_omp
    assert "-ffast-math" in CompileOptions(extra_flags=["-ffast-math"]).compile_flags()
    with pytest.raises(ValueError, match="opt_level"):
        CompileOptions(opt_level=7)


def test_assembly_shows_simd(cache_dir):
    src = ("void axpy(float* restrict y, const float* restrict x, float a, int n) {\n"
           "  for (int i = 0; i < n; ++i) y[i] += a * x[i];\n}\n")
    asm = compile_to_assembly(src, CompileOptions())
    assert "axpy" in asm
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        assert re.search(r"\b(v?mulps|vfmadd\w*ps)\b", asm), asm[:2000]
    elif machine in ("aarch64", "arm64"):
        assert re.search(r"\bfml[as]\b|\bfmul\b.*\.4s", asm), asm[:2000]
