"""ingot.ir.transform: passes, Sequential, PassContext, config schema, instruments."""
import os

import pytest

from ingot.ir import IRModule, decl_buffer
from ingot.ir import transform as T
from ingot.tir import Evaluate, PrimFunc
from ingot.tir.transform import prim_func_pass


def _mod():
    return IRModule({"f": PrimFunc([decl_buffer((4,), "float32", "A")], Evaluate(0)), "g": "not a prim func"})


def _tagger(name, opt_level=0):
    return T.module_pass(lambda m, c: m.with_attrs(**{name: True}), opt_level=opt_level, name=name)


def test_module_pass_decorator_and_opt_level():
    @T.module_pass(opt_level=3)
    def late(mod, ctx):
        return mod.with_attrs(late=True)

    assert late.info.name == "late" and late.info.opt_level == 3
    with T.PassContext(opt_level=2):
        assert "late" not in late(_mod()).attrs
    with T.PassContext(opt_level=3):
        assert late(_mod()).attrs["late"] is True


def test_required_and_disabled_pass():
    p = _tagger("P", opt_level=4)
    with T.PassContext(opt_level=0, required_pass=["P"]):
        assert "P" in p(_mod()).attrs
    with T.PassContext(opt_level=4, disabled_pass=["P"]):
        assert "P" not in p(_mod()).attrs


def test_sequential_nests_and_gates():
    inner = T.Sequential([_tagger("a"), _tagger("b", opt_level=3)], name="inner")
    outer = T.Sequential([inner, _tagger("c")], name="outer")
    with T.PassContext(opt_level=2):
        assert sorted(outer(_mod()).attrs) == ["a", "c"]
    with pytest.raises(TypeError, match="not a Pass"):
        T.Sequential([lambda m: m])


def test_pass_requires_registered_pass():
    T.register_pass("TagR", lambda: _tagger("R"))
    p = T.module_pass(lambda m, c: m.with_attrs(after=m.attrs.get("R", False)), name="NeedsR", required=["TagR"])
    assert p(_mod()).attrs["after"] is True
    missing = T.module_pass(lambda m, c: m, name="NeedsMissing", required=["NoSuchPass"])
    with pytest.raises(Exception, match="NoSuchPass"):
        missing(_mod())


def test_pass_context_current_and_nesting():
    assert T.PassContext.current().opt_level == 2
    with T.PassContext(opt_level=1):
        with T.PassContext(opt_level=3):
            assert T.PassContext.current().opt_level == 3
        assert T.PassContext.current().opt_level == 1


def test_config_validation_names_valid_keys():
    with pytest.raises(T.PassConfigError) as err:
        T.PassContext(config={"tir.disable_vectorise": True})
    msg = str(err.value)
    assert "tir.disable_vectorise" in msg and "tir.disable_vectorize" in msg and "tir.add_lower_pass" in msg
    with pytest.raises(T.PassConfigError, match="expects a value of type bool"):
        T.PassContext(config={"tir.noalias": "yes"})
    ctx = T.PassContext(config={"tir.disable_vectorize": 1})
    assert ctx.config["tir.disable_vectorize"] is True


def test_pass_needs_module():
    with pytest.raises(TypeError, match="IRModule"):
        _tagger("x")(PrimFunc([], Evaluate(0)))


def test_function_pass_and_prim_func_pass_apply_by_type():
    seen = []
    p = prim_func_pass(lambda f, m, c: seen.append(f) or f.with_attr("x", 1), name="X")
    out = p(_mod())
    assert len(seen) == 1 and out["f"].attrs["x"] == 1 and out["g"] == "not a prim func"
    upper = T.function_pass(lambda f, m, c: f.upper(), func_type=str, name="Upper")
    assert upper(_mod())["g"] == "NOT A PRIM FUNC"


def test_class_decorator():
    @T.module_pass(opt_level=0)
    class AddAttr:
        def __init__(self, key):
            self.key = key

        def transform_module(self, mod, ctx):
            return mod.with_attrs(**{self.key: 1})

    p = AddAttr("hello")
    assert p.info.name == "AddAttr" and p(_mod()).attrs["hello"] == 1


def test_instrument_hooks_order_and_should_run():
    events = []

    class Rec(T.PassInstrument):
        def enter_pass_ctx(self):
            events.append("enter")

        def exit_pass_ctx(self):
            events.append("exit")

        def should_run(self, mod, info):
            return info.name != "skip"

        def run_before_pass(self, mod, info):
            events.append(("before", info.name))

        def run_after_pass(self, mod, info):
            events.append(("after", info.name))

    with T.PassContext(instruments=[Rec()]):
        mod = T.Sequential([_tagger("a"), _tagger("skip")], name="seq")(_mod())
    assert "skip" not in mod.attrs
    assert events == ["enter", ("before", "seq"), ("before", "a"), ("after", "a"), ("after", "seq"), "exit"]


def test_timing_instrument_renders_table():
    timing = T.PassTimingInstrument()
    with T.PassContext(instruments=[timing]):
        T.Sequential([_tagger("a"), _tagger("b")], name="seq")(_mod())
    table = timing.render()
    lines = table.splitlines()
    assert len(lines) == 4 and "seq" in lines[1] and lines[2].startswith("    a:")


def test_dump_ir_writes_files(tmp_path):
    with T.PassContext(instruments=[T.DumpIR(tmp_path)]):
        T.Sequential([_tagger("a")], name="seq")(_mod())
    names = sorted(os.listdir(tmp_path))
    assert names == ["000_input.txt", "001_a.txt", "002_seq.txt"]
    assert "from f" in (tmp_path / "001_a.txt").read_text()


def test_print_ir_instrument(capsys):
    with T.PassContext(instruments=[T.PrintIRInstrument(passes=["a"])]):
        T.Sequential([_tagger("a"), _tagger("b")])(_mod())
    out = capsys.readouterr().out
    assert "# IR after a" in out and "after b" not in out
