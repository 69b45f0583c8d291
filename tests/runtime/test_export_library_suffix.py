"""``export_library`` writes a ``.so`` and refuses other suffixes (TVM's ``.tar``) by name."""
import os

import pytest

import ingot
from ingot import te
from ingot.runtime.errors import IngotRuntimeError


@pytest.mark.parametrize("name", ["x.tar", "x.o", "x"])
def test_other_suffixes_are_refused_with_the_supported_one(tmp_path, name):
    A = te.placeholder((4,), name="A")
    lib = ingot.build(te.create_prim_func([A, te.compute((4,), lambda i: A[i] + 1.0, name="B")]), "llvm")
    with pytest.raises(IngotRuntimeError, match=r"supported suffix is \.so"):
        lib.export_library(tmp_path / name)
    assert not os.path.exists(tmp_path / name)
