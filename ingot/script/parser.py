"""TVMScript parser: Python source (read with ``ast``, never executed) → `PrimFunc` / `IRModule`.

Note: the parser walks the function's statements in order, keeping a stack of scopes (loops,
blocks and ``with`` bodies open a scope; TVMScript scoping, not Python's) and a stack of open
blocks. A few statements wrap *the rest of their suite*, as in TVM: ``x = expr`` (a `LetStmt`),
``assert c, "msg"`` (an `AssertStmt`), ``X = T.decl_buffer(...)`` (an `Allocate`). Block-level
declarations (``T.axis.*``, ``T.reads``, ``T.where``, ``T.alloc_buffer``, ``with T.init()``) update
the innermost open block; when a function contains blocks, its body is wrapped in the implicit
root block, which owns the function-level ``T.alloc_buffer``s. Regions left out are inferred with
`ingot.tir.analysis.infer_block_access_regions`.

Example:
    >>> from ingot.script import from_source
    >>> f = from_source('''
    ... @T.prim_func
    ... def scale(A: T.Buffer((16,), "float32"), B: T.Buffer((16,), "float32")):
    ...     for i in T.parallel(16):
    ...         B[i] = A[i] * 2.0
    ... ''')
    >>> f.body.kind
    'parallel'
"""
from __future__ import annotations

import ast
import builtins
import importlib
from typing import Any, Callable, Optional

from ingot.ir.buffer import Buffer as IRBuffer, BufferRegion, MatchBufferRegion
from ingot.ir.expr import IntImm, IterVar, PrimExpr, Range, SizeVar, Var, cast, convert
from ingot.ir.module import IRModule
from ingot.tir.analysis import infer_block_access_regions
from ingot.tir.function import PrimFunc
from ingot.tir.stmt import (
    Allocate, AssertStmt, Block, BlockRealize, BufferStore, Evaluate, For, IfThenElse, LetStmt, SeqStmt, Stmt,
)

from . import ir as I
from . import tir as T
from ._evaluator import _BINOPS, Evaluator, extent_of, is_ir
from .error import ParseError, Source


class _Wrap:
    """A statement that takes the rest of its suite as its body (let, assert, allocation)."""

    def __init__(self, build: Callable[[Stmt], Stmt], defs: "dict[str, Any] | None" = None):
        self.build = build
        self.defs = defs or {}


class _BlockCtx:
    def __init__(self, name: str, is_root: bool = False):
        self.name = name
        self.is_root = is_root
        self.iter_vars: list[IterVar] = []
        self.iter_values: list[Any] = []
        self.predicate: Any = True
        self.reads: Optional[list] = None
        self.writes: Optional[list] = None
        self.annotations: dict = {}
        self.alloc_buffers: list[IRBuffer] = []
        self.match_buffers: list[MatchBufferRegion] = []
        self.init: Optional[Stmt] = None


def call_name(node: ast.AST) -> str:
    """The last name of a decorator or call's callee (``T.prim_func`` -> ``"prim_func"``, ``R.output(x)``
    -> ``"output"``); ``""`` for anything else.

    Example:
        >>> import ast
        >>> call_name(ast.parse("T.block('C')").body[0].value)
        'block'
    """
    if isinstance(node, ast.Call):
        node = node.func
    if isinstance(node, ast.Attribute):
        return node.attr
    if isinstance(node, ast.Name):
        return node.id
    return ""


def _is_block_with(node: ast.AST) -> bool:
    return isinstance(node, ast.With) and any(
        isinstance(item.context_expr, ast.Call) and call_name(item.context_expr) == "block"
        for item in node.items
    )


class FunctionParser(Evaluator):
    """Parses one ``@T.prim_func`` definition.

    Example:
        >>> import ast
        >>> src = Source.from_text('def f(A: T.Buffer((4,), "int32")):\\n    A[0] = 1\\n')
        >>> fn = FunctionParser(src, {"T": T}).parse(ast.parse(src.text).body[0])
        >>> type(fn.body).__name__
        'BufferStore'
    """

    def __init__(self, source: Source, env: dict):
        super().__init__(source, env)
        self.blocks: list[_BlockCtx] = []
        self.loop_doms: dict[int, Range] = {}
        self.attrs: dict = {}
        self.matched_params: dict[int, IRBuffer] = {}
        self.prescanned: set[str] = set()

    # -- function --------------------------------------------------------------------------------
    def parse(self, fdef: ast.FunctionDef) -> PrimFunc:
        """The `PrimFunc` of a function definition."""
        # Step 1. symbolic variables declared at the top (`n = T.int32()`) are visible in annotations.
        for stmt in fdef.body:
            for name, var in self._var_decls(stmt):
                self.define(name, var)
                self.prescanned.add(name)
        # Step 2. parameters.
        params: list[Any] = []
        for arg in fdef.args.args:
            params.append(self._param(arg))
        if fdef.args.vararg or fdef.args.kwarg or fdef.args.kwonlyargs:
            raise self.error(fdef.args, "a prim_func takes positional parameters only")
        # Step 3. the body, inside the implicit root block when it has blocks.
        has_blocks = any(_is_block_with(n) for n in ast.walk(fdef))
        root = _BlockCtx("root", is_root=True) if has_blocks else None
        if root is not None:
            self.blocks.append(root)
        body = self.parse_stmts(fdef.body)
        if root is not None:
            self.blocks.pop()
            explicit_root = (
                isinstance(body, BlockRealize) and body.block.name_hint == "root" and not body.block.iter_vars
            )
            if not explicit_root or root.alloc_buffers:
                body = BlockRealize([], True, Block([], [], [], "root", body, alloc_buffers=root.alloc_buffers))
        # Step 4. handles bound by T.match_buffer become buffer parameters.
        params = [self.matched_params.get(id(p), p) for p in params]
        return PrimFunc(params, body, self.attrs)

    def _param(self, arg: ast.arg) -> Any:
        if arg.annotation is None:
            raise self.error(
                arg, f"parameter '{arg.arg}' needs a type annotation, e.g. "
                f'{arg.arg}: T.Buffer((128,), "float32"), {arg.arg}: T.handle or {arg.arg}: T.int32'
            )
        spec = self.eval(arg.annotation)
        if isinstance(spec, T.Buffer):
            value: Any = spec.build(arg.arg)
        elif spec is T.handle:
            value = Var(arg.arg, "handle")
        elif isinstance(spec, T._DTypeConstructor):
            value = Var(arg.arg, spec.dtype)
        elif spec is T.Buffer:
            raise self.error(arg.annotation, f"parameter '{arg.arg}': T.Buffer needs a shape, e.g. T.Buffer((128,), \"float32\")")
        else:
            raise self.error(arg.annotation, f"parameter '{arg.arg}': unsupported annotation {spec!r}")
        self.define(arg.arg, value)
        return value

    def _var_decl_dtype(self, node: ast.AST) -> Optional[tuple[str, bool]]:
        """(dtype, is_size_var) when ``node`` is ``T.int32()`` / ``T.var("int32")`` (a symbolic variable)."""
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            return None
        try:
            func = self.eval(node.func)
        except ParseError:
            return None
        size = any(kw.arg == "is_size_var" and isinstance(kw.value, ast.Constant) and kw.value.value
                   for kw in node.keywords)
        if isinstance(func, T._DTypeConstructor) and not node.args:
            return func.dtype, size
        if func is T.var and node.args:
            dtype = self.eval(node.args[0])
            return getattr(dtype, "dtype", dtype), size
        return None

    def _var_decls(self, stmt: ast.stmt) -> list[tuple[str, Var]]:
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            return []
        target, value = stmt.targets[0], stmt.value
        pairs = []
        if isinstance(target, ast.Name):
            pairs = [(target, self._var_decl_dtype(value))]
        elif isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
            pairs = [(t, self._var_decl_dtype(v)) for t, v in zip(target.elts, value.elts)]
        if not pairs or not all(isinstance(t, ast.Name) and d for t, d in pairs):
            return []
        return [(t.id, (SizeVar if size else Var)(t.id, dtype)) for t, (dtype, size) in pairs]

    # -- statements ------------------------------------------------------------------------------
    def parse_stmts(self, stmts: list[ast.stmt]) -> Stmt:
        """A suite of statements as one `Stmt` (`Evaluate(0)` when it produces nothing)."""
        out: list[Stmt] = []
        for index, stmt in enumerate(stmts):
            result = self.parse_stmt(stmt)
            if isinstance(result, _Wrap):
                self.push_scope()
                try:
                    for name, value in result.defs.items():
                        self.define(name, value)
                    rest = self.parse_stmts(stmts[index + 1:])
                finally:
                    self.pop_scope()
                out.append(result.build(rest))
                break
            if result is not None:
                out.append(result)
        return SeqStmt.flatten(out)

    def parse_scoped(self, stmts: list[ast.stmt]) -> Stmt:
        self.push_scope()
        try:
            return self.parse_stmts(stmts)
        finally:
            self.pop_scope()

    def parse_stmt(self, node: ast.stmt) -> Any:
        method = getattr(self, "_stmt_" + type(node).__name__, None)
        if method is None:
            raise self.error(node, f"unsupported statement in TVMScript: {type(node).__name__}")
        return method(node)

    def _stmt_Pass(self, node: ast.Pass) -> None:
        return None

    def _stmt_Expr(self, node: ast.Expr) -> Any:
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return None  # docstring
        value = self.eval(node.value)
        if isinstance(value, T.FuncAttr):
            self.attrs.update(value.attrs)
            return None
        if isinstance(value, T.BlockItem):
            return self._block_item(node, value)
        if isinstance(value, Stmt):
            return value
        if is_ir(value):
            return Evaluate(convert(value))
        if value is None:
            return None
        raise self.error(node, f"this statement has no effect in TVMScript (its value is {type(value).__name__})")

    def _block_item(self, node: ast.AST, item: "T.BlockItem") -> None:
        ctx = self.blocks[-1] if self.blocks else None
        if ctx is None or ctx.is_root:
            raise self.error(node, f"T.{item.kind}(...) must be inside a `with T.block(...)`")
        if item.kind in ("reads", "writes"):
            regions = []
            for r in item.value:
                if isinstance(r, IRBuffer):
                    r = BufferRegion.full(r)
                elif isinstance(r, PrimExpr) and hasattr(r, "buffer"):
                    r = BufferRegion.from_point(r.buffer, r.indices)
                if not isinstance(r, BufferRegion):
                    raise self.error(node, f"T.{item.kind} takes buffer regions such as A[vi, 0:16], got {r!r}")
                regions.append(r)
            setattr(ctx, item.kind, regions)
        elif item.kind == "where":
            ctx.predicate = item.value
        else:
            ctx.annotations.update(item.value)
        return None

    def _stmt_Assert(self, node: ast.Assert) -> _Wrap:
        cond = self.eval_expr(node.test)
        message = "" if node.msg is None else str(self.eval(node.msg))
        return _Wrap(lambda body: AssertStmt(cond, message, body))

    def _stmt_If(self, node: ast.If) -> Any:
        cond = self.eval(node.test)
        if not is_ir(cond):
            # A Python condition (a closure constant) chooses the branch at parse time.
            chosen = node.body if cond else node.orelse
            return self.parse_scoped(chosen) if chosen else None
        then_case = self.parse_scoped(node.body)
        else_case = self.parse_scoped(node.orelse) if node.orelse else None
        return IfThenElse(convert(cond), then_case, else_case)

    def _stmt_For(self, node: ast.For) -> Stmt:
        if node.orelse:
            raise self.error(node, "for ... else is not supported in TVMScript")
        targets = node.target.elts if isinstance(node.target, ast.Tuple) else [node.target]
        if not all(isinstance(t, ast.Name) for t in targets):
            raise self.error(node.target, "loop variables must be plain names")
        frames = self._loop_frames(node.iter)
        if len(frames) != len(targets):
            raise self.error(node, f"{len(targets)} loop variable(s) for {len(frames)} loop(s)")
        self.push_scope()
        try:
            loops = []
            for target, frame in zip(targets, frames):
                start, stop = frame.start, frame.stop
                extent = extent_of(start, stop) if frame.has_start else stop
                dtype = _index_dtype(start, extent)
                var = Var(target.id, dtype)
                lo = IntImm(dtype, start) if isinstance(start, int) else cast(convert(start), dtype)
                ext = IntImm(dtype, extent) if isinstance(extent, int) else cast(convert(extent), dtype)
                self.define(target.id, var)
                self.loop_doms[id(var)] = Range.from_min_extent(lo, ext)
                loops.append((var, lo, ext, frame))
            body = self.parse_stmts(node.body)
        finally:
            self.pop_scope()
        for var, lo, ext, frame in reversed(loops):
            body = For(var, lo, ext, frame.kind, body, frame.thread, frame.annotations)
        return body

    def _loop_frames(self, node: ast.expr) -> list:
        if not isinstance(node, ast.Call):
            raise self.error(node, "loop over range(...), T.grid(...), T.serial(...), T.parallel(...), ...")
        func = self.eval(node.func)
        if func is builtins.range:
            if node.keywords or not 1 <= len(node.args) <= 2:
                raise self.error(node, "range(...) in TVMScript takes (extent) or (begin, end)")
            args = [self.eval(a) for a in node.args]
            return [T.serial(*args)]
        result = self.eval(node)
        frames = result if isinstance(result, list) else [result]
        if not all(isinstance(f, T.LoopFrame) for f in frames):
            raise self.error(node, "loop over range(...), T.grid(...), T.serial(...), T.parallel(...), ...")
        return frames

    def _stmt_With(self, node: ast.With) -> Any:
        if len(node.items) != 1:
            raise self.error(node, "one context per `with` in TVMScript")
        item = node.items[0]
        frame = self.eval(item.context_expr)
        alias = item.optional_vars
        if alias is not None and not isinstance(alias, ast.Name):
            raise self.error(alias, "`with ... as` takes a plain name")
        if isinstance(frame, T.BlockFrame):
            return self._block(node, frame)
        if isinstance(frame, T.InitFrame):
            ctx = self.blocks[-1] if self.blocks else None
            if ctx is None or ctx.is_root:
                raise self.error(node, "`with T.init():` must be inside a `with T.block(...)`")
            ctx.init = self.parse_scoped(node.body)
            return None
        if isinstance(frame, T.LetFrame) and alias is not None:
            value = convert(frame.value)
            var = Var(alias.id, frame.dtype or value.dtype)
            return LetStmt(var, value, self._scoped_with(node.body, {alias.id: var}))
        if isinstance(frame, T.AssertFrame):
            return AssertStmt(convert(frame.condition), frame.message, self.parse_scoped(node.body))
        if isinstance(frame, T.BufferDecl) and frame.kind in ("decl_buffer", "allocate") and alias is not None:
            buf = frame.spec.build(alias.id)
            bound = buf.data if frame.kind == "allocate" else buf
            return Allocate(buf, self._scoped_with(node.body, {alias.id: bound}))
        raise self.error(item.context_expr, "unsupported `with` in TVMScript; expected T.block, T.init, "
                         "T.LetStmt(...) as x, T.Assert(...), or T.decl_buffer(...) as X")

    def _scoped_with(self, body: list[ast.stmt], defs: dict) -> Stmt:
        self.push_scope()
        try:
            for name, value in defs.items():
                self.define(name, value)
            return self.parse_stmts(body)
        finally:
            self.pop_scope()

    def _block(self, node: ast.With, frame: "T.BlockFrame") -> Stmt:
        ctx = _BlockCtx(frame.name)
        self.blocks.append(ctx)
        try:
            body = self.parse_scoped(node.body)
        finally:
            self.blocks.pop()
        block = Block(ctx.iter_vars, ctx.reads or [], ctx.writes or [], frame.name, body, ctx.init,
                      ctx.alloc_buffers, ctx.match_buffers, ctx.annotations)
        if ctx.reads is None or ctx.writes is None:
            reads, writes = infer_block_access_regions(block)
            block = block.replace(reads=ctx.reads if ctx.reads is not None else tuple(reads),
                                  writes=ctx.writes if ctx.writes is not None else tuple(writes))
        return BlockRealize(ctx.iter_values, ctx.predicate, block)

    # -- assignments -----------------------------------------------------------------------------
    def _stmt_Assign(self, node: ast.Assign) -> Any:
        if len(node.targets) != 1:
            raise self.error(node, "chained assignment is not supported in TVMScript")
        target = node.targets[0]
        if isinstance(target, ast.Subscript):
            return self._store(target, self.eval(node.value), node)
        decls = self._var_decls(node)
        if decls:
            for name, var in decls:
                if name not in self.prescanned or len(self.scopes) > 1 and name not in self.scopes[-1]:
                    self.define(name, var)
            return None
        value = self.eval(node.value)
        if isinstance(target, ast.Name):
            return self._assign(target.id, value, node)
        if isinstance(target, (ast.Tuple, ast.List)) and all(isinstance(t, ast.Name) for t in target.elts):
            names = [t.id for t in target.elts]
            if isinstance(value, T.AxisRemap):
                return self._remap(names, value, node)
            if isinstance(value, (tuple, list)) and len(value) == len(names):
                if any(is_ir(v) for v in value):
                    raise self.error(node, "unpack expressions one per line: `x = ...` binds a let variable")
                for name, v in zip(names, value):
                    self.define(name, v)
                return None
        raise self.error(target, "unsupported assignment target in TVMScript")

    def _stmt_AnnAssign(self, node: ast.AnnAssign) -> Any:
        if not isinstance(node.target, ast.Name) or node.value is None:
            raise self.error(node, "annotated assignments take the form `x: T.int32 = value`")
        ann = self.eval(node.annotation)
        dtype = getattr(ann, "dtype", None)
        if not isinstance(ann, T._DTypeConstructor):
            raise self.error(node.annotation, "a let variable is annotated with a scalar type such as T.int32")
        value = self.eval_expr(node.value)
        if value.dtype != dtype:
            value = cast(value, dtype)
        var = Var(node.target.id, dtype)
        return _Wrap(lambda body: LetStmt(var, value, body), {var.name: var})

    def _stmt_AugAssign(self, node: ast.AugAssign) -> Stmt:
        if not isinstance(node.target, ast.Subscript):
            raise self.error(node, "only buffer elements can be updated in place (`A[i] += x`)")
        load = self.eval(node.target)
        op = _BINOPS[type(node.op)]
        value = self.eval(node.value)
        try:
            result = op(load, value)
        except Exception as err:  # noqa: BLE001
            raise self.error(node, str(err)) from None
        return self._store(node.target, result, node)

    def _store(self, target: ast.Subscript, value: Any, node: ast.AST) -> Stmt:
        buffer = self.eval(target.value)
        if not isinstance(buffer, IRBuffer):
            raise self.error(target.value, f"can only store to buffers, not {type(buffer).__name__}")
        items = target.slice.elts if isinstance(target.slice, ast.Tuple) else [target.slice]
        if any(isinstance(i, ast.Slice) for i in items):
            raise self.error(target, "slice stores are not supported; store a vector with an index T.Ramp(base, 1, lanes)")
        indices = [self.eval(i) for i in items]
        if len(indices) != buffer.ndim:
            raise self.error(target, f"buffer '{buffer.name}' has {buffer.ndim} dimension(s) but is indexed with {len(indices)}")
        try:
            return BufferStore(buffer, value, indices)
        except Exception as err:  # noqa: BLE001
            raise self.error(node, str(err)) from None

    def _assign(self, name: str, value: Any, node: ast.Assign) -> Any:
        if isinstance(value, T.AxisDecl):
            return self._axis(name, value, node)
        if isinstance(value, T.AxisRemap):
            return self._remap([name], value, node)
        if isinstance(value, T.BufferDecl):
            return self._buffer_decl(name, value, node)
        if isinstance(value, T.Buffer):
            self.define(name, value.build(name))
            return None
        if is_ir(value):
            value = convert(value)
            var = Var(name, value.dtype)
            return _Wrap(lambda body: LetStmt(var, value, body), {name: var})
        self.define(name, value)  # a parse-time Python value
        return None

    def _buffer_decl(self, name: str, decl: "T.BufferDecl", node: ast.AST) -> Any:
        if decl.kind == "match_buffer":
            return self._match_buffer(name, decl, node)
        buf = decl.spec.build(name)
        if decl.kind == "alloc_buffer" and self.blocks:
            self.blocks[-1].alloc_buffers.append(buf)
            self.define(name, buf)
            return None
        if decl.kind == "decl_buffer" and decl.spec.data is not None:
            self.define(name, buf)  # a view over existing storage
            return None
        bound = buf.data if decl.kind == "allocate" else buf
        return _Wrap(lambda body: Allocate(buf, body), {name: bound})

    def _match_buffer(self, name: str, decl: "T.BufferDecl", node: ast.AST) -> None:
        source = decl.source
        if isinstance(source, Var) and source.dtype.is_handle:
            if self.blocks and not self.blocks[-1].is_root:
                raise self.error(node, "T.match_buffer of a handle parameter belongs at the top of the function")
            buf = decl.spec.build(name)
            self.matched_params[id(source)] = buf
            self.define(name, buf)
            return None
        if isinstance(source, IRBuffer):
            source = BufferRegion.full(source)
        if not isinstance(source, BufferRegion):
            raise self.error(node, "T.match_buffer takes a T.handle parameter or a buffer region such as A[vi, 0:16]")
        ctx = self.blocks[-1] if self.blocks else None
        if ctx is None or ctx.is_root:
            raise self.error(node, "T.match_buffer of a region must be inside a `with T.block(...)`")
        spec = decl.spec
        if not spec.shape:
            spec.shape = tuple(r.extent for r in source.region)
        buf = spec.build(name)
        ctx.match_buffers.append(MatchBufferRegion(buf, source))
        self.define(name, buf)
        return None

    def _axis(self, name: str, decl: "T.AxisDecl", node: ast.AST) -> None:
        ctx = self._user_block(node, "T.axis")
        if decl.value is None:
            raise self.error(node, f"block iteration variable '{name}' needs its binding, e.g. T.axis.spatial(128, i)")
        value = convert(decl.value)
        dom = decl.dom
        if isinstance(dom, Range):
            rng = dom
        elif isinstance(dom, (tuple, list)) and len(dom) == 2:
            rng = Range.from_min_extent(_as(dom[0], value.dtype), _as(extent_of(dom[0], dom[1]), value.dtype))
        else:
            rng = Range.from_min_extent(IntImm(value.dtype, 0), _as(dom, value.dtype))
        var = Var(name, value.dtype)
        ctx.iter_vars.append(IterVar(rng, var, decl.kind))
        ctx.iter_values.append(value)
        self.define(name, var)
        return None

    def _remap(self, names: list[str], remap: "T.AxisRemap", node: ast.AST) -> None:
        ctx = self._user_block(node, "T.axis.remap")
        if len(names) != len(remap.values):
            raise self.error(node, f"T.axis.remap binds {len(remap.values)} variable(s), assigned to {len(names)} name(s)")
        for name, kind, value in zip(names, remap.kinds, remap.values):
            dom = self.loop_doms.get(id(value)) if isinstance(value, Var) else None
            if dom is None:
                raise self.error(node, f"T.axis.remap binds loop variables only; {value!r} is not one "
                                 f"(use {name} = T.axis.spatial(extent, value) instead)")
            var = Var(name, value.dtype)
            ctx.iter_vars.append(IterVar(dom, var, kind))
            ctx.iter_values.append(value)
            self.define(name, var)
        return None

    def _user_block(self, node: ast.AST, what: str) -> _BlockCtx:
        ctx = self.blocks[-1] if self.blocks else None
        if ctx is None or ctx.is_root:
            raise self.error(node, f"{what} must be inside a `with T.block(...)`")
        return ctx

    def _stmt_Return(self, node: ast.Return) -> None:
        raise self.error(node, "a prim_func returns nothing; write results into its output buffers")


def _as(value: Any, dtype: Any) -> PrimExpr:
    if isinstance(value, int) and not isinstance(value, bool):
        return IntImm(dtype, value)
    return cast(convert(value), dtype)


def _index_dtype(*values: Any) -> str:
    for v in values:
        if isinstance(v, PrimExpr):
            return str(v.dtype)
    for v in values:
        if isinstance(v, int) and not -(2**31) <= v < 2**31:
            return "int64"
    return "int32"


# --------------------------------------------------------------------------------------------
# Entry points
# --------------------------------------------------------------------------------------------


#: decorator name → (parser of such a method, namespace (name, module) or None). ``ingot.graph``
#: registers ``@R.function`` here: this package sits below the graph and cannot import it.
_FUNCTION_PARSERS: "dict[str, tuple[Callable[..., Any], Any]]" = {}


def register_function_parser(decorator: str, parse: Callable[..., Any], namespace: "tuple[str, Any] | None" = None) -> None:
    """Let ``@I.ir_module`` classes and `from_source` hold methods decorated ``@X.<decorator>``:
    ``parse(source, fdef, env, module_names, parsed)`` returns the function; ``namespace``
    (e.g. ``("R", ingot.graph.script)``) is predefined in parsed text.

    Example:
        >>> import ingot.graph  # registers @R.function
        >>> "function" in _FUNCTION_PARSERS
        True
    """
    _FUNCTION_PARSERS[decorator] = (parse, namespace)


def _namespaces() -> dict:
    return dict(ns for _, ns in _FUNCTION_PARSERS.values() if ns is not None)


def _env_of(objects: list, frame: Any) -> dict:
    env: dict = {}
    for obj in objects:
        env.update(getattr(obj, "__globals__", {}))
    if frame is not None:
        env.update(frame.f_globals)
        if frame.f_code.co_name != "<module>":
            env.update(frame.f_locals)
    for obj in objects:
        code = getattr(obj, "__code__", None)
        for name, cell in zip(code.co_freevars if code else (), getattr(obj, "__closure__", None) or ()):
            try:
                env[name] = cell.cell_contents
            except ValueError:  # an empty cell (assigned later in the enclosing function)
                pass
    env.setdefault("T", T)
    env.setdefault("I", I)
    for name, value in _namespaces().items():
        env.setdefault(name, value)
    return env


def parse_function(func: Any, frame: Any = None) -> PrimFunc:
    """Parse a Python function written in TVMScript (used by ``@T.prim_func``).

    Example:
        >>> from ingot.script import tir as T
        >>> def copy(A: T.Buffer((4,), "float32"), B: T.Buffer((4,), "float32")):
        ...     for i in range(4):
        ...         B[i] = A[i]
        >>> type(parse_function(copy)).__name__
        'PrimFunc'
    """
    source = Source.from_object(func)
    tree = _parse_ast(source)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise source.error(fdef, "@T.prim_func decorates a function definition")
    return FunctionParser(source, _env_of([func], frame)).parse(fdef)


def parse_module(cls: Any, frame: Any = None) -> IRModule:
    """Parse a class of ``@T.prim_func`` methods into an `IRModule` (used by ``@I.ir_module``).

    Example: see `ingot.script.ir_module`.
    """
    source = Source.from_object(cls)
    tree = _parse_ast(source)
    cdef = tree.body[0]
    if not isinstance(cdef, ast.ClassDef):
        raise source.error(cdef, "@I.ir_module decorates a class definition")
    methods = [v for v in vars(cls).values() if callable(v) and hasattr(v, "__code__")]
    return _module_from_class(source, cdef, _env_of(methods, frame))


def _module_from_class(source: Source, cdef: ast.ClassDef, env: dict) -> IRModule:
    functions: dict = {}
    attrs: dict = {}
    # TensorIR functions first: the other kinds (``@R.function``) refer to them by name.
    module_names = {stmt.name for stmt in cdef.body if isinstance(stmt, ast.FunctionDef)}
    others: list = []
    for stmt in cdef.body:
        if isinstance(stmt, ast.FunctionDef):
            names = [call_name(d) for d in stmt.decorator_list]
            if "prim_func" in names:
                functions[stmt.name] = FunctionParser(source, env).parse(stmt)
                continue
            kind = next((n for n in names if n in _FUNCTION_PARSERS), None)
            if kind is None:
                hint = (" (graph functions: `import ingot.graph` or `from ingot.script import relax as R` first)"
                        if "function" in names else "")
                raise source.error(stmt, f"method '{stmt.name}' of an ir_module must be decorated with @T.prim_func"
                                         f"{' or @R.function' if not hint else ''}{hint}")
            functions[stmt.name] = None  # keeps the order of the class
            others.append((stmt, kind))
        elif isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # docstring
        elif isinstance(stmt, ast.Expr):
            value = Evaluator(source, env).eval(stmt.value)
            if not isinstance(value, I.ModuleAttrs):
                raise source.error(stmt, "an ir_module class holds @T.prim_func methods and I.module_attrs({...})")
            attrs.update(value.attrs)
        elif not isinstance(stmt, ast.Pass):
            raise source.error(stmt, "an ir_module class holds @T.prim_func methods and I.module_attrs({...})")
    parsed = _ParsedFunctions(source, env, module_names, {stmt.name: (stmt, kind) for stmt, kind in others})
    parsed.update({k: v for k, v in functions.items() if v is not None})
    for stmt, _ in others:
        functions[stmt.name] = parsed.get(stmt.name)
    return IRModule(functions, attrs)


class _ParsedFunctions(dict):
    """The module's functions by name, parsing a pending one on first `get` (a graph function may call
    one written below it)."""

    def __init__(self, source: Source, env: dict, module_names: set, pending: dict):
        super().__init__()
        self.source, self.env, self.module_names, self.pending = source, env, module_names, pending
        self.active: set = set()

    def get(self, name: str, default: Any = None) -> Any:
        if name in self:
            return self[name]
        if name not in self.pending:
            return default
        stmt, kind = self.pending[name]
        if name in self.active:
            raise self.source.error(stmt, f"function '{name}' calls itself, directly or through others; recursive "
                                          f"graph functions are not supported")
        self.active.add(name)
        self[name] = _FUNCTION_PARSERS[kind][0](self.source, stmt, self.env, self.module_names, self)
        self.active.discard(name)
        return self[name]


def _parse_ast(source: Source) -> ast.Module:
    try:
        return ast.parse(source.text)
    except SyntaxError as err:
        node = type("Loc", (), {"lineno": err.lineno or 1, "col_offset": max((err.offset or 1) - 1, 0)})()
        raise source.error(node, f"Python syntax error: {err.msg}") from None


def from_source(text: str, extra_vars: "dict | None" = None, filename: str = "<string>") -> Any:
    """Parse TVMScript text holding a ``@T.prim_func`` function or an ``@I.ir_module`` class.

    ``T``, ``I`` and ``ingot`` are predefined; top-level imports of ``ingot`` modules and simple
    constant assignments (``n = 128``) in the text are honoured; ``extra_vars`` adds more names.

    Example:
        >>> f = from_source('''
        ... @T.prim_func
        ... def main(A: T.Buffer((4,), "float32")):
        ...     for i in range(4):
        ...         A[i] = 0.0
        ... ''')
        >>> [p.name for p in f.params]
        ['A']
    """
    import ingot

    source = Source.from_text(text, filename)
    tree = _parse_ast(source)
    env: dict = {"T": T, "I": I, "ingot": ingot, **_namespaces()}
    for stmt in tree.body:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            _do_import(stmt, env)
        elif isinstance(stmt, ast.Assign) and all(isinstance(t, ast.Name) for t in stmt.targets):
            try:
                value = ast.literal_eval(stmt.value)
            except ValueError:
                continue
            for t in stmt.targets:
                env[t.id] = value
    env.update(extra_vars or {})
    for stmt in tree.body:
        if isinstance(stmt, ast.FunctionDef):
            names = [call_name(d) for d in stmt.decorator_list]
            kind = next((n for n in names if n in _FUNCTION_PARSERS), None)
            if kind is not None and "prim_func" not in names:
                return _FUNCTION_PARSERS[kind][0](source, stmt, env)
            return FunctionParser(source, env).parse(stmt)
        if isinstance(stmt, ast.ClassDef):
            return _module_from_class(source, stmt, env)
    raise ParseError("no @T.prim_func function or @I.ir_module class found in the TVMScript source")


def _do_import(stmt: ast.AST, env: dict) -> None:
    # Only ingot's own modules are imported: parsing text must not run arbitrary code.
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            if alias.name.split(".")[0] == "ingot":
                module = importlib.import_module(alias.name)
                env[alias.asname or alias.name.split(".")[0]] = module if alias.asname else importlib.import_module("ingot")
    elif isinstance(stmt, ast.ImportFrom) and (stmt.module or "").split(".")[0] == "ingot":
        module = importlib.import_module(stmt.module)
        for alias in stmt.names:
            value = getattr(module, alias.name, None)
            if value is None:
                value = importlib.import_module(f"{stmt.module}.{alias.name}")
            env[alias.asname or alias.name] = value


__all__ = ["FunctionParser", "parse_function", "parse_module", "from_source", "register_function_parser"]
