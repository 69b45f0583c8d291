"""Fixtures for runtime tests: a private kernel cache and the hand-written C module."""

import os
import sys

import pytest

_HERE = os.path.dirname(os.path.abspath(__file__))
_ROOT = os.path.dirname(os.path.dirname(_HERE))
for _p in (_HERE, _ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from ingot.codegen.toolchain import CompileOptions, compile_shared_library  # noqa: E402

import handwritten  # noqa: E402

# Warnings are errors for the hand-written module: the prelude must compile cleanly.
STRICT = CompileOptions(extra_flags=("-Wall", "-Wextra", "-Werror"))


@pytest.fixture
def cache_dir(tmp_path, monkeypatch):
    """A fresh, private INGOT_CACHE_DIR for one test."""
    d = tmp_path / "kernel-cache"
    monkeypatch.setenv("INGOT_CACHE_DIR", str(d))
    return d


@pytest.fixture(scope="session")
def session_cache(tmp_path_factory):
    return tmp_path_factory.mktemp("ingot-runtime-cache")


@pytest.fixture(scope="session")
def lib_path(session_cache):
    """The hand-written module, compiled once per session (source embedded)."""
    return compile_shared_library(handwritten.module_source(), STRICT, cache_dir=session_cache)


@pytest.fixture(scope="session")
def lib_path_no_source(session_cache):
    return compile_shared_library(handwritten.module_source(include_source=False), STRICT,
                                  cache_dir=session_cache)


@pytest.fixture(scope="session")
def mod(lib_path):
    from ingot.runtime import Module

    return Module(lib_path)
