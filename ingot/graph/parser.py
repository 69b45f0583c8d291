"""Parser of graph functions written in TVMScript (``@R.function``): Python source → `Function`.

Note: the source is read with ``ast`` and never run. A graph function is straight-line code:
bindings (``y: R.Tensor(...) = R.relu(x)`` or ``y = ...``), ``with R.dataflow():`` blocks closed
by ``R.output(...)``, ``R.func_attr({...})``, symbolic dimensions declared as ``n = T.int64()``,
and one ``return``. Expressions are evaluated by the TensorIR evaluator (`ingot.script._evaluator`)
with the ``R`` helpers of `ingot.graph.script`; ``cls.f`` and a bare module function name ``f``
are the `GlobalVar` of ``f``. ``if c: ... else: ...`` whose branches end
by binding one name is an `ingot.graph.control_flow.If` (Relax's form). Anything else (loops,
nested functions, tuple unpacking) is a `ParseError` naming the construct. A dataflow block's bindings are `DataflowVar`s except
those named by ``R.output``. The module-level parser (``@I.ir_module`` in `ingot.script`) calls
`parse_graph_function` for ``@R.function`` methods: this module registers it when
``ingot.graph`` is imported (`ingot.script` sits below the graph and cannot import it).

Example:
    >>> from ingot.script import from_source
    >>> f = from_source('''
    ... @R.function
    ... def main(x: R.Tensor((2, 3), dtype="float32")) -> R.Tensor((2, 3), dtype="float32"):
    ...     with R.dataflow():
    ...         lv: R.Tensor((2, 3), dtype="float32") = R.exp(x)
    ...         gv: R.Tensor((2, 3), dtype="float32") = R.add(lv, x)
    ...         R.output(gv)
    ...     return gv
    ... ''')
    >>> [type(b.var).__name__ for b in f.body.blocks[0].bindings]
    ['DataflowVar', 'Var']
"""
from __future__ import annotations

import ast
import types
from typing import Any, Optional

from ingot.ir import collect_vars
from ingot.ir.module import GlobalVar
from ingot.script._evaluator import Evaluator
from ingot.script.error import ParseError, Source
from ingot.script.parser import call_name, register_function_parser

from . import expr as E
from . import script as R
from . import struct_info as S

_SYM_DTYPES = ("int64", "int32")


class _ClassRef:
    """``cls`` inside an ``@I.ir_module`` class: ``cls.f`` is the `GlobalVar` of function ``f``."""

    def __init__(self, names: "set[str] | None"):
        self.names = names

    def __getattr__(self, name: str) -> GlobalVar:
        if self.names is not None and name not in self.names:
            raise AttributeError(f"the module has no function {name!r}; it has {sorted(self.names)}")
        return GlobalVar(name)


class GraphFunctionParser(Evaluator):
    """Parses one ``@R.function`` definition (see the module note).

    Example: see the module docstring.
    """

    def __init__(self, source: Source, env: dict, module_names: "set[str] | None" = None,
                 parsed: "dict[str, Any] | None" = None):
        env = dict(env)
        env.setdefault("R", R)
        env["cls"] = _ClassRef(module_names)
        super().__init__(source, env)
        self.module_names = module_names or set()
        self.parsed = parsed if parsed is not None else {}
        self.attrs: dict = {}

    # -- names ------------------------------------------------------------------------------------
    def lookup(self, name: str, node: Any) -> Any:
        for scope in reversed(self.scopes):
            if name in scope:
                return scope[name]
        if name in self.module_names:  # the MLC course writes R.call_tir(linear0, ...)
            return GlobalVar(name)
        if name == "metadata" and name not in self.env:
            raise self.error(node, "the text refers to metadata[...] (constants of more than 4 elements are not "
                                   "printed); parse it with from_source(text, extra_vars={'metadata': "
                                   "ingot.graph.printer.metadata_of(mod)})")
        return super().lookup(name, node)

    # -- entry ------------------------------------------------------------------------------------
    def parse(self, fdef: ast.FunctionDef, private: bool = False) -> E.Function:
        """The `Function` written by ``fdef``."""
        for deco in fdef.decorator_list:
            if isinstance(deco, ast.Call):
                private = private or any(k.arg == "private" and isinstance(k.value, ast.Constant) and k.value.value
                                         for k in deco.keywords)
        body = list(fdef.body)
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
            body = body[1:]  # docstring
        # Step 1. symbolic dimensions (``n = T.int64()``) are declared in the body but used by the
        # signature: define them first.
        for stmt in body:
            sym = _sym_decl(stmt)
            if sym is not None:
                self.define(sym[0], R.prim_var(*sym))
        # Step 2. parameters.
        params = []
        for arg in fdef.args.args:
            if arg.annotation is None:
                raise self.error(arg, f"parameter '{arg.arg}' of @R.function {fdef.name} needs a struct info "
                                      f"annotation such as R.Tensor((1, 784), dtype=\"float32\")")
            sinfo = self._sinfo(arg.annotation)
            var = E.Var(arg.arg, sinfo)
            self.define(arg.arg, var)
            params.append(var)
        for what, items in (("*args", fdef.args.vararg), ("**kwargs", fdef.args.kwarg)):
            if items is not None:
                raise self.error(fdef, f"@R.function {fdef.name}: {what} is not supported; list every parameter")
        # Step 3. the body: blocks of bindings, then the return value.
        blocks: list[E.BindingBlock] = []
        plain: list[E.VarBinding] = []
        ret: Any = None
        for stmt in body:
            if ret is not None:
                raise self.error(stmt, f"@R.function {fdef.name}: statements after `return`")
            if _sym_decl(stmt) is not None:
                continue
            if isinstance(stmt, ast.With):
                if plain:
                    blocks.append(E.BindingBlock(plain))
                    plain = []
                blocks.append(self._dataflow(stmt))
            elif isinstance(stmt, ast.Return):
                if stmt.value is None:
                    raise self.error(stmt, f"@R.function {fdef.name} must return a value")
                ret = R.as_expr(self.eval(stmt.value))
            else:
                binding = self._statement(stmt, dataflow=False, outputs=set())
                if binding is not None:
                    plain.append(binding)
        if ret is None:
            raise self.error(fdef, f"@R.function {fdef.name} has no `return`")
        if isinstance(ret, E.Call):  # `return R.relu(x)`: bound first, as the builder does (A-normal form)
            var = E.Var(_fresh("gv", self.scopes), ret.struct_info)
            plain.append(E.VarBinding(var, ret))
            ret = var
        if plain:
            blocks.append(E.BindingBlock(plain))
        ret_sinfo = self._sinfo(fdef.returns) if fdef.returns is not None else None
        attrs = dict(self.attrs)
        if not private and "global_symbol" not in attrs:  # TVM's rule: a public function's symbol is its name
            attrs["global_symbol"] = fdef.name
        return E.Function(params, E.SeqExpr(blocks, ret), ret_sinfo, attrs)

    # -- statements -------------------------------------------------------------------------------
    def _dataflow(self, node: ast.With) -> E.DataflowBlock:
        if len(node.items) != 1 or call_name(node.items[0].context_expr) != "dataflow":
            raise self.error(node, "a graph function holds `with R.dataflow():` blocks only")
        outputs: set[str] = set()
        stmts = node.body
        last = stmts[-1] if stmts else None
        if last is not None and isinstance(last, ast.Expr) and call_name(last.value) == "output":
            for arg in last.value.args:
                if not isinstance(arg, ast.Name):
                    raise self.error(arg, "R.output(...) takes the names of bindings of the dataflow block")
                outputs.add(arg.id)
            stmts = stmts[:-1]
        bindings = []
        for stmt in stmts:
            if isinstance(stmt, ast.Expr) and call_name(stmt.value) == "output":
                raise self.error(stmt, "R.output(...) must be the last statement of the dataflow block")
            binding = self._statement(stmt, dataflow=True, outputs=outputs)
            if binding is not None:
                bindings.append(binding)
        defined = {b.var.name_hint for b in bindings}
        missing = outputs - defined
        if missing:
            raise self.error(last, f"R.output names {sorted(missing)}, which the dataflow block does not bind")
        return E.DataflowBlock(bindings)

    def _statement(self, stmt: ast.stmt, dataflow: bool, outputs: set) -> Optional[E.VarBinding]:
        if isinstance(stmt, ast.Expr):
            if call_name(stmt.value) == "func_attr":
                marker = self.eval(stmt.value)
                self.attrs.update(marker.value)
                return None
            if isinstance(stmt.value, ast.Constant):
                return None  # a string comment
            raise self.error(stmt, "an expression statement in a graph function: bind it (`y = ...`) or "
                                   "use R.func_attr({...}) / R.output(...)")
        if isinstance(stmt, ast.Pass):
            return None
        if isinstance(stmt, ast.If):
            return self._if(stmt, dataflow, outputs)
        if isinstance(stmt, ast.AnnAssign):
            target, annotation, value_node = stmt.target, stmt.annotation, stmt.value
        elif isinstance(stmt, ast.Assign):
            if len(stmt.targets) != 1:
                raise self.error(stmt, "chained assignment (`a = b = ...`) is not supported in a graph function")
            target, annotation, value_node = stmt.targets[0], None, stmt.value
        else:
            raise self.error(stmt, f"`{_construct(stmt)}` is not supported in an @R.function: a graph function "
                                   f"is straight-line bindings, `with R.dataflow():` blocks and one `return`")
        if not isinstance(target, ast.Name):
            raise self.error(stmt, "bind one name per statement (`y = ...`); tuple unpacking is not supported: "
                                   "bind the tuple, then take items with t[0]")
        if value_node is None:
            raise self.error(stmt, f"binding '{target.id}' has no value")
        value = R.as_expr(self.eval(value_node))
        if isinstance(value, E.Function):
            raise self.error(stmt, "nested @R.function definitions are not supported; put the function in the "
                                   "module and call it as cls.name(...)")
        if not isinstance(value, E.Expr):
            raise self.error(value_node, f"binding '{target.id}': expected a graph expression, got "
                                         f"{type(value).__name__} {value!r}; wrap numbers with R.const(...)")
        sinfo = value.struct_info
        if annotation is not None and isinstance(sinfo, S.ObjectStructInfo):
            sinfo = self._sinfo(annotation)
        cls = E.DataflowVar if dataflow and target.id not in outputs else E.Var
        var = cls(target.id, sinfo)
        self.define(target.id, var)
        self._define_fresh_dims(sinfo)
        return E.VarBinding(var, value)

    def _define_fresh_dims(self, sinfo: S.StructInfo) -> None:
        """Run-time shapes: the fresh symbolic dims a binding introduces (``R.tensor_to_shape``,
        ``R.builtin``) are in scope for the statements after it (`ingot.graph.runtime_shape`)."""
        from .runtime_shape import is_shape_var

        for v in collect_vars(sinfo):
            if is_shape_var(v) and all(v.name not in scope for scope in self.scopes):
                self.scopes[0][v.name] = v

    def _if(self, stmt: ast.If, dataflow: bool, outputs: set) -> E.VarBinding:
        """``if c: ... v = a  else: ... v = b`` (Relax's form): ``v = If(c, SeqExpr(..., a), SeqExpr(..., b))``."""
        from .control_flow import If

        if not stmt.orelse:
            raise self.error(stmt, "an `if` in a graph function needs an `else` branch; both branches end by "
                                   "binding the same name (`v = ...`), the value of the If")
        cond = R.as_expr(self.eval(stmt.test))
        branches, names, annotation = [], [], None
        for body in (stmt.body, stmt.orelse):
            last = body[-1]
            if not isinstance(last, (ast.Assign, ast.AnnAssign)):
                raise self.error(last, "each branch of an `if` ends by binding its result (`v = ...`)")
            target = last.targets[0] if isinstance(last, ast.Assign) else last.target
            if not isinstance(target, ast.Name):
                raise self.error(last, "the last statement of a branch binds one name (`v = ...`)")
            annotation = annotation or getattr(last, "annotation", None)
            self.scopes.append({})
            try:
                bindings = [b for b in (self._statement(s, False, set()) for s in body[:-1]) if b is not None]
                result = R.as_expr(self.eval(last.value))
            finally:
                self.scopes.pop()
            branches.append(E.SeqExpr([E.BindingBlock(bindings)] if bindings else [], result))
            names.append(target.id)
        if names[0] != names[1]:
            raise self.error(stmt, f"both branches of an `if` must bind the same name, got {names[0]!r} and "
                                   f"{names[1]!r}")
        value = If(cond, branches[0], branches[1])
        sinfo = value.struct_info
        if annotation is not None and not isinstance(sinfo, S.TensorStructInfo) or (
                isinstance(sinfo, S.TensorStructInfo) and sinfo.shape is None and annotation is not None):
            sinfo = self._sinfo(annotation)
        cls = E.DataflowVar if dataflow and names[0] not in outputs else E.Var
        var = cls(names[0], sinfo)
        self.define(names[0], var)
        return E.VarBinding(var, value)

    # -- expressions ------------------------------------------------------------------------------
    def _sinfo(self, node: ast.AST) -> S.StructInfo:
        value = self.eval(node)
        if not isinstance(value, S.StructInfo):
            raise self.error(node, f"expected a struct info annotation such as R.Tensor((1, 784), "
                                   f"dtype=\"float32\"), got {type(value).__name__}")
        return value

    def _eval_Attribute(self, node: ast.Attribute) -> Any:
        obj = self.eval(node.value)
        if isinstance(obj, (types.ModuleType, _ClassRef)):  # R.<name>, cls.<name>: their messages say more
            try:
                return getattr(obj, node.attr)
            except AttributeError as err:
                raise self.error(node, str(err).strip("'\"")) from None
        return super()._eval_Attribute(node)

    def _eval_Subscript(self, node: ast.Subscript) -> Any:
        target = self.eval(node.value)
        if isinstance(target, E.Expr):
            index = self.eval(node.slice)
            if not isinstance(index, int):
                raise self.error(node, "a tuple item is taken with a constant integer index: t[0]")
            return E.TupleGetItem(target, index)
        return super()._eval_Subscript(node)

    def _eval_Call(self, node: ast.Call) -> Any:
        func = self.eval(node.func)
        if isinstance(func, GlobalVar):
            callee = self.parsed.get(func.name_hint)
            if not isinstance(callee, E.Function):
                raise self.error(node, f"call of module function {func.name_hint!r}: only graph functions of the "
                                       f"module can be called directly; call a PrimFunc with "
                                       f"R.call_tir(cls.{func.name_hint}, (args...), out_sinfo=...)")
            args = [R.as_expr(self.eval(a)) for a in node.args]
            return E.Call(func, args, struct_info=callee.ret_struct_info)
        if (func is R.Tensor or func is R.Shape) and _has_str_dim(node):
            # TVM's R.Tensor(("n", 4), "float32"): a string dimension is the symbolic variable of that name.
            return self._symbolic(func, node)
        return super()._eval_Call(node)

    def _symbolic(self, func: Any, node: ast.Call) -> Any:
        args = [self.eval(a) for a in node.args]
        kwargs = {k.arg: self.eval(k.value) for k in node.keywords}
        key = "shape" if func is R.Tensor else "values"
        dims = args[0] if args else kwargs.get(key)
        dims = [self._sym_var(d) if isinstance(d, str) else d for d in dims]
        if args:
            args[0] = dims
        else:
            kwargs[key] = dims
        return func(*args, **kwargs)

    def _sym_var(self, name: str) -> Any:
        for scope in self.scopes:
            if name in scope:
                return scope[name]
        var = R.prim_var(name, "int64")
        self.scopes[0][name] = var
        return var


def _construct(stmt: ast.stmt) -> str:
    return {ast.For: "for", ast.While: "while", ast.If: "if", ast.FunctionDef: "def", ast.AugAssign: "x op= y",
            ast.Assert: "assert", ast.Try: "try", ast.Delete: "del"}.get(type(stmt), type(stmt).__name__)


def _fresh(base: str, scopes: list) -> str:
    name, k = base, 0
    while any(name in scope for scope in scopes):
        k += 1
        name = f"{base}{k}"
    return name


def _has_str_dim(node: ast.Call) -> bool:
    dims = node.args[0] if node.args else next((k.value for k in node.keywords if k.arg in ("shape", "values")), None)
    return isinstance(dims, (ast.Tuple, ast.List)) and any(
        isinstance(d, ast.Constant) and isinstance(d.value, str) for d in dims.elts)


def _sym_decl(stmt: ast.stmt) -> "tuple[str, str] | None":
    """``n = T.int64()`` → ``("n", "int64")``."""
    if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
        value = stmt.value
        if isinstance(value, ast.Call) and not value.args and not value.keywords and \
                isinstance(value.func, ast.Attribute) and value.func.attr in _SYM_DTYPES:
            return stmt.targets[0].id, value.func.attr
    return None


def parse_graph_function(source: Source, fdef: ast.FunctionDef, env: dict, module_names: "set[str] | None" = None,
                         parsed: "dict[str, Any] | None" = None, private: bool = False) -> E.Function:
    """Parse one ``@R.function`` definition (the hook `ingot.script`'s module parser calls).

    Example:
        >>> import ast
        >>> text = "def f(x: R.Tensor((2,), 'float32')):\\n    return R.exp(x)\\n"
        >>> f = parse_graph_function(Source.from_text(text), ast.parse(text).body[0], {})
        >>> f.attrs["global_symbol"]
        'f'
    """
    return GraphFunctionParser(source, env, module_names, parsed).parse(fdef, private=private)


def parse_function(func: Any, frame: Any = None, private: bool = False) -> E.Function:
    """Parse a Python function written as a graph function (used by ``@R.function``).

    Example: see `ingot.graph.script.function`.
    """
    from ingot.script.parser import _env_of, _parse_ast

    source = Source.from_object(func)
    tree = _parse_ast(source)
    fdef = tree.body[0]
    if not isinstance(fdef, ast.FunctionDef):
        raise ParseError("@R.function decorates a function definition")
    return parse_graph_function(source, fdef, _env_of([func], frame), private=private)


register_function_parser("function", parse_graph_function, namespace=("R", R))

__all__ = ["GraphFunctionParser", "parse_graph_function", "parse_function"]
