"""`create_prim_func`: a TE graph → a scheduled-level TensorIR `PrimFunc` (TVM's CreatePrimFunc).

Note: the result follows TVM exactly, so schedules written against TVM's output apply unchanged:

* the body is a ``BlockRealize`` of the root block ``"root"``; tensors that are computed but not in
  ``args`` become its ``alloc_buffers``; the stages' loop nests, in dependency order, are its body;
* each `te.compute` becomes ``for`` loops named after its axes (``i, j, k``) around one block named
  after the op (made unique: ``C``, ``C_1``...), whose iteration variables ``v_i, v_j, v_k`` are bound
  to the loops (``T.axis.remap("SSR", [i, j, k])``), with read/write regions;
* a reduction block has ``init`` (store the identity, or the reducer's ``init=``) and the update
  ``C[v] = combine(C[v], source)``; a ``where=`` condition guards the update with an ``if``
  (as TVM's classic lowering, so a guarded out-of-bounds read never happens);
* parameters are the tensors of ``args`` as buffers (symbolic dimensions are the Vars in their
  shapes), in order; a variable the function needs that is not a whole dimension of a parameter
  (used only in a compute shape or body) becomes a scalar parameter, appended in order of first use
  unless it is given in ``args``; attributes ``{"global_symbol": "main", "tir.noalias": True}``.

Example:
    >>> from ingot import te
    >>> A = te.placeholder((128, 128), name="A"); B = te.placeholder((128, 128), name="B")
    >>> k = te.reduce_axis((0, 128), name="k")
    >>> C = te.compute((128, 128), lambda i, j: te.sum(A[i, k] * B[k, j], axis=k), name="C")
    >>> f = te.create_prim_func([A, B, C])
    >>> block = f.body.block.body.body.body.body.block
    >>> block.name_hint, [iv.kind for iv in block.iter_vars], [str(r) for r in block.reads]
    ('C', ['S', 'S', 'R'], ['A[v_i, v_k]', 'B[v_k, v_j]'])
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

from ingot.ir.buffer import Buffer, decl_buffer
from ingot.ir.dtype import DataType
from ingot.ir.expr import (
    BinaryOp, BufferLoad, CmpOp, IntImm, IterVar, PrimExpr, Range, Var, _arith, _compare, cast, is_const_int,
)
from ingot.ir.functor import Mutator, collect_vars
from ingot.tir.function import PrimFunc
from ingot.tir.stmt import Block, BlockRealize, BufferStore, For, ForKind, IfThenElse, LetStmt, SeqStmt, Stmt

from .reduce import Reduce
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor, TensorBuffer

__all__ = ["create_prim_func"]


def create_prim_func(args: Sequence["Tensor | Var"], index_dtype_override: "str | None" = None) -> PrimFunc:
    """The TensorIR function computing the tensors of ``args`` from the placeholders of ``args``.

    ``args`` lists the function's parameters: tensors (inputs and outputs, in call order) and
    optionally scalar Vars. ``index_dtype_override="int64"`` makes every loop, iteration variable,
    shape and index that type (TVM's option for large tensors).

    Example:
        >>> from ingot import te
        >>> n = te.var("n")
        >>> A = te.placeholder((n,), name="A")
        >>> B = te.compute((n,), lambda i: A[i] + 1.0, name="B")
        >>> f = te.create_prim_func([A, B])
        >>> [p.name for p in f.params], f.attrs["global_symbol"]
        (['A', 'B'], 'main')
    """
    return _Builder(args, index_dtype_override).build()


class _Builder:
    def __init__(self, args: Sequence[Any], index_dtype_override: "str | None"):
        if isinstance(args, (Tensor, Var)):
            args = [args]
        self.args = list(args)
        for pos, a in enumerate(self.args):
            if not isinstance(a, (Tensor, Var)):
                raise TypeError(
                    f"te.create_prim_func: argument {pos} is a {type(a).__name__} ({a!r}); arguments are te tensors "
                    f"(te.placeholder / te.compute results) and scalar Vars"
                )
        self.arg_tensors = [a for a in self.args if isinstance(a, Tensor)]
        if len({id(t) for t in self.arg_tensors}) != len(self.arg_tensors):
            dup = next(t for i, t in enumerate(self.arg_tensors) if any(t is u for u in self.arg_tensors[:i]))
            raise ValueError(f"te.create_prim_func: the tensor {dup.name!r} is listed twice in args")
        self.index_dtype = DataType(index_dtype_override) if index_dtype_override is not None else None
        if self.index_dtype is not None and not (self.index_dtype.is_int and self.index_dtype.lanes == 1):
            raise ValueError(f"te.create_prim_func: index_dtype_override={index_dtype_override!r}; use 'int32' or 'int64'")
        self.tensor_buffers: dict[int, Buffer] = {}   # id(TensorBuffer) -> function buffer
        self.vmap: dict[Var, PrimExpr] = {}           # shape vars under index_dtype_override
        self.root_alloc: list[Buffer] = []
        self.block_names: set[str] = set()
        self.defined: set[int] = set()                # ids of vars defined inside the body

    # -- Step 1. The operations, producers first (TVM's post-DFS order from the args) ----------
    def ordered_ops(self) -> list[Operation]:
        order: list[Operation] = []
        seen: set[int] = set()
        readers: dict[int, Operation] = {}
        for t in self.arg_tensors:
            stack = [(t.op, iter(t.op.input_tensors))]
            if id(t.op) in seen:
                continue
            seen.add(id(t.op))
            while stack:
                op, inputs = stack[-1]
                nxt = next(inputs, None)
                if nxt is None:
                    stack.pop()
                    order.append(op)
                elif id(nxt.op) not in seen:
                    seen.add(id(nxt.op))
                    readers[id(nxt.op)] = op
                    stack.append((nxt.op, iter(nxt.op.input_tensors)))
        self.readers = readers
        return order

    def is_arg(self, tensor: Tensor) -> bool:
        return any(tensor is a for a in self.arg_tensors)

    # -- Step 2. Buffers for the tensors ---------------------------------------------------------
    def declare(self, tensor: Tensor) -> Buffer:
        shape = tuple(self.index(self.remap(d)) for d in tensor.shape)
        buffer = decl_buffer(shape, tensor.dtype, tensor.name)
        self.tensor_buffers[id(tensor.buffer)] = buffer
        return buffer

    def build(self) -> PrimFunc:
        self.setup_index_vars()
        stmts: list[Stmt] = []
        for op in self.ordered_ops():
            if isinstance(op, PlaceholderOp):
                tensor = op.output(0)
                if not self.is_arg(tensor):
                    reader = self.readers.get(id(op))
                    by = f" (read by te.compute {reader.name!r})" if reader is not None else ""
                    raise ValueError(
                        f"te.create_prim_func: the placeholder {tensor.name!r}{by} is not in args; every input "
                        f"tensor must be a parameter: add {tensor.name} to the argument list"
                    )
                self.declare(tensor)
            elif isinstance(op, ComputeOp):
                buffers = []
                for tensor in op.outputs:
                    buffers.append(self.declare(tensor))
                    if not self.is_arg(tensor):
                        self.root_alloc.append(buffers[-1])
                stmts.append(self.compute_stmt(op, buffers))
            else:  # pragma: no cover - only two operation kinds exist
                raise TypeError(f"te.create_prim_func: unsupported operation {op!r}")
        root = Block([], [], [], "root", SeqStmt.flatten(stmts), alloc_buffers=self.root_alloc)
        body = BlockRealize([], True, root)
        params = self.params(body)
        return PrimFunc(params, body, {"global_symbol": "main", "tir.noalias": True})

    # -- Step 3. One loop nest and block per compute ---------------------------------------------
    def compute_stmt(self, op: ComputeOp, buffers: list[Buffer]) -> Stmt:
        axes = list(op.axis) + list(op.reduce_axis)
        axis_vars = {id(iv.var) for iv in axes}
        for iv in op.reduce_axis:
            dep = [v for v in collect_vars(iv.dom) if id(v) in axis_vars]
            if dep:
                raise NotImplementedError(
                    f"te.create_prim_func: te.compute {op.name!r}: the domain of reduce axis {iv.var.name!r} depends "
                    f"on the axis {dep[0].name!r} (a triangular loop); TVM nests blocks for this, Ingot does not yet. "
                    f"Use a rectangular axis with a where= condition instead"
                )
        loops: list[tuple[Var, Range]] = []
        iter_vars: list[IterVar] = []
        bindings: list[PrimExpr] = []
        vmap: dict[Var, PrimExpr] = dict(self.vmap)
        for iv in axes:
            dom = Range.from_min_extent(self.index(self.remap(iv.dom.min)), self.index(self.remap(iv.dom.extent)))
            dtype = self.index_dtype or DataType(f"int{max(dom.min.dtype.bits, dom.extent.dtype.bits)}")
            dom = Range.from_min_extent(_as_dtype(dom.min, dtype), _as_dtype(dom.extent, dtype))
            loop_var, block_var = Var(iv.var.name, dtype), Var(f"v_{iv.var.name}", dtype)
            self.defined.update((id(loop_var), id(block_var)))
            loops.append((loop_var, dom))
            iter_vars.append(IterVar(dom, block_var, iv.kind))
            bindings.append(loop_var)
            vmap[iv.var] = block_var
        store_indices = [v.var for v, iv in zip(iter_vars, axes) if iv.kind != "R"]
        if not iter_vars:
            # A 0-d output: TVM gives the block one unit iteration variable bound to 0.
            dummy = Var("vi", "int32")
            self.defined.add(id(dummy))
            iter_vars.append(IterVar(Range.from_min_extent(0, 1), dummy, "S"))
            bindings.append(IntImm("int32", 0))
        annotations = {k: self.attr_value(v) for k, v in op.attrs.items()}
        realizes: list[Stmt] = []
        if isinstance(op.body[0], Reduce):
            init, update = self.reduce_stmts(op.body[0], buffers, store_indices, vmap)
            realizes.append(self.realize(op.name, iter_vars, bindings, update, init, annotations))
        else:
            for i, (expr, buffer) in enumerate(zip(op.body, buffers)):
                ivs, idx, local = iter_vars, store_indices, vmap
                if i > 0:
                    # Every block defines its own iteration variables (SSA), as TVM renews them.
                    ivs = [IterVar(v.dom, Var(v.var.name, v.var.dtype), v.kind) for v in iter_vars]
                    self.defined.update(id(v.var) for v in ivs)
                    renew = {old.var: new.var for old, new in zip(iter_vars, ivs)}
                    local = {k: renew.get(v, v) for k, v in vmap.items()}
                    idx = [renew[v] for v in store_indices]
                store = BufferStore(buffer, self.remap(expr, local), idx)
                realizes.append(self.realize(buffer.name, ivs, bindings, store, None, annotations))
        body: Stmt = SeqStmt.flatten(realizes)
        for loop_var, dom in reversed(loops):
            body = For(loop_var, dom.min, dom.extent, ForKind.SERIAL, body)
        return body

    def reduce_stmts(self, reduce: Reduce, buffers: list[Buffer], indices: list[PrimExpr],
                     vmap: Mapping[Var, PrimExpr]) -> tuple[Stmt, Stmt]:
        n = len(buffers)
        starts = reduce.init if reduce.init else reduce.combiner.identity_element
        init = SeqStmt.flatten([BufferStore(b, self.remap(s, vmap), indices) for b, s in zip(buffers, starts)])
        lhs = [BufferLoad(b, indices) for b in buffers]
        rhs = [self.remap(s, vmap) for s in reduce.source]
        combined = reduce.combiner(lhs, rhs)
        if n == 1:
            update: Stmt = BufferStore(buffers[0], combined[0], indices)
        else:
            # All values combine from the old ones: bind them first, then store (TVM's Bind).
            temps = [Var(f"v_{b.name}", b.dtype) for b in buffers]
            self.defined.update(id(t) for t in temps)
            update = SeqStmt.flatten([BufferStore(b, t, indices) for b, t in zip(buffers, temps)])
            for t, value in reversed(list(zip(temps, combined))):
                update = LetStmt(t, value, update)
        if not is_const_int(reduce.condition, 1):
            update = IfThenElse(self.remap(reduce.condition, vmap), update)
        return init, update

    def realize(self, name: str, iter_vars, bindings, body: Stmt, init, annotations) -> BlockRealize:
        block = Block(iter_vars, [], [], self.fresh_name(name), body, init=init, annotations=annotations)
        reads, writes = _infer_regions(block)
        return BlockRealize(bindings, True, block.replace(reads=tuple(reads), writes=tuple(writes)))

    def fresh_name(self, base: str) -> str:
        name, k = base, 0
        while name in self.block_names:
            k += 1
            name = f"{base}_{k}"
        self.block_names.add(name)
        return name

    def attr_value(self, value: Any) -> Any:
        if isinstance(value, Tensor):
            return self.tensor_buffers.get(id(value.buffer), value.name)
        if isinstance(value, (list, tuple)):
            return tuple(self.attr_value(v) for v in value)
        return value

    # -- Expressions: tensors → buffers, axes → block vars, index dtype --------------------------
    def remap(self, expr: Any, vmap: "Mapping[Var, PrimExpr] | None" = None) -> Any:
        return _Remapper(self, self.vmap if vmap is None else vmap).visit(expr)

    def index(self, expr: PrimExpr) -> PrimExpr:
        return _as_dtype(expr, self.index_dtype) if self.index_dtype is not None else expr

    def setup_index_vars(self) -> None:
        if self.index_dtype is None:
            return
        # Shape variables of another integer type become index_dtype variables of the same name.
        for t in self._all_tensors():
            for dim in t.shape:
                for v in collect_vars(dim):
                    if v.dtype != self.index_dtype and v.dtype.is_integer and v not in self.vmap:
                        self.vmap[v] = type(v)(v.name, self.index_dtype)

    def _all_tensors(self) -> list[Tensor]:
        out: list[Tensor] = []
        for op in self.ordered_ops():
            out.extend(op.outputs)
        return out

    # -- Step 4. Parameters ----------------------------------------------------------------------
    def params(self, body: Stmt) -> list[Any]:
        params: list[Any] = []
        for a in self.args:
            if isinstance(a, Tensor):
                params.append(self.tensor_buffers[id(a.buffer)])
            else:
                params.append(self.vmap.get(a, a))
        bound = {id(d) for p in params if isinstance(p, Buffer) for d in p.shape if isinstance(d, Var)}
        bound |= {id(p) for p in params if isinstance(p, Var)}
        used = collect_vars(body)
        for b in self.root_alloc + [p for p in params if isinstance(p, Buffer)]:
            used += collect_vars(list(b.shape))
        extra: list[Var] = []
        for v in used:
            if id(v) in self.defined or id(v) in bound or v.dtype.is_handle:
                continue
            if all(v is not e for e in extra):
                extra.append(v)
        return params + extra


class _Remapper(Mutator):
    """Tensor loads → function buffers, variables → ``vmap``; re-promotes operand dtypes."""

    def __init__(self, builder: _Builder, vmap: Mapping[Var, PrimExpr]):
        self.builder, self.vmap = builder, vmap

    def visit_Var(self, node: Var) -> Any:
        return self.vmap.get(node, node)

    def visit_BufferLoad(self, node: BufferLoad) -> Any:
        buffer = node.buffer
        if isinstance(buffer, TensorBuffer):
            mapped = self.builder.tensor_buffers.get(id(buffer))
            if mapped is None:  # pragma: no cover - post-DFS order declares producers first
                raise ValueError(f"te.create_prim_func: the tensor {buffer.name!r} is read before it is computed")
            buffer = mapped
        indices = tuple(self.builder.index(self.visit(i)) for i in node.indices)
        return BufferLoad(buffer, indices)

    def visit_BinaryOp(self, node: BinaryOp) -> Any:
        a, b = self.visit(node.a), self.visit(node.b)
        return node if (a is node.a and b is node.b) else _arith(type(node), a, b)

    def visit_CmpOp(self, node: CmpOp) -> Any:
        a, b = self.visit(node.a), self.visit(node.b)
        return node if (a is node.a and b is node.b) else _compare(type(node), a, b)


def _as_dtype(expr: PrimExpr, dtype: DataType) -> PrimExpr:
    if expr.dtype == dtype or not expr.dtype.is_integer:
        return expr
    if isinstance(expr, IntImm):
        return IntImm(dtype, expr.value)
    return cast(expr, dtype)


def _infer_regions(block: Block):
    from ingot.tir.analysis import infer_block_access_regions

    reads, writes = infer_block_access_regions(block)
    if block.init is not None:
        # TVM's CreatePrimFunc (script.Complete) leaves a reduction's outputs out of its reads.
        written = {id(w.buffer) for w in writes}
        reads = [r for r in reads if id(r.buffer) not in written]
    return reads, writes
