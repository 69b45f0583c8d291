"""TVM's ``Target("llvm", host="llvm")`` and ``-host=`` spellings."""
import pytest

from ingot.target import Target, TargetError


def test_cpu_target_is_its_own_host():
    for t in (Target("llvm", host="llvm"), Target("llvm -host=llvm"), Target("c -num-cores=2", host=Target("c"))):
        assert t.host is t
        assert "host" not in t.attrs
    assert Target("llvm", host="llvm") == Target("llvm")


def test_cuda_target_keeps_its_host():
    t = Target("cuda -arch=sm_90", host="llvm -num-cores=2")
    assert t.host == Target("llvm -num-cores=2")
    assert Target("cuda").host == Target("llvm")
    assert Target(str(t)) == t


def test_cpu_target_with_a_gpu_host_is_refused():
    with pytest.raises(TargetError, match="its own host"):
        Target("llvm", host="cuda")
