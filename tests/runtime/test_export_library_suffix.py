"""``export_library`` writes the ``.so`` layout that ``ingot.runtime.load_module`` reads back, and
refuses other suffixes (TVM's ``.tar``) by name, at both levels: a kernel library (runtime
``Module``) and a compiled model (graph ``Executable``: library + manifest + weights)."""
import os

import numpy as np
import pytest

import ingot
from ingot import graph as G
from ingot import te
from ingot.ir.error import IRError
from ingot.runtime import load_module
from ingot.runtime.errors import IngotRuntimeError
from ingot.testing.mlp import mlp_module, mlp_params, mlp_reference


def _add_one_library():
    A = te.placeholder((4,), name="A")
    return ingot.build(te.create_prim_func([A, te.compute((4,), lambda i: A[i] + 1.0, name="B")]), "llvm")


@pytest.mark.parametrize("name", ["x.tar", "x.o", "x"])
def test_kernel_library_other_suffixes_are_refused_with_the_supported_one(tmp_path, name):
    with pytest.raises(IngotRuntimeError, match=r"supported suffix is \.so"):
        _add_one_library().export_library(tmp_path / name)
    assert os.listdir(tmp_path) == []


def test_kernel_library_so_loads_back_and_runs(tmp_path):
    path = _add_one_library().export_library(tmp_path / "x.so")
    lib = load_module(path)
    a, b = np.arange(4, dtype="float32"), np.zeros(4, "float32")
    lib["main"](a, b)
    np.testing.assert_array_equal(b, a + 1)


@pytest.fixture(scope="module")
def mlp_executable():
    params = mlp_params()
    return G.build(mlp_module(1, params), "llvm"), params


@pytest.mark.parametrize("name", ["model.tar", "model.o"])
def test_model_other_suffixes_are_refused_before_anything_is_written(tmp_path, mlp_executable, name):
    ex, _ = mlp_executable
    with pytest.raises(IRError, match=r"supported suffix is \.so.*load_module.*export to .*model\.so"):
        ex.export_library(str(tmp_path / name))
    assert os.listdir(tmp_path) == []


def test_model_so_loads_back_with_its_weights_and_runs(tmp_path, mlp_executable):
    ex, params = mlp_executable
    path = ex.export_library(str(tmp_path / "model.so"))
    assert sorted(os.listdir(tmp_path)) == ["model.json", "model.so", "model.weights.bin"]
    x = np.random.default_rng(0).standard_normal((1, 784)).astype("float32")
    out = G.Executor(load_module(path), ingot.cpu())["main"](x)
    np.testing.assert_allclose(out.numpy(), mlp_reference(x, params), rtol=1e-4, atol=1e-5)
