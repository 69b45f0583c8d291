"""`Schedule`: TVM's ``tir.Schedule`` — transform a TensorIR function step by step, recording a trace.

Note: the schedule holds a `ScheduleState` (the current IRModule and stable srefs to its loops
and blocks), a symbol table from random variables (`BlockRV`, `LoopRV`, `ExprRV`) to srefs or
integer values, a seeded random state, and the `Trace` of every primitive applied. Each
primitive lives in its own module under ``primitives/`` (legality check, transformation,
instruction kind together); the methods below are those functions wrapped by `_all_or_nothing`
(``sch.split.__wrapped__`` is ``primitives.split.split``), or by `_lookup_only` for the lookups.

Contract (all-or-nothing): a primitive either succeeds, changing the IR, the srefs, the handle
table, the random state and the trace together, or raises (`ScheduleError`, or any exception
from its checks) and leaves all of them exactly as they were: the same IR, every handle valid
and pointing at the same loop/block, no new handle, no instruction recorded, the same random
stream. So a rule may call a primitive directly and go on after a refusal; it needs no copy.
`Schedule.attempt()` extends the same guarantee to a sequence of primitives.

Two ways to keep the contract: `_all_or_nothing` opens a savepoint (the state's journal, the
handle table's journal, the trace length, the random state saved on its first draw) and rolls
back to it on an exception; `_lookup_only` is the cheap path for the lookups (get_block,
get_loops, get_child_blocks, get_producers, get_consumers), which by construction change neither
the IR, the srefs, the random state nor the working function: they only add handles and append
one instruction, so undoing a failed lookup is dropping what it added (no savepoint: a get_loops
costs ~0.3 µs over the bare primitive instead of ~0.8 µs; benchmarks/experiments/schedule_atomic.py). The
samplers are not lookups: they draw from the random state, which must be restored when anything
after the draw fails, so they keep the savepoint.

Example:
    >>> # sch = Schedule(mod, seed=0)
    >>> # b = sch.get_block("C"); i, j, k = sch.get_loops(b)
    >>> # j0, j1 = sch.split(j, factors=[None, 4]); sch.reorder(i, j0, k, j1)
    >>> # print(sch.mod.script()); print(sch.trace)
"""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator, Optional, Sequence, Union

import numpy as np

from ingot.ir.expr import PrimExpr, as_const_int
from ingot.ir.module import IRModule
from ingot.tir.function import PrimFunc

from . import primitives as P
from .error import RENDER_LEVELS, ScheduleError
from .instruction import RV_TYPES, BlockRV, ExprRV, Instruction, InstructionKind, LoopRV
from .state import INLINE_MARK, ROOT_MARK, ScheduleState, StmtSRef
from .trace import Trace

RV = Union[BlockRV, LoopRV, ExprRV]


def _all_or_nothing(primitive: Callable) -> Callable:
    """``primitive`` as a Schedule method that changes nothing when it raises (the contract in
    the module note): a savepoint before, a rollback on any exception.

    Example:
        >>> # split = _all_or_nothing(P.split.split)   # in the Schedule class body
    """
    @functools.wraps(primitive)
    def method(self: Schedule, *args: Any, **kwargs: Any) -> Any:
        mark = self._savepoint()
        try:
            return primitive(self, *args, **kwargs)
        except BaseException:
            self._rollback(mark)
            raise
        finally:
            self._release()

    method.all_or_nothing = True  # lets tests enumerate the primitives
    return method


def _lookup_only(primitive: Callable) -> Callable:
    """``primitive``, a lookup, as a Schedule method that changes nothing when it raises, without
    a savepoint: a lookup may only add handles (`Schedule._new_rv`) and append instructions
    (`Schedule._record`); it never replaces IR, moves srefs, draws random numbers or switches the
    working function. On an exception, the handles and instructions it added are dropped.

    Example:
        >>> # get_loops = _lookup_only(P.get_block.get_loops)   # in the Schedule class body
    """
    @functools.wraps(primitive)
    def method(self: Schedule, *args: Any, **kwargs: Any) -> Any:
        n_symbols, n_insts = len(self._symbols), len(self._trace.insts)
        journal = self._rv_journal
        n_journal = len(journal) if journal is not None else 0
        try:
            return primitive(self, *args, **kwargs)
        except BaseException:
            self._drop_added(n_symbols, n_insts, n_journal)
            raise

    method.all_or_nothing = True
    method.lookup_only = True  # lets tests check which primitives take the cheap path
    return method


class Schedule:
    """A schedule over an IRModule (or a single PrimFunc, named ``"main"``).

    ``seed``: the random state's seed (-1 or None: from the OS). ``debug_mask``: ``"all"`` (or a
    nonzero int) re-verifies the sref tree after every primitive. ``error_render_level``:
    ``"detail"`` | ``"fast"`` | ``"none"`` (how much a `ScheduleError` prints).

    Every primitive is all-or-nothing: when it raises, the IR, the handles, the random state and
    the trace are unchanged, so the schedule can go on (see the module note). For a multi-step
    attempt that may fail halfway, use ``with sch.attempt(): ...`` (rolls everything back on
    an exception, then re-raises it) rather than trying on `copy()`.

    Example:
        >>> # sch = Schedule(MyModule, seed=42)
        >>> # sch.mod is the current IRModule; sch.trace the recorded instructions
        >>> # try: sch.compute_inline(b)          # refused: sch is exactly as before
        >>> # except ScheduleError: pass
    """

    def __init__(
        self,
        mod: "IRModule | PrimFunc",
        *,
        seed: "int | None" = None,
        debug_mask: "str | int" = 0,
        error_render_level: str = "detail",
        enable_check: bool = True,
    ):
        if isinstance(mod, PrimFunc):
            mod = IRModule({"main": mod})
        if not isinstance(mod, IRModule):
            raise TypeError(f"Schedule takes an IRModule or a PrimFunc, got {type(mod).__name__}")
        if error_render_level not in RENDER_LEVELS:
            raise ValueError(f"error_render_level must be one of {RENDER_LEVELS}, got {error_render_level!r}")
        for name, func in mod.items():
            if isinstance(func, PrimFunc) and not _has_root_block(func):
                raise ScheduleError(
                    f"function {name!r} has no root block",
                    "a schedulable PrimFunc's body is a BlockRealize of a block named 'root' (see docs/schedule.md); "
                    "build it with te.create_prim_func or TVMScript, not from lowered IR",
                )
        self.state = ScheduleState(mod)
        self._symbols: dict[int, tuple[Any, Any]] = {}
        self._trace = Trace()
        self.error_render_level = error_render_level
        self.debug_mask = debug_mask
        self.enable_check = enable_check
        self._rng = np.random.Generator(np.random.PCG64(None if seed in (None, -1) else int(seed)))
        self._func_working_on: Optional[str] = "main" if "main" in mod else (
            self.state.func_names()[0] if len(self.state.func_names()) == 1 else None)
        self._tx_marks: list[list] = []  # savepoints of the open transactions (they nest)
        self._rv_journal: Optional[list] = None  # handle-table undo records while one is open

    # -- module, trace, copies -----------------------------------------------------------------
    @property
    def mod(self) -> IRModule:
        """The current IRModule."""
        return self.state.mod

    @property
    def trace(self) -> Trace:
        """The instructions applied so far (a copy; replay it with `Trace.apply_to_schedule`)."""
        return self._trace.copy()

    @property
    def func_working_on(self) -> Optional[str]:
        return self._func_working_on

    def work_on(self, func_name: str) -> None:
        """Make ``func_name`` the default function for `get_block`.

        Example:
            >>> # sch.work_on("fused_add"); sch.get_block("T_add")
        """
        if func_name not in self.state.func_names():
            raise ValueError(f"work_on: the module has no PrimFunc {func_name!r}; it has {self.state.func_names()}")
        self._func_working_on = func_name

    def copy(self) -> "Schedule":
        """An independent schedule over the same IR (handles stay valid in the copy; the copy's
        random state is forked, so it explores a different but reproducible stream).

        Example:
            >>> # sch2 = sch.copy(); sch2.split(sch2_loop, [None, 4])  # sch unchanged
        """
        new = Schedule.__new__(Schedule)
        new.state, mapping = self.state.copy()
        new._symbols = {
            key: (rv, mapping.get(id(value), value) if isinstance(value, StmtSRef) else value)
            for key, (rv, value) in self._symbols.items()
        }
        new._trace = self._trace.copy()
        new.error_render_level = self.error_render_level
        new.debug_mask = self.debug_mask
        new.enable_check = self.enable_check
        new._rng = np.random.Generator(np.random.PCG64(self.fork_seed()))
        new._func_working_on = self._func_working_on
        new._tx_marks = []
        new._rv_journal = None
        return new

    # -- transactions ---------------------------------------------------------------------------
    @contextlib.contextmanager
    def attempt(self) -> Iterator["Schedule"]:
        """All-or-nothing for a sequence of steps: on any exception inside the block, the
        schedule (IR, handles, random state, trace) is rolled back to where it was when the
        block was entered, and the exception propagates. Nests; costs no copy.

        Example:
            >>> # try:
            >>> #     with sch.attempt():
            >>> #         wb = sch.cache_write(b, 0, "local"); sch.reverse_compute_at(wb, loop)
            >>> # except ScheduleError:
            >>> #     pass            # neither step happened
        """
        mark = self._savepoint()
        try:
            yield self
        except BaseException:
            self._rollback(mark)
            raise
        finally:
            self._release()

    def _savepoint(self) -> list:
        # Step 1. Open (or nest into) the transaction of the state and of the handle table.
        if self._rv_journal is None:
            self._rv_journal = []
        # Step 2. What else a primitive changes: the trace (append-only), the working function,
        # the random state (slots 3-4, filled by `rng` on the first draw).
        mark = [self.state.savepoint(), len(self._rv_journal), len(self._trace.insts), None, None,
                self._func_working_on]
        self._tx_marks.append(mark)
        return mark

    def _rollback(self, mark: list) -> None:
        state_mark, rv_mark, n_insts, rng, rng_state, func_working_on = mark
        self.state.rollback(state_mark)
        journal = self._rv_journal
        while len(journal) > rv_mark:
            key, entry = journal.pop()
            if entry is None:
                self._symbols.pop(key, None)
            else:
                self._symbols[key] = entry
        while len(self._trace.insts) > n_insts:
            self._trace.pop()
        if rng_state is not None:
            self._rng = rng
            rng.bit_generator.state = rng_state
        self._func_working_on = func_working_on

    def _drop_added(self, n_symbols: int, n_insts: int, n_journal: int) -> None:
        # Undo of `_lookup_only`: new handles are new keys (a live handle's id cannot be reused
        # while the table holds it), so they are the last ones inserted into the ordered dict.
        symbols = self._symbols
        while len(symbols) > n_symbols:
            symbols.popitem()
        if self._rv_journal is not None:
            del self._rv_journal[n_journal:]
        while len(self._trace.insts) > n_insts:
            self._trace.pop()

    def _release(self) -> None:
        self._tx_marks.pop()
        if not self._tx_marks:
            self.state.end_transaction()
            self._rv_journal = None

    # -- random state ---------------------------------------------------------------------------
    def seed(self, seed: int) -> None:
        """Reseed the random state.

        Example:
            >>> # sch.seed(7)
        """
        self.rng  # noqa: B018 - saves the random state first when a transaction is open
        self._rng = np.random.Generator(np.random.PCG64(int(seed)))

    def fork_seed(self) -> int:
        """A new seed drawn from this schedule's random state (for an independent stream).

        Example:
            >>> # Schedule(mod, seed=sch.fork_seed())
        """
        return int(self.rng.integers(0, 2**63 - 1))

    @property
    def rng(self) -> np.random.Generator:
        """The random state (sampling primitives draw from it).

        Example:
            >>> # int(sch.rng.integers(4))
        """
        # Saved lazily, on the first access inside each open savepoint (most primitives never
        # draw): a savepoint without a saved state has seen no draw, nor has any opened after it.
        for mark in reversed(self._tx_marks):
            if mark[4] is not None:
                break
            mark[3], mark[4] = self._rng, self._rng.bit_generator.state
        return self._rng

    # -- random variables -------------------------------------------------------------------------
    def get(self, rv: Any) -> Any:
        """The IR behind a handle: a `For` for a LoopRV, a `Block` for a BlockRV, an int for an
        ExprRV (``"root"``/``"inline"`` for the compute-location markers).

        Example:
            >>> # sch.get(sch.get_loops(b)[0]).extent
        """
        if not isinstance(rv, RV_TYPES):
            raise TypeError(f"sch.get expects a BlockRV, LoopRV or ExprRV, got {type(rv).__name__}")
        value = self._lookup(rv)
        if isinstance(value, StmtSRef):
            if value is ROOT_MARK or value is INLINE_MARK:
                return value.func_name
            self._check_valid(rv, value)
            return value.stmt
        return value

    def get_sref(self, rv: Any) -> StmtSRef:
        """The stable reference behind a LoopRV/BlockRV (internal to primitives and the tuner)."""
        value = self._lookup(rv)
        if not isinstance(value, StmtSRef):
            raise TypeError(f"{rv!r} is not a loop or block handle")
        return value

    def remove_rv(self, rv: Any) -> None:
        """Forget a handle (it can no longer be used).

        Example:
            >>> # sch.remove_rv(b0)
        """
        entry = self._symbols.pop(id(rv), None)
        if entry is not None and self._rv_journal is not None:
            self._rv_journal.append((id(rv), entry))

    def _lookup(self, rv: Any) -> Any:
        try:
            return self._symbols[id(rv)][1]
        except KeyError:
            raise ScheduleError(
                f"{rv!r} does not belong to this schedule",
                "random variables are only valid on the schedule that created them (or its copies); "
                "replay the trace on the other schedule to get its handles",
            ) from None

    def _check_valid(self, rv: Any, sref: StmtSRef) -> None:
        if sref.stmt is None:
            what = "loop" if isinstance(rv, LoopRV) else "block"
            raise ScheduleError(
                f"the {what} behind {rv!r} no longer exists",
                "a primitive (split, fuse, ...) replaced it; use the handles that primitive returned",
            )

    def _new_rv(self, cls: type, value: Any) -> Any:
        rv = cls()
        self._symbols[id(rv)] = (rv, value)
        if self._rv_journal is not None:
            self._rv_journal.append((id(rv), None))
        return rv

    def _loop(self, rv: Any, primitive: str, arg: str = "loop") -> StmtSRef:
        if not isinstance(rv, LoopRV):
            raise TypeError(f"{primitive}: argument {arg!r} must be a LoopRV, got {type(rv).__name__}: {rv!r}")
        sref = self._lookup(rv)
        if sref is ROOT_MARK or sref is INLINE_MARK:
            raise ScheduleError(f"{primitive}: {arg} is the compute-location marker {sref.func_name!r}, not a loop")
        self._check_valid(rv, sref)
        return sref

    def _block(self, rv: Any, primitive: str, arg: str = "block") -> StmtSRef:
        if isinstance(rv, str):
            rv = self.get_block(rv)
        if not isinstance(rv, BlockRV):
            raise TypeError(f"{primitive}: argument {arg!r} must be a BlockRV, got {type(rv).__name__}: {rv!r}")
        sref = self._lookup(rv)
        self._check_valid(rv, sref)
        return sref

    def _block_or_loop(self, rv: Any, primitive: str) -> StmtSRef:
        if isinstance(rv, LoopRV):
            return self._loop(rv, primitive, "block_or_loop")
        return self._block(rv, primitive, "block_or_loop")

    def _int(self, value: Any, primitive: str, arg: str) -> Any:
        """An int (or symbolic expression) from an int, IntImm, PrimExpr or ExprRV."""
        if isinstance(value, ExprRV):
            value = self._lookup(value)
        if isinstance(value, (bool, np.bool_)):
            raise TypeError(f"{primitive}: {arg} must be an integer, got {value!r}")
        if isinstance(value, (int, np.integer)):
            return int(value)
        if isinstance(value, PrimExpr):
            c = as_const_int(value)
            return c if c is not None else value
        raise TypeError(f"{primitive}: {arg} must be an int or ExprRV, got {type(value).__name__}: {value!r}")

    # -- recording and errors ---------------------------------------------------------------------
    def _record(self, kind: InstructionKind, inputs: Sequence[Any], attrs: Sequence[Any], outputs: Sequence[Any],
                decision: Any = None) -> None:
        self._trace.append(Instruction(kind, inputs, attrs, outputs), decision)
        if self.debug_mask:
            self._verify()

    def _raise(self, summary: str, detail: str, func_name: "str | None" = None, nodes: Sequence[Any] = ()) -> None:
        func = self.mod[func_name] if func_name is not None and func_name in self.mod else None
        raise ScheduleError(summary, detail, func, nodes, self.error_render_level)

    def _verify(self) -> None:
        """Check that every live sref points at a node of the current function (debug_mask)."""
        fresh = ScheduleState(self.mod)
        for name in self.state.func_names():
            mine = self.state.blocks(name)
            theirs = fresh.blocks(name)
            if set(mine) != set(theirs) or any(mine[k].stmt is not theirs[k].stmt for k in mine):
                raise AssertionError(f"schedule state out of sync with function {name!r} (internal error)")

    def enter_postproc(self) -> None:
        """Mark the start of post-processing in the trace (dropped by ``remove_postproc``).

        Example:
            >>> # sch.enter_postproc()
        """
        self._record(_ENTER_POSTPROC, [], [], [])

    def show(self) -> None:
        """Print the current module and trace."""
        print(self.mod.script())
        print(self.trace)

    # -- primitives (each defined in its own module under primitives/, made all-or-nothing) --------
    # Lookups: no IR, sref or random-state change, so no savepoint (see the module note).
    get_block = _lookup_only(P.get_block.get_block)
    get_loops = _lookup_only(P.get_block.get_loops)
    get_child_blocks = _lookup_only(P.get_block.get_child_blocks)
    get_producers = _lookup_only(P.get_block.get_producers)
    get_consumers = _lookup_only(P.get_block.get_consumers)
    split = _all_or_nothing(P.split.split)
    fuse = _all_or_nothing(P.fuse.fuse)
    reorder = _all_or_nothing(P.reorder.reorder)
    parallel = _all_or_nothing(P.loop_kind.parallel)
    vectorize = _all_or_nothing(P.loop_kind.vectorize)
    unroll = _all_or_nothing(P.loop_kind.unroll)
    bind = _all_or_nothing(P.loop_kind.bind)
    annotate = _all_or_nothing(P.annotate.annotate)
    unannotate = _all_or_nothing(P.annotate.unannotate)
    cache_read = _all_or_nothing(P.cache.cache_read)
    cache_write = _all_or_nothing(P.cache.cache_write)
    set_scope = _all_or_nothing(P.set_scope.set_scope)
    storage_align = _all_or_nothing(P.storage_align.storage_align)
    add_unit_loop = _all_or_nothing(P.add_unit_loop.add_unit_loop)
    sample_perfect_tile = _all_or_nothing(P.sampling.sample_perfect_tile)
    sample_categorical = _all_or_nothing(P.sampling.sample_categorical)
    sample_compute_location = _all_or_nothing(P.sampling.sample_compute_location)
    compute_at = _all_or_nothing(P.compute_at.compute_at)
    reverse_compute_at = _all_or_nothing(P.compute_at.reverse_compute_at)
    compute_inline = _all_or_nothing(P.compute_inline.compute_inline)
    reverse_compute_inline = _all_or_nothing(P.compute_inline.reverse_compute_inline)
    decompose_reduction = _all_or_nothing(P.decompose_reduction.decompose_reduction)
    rfactor = _all_or_nothing(P.rfactor.rfactor)
    transform_layout = _all_or_nothing(P.transform_layout.transform_layout)
    blockize = _all_or_nothing(P.blockize_tensorize.blockize)
    tensorize = _all_or_nothing(P.blockize_tensorize.tensorize)
    pad_einsum = _all_or_nothing(P.pad_einsum.pad_einsum)


_ENTER_POSTPROC = InstructionKind("enter_postproc")


def _has_root_block(func: PrimFunc) -> bool:
    from ingot.tir.stmt import BlockRealize

    return isinstance(func.body, BlockRealize) and not func.body.block.iter_vars
