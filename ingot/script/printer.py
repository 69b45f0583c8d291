"""TVMScript printer: `PrimFunc`, `IRModule`, statements and buffers → TVMScript text.

Note: the output is meant to be read by people and parsed back by `ingot.script.from_source`
into a structurally equal program, so every choice here mirrors one in the parser:

* names: every variable and buffer gets a valid Python identifier, unique among the names
  visible where it is defined (a shadowing duplicate becomes ``i_1``); reserved names (``T``,
  ``I``, ``range``, keywords) get a trailing underscore. Printing is deterministic.
* a function whose body is the implicit root block prints the root's ``alloc_buffers`` at the top
  and hides the block; symbolic shape variables are declared first (``n = T.int32()``) and their
  buffers are bound with ``T.match_buffer`` of a ``T.handle`` parameter, as in TVM;
* buffers used but defined nowhere (views produced by flattening, sharing a parameter's ``data``)
  are declared as ``A_1 = T.Buffer((16384,), "float32", data=A.data)``;
* a let, assert or allocation that is the last statement of its suite prints flat
  (``x: T.int32 = ...``, ``X = T.decl_buffer(...)``) and scopes over the rest of the suite; one
  followed by siblings prints as ``with T.LetStmt(...) as x:`` / ``with T.decl_buffer(...) as X:``;
* perfectly nested serial loops print as ``T.grid``, block bindings that are plain loop variables
  as ``T.axis.remap``; regions print ``min:min + extent`` (the parser cancels ``min``).

Example:
    >>> from ingot.ir import Var, decl_buffer
    >>> from ingot.tir import For, ForKind, BufferStore, PrimFunc
    >>> A = decl_buffer((8,), "float32", "A")
    >>> i = Var("i")
    >>> print(script(PrimFunc([A], For(i, 0, 8, ForKind.SERIAL, BufferStore(A, A[i] + 1.0, [i])))))
    # from ingot.script import tir as T
    <BLANKLINE>
    @T.prim_func
    def main(A: T.Buffer((8,), "float32")):
        for i in range(8):
            A[i] = A[i] + 1.0
"""
from __future__ import annotations

import json
import keyword
import math
import re
from typing import Any, Optional

from ingot.ir.buffer import Buffer, BufferRegion
from ingot.ir.expr import (
    Add, FloatImm, IntImm, IterVar, Let, PrimExpr, Range, SizeVar, Var, is_const_int,
)
from ingot.ir.functor import Visitor
from ingot.ir.module import IRModule
from ingot.ir.printer import _ExprPrinter, register_node_printer
from ingot.ir.structural import structural_equal
from ingot.tir.function import PrimFunc
from ingot.tir.stmt import (
    Allocate, AssertStmt, Block, BlockRealize, BufferStore, Evaluate, For, ForKind, IfThenElse, LetStmt,
    SeqStmt, Stmt,
)

from . import tir as T

_RESERVED = {"T", "I", "range", "ingot", "None", "True", "False"}
_INDENT = "    "


def _sanitize(hint: str) -> str:
    name = re.sub(r"\W", "_", str(hint or "v"))
    if not name:
        name = "v"
    if name[0].isdigit():
        name = "v" + name
    if keyword.iskeyword(name) or name in _RESERVED:
        name += "_"
    return name


class _Names:
    """Names of variables and buffers, unique among those visible (scoped like the parser)."""

    def __init__(self) -> None:
        self.scopes: list[list[str]] = [[]]
        self.visible: dict[str, int] = {}
        self.names: dict[int, str] = {}
        self.keep: list[Any] = []

    def push(self) -> None:
        self.scopes.append([])

    def pop(self) -> None:
        for name in self.scopes.pop():
            self.visible[name] -= 1
            if not self.visible[name]:
                del self.visible[name]

    def define(self, obj: Any, hint: str) -> str:
        base = _sanitize(hint)
        name, k = base, 0
        while name in self.visible:
            k += 1
            name = f"{base}_{k}"
        self.visible[name] = self.visible.get(name, 0) + 1
        self.scopes[-1].append(name)
        if obj is not None:
            self.names[id(obj)] = name
            self.keep.append(obj)
        return name

    def get(self, obj: Any) -> Optional[str]:
        return self.names.get(id(obj))


class _ExprText(_ExprPrinter):
    """The IR layer's expression printer, plus forms the parser needs to read back exactly."""

    def __init__(self, printer: "_Printer"):
        super().__init__(printer.name_of)
        self.printer = printer

    def p_FloatImm(self, e: FloatImm):
        if not math.isfinite(e.value):
            return f'T.{e.dtype}("{e.value}")', 10
        return super().p_FloatImm(e)

    def p_Let(self, e: Let):
        value = self.text(e.value)
        self.printer.names.push()
        name = self.printer.names.define(e.var, e.var.name)
        body = self.text(e.body)
        self.printer.names.pop()
        return f"T.Let({body}, where={{{name}: {value}}})", 10

    def p_Call(self, e):
        if e.op not in ("call_extern", "call_pure_extern", "reinterpret") and not _rebuilds(e):
            args = "".join(", " + self.text(a) for a in e.args)
            return f'T.call_intrin("{e.dtype}", "{e.op}"{args})', 10
        return super().p_Call(e)


def _rebuilds(call: Any) -> bool:
    """Whether ``T.<op>(*args)`` gives back this call (else it prints as ``T.call_intrin``)."""
    fn = getattr(T, call.op, None) if call.op.isidentifier() else None
    if fn is None or not callable(fn):
        return False
    try:
        again = fn(*call.args)
    except Exception:  # noqa: BLE001 - any failure means: use the explicit form
        return False
    return structural_equal(again, call, map_free_vars=False)


class _Collector(Visitor):
    """Definitions and uses of variables and buffers in a function (in order of first sight)."""

    def __init__(self) -> None:
        self.defined: set[int] = set()
        self.defined_buffers: list[Buffer] = []
        self.used_vars: dict[int, Var] = {}
        self.used_buffers: dict[int, Buffer] = {}

    def define_buffer(self, buf: Buffer) -> None:
        self.defined.add(id(buf))
        self.defined_buffers.append(buf)
        self.visit_Buffer(buf)

    def visit_Var(self, node: Var) -> None:
        self.used_vars.setdefault(id(node), node)

    def visit_Buffer(self, node: Buffer) -> None:
        if id(node) in self.used_buffers:
            return
        self.used_buffers[id(node)] = node
        self.visit(node.shape)
        self.visit(node.strides)
        self.visit(node.elem_offset)

    def visit_For(self, node: For) -> None:
        self.defined.add(id(node.loop_var))
        self.generic_visit(node)

    def visit_IterVar(self, node: IterVar) -> None:
        self.defined.add(id(node.var))
        self.generic_visit(node)

    def visit_LetStmt(self, node: LetStmt) -> None:
        self.defined.add(id(node.var))
        self.generic_visit(node)

    def visit_Let(self, node: Let) -> None:
        self.defined.add(id(node.var))
        self.generic_visit(node)

    def visit_Allocate(self, node: Allocate) -> None:
        self.define_buffer(node.buffer)
        self.visit(node.body)

    def visit_Block(self, node: Block) -> None:
        for buf in node.alloc_buffers:
            self.define_buffer(buf)
        for m in node.match_buffers:
            self.define_buffer(m.buffer)
        self.generic_visit(node)


def _is_hidden_root(body: Stmt) -> bool:
    if not isinstance(body, BlockRealize) or body.iter_values or not is_const_int(body.predicate, 1):
        return False
    b = body.block
    if b.name_hint != "root" or b.iter_vars or b.init is not None or b.reads or b.writes:
        return False
    if b.match_buffers or b.annotations:
        return False
    found: list = []

    class _Find(Visitor):
        def visit_BlockRealize(self, node):
            found.append(node)

    _Find().visit(b.body)
    return bool(found)


def _has_vars(buf: Buffer) -> bool:
    found: list = []

    class _Find(Visitor):
        def visit_Var(self, node):
            found.append(node)

    _Find().visit((buf.shape, buf.strides, buf.elem_offset))
    return bool(found)


class _Printer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.depth = 0
        self.names = _Names()
        self.data_owner: dict[int, Buffer] = {}
        self.views: dict[int, list[Buffer]] = {}
        self.loops: dict[int, For] = {}
        # ids of statements to underline with ^^^ (error messages); loops are then never merged
        # into T.grid, so each marked loop has a line of its own.
        self.marks: set[int] = set()

    # -- output ----------------------------------------------------------------------------------
    def emit(self, text: str) -> None:
        self.lines.append(_INDENT * self.depth + text)

    def text(self) -> str:
        return "\n".join(self.lines)

    # -- names and expressions -------------------------------------------------------------------
    def name_of(self, obj: Any) -> str:
        name = self.names.get(obj)
        if name is not None:
            return name
        if isinstance(obj, Var) and id(obj) in self.data_owner and self.data_owner[id(obj)] is not None:
            return f"{self.name_of(self.data_owner[id(obj)])}.data"
        return self.names.define(obj, getattr(obj, "name", "v"))

    def expr(self, e: Any) -> str:
        return _ExprText(self).text(e)

    def value(self, v: Any) -> str:
        """An annotation/attribute value as Python literal text the parser reads back equal."""
        if isinstance(v, bool) or v is None:
            return repr(v)
        if isinstance(v, (int, float)):
            return repr(v) if not isinstance(v, float) or math.isfinite(v) else f'float("{v}")'
        if isinstance(v, str):
            return json.dumps(v)
        if isinstance(v, IntImm):
            return f"T.bool({bool(v.value)})" if v.dtype.is_bool else f"T.{v.dtype}({v.value})"
        if isinstance(v, FloatImm):
            return f'T.{v.dtype}({repr(v.value) if math.isfinite(v.value) else json.dumps(str(v.value))})'
        if isinstance(v, PrimExpr):
            return self.expr(v)
        if isinstance(v, Buffer):
            return self.name_of(v)
        if isinstance(v, (tuple, list)):
            return "[" + ", ".join(self.value(x) for x in v) + "]"
        if isinstance(v, dict):
            return "{" + ", ".join(f"{self.value(k)}: {self.value(x)}" for k, x in v.items()) + "}"
        return repr(v)

    def shape(self, dims: Any) -> str:
        items = [self.expr(d) for d in dims]
        return "(" + ", ".join(items) + ("," if len(items) == 1 else "") + ")"

    def buffer_args(self, buf: Buffer, with_data: bool = False) -> str:
        parts = [self.shape(buf.shape), f'"{buf.dtype}"']
        if with_data:
            owner = self.data_owner.get(id(buf.data))
            if owner is not None and owner is not buf:
                parts.append(f"data={self.name_of(owner)}.data")
        if buf.strides:
            parts.append(f"strides={self.shape(buf.strides)}")
        if not (isinstance(buf.elem_offset, IntImm) and buf.elem_offset.value == 0 and str(buf.elem_offset.dtype) == "int32"):
            parts.append(f"elem_offset={self.expr(buf.elem_offset)}")
        if buf.scope != "global":
            parts.append(f'scope="{buf.scope}"')
        return ", ".join(parts)

    def region(self, r: BufferRegion) -> str:
        items = []
        for rng in r.region:
            if is_const_int(rng.extent, 1):
                items.append(self.expr(rng.min))
            else:
                items.append(self.range_text(rng, ":"))
        return f"{self.name_of(r.buffer)}[{', '.join(items)}]"

    def range_text(self, rng: Range, sep: str) -> str:
        """``min<sep>min + extent``; the parser cancels ``min`` to get ``extent`` back."""
        if is_const_int(rng.min, 0):
            return f"{self.expr(rng.min)}{sep}{self.expr(rng.extent)}"
        if isinstance(rng.min, IntImm) and isinstance(rng.extent, IntImm):
            return f"{self.expr(rng.min)}{sep}{self.expr(IntImm(rng.min.dtype, rng.min.value + rng.extent.value))}"
        return f"{self.expr(rng.min)}{sep}{self.expr(Add(rng.min, rng.extent))}"

    # -- declarations of buffers ------------------------------------------------------------------
    def plan_buffers(self, collector: _Collector, params: list) -> list[Buffer]:
        """Record which buffer owns each data pointer; return the undefined views without an owner."""
        for p in params:
            if isinstance(p, Buffer):
                self.data_owner.setdefault(id(p.data), p)
            elif isinstance(p, Var) and p.dtype.is_handle:
                self.data_owner.setdefault(id(p), None)
        for b in collector.defined_buffers:
            self.data_owner.setdefault(id(b.data), b)
        orphans: list[Buffer] = []
        param_ids = {id(p) for p in params}
        for b in collector.used_buffers.values():
            if id(b) in collector.defined or id(b) in param_ids:
                continue
            owner = self.data_owner.get(id(b.data))
            if owner is None:
                self.data_owner[id(b.data)] = b
                orphans.append(b)
            else:
                self.views.setdefault(id(owner), []).append(b)
        return orphans

    def emit_views(self, owner: Buffer) -> None:
        for view in self.views.pop(id(owner), []):
            name = self.names.define(view, view.name)
            self.emit(f"{name} = T.Buffer({self.buffer_args(view, with_data=True)})")
            self.emit_views(view)

    # -- functions and modules -------------------------------------------------------------------
    def print_func(self, func: PrimFunc, name: str, decorator: str = "@T.prim_func") -> None:
        collector = _Collector()
        for p in func.params:
            if isinstance(p, Buffer):
                collector.visit_Buffer(p)
        collector.visit(func.body)
        hidden_root = _is_hidden_root(func.body)
        orphans = self.plan_buffers(collector, list(func.params))
        # Step 1. signature (parameters are named first: they keep their names).
        sig, matched = [], []
        for p in func.params:
            pname = self.names.define(p, p.name)
            if isinstance(p, Var):
                sig.append(f"{pname}: T.{p.dtype}" if not p.dtype.is_handle else f"{pname}: T.handle")
            elif _has_vars(p):
                matched.append(p)
                sig.append(None)
            else:
                sig.append(f"{pname}: T.Buffer({self.buffer_args(p)})")
        defined = set(collector.defined) | {id(p) for p in func.params}
        free = [v for k, v in collector.used_vars.items() if k not in defined and k not in self.data_owner]
        free_names = [self.names.define(v, v.name) for v in free]
        for index, p in enumerate(func.params):
            if sig[index] is None:
                sig[index] = f"{self.names.define(None, 'var_' + self.names.get(p))}: T.handle"
        handle_of = {id(p): s.split(":")[0] for p, s in zip(func.params, sig)}
        self.emit(decorator)
        self.emit(f"def {name}({', '.join(sig)}):")
        self.depth += 1
        start = len(self.lines)
        # Step 2. attributes, symbolic variables, buffers bound to handles, views.
        if func.attrs:
            self.emit(f"T.func_attr({self.value(dict(func.attrs))})")
        for v, vname in zip(free, free_names):
            if v.dtype.is_handle:
                self.emit(f'{vname} = T.var("handle")')
            else:
                self.emit(f"{vname} = T.{v.dtype}({'is_size_var=True' if isinstance(v, SizeVar) else ''})")
        for p in matched:
            self.emit(f"{self.name_of(p)} = T.match_buffer({handle_of[id(p)]}, {self.buffer_args(p)})")
        for p in func.params:
            if isinstance(p, Buffer):
                self.emit_views(p)
        for b in orphans:
            name_b = self.names.define(b, b.name)
            self.emit(f"{name_b} = T.Buffer({self.buffer_args(b)})")
            self.emit_views(b)
        # Step 3. the body (the implicit root block is hidden; its buffers come first).
        if hidden_root:
            for buf in func.body.block.alloc_buffers:
                self.emit(f"{self.names.define(buf, buf.name)} = T.alloc_buffer({self.buffer_args(buf)})")
                self.emit_views(buf)
            self.stmt(func.body.block.body, tail=True)
        else:
            self.stmt(func.body, tail=True)
        if len(self.lines) == start:
            self.emit("T.evaluate(0)")
        self.depth -= 1

    # -- statements ------------------------------------------------------------------------------
    def stmt(self, s: Stmt, tail: bool) -> None:
        method = getattr(self, "s_" + type(s).__name__, None)
        if method is None:
            self.emit(f"# unprintable statement {type(s).__name__}")
            return
        first = len(self.lines)
        method(s, tail)
        if self.marks and self._is_marked(s) and len(self.lines) > first:
            line = self.lines[first]
            indent = len(line) - len(line.lstrip())
            self.lines.insert(first + 1, " " * indent + "^" * (len(line) - indent))

    def _is_marked(self, s: Stmt) -> bool:
        if id(s) in self.marks:
            return True
        return isinstance(s, BlockRealize) and (id(s.block) in self.marks
                                                 or any(id(iv) in self.marks for iv in s.block.iter_vars))

    def body(self, s: Stmt) -> None:
        self.depth += 1
        self.names.push()
        self.stmt(s, tail=True)
        self.names.pop()
        self.depth -= 1

    def s_SeqStmt(self, s: SeqStmt, tail: bool) -> None:
        last = len(s.seq) - 1
        for index, item in enumerate(s.seq):
            self.stmt(item, tail and index == last)

    def s_BufferStore(self, s: BufferStore, tail: bool) -> None:
        idx = ", ".join(self.expr(i) for i in s.indices)
        self.emit(f"{self.name_of(s.buffer)}[{idx}] = {self.expr(s.value)}")

    def s_Evaluate(self, s: Evaluate, tail: bool) -> None:
        self.emit(f"T.evaluate({self.expr(s.value)})")

    def s_IfThenElse(self, s: IfThenElse, tail: bool) -> None:
        cond = self.value(s.condition) if isinstance(s.condition, IntImm) else self.expr(s.condition)
        self.emit(f"if {cond}:")
        self.body(s.then_case)
        if s.else_case is not None:
            self.emit("else:")
            self.body(s.else_case)

    def s_LetStmt(self, s: LetStmt, tail: bool) -> None:
        value = self.expr(s.value)
        if tail:
            name = self.names.define(s.var, s.var.name)
            self.emit(f"{name}: T.{s.var.dtype} = {value}")
            self.stmt(s.body, tail=True)
            return
        self.names.push()
        name = self.names.define(s.var, s.var.name)
        self.emit(f"with T.LetStmt({value}, type_annotation=T.{s.var.dtype}) as {name}:")
        self.depth += 1
        self.stmt(s.body, tail=True)
        self.depth -= 1
        self.names.pop()

    def s_AssertStmt(self, s: AssertStmt, tail: bool) -> None:
        cond, msg = self.expr(s.condition), json.dumps(s.message)
        if tail:
            self.emit(f"assert {cond}, {msg}")
            self.stmt(s.body, tail=True)
        else:
            self.emit(f"with T.Assert({cond}, {msg}):")
            self.body(s.body)

    def s_Allocate(self, s: Allocate, tail: bool) -> None:
        args = self.buffer_args(s.buffer)
        if tail:
            self.emit(f"{self.names.define(s.buffer, s.buffer.name)} = T.decl_buffer({args})")
            self.emit_views(s.buffer)
            self.stmt(s.body, tail=True)
            return
        self.names.push()
        name = self.names.define(s.buffer, s.buffer.name)
        self.emit(f"with T.decl_buffer({args}) as {name}:")
        self.depth += 1
        self.emit_views(s.buffer)
        self.stmt(s.body, tail=True)
        self.depth -= 1
        self.names.pop()

    def s_For(self, s: For, tail: bool) -> None:
        chain = [s]
        if _plain_serial(s) and not self.marks:
            while isinstance(chain[-1].body, For) and _plain_serial(chain[-1].body):
                inner = chain[-1].body
                outer_vars = {id(f.loop_var) for f in chain}
                if _uses_any(inner.extent, outer_vars):
                    break
                chain.append(inner)
        extents = [self.expr(f.extent) for f in chain]
        self.names.push()
        names = [self.names.define(f.loop_var, f.loop_var.name) for f in chain]
        for f in chain:
            self.loops[id(f.loop_var)] = f
        if len(chain) > 1:
            self.emit(f"for {', '.join(names)} in T.grid({', '.join(extents)}):")
        elif _plain_serial(s):
            self.emit(f"for {names[0]} in range({extents[0]}):")
        else:
            self.emit(f"for {names[0]} in {self.loop_call(s)}:")
        self.depth += 1
        self.stmt(chain[-1].body, tail=True)
        self.depth -= 1
        self.names.pop()

    def loop_call(self, s: For) -> str:
        func = {ForKind.SERIAL: "serial", ForKind.PARALLEL: "parallel", ForKind.VECTORIZED: "vectorized",
                ForKind.UNROLLED: "unroll", ForKind.THREAD_BINDING: "thread_binding"}[s.kind]
        args = [self.range_text(Range.from_min_extent(s.min, s.extent), ", ")]
        if is_const_int(s.min, 0) and str(s.min.dtype) == str(s.extent.dtype):
            args = [self.expr(s.extent)]
        if s.kind == ForKind.THREAD_BINDING:
            args.append(f"thread={json.dumps(s.thread_binding)}")
        if s.annotations:
            args.append(f"annotations={self.value(dict(s.annotations))}")
        return f"T.{func}({', '.join(args)})"

    def s_BlockRealize(self, s: BlockRealize, tail: bool) -> None:
        self.print_block(s.block, s)

    def s_Block(self, s: Block, tail: bool) -> None:
        self.print_block(s, None)

    def print_block(self, b: Block, realize: Optional[BlockRealize]) -> None:
        self.emit(f"with T.block({json.dumps(b.name_hint)}):")
        self.depth += 1
        self.names.push()
        values = realize.iter_values if realize is not None else [None] * len(b.iter_vars)
        # Step 1. iteration variables: T.axis.remap when every binding is a plain loop variable.
        if b.iter_vars and realize is not None and all(self._remappable(iv, v) for iv, v in zip(b.iter_vars, values)) \
                and len({id(v) for v in values}) == len(values):
            loop_names = [self.expr(v) for v in values]
            names = [self.names.define(iv.var, iv.var.name) for iv in b.iter_vars]
            kinds = "".join(iv.kind for iv in b.iter_vars)
            self.emit(f'{", ".join(names)} = T.axis.remap("{kinds}", [{", ".join(loop_names)}])')
        else:
            for iv, v in zip(b.iter_vars, values):
                kind = {"S": "spatial", "R": "reduce"}.get(iv.kind, "opaque")
                dom = self.range_text(iv.dom, ", ")
                dom = self.expr(iv.dom.extent) if is_const_int(iv.dom.min, 0) else f"({dom})"
                binding = "" if v is None else ", " + self.expr(v)
                self.emit(f"{self.names.define(iv.var, iv.var.name)} = T.axis.{kind}({dom}{binding})")
        # Step 2. predicate, regions, annotations, buffers, init, body.
        if realize is not None and not is_const_int(realize.predicate, 1):
            self.emit(f"T.where({self.expr(realize.predicate)})")
        self.emit(f"T.reads({', '.join(self.region(r) for r in b.reads)})")
        self.emit(f"T.writes({', '.join(self.region(r) for r in b.writes)})")
        if b.annotations:
            self.emit(f"T.block_attr({self.value(dict(b.annotations))})")
        for buf in b.alloc_buffers:
            self.emit(f"{self.names.define(buf, buf.name)} = T.alloc_buffer({self.buffer_args(buf)})")
            self.emit_views(buf)
        for m in b.match_buffers:
            source = self.region(m.source)
            self.emit(f"{self.names.define(m.buffer, m.buffer.name)} = T.match_buffer({source}, {self.buffer_args(m.buffer)})")
        if b.init is not None:
            self.emit("with T.init():")
            self.body(b.init)
        self.stmt(b.body, tail=True)
        self.names.pop()
        self.depth -= 1

    def _remappable(self, iv: IterVar, value: Any) -> bool:
        loop = self.loops.get(id(value)) if isinstance(value, Var) else None
        if loop is None or iv.kind not in ("S", "R") or loop.loop_var is not value:
            return False
        return structural_equal(iv.dom.min, loop.min) and structural_equal(iv.dom.extent, loop.extent)


def _plain_serial(f: For) -> bool:
    return f.kind == ForKind.SERIAL and not f.annotations and is_const_int(f.min, 0) \
        and str(f.min.dtype) == str(f.extent.dtype)


def _uses_any(e: Any, var_ids: set) -> bool:
    found: list = []

    class _Find(Visitor):
        def visit_Var(self, node):
            if id(node) in var_ids:
                found.append(node)

    _Find().visit(e)
    return bool(found)


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------

_T_HEADER = "# from ingot.script import tir as T"
_I_HEADER = "# from ingot.script import ir as I"


def _func_name(func: PrimFunc, fallback: str = "main") -> str:
    name = func.attrs.get("global_symbol", fallback) if isinstance(func, PrimFunc) else fallback
    return _sanitize(name) if isinstance(name, str) else fallback


def script(node: Any, marks: Any = ()) -> str:
    """TVMScript text of a `PrimFunc`, `IRModule`, statement, buffer or region; the statements in
    ``marks`` (loops, blocks, stores) are underlined with ``^^^`` (used by error messages).

    Example:
        >>> from ingot.ir import decl_buffer
        >>> script(decl_buffer((4, 4), "float16", "W"))
        'W = T.Buffer((4, 4), "float16")'
    """
    p = _Printer()
    p.marks = {id(n) for n in marks}
    if isinstance(node, IRModule):
        p.lines += [_I_HEADER, _T_HEADER, "", "@I.ir_module", "class Module:"]
        p.depth = 1
        if node.attrs:
            p.emit(f"I.module_attrs({p.value(dict(node.attrs))})")
        for index, (name, func) in enumerate(node.functions.items()):
            if index or node.attrs:
                p.lines.append("")
            if isinstance(func, PrimFunc):
                sub = _Printer()
                sub.depth = 1
                sub.print_func(func, _sanitize(name))
                p.lines += sub.lines
            else:
                from ingot.ir.printer import node_to_str

                p.lines += [_INDENT + line for line in node_to_str(func).splitlines()]
        return p.text()
    if isinstance(node, PrimFunc):
        p.lines += [_T_HEADER, ""]
        p.print_func(node, _func_name(node))
        return p.text()
    if isinstance(node, Stmt):
        p.stmt(node, tail=True)
        return p.text()
    if isinstance(node, Buffer):
        return f"{p.names.define(node, node.name)} = T.Buffer({p.buffer_args(node)})"
    if isinstance(node, BufferRegion):
        return p.region(node)
    if isinstance(node, PrimExpr):
        return p.expr(node)
    raise TypeError(f"ingot.script.script cannot print a {type(node).__name__}")


def install_printers() -> None:
    """Make ``print``/``repr`` of TensorIR nodes show TVMScript (called by ``import ingot.script``).

    Example:
        >>> install_printers()
    """
    for cls in (Stmt, PrimFunc, IRModule, Buffer, BufferRegion):
        register_node_printer(cls, script, accepts_marks=True)


__all__ = ["script", "install_printers"]
