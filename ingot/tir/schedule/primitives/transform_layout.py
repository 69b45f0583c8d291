"""`transform_layout`: change a buffer's layout by an index map, rewriting every access.

Note: ``transform_layout(block, buffer, index_map)`` picks a buffer the block reads or writes
(``("read", i)``, ``("write", i)``, an int = the ``i``-th written buffer, or the buffer's name)
and replaces it everywhere in the function by a new buffer of shape ``index_map(shape)``: loads
and stores ``X[idx]`` become ``X'[index_map(idx)]``, block regions are mapped (relaxed boxes),
allocations and match_buffers are redefined. The map must be bijective over the buffer's shape
(checked with `ingot.arith.IndexMap`), otherwise elements would collide or be lost; padding maps
(``pad_value``) are not supported yet and raise NotImplementedError. A *parameter* buffer
changes the function's signature, which callers do not expect: it is refused unless
``allow_param_change=True``. To pack an input (e.g. B of a matmul into ``[N // 16, K, 16]``),
``cache_read`` it and transform the layout of the cache.

Example (before/after, packing an intermediate)::

    B = T.alloc_buffer((64, 32))           B = T.alloc_buffer((4, 32, 16))
    B[vn, vk] = ...               →        B[vn // 16, vk, vn % 16] = ...
"""
from __future__ import annotations

from typing import Any, Callable, Union

from ingot.ir.buffer import Buffer, BufferRegion, MatchBufferRegion, decl_buffer
from ingot.ir.expr import BufferLoad, IntImm, Range, Var
from ingot.ir.functor import Mutator
from ingot.tir.stmt import Allocate, Block, BufferStore

from ..instruction import BlockRV, InstructionKind

TRANSFORM_LAYOUT = InstructionKind("transform_layout", inputs=("block",),
                                   attrs=("buffer", "index_map", "pad_value", "allow_param_change"))


def _as_index_map(index_map: Any, ndim: int):
    from ingot.arith import IndexMap

    if isinstance(index_map, IndexMap):
        return index_map
    if callable(index_map):
        return IndexMap.from_func(index_map, ndim=ndim)
    raise TypeError(f"transform_layout: index_map must be a lambda or an ingot.arith.IndexMap, got {index_map!r}")


def _index_map_json(m: Any) -> list:
    """A JSON-able form of an IndexMap: [param names, final index texts], re-parsed on replay."""
    return [[v.name for v in m.initial_indices], [_expr_json(e, m.initial_indices) for e in m.final_indices]]


def _expr_json(e: Any, params: tuple) -> Any:
    """Expression as nested lists (only what index maps use: vars, ints, + - * // %)."""
    from ingot.ir import expr as E

    ops = {E.Add: "+", E.Sub: "-", E.Mul: "*", E.FloorDiv: "//", E.FloorMod: "%"}
    if isinstance(e, E.IntImm):
        return e.value
    if isinstance(e, E.Var):
        return ["var", [k for k, v in enumerate(params) if v is e][0]]
    if type(e) in ops:
        return [ops[type(e)], _expr_json(e.a, params), _expr_json(e.b, params)]
    raise NotImplementedError(f"transform_layout: cannot record the index expression {e} in a trace "
                              "(only +, -, *, //, % of the indices and constants)")


def index_map_from_json(data: list):
    """Rebuild an IndexMap recorded by `transform_layout`'s trace attribute.

    Example:
        >>> str(index_map_from_json([["i", "j"], [["var", 1], ["var", 0]]]))
        'IndexMap(lambda i, j: (j, i))'
    """
    from ingot.arith import IndexMap

    names, finals = data
    params = [Var(n) for n in names]

    def build(x: Any) -> Any:
        if isinstance(x, int):
            return IntImm("int32", x)
        if x[0] == "var":
            return params[x[1]]
        a, b = build(x[1]), build(x[2])
        return {"+": lambda: a + b, "-": lambda: a - b, "*": lambda: a * b, "//": lambda: a // b,
                "%": lambda: a % b}[x[0]]()

    return IndexMap(params, [build(f) for f in finals])


class _Rewrite(Mutator):
    def __init__(self, old: Buffer, new: Buffer, index_map: Any):
        from ingot.arith import Analyzer

        self.old, self.new, self.map = old, new, index_map
        self.ana = Analyzer()

    def _indices(self, indices: tuple) -> list:
        return self.map.map_indices(list(indices), self.ana)

    def visit_BufferLoad(self, node: BufferLoad) -> Any:
        node = self.generic_visit(node)
        if node.buffer is self.old:
            return BufferLoad(self.new, self._indices(node.indices))
        return node

    def visit_BufferStore(self, node: BufferStore) -> Any:
        node = self.generic_visit(node)
        if node.buffer is self.old:
            return BufferStore(self.new, node.value, self._indices(node.indices))
        return node

    def visit_BufferRegion(self, node: BufferRegion) -> Any:
        if node.buffer is not self.old:
            return self.generic_visit(node)
        if all(isinstance(r.extent, IntImm) and r.extent.value == 1 for r in node.region):
            return BufferRegion.from_point(self.new, self._indices(tuple(r.min for r in node.region)))
        # A box: map symbolic points of it, then relax over the box.
        from ingot.arith import relax_region

        points = [Var(f"p{k}", r.min.dtype) for k, r in enumerate(node.region)]
        dom = {p: Range.from_min_extent(r.min, r.extent) for p, r in zip(points, node.region)}
        mapped = [Range.from_min_extent(e, IntImm(e.dtype, 1)) for e in self._indices(tuple(points))]
        return BufferRegion(self.new, relax_region(mapped, dom, self.ana))

    def visit_MatchBufferRegion(self, node: MatchBufferRegion) -> Any:
        return node.replace(source=self.visit(node.source))

    def visit_Block(self, node: Block) -> Any:
        node = self.generic_visit(node)
        if any(b is self.old for b in node.alloc_buffers):
            node = node.replace(alloc_buffers=tuple(self.new if b is self.old else b for b in node.alloc_buffers))
        return node

    def visit_Allocate(self, node: Allocate) -> Any:
        node = self.generic_visit(node)
        return node.replace(buffer=self.new) if node.buffer is self.old else node


def transform_layout(sch: Any, block: BlockRV, buffer: Union[int, str, tuple], index_map: Union[Callable, Any],
                     pad_value: Any = None, allow_param_change: bool = False) -> None:
    """Re-layout a buffer of ``block`` by ``index_map`` everywhere in the function.

    Example:
        >>> # sch.transform_layout(sch.get_block("B_pack"), ("write", 0), lambda k, n: (n // 16, k, n % 16))
        >>> # trace: sch.transform_layout(block=b0, buffer=["write", 0], index_map=[...], pad_value=None, ...)
    """
    # Step 1. Find the buffer and the map; check bijectivity and the parameter rule.
    sref = sch._block(block, "transform_layout")
    blk: Block = sref.stmt
    if isinstance(buffer, str):
        cands = [r.buffer for r in blk.writes + blk.reads if r.buffer.name == buffer]
        if not cands:
            sch._raise(f"transform_layout: block {blk.name_hint!r} does not access a buffer named {buffer!r}",
                       f"it reads {[r.buffer.name for r in blk.reads]} and writes {[r.buffer.name for r in blk.writes]}",
                       sref.func_name, [blk])
        target = cands[0]
        attr_buffer: Any = buffer
    else:
        kind, index = ("write", buffer) if isinstance(buffer, int) else tuple(buffer)
        regions = blk.writes if kind == "write" else blk.reads if kind == "read" else None
        if regions is None:
            raise ValueError(f"transform_layout: buffer kind must be 'read' or 'write', got {kind!r}")
        if not 0 <= int(index) < len(regions):
            sch._raise(f"transform_layout: block {blk.name_hint!r} has {len(regions)} {kind} buffer(s); index "
                       f"{index} is out of range", "", sref.func_name, [blk])
        target = regions[int(index)].buffer
        attr_buffer = [kind, int(index)]
    if isinstance(index_map, list):  # replayed from a trace
        index_map = index_map_from_json(index_map)
    imap = _as_index_map(index_map, target.ndim)
    if imap.ndim_in != target.ndim:
        sch._raise(f"transform_layout: the index map takes {imap.ndim_in} indices, buffer {target.name!r} has "
                   f"{target.ndim} dims", "give one lambda parameter per dimension", sref.func_name, [blk])
    if pad_value is not None:
        raise NotImplementedError("transform_layout: pad_value (padding layouts) is not implemented yet; use a map "
                                  "that is bijective on the buffer shape, or pad_einsum first")
    if not imap.is_bijective(target.shape):
        sch._raise(f"transform_layout: {imap} is not bijective over the shape {list(map(str, target.shape))} of "
                   f"buffer {target.name!r}", "elements would collide or be lost; pad the buffer first (pad_einsum) "
                   "or use a map whose factors divide the extents", sref.func_name, [blk])
    func = sch.mod[sref.func_name]
    is_param = any(p is target for p in func.params)
    if is_param and not allow_param_change:
        sch._raise(f"transform_layout: buffer {target.name!r} is a parameter of function {sref.func_name!r}",
                   "changing it would change the function's signature; cache_read the buffer and transform the "
                   "layout of the cache (e.g. pack B into [N // 16, K, 16]), or pass allow_param_change=True",
                   sref.func_name, [blk])

    # Step 2. The new buffer; rewrite the whole function.
    new_shape = [int(s) if isinstance(s, IntImm) else s for s in imap.map_shape(target.shape)]
    new = decl_buffer(new_shape, target.dtype, target.name, scope=target.scope)
    rewriter = _Rewrite(target, new, imap)
    body = rewriter.visit(func.body)
    params = tuple(new if p is target else p for p in func.params)
    sch.state.set_func(sref.func_name, func.replace(params=params, body=body))
    sch._record(TRANSFORM_LAYOUT, [block], [attr_buffer, _index_map_json(imap), pad_value, bool(allow_param_change)],
                [])
