"""`ScheduleState`: the current IRModule plus stable references (srefs) to its loops and blocks.

Note: the IR is immutable, so every primitive builds a new function and the old `For`/`Block`
objects die. Handles must survive that. Each loop and block therefore has a `StmtSRef`, a small
*mutable* record owned by the state that always points at the current node. After a primitive
replaces a subtree, `ScheduleState.replace` rebuilds the path to the root and re-indexes the
function once (a walk over statements only, never into expressions), re-attaching srefs by
stable keys:

* a loop is identified by its loop variable (a primitive that keeps a loop keeps its `Var`;
  `split`/`fuse` create new variables, so the old loop's sref becomes invalid);
* a block is identified by its name, unique within a function (`get_block` relies on it too).

An sref whose node disappeared gets ``stmt = None``; using a handle to it raises a
`ScheduleError` that says the loop/block was removed. Random variables (`LoopRV`, `BlockRV`) map
to srefs in the schedule's symbol table, so the handle table never needs rewriting.

Example:
    >>> # state = ScheduleState(mod); sref = state.block_sref("main", "C"); sref.stmt.name_hint
"""
from __future__ import annotations

from typing import Any, Iterator, Optional

from ingot.ir.module import IRModule
from ingot.tir.function import PrimFunc
from ingot.tir.stmt import (
    Allocate, AssertStmt, Block, BlockRealize, For, IfThenElse, LetStmt, SeqStmt, Stmt,
)

from .error import ScheduleError


class StmtSRef:
    """A stable reference to a loop (`For`) or block (`Block`) of the scheduled function.

    ``stmt`` is the current node (None once removed), ``parent`` the enclosing loop/block sref,
    ``realize`` the `BlockRealize` of a block, ``func_name`` the function holding it.

    Example:
        >>> # sref.stmt.loop_var.name  -> 'i'
    """

    __slots__ = ("stmt", "parent", "realize", "func_name", "seq_index")

    def __init__(self, stmt: Any, parent: "Optional[StmtSRef]", func_name: str):
        self.stmt = stmt
        self.parent = parent
        self.realize: Optional[BlockRealize] = None
        self.func_name = func_name
        # Position of this node in its parent's SeqStmt (-1 when it is not in a sequence).
        self.seq_index = -1

    @property
    def is_loop(self) -> bool:
        return isinstance(self.stmt, For)

    @property
    def is_block(self) -> bool:
        return isinstance(self.stmt, Block)

    def __repr__(self) -> str:
        if self.stmt is None:
            return "StmtSRef(<removed>)"
        if isinstance(self.stmt, For):
            return f"StmtSRef(loop {self.stmt.loop_var.name})"
        return f"StmtSRef(block {self.stmt.name_hint})"


class _Marker(StmtSRef):
    """The two non-loop compute locations: ``root`` (-1) and ``inline`` (-2)."""

    def __init__(self, name: str):
        super().__init__(None, None, "")
        self.func_name = name

    def __repr__(self) -> str:
        return f"StmtSRef.{self.func_name}"


ROOT_MARK = _Marker("root")
INLINE_MARK = _Marker("inline")


class _FuncIndex:
    """Srefs of one function: loops by id(loop_var), blocks by name."""

    __slots__ = ("loops", "blocks", "root")

    def __init__(self) -> None:
        self.loops: dict[int, StmtSRef] = {}
        self.blocks: dict[str, StmtSRef] = {}
        self.root: Optional[StmtSRef] = None


class ScheduleState:
    """The module being scheduled and the srefs of its PrimFuncs.

    Example:
        >>> # st = ScheduleState(IRModule({"main": func})); st.mod["main"] is func  -> True
    """

    def __init__(self, mod: IRModule):
        self.mod = mod
        self._index: dict[str, _FuncIndex] = {}
        # Undo records of the open transaction (None when none is open; see `savepoint`).
        self._journal: Optional[list] = None
        for name, func in mod.items():
            if isinstance(func, PrimFunc):
                self._index[name] = _FuncIndex()
                self._reindex(name, func)

    # -- lookup ------------------------------------------------------------------------------------
    def func_names(self) -> list[str]:
        return list(self._index)

    def block_sref(self, func_name: str, name: str) -> Optional[StmtSRef]:
        index = self._index.get(func_name)
        return None if index is None else index.blocks.get(name)

    def blocks(self, func_name: str) -> dict[str, StmtSRef]:
        return self._index[func_name].blocks

    def loop_sref(self, func_name: str, loop: For) -> Optional[StmtSRef]:
        return self._index[func_name].loops.get(id(loop.loop_var))

    def root_sref(self, func_name: str) -> StmtSRef:
        root = self._index[func_name].root
        assert root is not None
        return root

    def sref_of(self, func_name: str, stmt: Stmt) -> StmtSRef:
        """The sref of a loop or block node of the current function."""
        index = self._index[func_name]
        if isinstance(stmt, For):
            return index.loops[id(stmt.loop_var)]
        if isinstance(stmt, BlockRealize):
            stmt = stmt.block
        return index.blocks[stmt.name_hint]

    def copy(self) -> tuple["ScheduleState", dict[int, StmtSRef]]:
        """An independent state over the same (immutable) module and a map old sref id → new sref."""
        new = ScheduleState.__new__(ScheduleState)
        new.mod = self.mod
        new._index = {}
        new._journal = None
        mapping: dict[int, StmtSRef] = {id(ROOT_MARK): ROOT_MARK, id(INLINE_MARK): INLINE_MARK}
        for name, index in self._index.items():
            new_index = _FuncIndex()
            for sref in list(index.loops.values()) + list(index.blocks.values()):
                clone = StmtSRef(sref.stmt, None, sref.func_name)
                clone.realize = sref.realize
                clone.seq_index = sref.seq_index
                mapping[id(sref)] = clone
            for key, sref in index.loops.items():
                new_index.loops[key] = mapping[id(sref)]
            for key, sref in index.blocks.items():
                new_index.blocks[key] = mapping[id(sref)]
            for sref in list(index.loops.values()) + list(index.blocks.values()):
                if sref.parent is not None:
                    mapping[id(sref)].parent = mapping[id(sref.parent)]
            new_index.root = mapping[id(index.root)] if index.root is not None else None
            new._index[name] = new_index
        return new, mapping

    # -- transactions (all-or-nothing primitives) -----------------------------------------------
    def savepoint(self) -> int:
        """Open (or nest into) a transaction and return a mark for `rollback`.

        Note: while a transaction is open, `set_func` (through which every mutation goes) first
        records what it is about to change: the module, the function's sref tables and the
        fields of its srefs. The IR is immutable, so that record is small (O(#loops + #blocks),
        no IR copy). `Schedule` opens one around every primitive and around `Schedule.attempt`.

        Example:
            >>> # mark = state.savepoint(); ...; state.rollback(mark); state.end_transaction()
        """
        if self._journal is None:
            self._journal = []
        return len(self._journal)

    def rollback(self, mark: int) -> None:
        """Undo every change made since `savepoint` returned ``mark``: the module, the sref
        tables and every sref's fields are as they were (the same sref objects, so handles that
        existed then are valid again; srefs created since are dropped).

        Example:
            >>> # mark = state.savepoint(); state.set_func("main", f2); state.rollback(mark)
        """
        journal = self._journal
        if journal is None:
            return
        while len(journal) > mark:
            mod, func_name, loops, blocks, root, fields = journal.pop()
            self.mod = mod
            index = self._index[func_name]
            index.loops, index.blocks, index.root = loops, blocks, root
            for sref, stmt, parent, realize, seq_index in fields:
                sref.stmt, sref.parent, sref.realize, sref.seq_index = stmt, parent, realize, seq_index

    def end_transaction(self) -> None:
        """Close the outermost transaction (its changes are kept; the undo records dropped)."""
        self._journal = None

    def _journal_func(self, func_name: str) -> None:
        # _reindex builds new tables (the old dicts are only read) and mutates srefs in place:
        # keep the old tables and every sref's fields.
        index = self._index[func_name]
        fields = [(s, s.stmt, s.parent, s.realize, s.seq_index)
                  for table in (index.loops, index.blocks) for s in table.values()]
        self._journal.append((self.mod, func_name, index.loops, index.blocks, index.root, fields))

    # -- mutation ----------------------------------------------------------------------------------
    def replace(self, func_name: str, old: Stmt, new: "Stmt | None") -> PrimFunc:
        """Replace the statement ``old`` (by identity) with ``new`` in function ``func_name``,
        update the module and re-attach srefs; returns the new function.

        ``new`` None removes ``old`` from its enclosing sequence.

        Example:
            >>> # state.replace("main", loop, loop.replace(kind="parallel"))
        """
        func = self.mod[func_name]
        if new is old:  # e.g. parallel on a loop that is already parallel
            return func
        body = _replace_stmt(func.body, old, new)
        if body is func.body:
            raise AssertionError(f"internal error: statement to replace not found in {func_name!r}")
        return self.set_func(func_name, func.with_body(body))

    def replace_many(self, func_name: str, changes: dict[int, "Stmt | None"]) -> PrimFunc:
        """Replace several statements at once (``changes``: id(old) → new) in one rebuild."""
        func = self.mod[func_name]
        body = _Replacer(changes).visit(func.body)
        return self.set_func(func_name, func.with_body(body))

    def set_func(self, func_name: str, func: PrimFunc) -> PrimFunc:
        """Install a new version of a function and re-attach its srefs (undoable while a
        transaction is open: see `savepoint`)."""
        if self._journal is not None:
            self._journal_func(func_name)
        self.mod = self.mod.with_function(func_name, func)
        self._reindex(func_name, func)
        return func

    def _reindex(self, func_name: str, func: PrimFunc) -> None:
        # Step 1. Walk the statement tree (never into expressions), re-attaching srefs by key.
        index = self._index[func_name]
        old_loops, old_blocks = index.loops, index.blocks
        loops: dict[int, StmtSRef] = {}
        blocks: dict[str, StmtSRef] = {}
        for stmt, parent, realize, seq_index in _walk_srefs(func.body):
            if isinstance(stmt, For):
                key = id(stmt.loop_var)
                sref = old_loops.get(key)
                if sref is None or sref.stmt is None or not isinstance(sref.stmt, For) or \
                        sref.stmt.loop_var is not stmt.loop_var:
                    sref = StmtSRef(stmt, None, func_name)
                loops[key] = sref
            else:
                name = stmt.name_hint
                if name in blocks:
                    raise ScheduleError(
                        f"function {func_name!r} has two blocks named {name!r}",
                        "block names must be unique within a function; rename one of them", func, [stmt],
                    )
                sref = old_blocks.get(name) or StmtSRef(stmt, None, func_name)
                sref.realize = realize
                blocks[name] = sref
            sref.stmt = stmt
            sref.seq_index = seq_index
            sref.parent = None if parent is None else (
                loops[id(parent.loop_var)] if isinstance(parent, For) else blocks[parent.name_hint]
            )
        # Step 2. Srefs whose node disappeared become invalid (their handles then raise).
        for key, sref in old_loops.items():
            if loops.get(key) is not sref:
                sref.stmt = None
        for key, sref in old_blocks.items():
            if blocks.get(key) is not sref:
                sref.stmt = None
        index.loops, index.blocks = loops, blocks
        root_realize = func.body if isinstance(func.body, BlockRealize) else None
        index.root = blocks.get(root_realize.block.name_hint) if root_realize is not None else None


def _walk_srefs(body: Stmt) -> Iterator[tuple[Any, Any, Any, int]]:
    """(node, parent loop/block node, realize, index in parent sequence) for every For and Block,
    parents before children."""
    stack: list[tuple[Any, Any, Any, int]] = [(body, None, None, -1)]
    while stack:
        stmt, parent, realize, seq_index = stack.pop()
        if isinstance(stmt, For):
            yield stmt, parent, None, seq_index
            stack.append((stmt.body, stmt, None, -1))
        elif isinstance(stmt, BlockRealize):
            block = stmt.block
            yield block, parent, stmt, seq_index
            if block.body is not None:
                stack.append((block.body, block, None, -1))
            if block.init is not None:
                stack.append((block.init, block, None, -1))
        elif isinstance(stmt, SeqStmt):
            for i in range(len(stmt.seq) - 1, -1, -1):
                stack.append((stmt.seq[i], parent, None, i))
        elif isinstance(stmt, (LetStmt, AssertStmt, Allocate)):
            stack.append((stmt.body, parent, None, -1))
        elif isinstance(stmt, IfThenElse):
            if stmt.else_case is not None:
                stack.append((stmt.else_case, parent, None, -1))
            stack.append((stmt.then_case, parent, None, -1))
        elif isinstance(stmt, Block):  # a bare Block (not realized) still holds srefs below
            stack.append((stmt.body, stmt, None, -1))


class _Replacer:
    """Rebuild a statement tree with some statements (by identity) replaced; statements only."""

    def __init__(self, changes: dict[int, "Stmt | None"]):
        self.changes = changes

    def visit(self, stmt: Any) -> Any:
        if id(stmt) in self.changes:
            return self.changes[id(stmt)]
        if isinstance(stmt, SeqStmt):
            items = []
            changed = False
            for s in stmt.seq:
                n = self.visit(s)
                changed |= n is not s
                if n is None:
                    continue
                items.extend(n.seq if isinstance(n, SeqStmt) else [n])
            if not changed:
                return stmt
            return SeqStmt.flatten(items) if items else None
        if isinstance(stmt, (For, LetStmt, AssertStmt, Allocate)):
            body = self.visit(stmt.body)
            return stmt if body is stmt.body else stmt.replace(body=_non_empty(body))
        if isinstance(stmt, IfThenElse):
            then_case = self.visit(stmt.then_case)
            else_case = self.visit(stmt.else_case) if stmt.else_case is not None else None
            if then_case is stmt.then_case and else_case is stmt.else_case:
                return stmt
            return stmt.replace(then_case=_non_empty(then_case), else_case=else_case)
        if isinstance(stmt, BlockRealize):
            block = self.visit(stmt.block)
            return stmt if block is stmt.block else stmt.replace(block=block)
        if isinstance(stmt, Block):
            body = self.visit(stmt.body)
            init = self.visit(stmt.init) if stmt.init is not None else None
            if body is stmt.body and init is stmt.init:
                return stmt
            return stmt.replace(body=_non_empty(body), init=init)
        return stmt


def _non_empty(stmt: "Stmt | None") -> Stmt:
    from ingot.tir.stmt import Evaluate

    return Evaluate(0) if stmt is None else stmt


def _replace_stmt(root: Stmt, old: Stmt, new: "Stmt | None") -> Stmt:
    return _non_empty(_Replacer({id(old): new}).visit(root))
