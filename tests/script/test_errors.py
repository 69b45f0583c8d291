"""TVMScript parse errors name the file and line and show the source line with a caret."""
import inspect
import re

import pytest

import ingot  # noqa: F401  (registers the TVMScript printer)
from ingot.ir import IngotError
from ingot.script import ParseError, from_source
from ingot.script import tir as T


def _line_of(marker: str) -> int:
    lines = inspect.getsource(inspect.getmodule(_line_of)).splitlines()
    return next(i for i, line in enumerate(lines, 1) if marker in line)


def test_parse_error_is_ingot_error_and_syntax_error():
    assert issubclass(ParseError, IngotError) and issubclass(ParseError, SyntaxError)


def test_undefined_buffer_points_at_line():
    with pytest.raises(ParseError) as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                D[i] = A[i]  # MARK-undefined
    err = info.value
    text = str(err)
    assert err.lineno == _line_of("MARK-undefined")
    assert err.filename.endswith("test_errors.py")
    assert f"test_errors.py:{err.lineno}: undefined name 'D'" in text
    assert "D[i] = A[i]  # MARK-undefined" in text
    assert "\n    ^" in text


def test_remap_kinds_length_mismatch():
    with pytest.raises(ParseError, match=r'kinds string "SSR" has 3 letters but 2') as info:
        @T.prim_func
        def f(A: T.Buffer((4, 4), "float32")):
            for i, j in T.grid(4, 4):
                with T.block("A"):
                    vi, vj = T.axis.remap("SSR", [i, j])  # MARK-remap
                    A[vi, vj] = 0.0
    assert info.value.lineno == _line_of("MARK-remap")
    caret_line = str(info.value).splitlines()[-1]
    assert caret_line.strip().startswith("^") and len(caret_line.strip()) == len('T.axis.remap("SSR", [i, j])')


def test_unknown_t_construct():
    with pytest.raises(ParseError, match=r"unknown TVMScript construct T.foo") as info:
        @T.prim_func
        def f(A: T.Buffer((4,), "float32")):
            for i in range(4):
                A[i] = T.foo(A[i])  # MARK-foo
    assert info.value.lineno == _line_of("MARK-foo")


def test_errors_in_from_source_use_given_filename():
    src = '''
@T.prim_func
def main(A: T.Buffer((4,), "float32")):
    for i in range(4):
        A[i, 0] = 1.0
'''
    with pytest.raises(ParseError) as info:
        from_source(src, filename="kernel.py")
    text = str(info.value)
    assert text.startswith("kernel.py:5: buffer 'A' has 1 dimension(s) but is indexed with 2")
    assert "A[i, 0] = 1.0" in text


@pytest.mark.parametrize(
    "body, message",
    [
        ("    A[0] = T.exp(1)\n", "T.exp needs a floating-point argument"),
        ("    x = T.axis.spatial(4, 0)\n", "T.axis must be inside a `with T.block"),
        ("    T.reads(A[0])\n", "must be inside a `with T.block"),
        ("    for i in T.grid(4, 4):\n        pass\n", "1 loop variable(s) for 2 loop(s)"),
        ("    for i in [1, 2]:\n        pass\n", "loop over range"),
        ("    while True:\n        pass\n", "unsupported statement in TVMScript: While"),
        ("    A[0] = T.int8(1)\n", "stored value"),
        ("    return 1\n", "a prim_func returns nothing"),
        ("    with T.block('b'):\n        vi, vj = T.axis.remap('SS', [0, 1])\n", "binds loop variables only"),
    ],
)
def test_error_messages(body, message):
    src = '@T.prim_func\ndef main(A: T.Buffer((4,), "float32")):\n' + body
    with pytest.raises(ParseError, match=re.escape(message)) as info:
        from_source(src, filename="k.py")
    assert str(info.value).startswith("k.py:")


def test_missing_annotation_and_python_syntax_error():
    with pytest.raises(ParseError, match="parameter 'A' needs a type annotation"):
        from_source("@T.prim_func\ndef main(A):\n    pass\n")
    with pytest.raises(ParseError, match="Python syntax error") as info:
        from_source("@T.prim_func\ndef main(A: T.handle):\n    for i in range(4)\n        pass\n")
    assert info.value.lineno == 3


def test_ir_module_rejects_undecorated_methods():
    with pytest.raises(ParseError, match="must be decorated with @T.prim_func"):
        from_source("@I.ir_module\nclass M:\n    def f(A: T.handle):\n        pass\n")
