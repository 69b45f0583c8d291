"""Target parsing (no compiler needed)."""
import pytest

from ingot.target import Target, TargetError, as_target, host_vector_width_bits


def test_parse_llvm_with_options():
    t = Target("llvm -mcpu=znver5 -num-cores=2")
    assert (t.kind, t.mcpu, t.num_cores, t.vector_width_bits, t.is_cpu) == ("llvm", "znver5", 2, 512, True)
    assert t.vector_lanes("float32") == 16 and t.vector_lanes("float64") == 8


def test_canonical_string_sorts_options_and_hashes_equal():
    a = Target("llvm -num-cores=2 -mcpu=haswell")
    b = Target("llvm   -mcpu=haswell -num-cores=2")
    assert str(a) == "llvm -mcpu=haswell -num-cores=2"
    assert a == b and hash(a) == hash(b) and a == str(b)
    assert Target({"kind": "llvm", "mcpu": "haswell", "num-cores": 2}) == a
    assert Target(a.export()) == a


def test_defaults_and_host_detection():
    t = Target("llvm")
    assert t.mcpu is None and t.num_cores >= 1
    assert t.vector_width_bits == host_vector_width_bits() in (128, 256, 512)
    assert Target("c").is_cpu and not Target("cuda").is_cpu
    assert Target("cuda -arch=sm_90").arch == "sm_90"
    assert Target("llvm -vector-width=256").vector_width_bits == 256
    assert Target("llvm -fast-math").attrs["fast-math"] is True


def test_current_context():
    assert Target.current() is None
    with Target("llvm -num-cores=1") as outer:
        with Target("c") as inner:
            assert Target.current() is inner
        assert Target.current() is outer
        assert as_target(None) is outer
    assert Target.current() is None
    assert as_target(None) == Target("llvm")


@pytest.mark.parametrize("text, fragment", [
    ("opencl", "valid kinds are llvm, cuda, c"),
    ("", "valid kinds"),
    ("llvm -mcpu", "needs a value"),
    ("llvm mcpu=x", "malformed option"),
    ("llvm -bogus=1", "valid options are"),
    ("llvm -num-cores=two", "expects an integer"),
    ("cuda -mcpu=x", "unknown option -mcpu"),
])
def test_errors_name_the_problem(text, fragment):
    with pytest.raises(TargetError, match=fragment):
        Target(text)


def test_immutable():
    t = Target("llvm")
    with pytest.raises(AttributeError):
        t.kind = "c"
