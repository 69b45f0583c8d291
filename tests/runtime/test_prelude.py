"""The C prelude compiles cleanly and C literals survive any text."""

import ctypes
import json
import shutil
import subprocess

import pytest

from ingot.codegen.prelude import C_PRELUDE, c_string_literal, emit_metadata_c, emit_source_c
from ingot.codegen.toolchain import CompileOptions, compile_shared_library
from ingot.runtime import Module, abi

pytestmark = pytest.mark.compiler

NASTY = [
    "",
    'plain "quoted" text',
    "back\\slash \\n not a newline",
    "line1\nline2\r\n\ttab",
    "comment end */ and start /* and //",
    "trigraph ??/ and ??= and ??' ?",
    "non-ascii: é ü 中文 🚀",
    "octal digits after escape: \x01" + "234",
    "\x7f control \x1b[0m",
]


def test_prelude_declares_the_abi():
    for name in ["DLTensor", "DLDataType", "DLDevice", "IngotValue", "IngotPackedFunc",
                 "INGOT_ARG_TENSOR", "ingot_check_num_args", "ingot_check_tensor",
                 "ingot_check_dim", "ingot_check_dim_equal", "ingot_time_function",
                 "ingot_set_num_threads", "#include <omp.h>"]:
        assert name in C_PRELUDE
    assert f"#define INGOT_ARG_TENSOR {abi.ARG_TENSOR}" in C_PRELUDE


def test_string_literals_round_trip(cache_dir):
    defs = "".join(
        f"INGOT_EXPORT const char s{i}[] = {c_string_literal(s, max_line=20)};\n"
        for i, s in enumerate(NASTY)
    )
    lib = ctypes.CDLL(compile_shared_library(C_PRELUDE + defs, CompileOptions(
        extra_flags=("-Wall", "-Werror"))))
    for i, s in enumerate(NASTY):
        addr = ctypes.addressof(ctypes.c_char.in_dll(lib, f"s{i}"))
        assert ctypes.string_at(addr).decode("utf-8") == s


def test_string_literal_rejects_nul():
    with pytest.raises(ValueError, match="NUL"):
        c_string_literal("a\x00b")


def test_metadata_and_source_round_trip(cache_dir):
    md = {"version": 1, "target": 'llvm -mcpu="x"', "note": "\n".join(NASTY),
          "functions": {"main": {"symbol": "ingot_main", "params": [
              {"name": "A", "kind": "tensor", "dtype": "float32", "shape": [128, "n"]},
              {"name": "n", "kind": "scalar", "dtype": "int32"}]}}}
    body = "INGOT_EXPORT int32_t ingot_main(IngotValue* a, int32_t* c, int32_t n, char* e, int32_t l)" \
           " { (void)a; (void)c; (void)n; (void)e; (void)l; return 0; }\n"
    src = C_PRELUDE + body
    full = src + emit_metadata_c(md) + emit_source_c(src + "/* */ ??/ é")
    mod = Module(compile_shared_library(full, CompileOptions(extra_flags=("-Wall", "-Werror"))))
    assert mod.metadata["note"] == md["note"]
    assert mod.metadata["functions"] == md["functions"]
    assert mod.target == md["target"]
    assert mod.get_source().endswith("/* */ ??/ é")
    assert json.loads(json.dumps(mod.metadata)) == mod.metadata


def test_metadata_validation_names_the_problem():
    with pytest.raises(ValueError, match="'main'.*symbol"):
        emit_metadata_c({"functions": {"main": {"params": []}}})
    with pytest.raises(ValueError, match="param #0.*kind"):
        emit_metadata_c({"functions": {"main": {"symbol": "m", "params": [{"name": "A"}]}}})
    with pytest.raises(ValueError, match="version"):
        emit_metadata_c({"version": 2, "functions": {}})
    with pytest.raises(TypeError, match="not JSON-serializable"):
        emit_metadata_c({"functions": {}, "x": object()})


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_prelude_is_valid_cplusplus(tmp_path):
    f = tmp_path / "p.cc"
    f.write_text(C_PRELUDE + emit_metadata_c({"functions": {}}))
    proc = subprocess.run(["g++", "-x", "c++", "-Wall", "-Werror", "-fsyntax-only", str(f)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr


def test_prelude_is_pedantic_c11(tmp_path):
    f = tmp_path / "p.c"
    f.write_text(C_PRELUDE)
    cc = shutil.which("cc") or shutil.which("gcc")
    proc = subprocess.run([cc, "-std=c11", "-Wall", "-Wextra", "-pedantic", "-Werror",
                           "-fsyntax-only", str(f)], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
