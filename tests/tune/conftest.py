"""Shared fixtures for ingot.tune tests: small workloads built with TE."""
import pytest
from ingot.testing.kernels import add_func, matmul_func  # noqa: F401  (re-exported for fixtures)


@pytest.fixture
def matmul():
    return matmul_func()


@pytest.fixture
def kernel_cache(tmp_path, monkeypatch):
    d = tmp_path / "kcache"
    monkeypatch.setenv("INGOT_CACHE_DIR", str(d))
    return d
