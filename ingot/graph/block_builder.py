"""`BlockBuilder`: build graph functions binding by binding (TVM Relax's ``relax.BlockBuilder``).

Note: the builder keeps a stack of frames — the function being built and, inside it, the binding
block being filled. `emit` binds a call to a fresh variable (``lv0, lv1, ...``, a `DataflowVar`
inside ``with bb.dataflow()``), so the result is in A-normal form by construction; `emit_output`
binds a variable visible after the dataflow block (``gv0, ...``). `emit_te` turns a TE function into
a PrimFunc added to the module and emits a ``call_tir`` to it. PrimFuncs are deduplicated by
structural hash, so emitting the same computation twice adds one function.

Example:
    >>> from ingot import graph as G
    >>> bb = G.BlockBuilder()
    >>> x = G.Var("x", G.TensorStructInfo((1, 4), "float32"))
    >>> with bb.function("main", [x]):
    ...     with bb.dataflow():
    ...         lv0 = bb.emit(G.op.relu(x))
    ...         gv = bb.emit_output(G.op.exp(lv0))
    ...     bb.emit_func_output(gv)
    >>> mod = bb.get()
    >>> [b.var.name_hint for b in mod["main"].body.blocks[0].bindings]
    ['lv0', 'gv0']
"""
from __future__ import annotations

import contextlib
from typing import Any, Iterator, Sequence

from ingot.ir import IRModule, structural_hash
from ingot.ir.error import IRError
from ingot.ir.module import GlobalVar

from .expr import BindingBlock, DataflowBlock, DataflowVar, Expr, Function, SeqExpr, Tuple, Var, VarBinding
from .struct_info import TensorStructInfo


class _FunctionFrame:
    def __init__(self, name: str, params: "list[Var] | None", attrs: dict):
        self.name = name
        self.params = params
        self.attrs = attrs
        self.blocks: list[BindingBlock] = []
        self.bindings: list[VarBinding] = []
        self.in_dataflow = False
        self.output: "Expr | None" = None
        self.ret_sinfo = None


class BlockBuilder:
    """Builds an `IRModule` of graph functions and PrimFuncs.

    Example:
        >>> from ingot import graph as G
        >>> bb = G.BlockBuilder()
        >>> x = G.Var("x", G.TensorStructInfo((4,), "float32"))
        >>> with bb.function("f", [x]):
        ...     bb.emit_func_output(bb.emit(G.op.sigmoid(x)))
        >>> print(bb.get()["f"].body.body.name_hint)
        lv0
    """

    def __init__(self, mod: "IRModule | None" = None):
        self._functions: dict[str, Any] = dict(mod.functions) if mod is not None else {}
        self._hash_to_name: dict[str, str] = {}
        for name, func in self._functions.items():
            if not isinstance(func, Function):
                self._hash_to_name.setdefault(_func_hash(func), name)
        self._frame: "_FunctionFrame | None" = None
        self._counter = 0
        self._out_counter = 0

    # -- functions and blocks ------------------------------------------------------------------
    @contextlib.contextmanager
    def function(self, name: str, params: "Sequence[Var] | None" = None,
                 attrs: "dict | None" = None) -> Iterator[None]:
        """Build function ``name`` with ``params`` inside the ``with``; end it with `emit_func_output`.

        Example:
            >>> from ingot import graph as G
            >>> bb = G.BlockBuilder()
            >>> x = G.Var("x", G.TensorStructInfo((2,), "float32"))
            >>> with bb.function("main", [x]):
            ...     bb.emit_func_output(x)
        """
        if self._frame is not None:
            raise IRError(f"BlockBuilder: function {name!r} started inside function {self._frame.name!r}; "
                          "finish the first with emit_func_output")
        self._frame = _FunctionFrame(name, None if params is None else list(params), dict(attrs or {}))
        self._counter = self._out_counter = 0
        try:
            yield
            if self._frame.output is None:
                raise IRError(f"BlockBuilder: function {name!r} has no output; call bb.emit_func_output(value)")
        finally:
            self._frame = None

    @contextlib.contextmanager
    def dataflow(self) -> Iterator[None]:
        """A dataflow block: bindings without side effects; results leave it through `emit_output`.

        Example:
            >>> from ingot import graph as G
            >>> bb = G.BlockBuilder()
            >>> x = G.Var("x", G.TensorStructInfo((2,), "float32"))
            >>> with bb.function("main", [x]):
            ...     with bb.dataflow():
            ...         y = bb.emit_output(G.op.relu(x))
            ...     bb.emit_func_output(y)
        """
        frame = self._require_frame("dataflow")
        if frame.in_dataflow:
            raise IRError("BlockBuilder: dataflow blocks do not nest")
        self._close_block()
        frame.in_dataflow = True
        try:
            yield
        finally:
            self._close_block()
            frame.in_dataflow = False

    def _require_frame(self, what: str) -> _FunctionFrame:
        if self._frame is None:
            raise IRError(f"BlockBuilder.{what}: call it inside `with bb.function(name, params):`")
        return self._frame

    def _close_block(self) -> None:
        frame = self._frame
        if frame is not None and frame.bindings:
            cls = DataflowBlock if frame.in_dataflow else BindingBlock
            frame.blocks.append(cls(frame.bindings))
            frame.bindings = []

    # -- emitting ------------------------------------------------------------------------------
    def emit(self, expr: Expr, name_hint: str = "") -> Var:
        """Bind ``expr`` to a fresh variable (``lvN``; a DataflowVar inside a dataflow block).

        Example:
            >>> from ingot import graph as G
            >>> bb = G.BlockBuilder()
            >>> x = G.Var("x", G.TensorStructInfo((2,), "float32"))
            >>> with bb.function("main", [x]):
            ...     lv = bb.emit(G.op.relu(x))
            ...     bb.emit_func_output(lv)
            >>> lv.name_hint
            'lv0'
        """
        frame = self._require_frame("emit")
        if not isinstance(expr, Expr):
            raise IRError(f"BlockBuilder.emit: expected a graph expression (e.g. G.op.relu(x)), got {expr!r}")
        name = name_hint or f"lv{self._counter}"
        self._counter += 1
        var = (DataflowVar if frame.in_dataflow else Var)(name, expr.struct_info)
        frame.bindings.append(VarBinding(var, expr))
        return var

    def emit_output(self, output: Expr, name_hint: str = "") -> Var:
        """Bind ``output`` to a variable visible after the dataflow block (``gvN``).

        Example: see `dataflow`.
        """
        frame = self._require_frame("emit_output")
        if not frame.in_dataflow:
            raise IRError("BlockBuilder.emit_output is for dataflow blocks; outside one use bb.emit")
        name = name_hint or f"gv{self._out_counter}"
        self._out_counter += 1
        var = Var(name, output.struct_info)
        frame.bindings.append(VarBinding(var, output))
        return var

    def emit_func_output(self, output: "Expr | Sequence[Expr]", params: "Sequence[Var] | None" = None) -> None:
        """End the current function: ``output`` is its result (a list becomes a Tuple).

        Example: see `function`.
        """
        frame = self._require_frame("emit_func_output")
        if frame.in_dataflow:
            raise IRError("BlockBuilder.emit_func_output must be called after the `with bb.dataflow()` block")
        if frame.output is not None:
            raise IRError(f"function {frame.name!r} already has an output")
        if params is not None:
            if frame.params is not None:
                raise IRError(f"function {frame.name!r}: params were given to bb.function already")
            frame.params = list(params)
        if frame.params is None:
            raise IRError(f"function {frame.name!r} has no parameter list; pass params to bb.function or here")
        if isinstance(output, (list, tuple)):
            output = Tuple(list(output))
        for block in frame.blocks + [BindingBlock(frame.bindings)]:
            if isinstance(block, DataflowBlock):
                continue
        self._close_block()
        if isinstance(output, DataflowVar):
            raise IRError(f"function {frame.name!r}: the output {output.name_hint} is a dataflow variable; "
                          "bind it with bb.emit_output inside the dataflow block")
        frame.output = output
        attrs = {"global_symbol": frame.name, **frame.attrs}
        func = Function(frame.params, SeqExpr(frame.blocks, output), output.struct_info, attrs)
        self._functions[frame.name] = func

    # -- PrimFuncs -----------------------------------------------------------------------------
    def add_func(self, func: Any, func_name: str) -> GlobalVar:
        """Add ``func`` to the module (reusing an existing structurally equal PrimFunc); its GlobalVar.

        Example:
            >>> from ingot import graph as G
            >>> bb = G.BlockBuilder()
            >>> x = G.Var("x", G.TensorStructInfo((2,), "float32"))
            >>> bb.add_func(G.Function([x], G.SeqExpr([], x)), "ident").name_hint
            'ident'
        """
        if not isinstance(func, Function):
            key = _func_hash(func)
            existing = self._hash_to_name.get(key)
            if existing is not None:
                return GlobalVar(existing)
        name = unique_name(func_name, self._functions)
        if not isinstance(func, Function):
            func = func.with_attr("global_symbol", name) if hasattr(func, "with_attr") else func
            self._hash_to_name[_func_hash(func)] = name
        self._functions[name] = func
        return GlobalVar(name)

    def update_func(self, gvar: "GlobalVar | str", func: Any) -> None:
        """Replace the function ``gvar`` (e.g. with a tuned PrimFunc)."""
        name = gvar.name_hint if isinstance(gvar, GlobalVar) else str(gvar)
        self._functions[name] = func

    def call_te(self, te_func: Any, *args: Any, primfunc_name_hint: str = "", **kwargs: Any) -> Expr:
        """A ``call_tir`` of the PrimFunc made from ``te_func(*placeholders, **kwargs)`` (not emitted).

        Graph tensor arguments become placeholders (shapes and symbolic dims kept); other arguments
        are passed to ``te_func`` as they are. Symbolic sizes that the PrimFunc takes as scalar
        parameters are passed as the call's ``tir_vars``.

        Example:
            >>> from ingot import graph as G, ops
            >>> bb = G.BlockBuilder()
            >>> x = G.Var("x", G.TensorStructInfo((2, 3), "float32"))
            >>> call = bb.call_te(ops.elemwise.relu, x)  # doctest: +SKIP
        """
        from .op.base import call_tir
        from .te_bridge import call_tir_scalars, create_prim_func, placeholder_for, tensor_sinfo_of

        placeholders, graph_args, te_args = [], [], []
        for index, a in enumerate(args):
            if isinstance(a, Expr) and isinstance(a.struct_info, TensorStructInfo):
                name = getattr(a, "name_hint", None) or f"arg{index}"
                ph = placeholder_for(a.struct_info, name)
                placeholders.append(ph)
                graph_args.append(a)
                te_args.append(ph)
            else:
                te_args.append(a)
        out = te_func(*te_args, **kwargs)
        outs = list(out) if isinstance(out, (list, tuple)) else [out]
        name = primfunc_name_hint or getattr(te_func, "__name__", "te_func")
        func = create_prim_func(placeholders, outs, name)
        sinfos = [tensor_sinfo_of(t) for t in outs]
        # Symbolic sizes the kernel takes as scalar parameters travel as tir_vars (TVM's call_te).
        tir_vars = call_tir_scalars(func, [a.struct_info for a in graph_args] + sinfos)
        gvar = self.add_func(func, name)
        return call_tir(gvar, graph_args, sinfos if len(sinfos) > 1 else sinfos[0], tir_vars=tir_vars or None)

    def emit_te(self, te_func: Any, *args: Any, primfunc_name_hint: str = "", **kwargs: Any) -> Var:
        """Emit a ``call_tir`` to the PrimFunc made from ``te_func`` (see `call_te`).

        Example:
            >>> from ingot import graph as G, ops
            >>> bb = G.BlockBuilder()
            >>> x = G.Var("x", G.TensorStructInfo((2, 3), "float32"))
            >>> with bb.function("main", [x]):
            ...     y = bb.emit_te(ops.elemwise.relu, x)  # doctest: +SKIP
            ...     bb.emit_func_output(y)  # doctest: +SKIP
        """
        return self.emit(self.call_te(te_func, *args, primfunc_name_hint=primfunc_name_hint, **kwargs))

    def get(self) -> IRModule:
        """The module built so far.

        Example: see the class docstring.
        """
        if self._frame is not None:
            raise IRError(f"BlockBuilder.get: function {self._frame.name!r} is still being built")
        return IRModule(self._functions)


def _func_hash(func: Any) -> str:
    # Names and the exported symbol do not make two kernels different.
    attrs = getattr(func, "attrs", None)
    if attrs is not None and "global_symbol" in attrs:
        func = func.replace(attrs=attrs.without("global_symbol"))
    return structural_hash(func)


def unique_name(base: str, taken: Any) -> str:
    """``base``, or ``base1``, ``base2``, ... : the first name not in ``taken`` (a module's functions).

    Example:
        >>> unique_name("main", {"main", "main1"})
        'main2'
    """
    name, k = base, 1
    while name in taken:
        name, k = f"{base}{k}", k + 1
    return name
