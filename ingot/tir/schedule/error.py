"""`ScheduleError`: a primitive's refusal, pointing at the IR it refused.

Note: STYLE §8 — an error carries the function and the offending nodes and prints the function
with those nodes marked. `ingot.tir.schedule` sits below `ingot.script` in the layer list, so it
does not import the TVMScript printer: it prints through `ingot.ir.printer.node_to_str`, where
`ingot.script` registers itself (``import ingot`` does), with a ``^^^`` line under every offending
loop or block. Without a registered printer it falls back to a compact outline of its own.

Example:
    >>> from ingot.tir.schedule import ScheduleError
    >>> err = ScheduleError("split: two factors are None", "give at most one None factor")
    >>> print(str(err).splitlines()[0])
    ScheduleError: split: two factors are None
"""
from __future__ import annotations

from typing import Any, Iterable, Sequence

from ingot.ir.error import IngotError
from ingot.ir.expr import is_const_int
from ingot.ir.printer import can_mark, expr_to_str, node_to_str

# How much an error prints: "detail" (summary, detail and the marked function), "fast" (summary
# and detail only; used by the tuner, which discards thousands of failing candidates), "none"
# (summary only).
RENDER_LEVELS = ("detail", "fast", "none")


class ScheduleError(IngotError, ValueError):
    """A schedule primitive refused: ``summary`` (one line), ``detail`` (why, and what would fix it),
    and the function with the offending ``nodes`` marked.

    Example:
        >>> try:
        ...     raise ScheduleError("fuse: loops are not nested", "fuse loops that form a chain")
        ... except ScheduleError as e:
        ...     e.summary
        'fuse: loops are not nested'
    """

    def __init__(
        self,
        summary: str,
        detail: str = "",
        func: Any = None,
        nodes: Sequence[Any] = (),
        render_level: str = "detail",
    ):
        self.summary = summary
        self.detail = detail
        self.func = func
        self.nodes = tuple(nodes)
        self.render_level = render_level
        self._message: "str | None" = None
        # Rendering the marked function costs ~0.5-1.5 ms; rules and the tuner catch thousands of
        # refusals they never print, so the message is rendered on first use.
        super().__init__(summary)

    def render(self) -> str:
        """The message at this error's render level (see `RENDER_LEVELS`)."""
        lines = [f"ScheduleError: {self.summary}"]
        if self.render_level == "none":
            return lines[0]
        if self.detail:
            lines.append(self.detail)
        if self.render_level == "detail" and self.func is not None:
            lines.append("The function, with the offending loops/blocks marked by ^^^:")
            if can_mark(self.func):
                lines.append(node_to_str(self.func, marks=self.nodes))
            else:
                lines.append(render_outline(self.func, self.nodes))
        return "\n".join(lines)

    def __str__(self) -> str:
        if self._message is None:
            self._message = self.render()
        return self._message

    def __reduce__(self) -> tuple:
        # Crossing a process boundary (builder pool): send the rendered text, not the IR.
        rest = str(self).partition("\n")[2]
        return (type(self), (self.summary, rest, None, (), "fast"))


def render_outline(func: Any, marked: Iterable[Any] = ()) -> str:
    """A TVMScript-like outline of a PrimFunc's loops and blocks, marking ``marked`` nodes.

    Example:
        >>> # print(render_outline(func, [loop])) prints, among other lines:
        >>> #     for i in T.serial(128):
        >>> #     ^^^^^^^^^^^^^^^^^^^^^^^
    """
    from ingot.tir.stmt import (
        Allocate, Block, BlockRealize, BufferStore, Evaluate, For, IfThenElse, LetStmt, SeqStmt,
    )

    marked_ids = {id(n) for n in marked}
    out: list[str] = []

    def emit(indent: int, text: str, node: Any) -> None:
        line = "    " * indent + text
        out.append(line)
        # The realize and its block are one construct in the text: mark either.
        if id(node) in marked_ids or (isinstance(node, BlockRealize) and id(node.block) in marked_ids):
            out.append("    " * indent + "^" * len(text))

    def walk(stmt: Any, indent: int) -> None:
        if isinstance(stmt, SeqStmt):
            for s in stmt.seq:
                walk(s, indent)
        elif isinstance(stmt, For):
            if stmt.kind == "thread_binding":
                head = f'T.thread_binding({expr_to_str(stmt.extent)}, thread="{stmt.thread_binding}")'
            elif is_const_int(stmt.min, 0):
                head = f"T.{stmt.kind}({expr_to_str(stmt.extent)})"
            else:
                head = f"T.{stmt.kind}({expr_to_str(stmt.min)}, {expr_to_str(stmt.min + stmt.extent)})"
            if stmt.annotations:
                head = head[:-1] + f", annotations={dict(stmt.annotations)})"
            emit(indent, f"for {stmt.loop_var.name} in {head}:", stmt)
            walk(stmt.body, indent + 1)
        elif isinstance(stmt, BlockRealize):
            block = stmt.block
            if block.name_hint == "root" and not block.iter_vars:
                for buf in block.alloc_buffers:
                    emit(indent, f"{buf.name} = T.alloc_buffer({_shape(buf)}, \"{buf.dtype}\", scope=\"{buf.scope}\")",
                         buf)
                walk(block.body, indent)
                return
            emit(indent, f'with T.block("{block.name_hint}"):', stmt)
            for iv, value in zip(block.iter_vars, stmt.iter_values):
                kind = {"S": "spatial", "R": "reduce"}.get(iv.kind, "opaque")
                emit(indent + 1, f"{iv.var.name} = T.axis.{kind}({expr_to_str(iv.dom.extent)}, {expr_to_str(value)})", iv)
            if not is_const_int(stmt.predicate, 1):
                emit(indent + 1, f"T.where({expr_to_str(stmt.predicate)})", stmt.predicate)
            for buf in block.alloc_buffers:
                emit(indent + 1, f"{buf.name} = T.alloc_buffer({_shape(buf)}, \"{buf.dtype}\", scope=\"{buf.scope}\")", buf)
            if block.annotations:
                emit(indent + 1, f"T.block_attr({dict(block.annotations)})", block.annotations)
            if block.init is not None:
                emit(indent + 1, "with T.init():", block.init)
                walk(block.init, indent + 2)
            walk(block.body, indent + 1)
        elif isinstance(stmt, Block):
            walk(BlockRealize([], True, stmt) if not stmt.iter_vars else stmt.body, indent)
        elif isinstance(stmt, BufferStore):
            idx = ", ".join(expr_to_str(i) for i in stmt.indices)
            emit(indent, f"{stmt.buffer.name}[{idx}] = {expr_to_str(stmt.value)}", stmt)
        elif isinstance(stmt, IfThenElse):
            emit(indent, f"if {expr_to_str(stmt.condition)}:", stmt)
            walk(stmt.then_case, indent + 1)
            if stmt.else_case is not None:
                emit(indent, "else:", stmt.else_case)
                walk(stmt.else_case, indent + 1)
        elif isinstance(stmt, LetStmt):
            emit(indent, f"{stmt.var.name} = {expr_to_str(stmt.value)}", stmt)
            walk(stmt.body, indent)
        elif isinstance(stmt, Allocate):
            emit(indent, f"{stmt.buffer.name} = T.allocate({_shape(stmt.buffer)}, \"{stmt.buffer.dtype}\")", stmt)
            walk(stmt.body, indent)
        elif isinstance(stmt, Evaluate):
            emit(indent, f"T.evaluate({expr_to_str(stmt.value)})", stmt)
        else:
            emit(indent, type(stmt).__name__, stmt)

    params = ", ".join(
        f"{p.name}: T.Buffer({_shape(p)}, \"{p.dtype}\")" if hasattr(p, "shape") else f"{p.name}: T.{p.dtype}"
        for p in getattr(func, "params", ())
    )
    name = getattr(func, "attrs", {}).get("global_symbol", "main") if hasattr(func, "attrs") else "main"
    out.append(f"def {name}({params}):")
    walk(getattr(func, "body", func), 1)
    return "\n".join(out)


def _shape(buf: Any) -> str:
    dims = [expr_to_str(d) for d in buf.shape]
    return "(" + ", ".join(dims) + ("," if len(dims) == 1 else "") + ")"
