"""`ParseError` and the source bookkeeping that lets it point at the user's line.

Example:
    >>> src = Source.from_text("x = 1\\ny = T.foo(2)\\n", "demo.py")
    >>> import ast
    >>> node = ast.parse(src.text).body[1].value
    >>> print(src.error(node, "unknown TVMScript construct T.foo"))
    demo.py:2: unknown TVMScript construct T.foo
        y = T.foo(2)
            ^^^^^^^^
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from typing import Any

from ingot.ir.error import IngotError


class ParseError(IngotError, SyntaxError):
    """A TVMScript program that cannot be parsed; the message names the file, the line, and shows
    the offending source line with a caret under the construct.

    Example:
        >>> err = ParseError("undefined name 'Q'", ("f.py", 3, 5, "    Q[0] = 1"), "f.py:3: ...")
        >>> (err.filename, err.lineno)
        ('f.py', 3)
    """

    def __init__(self, msg: str, location: tuple = ("<string>", 1, 1, ""), full_text: str = ""):
        SyntaxError.__init__(self, msg, location)
        self.full_text = full_text or msg

    def __str__(self) -> str:
        return self.full_text


class Source:
    """The text being parsed and where it came from (file name, first line, removed indent).

    Example:
        >>> Source.from_text("def f():\\n    pass\\n").filename
        '<string>'
    """

    def __init__(self, text: str, filename: str, first_line: int, original_lines: list[str], indent: int):
        self.text = text
        self.filename = filename
        self.first_line = first_line
        self.original_lines = original_lines
        self.indent = indent

    @staticmethod
    def from_text(text: str, filename: str = "<string>") -> "Source":
        lines = text.splitlines()
        dedented = textwrap.dedent(text)
        return Source(dedented, filename, 1, lines, _removed_indent(lines, dedented.splitlines()))

    @staticmethod
    def from_object(obj: Any) -> "Source":
        """The source of a function or class (with its decorators)."""
        try:
            try:
                lines, first_line = inspect.getsourcelines(obj)
                filename = inspect.getsourcefile(obj) or inspect.getfile(obj)
            except (OSError, TypeError):
                if not inspect.isclass(obj):
                    raise
                lines, first_line, filename = _class_source_from_methods(obj)
        except (OSError, TypeError) as err:
            raise ParseError(
                f"cannot read the source of {getattr(obj, '__qualname__', obj)!r} ({err}); TVMScript is "
                "parsed from source, so define it in a file, or pass the text to ingot.script.from_source"
            ) from None
        text = "".join(lines)
        dedented = textwrap.dedent(text)
        plain = [line.rstrip("\n") for line in lines]
        return Source(dedented, filename, max(first_line, 1), plain, _removed_indent(plain, dedented.splitlines()))

    def error(self, node: Any, message: str) -> ParseError:
        """A `ParseError` at ``node`` (an ``ast`` node, or None for the whole source)."""
        lineno = getattr(node, "lineno", 1) or 1
        col = (getattr(node, "col_offset", 0) or 0) + self.indent
        end_col = getattr(node, "end_col_offset", None)
        end_line = getattr(node, "end_lineno", lineno)
        file_line = self.first_line + lineno - 1
        code = self.original_lines[lineno - 1] if 0 < lineno <= len(self.original_lines) else ""
        if end_col is not None and end_line == lineno:
            width = max(end_col + self.indent - col, 1)
        else:
            width = max(len(code.rstrip()) - col, 1)
        stripped = code.lstrip()
        shift = len(code) - len(stripped)
        caret = " " * max(col - shift, 0) + "^" * width
        full = f"{self.filename}:{file_line}: {message}\n    {stripped.rstrip()}\n    {caret}"
        return ParseError(message, (self.filename, file_line, col + 1, code), full)


def _class_source_from_methods(cls: Any) -> tuple[list[str], int, str]:
    """The source of ``cls`` found from one of its methods (inspect cannot find classes defined in
    doctests or notebooks, but their methods' code objects know the file and line)."""
    import linecache
    import re

    for value in vars(cls).values():
        code = getattr(value, "__code__", None)
        if code is None:
            continue
        all_lines = linecache.getlines(code.co_filename)
        pattern = re.compile(rf"^\s*class\s+{re.escape(cls.__name__)}\b")
        for start in range(min(code.co_firstlineno, len(all_lines)) - 1, -1, -1):
            if pattern.match(all_lines[start]):
                while start > 0 and all_lines[start - 1].lstrip().startswith("@"):
                    start -= 1
                block = inspect.getblock(all_lines[start:])
                return list(block), start + 1, code.co_filename
    raise OSError("could not find class definition")


def _removed_indent(original: list[str], dedented: list[str]) -> int:
    for a, b in zip(original, dedented):
        if a.strip():
            return len(a) - len(b)
    return 0


def first_def(tree: ast.Module) -> ast.stmt:
    """The first function or class definition of a parsed source."""
    for stmt in tree.body:
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
            return stmt
    raise ParseError("no function or class definition found in the TVMScript source")
