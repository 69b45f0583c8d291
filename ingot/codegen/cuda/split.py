"""GPU lowering: split a lowered PrimFunc into host launches and device kernels (TVM's
``SplitHostDevice`` + ``ThreadSync`` + the launch-parameter extraction, in one place).

Note: the input is the lowered form of docs/passes.md in which the GPU loops are still
``ForKind.THREAD_BINDING`` loops tagged ``blockIdx.x`` ... ``threadIdx.z``. The host part of a
function may only contain a sequence of *kernels* (each a top-level thread-bound loop) and the
allocations around them; every other loop or store at the top level would run on one thread,
so it is rejected with a `GPULoweringError` naming it. For each kernel:

* Step 1 (launch). Collect its thread-bound loops. A ``blockIdx`` tag must have one extent;
  ``threadIdx`` loops with different constant extents launch the largest and guard the others
  (``if (threadIdx.x < 16)``). The extents must be computable on the host (from scalar
  parameters and symbolic dimensions of parameter buffers).
* Step 2 (redundant work). A statement that is not under a loop bound to some launched
  ``threadIdx`` axis would be executed by every thread of that axis (a reduction update would
  be applied several times): it is guarded by ``threadIdx.* == 0``. A statement outside a
  launched ``blockIdx`` axis is an error (blocks cannot be synchronized).
* Step 3 (sync). `insert_syncs`: between a statement that writes a ``shared`` buffer and a later
  one that reads it (or writes what was read: the next iteration's fill after this iteration's
  reads), a ``tvm_storage_sync("shared")`` — ``__syncthreads()`` — is inserted. Loops are
  analysed twice so loop-carried conflicts are seen. Syncs are only placed where every thread of
  the block arrives (never inside an ``if`` or a guarded/partial thread loop); a conflict inside
  such a region is left alone (conservative for the common per-thread pattern, documented).
* Step 4 (substitute). Thread-bound loops are replaced by their thread variable
  (``i = blockIdx.x + min``), guarded when their extent is smaller than the launch extent;
  ``vthread`` loops become serial loops.
* Step 5 (signature). The kernel's parameters are the pointers and scalars it uses that the
  host defines (parameter buffers, workspaces, scalar parameters, symbolic dimensions).

Allocations at the host level: ``global`` scope becomes a device workspace the launcher
allocates; ``local`` scope is moved into the one kernel that uses it (a per-thread array);
``shared`` scope at the host level is an error (shared memory lives only as long as a block).

Example:
    >>> from ingot.ir import Var, decl_buffer
    >>> from ingot.tir import PrimFunc, For, ForKind, BufferStore
    >>> A = decl_buffer((256,), "float32", "A")
    >>> bx, tx = Var("bx"), Var("tx")
    >>> body = For(bx, 0, 2, ForKind.THREAD_BINDING, For(tx, 0, 128, ForKind.THREAD_BINDING,
    ...     BufferStore(A, A[bx * 128 + tx] + 1.0, [bx * 128 + tx]), thread_binding="threadIdx.x"),
    ...     thread_binding="blockIdx.x")
    >>> dev = split_host_device(PrimFunc([A], body))
    >>> k = dev.kernels[0]
    >>> {tag: str(e) for tag, e in k.launch.items()}
    {'blockIdx.x': '2', 'threadIdx.x': '128'}
"""
from __future__ import annotations

import dataclasses
from typing import Any, Iterable

from ingot.codegen.c.printer import CodegenError
from ingot.ir.buffer import Buffer
from ingot.ir.expr import (
    EQ, LT, And, BufferLoad, Call, FloatImm, IntImm, Let, PrimExpr, StringImm, Var, as_const_int, cast,
)
from ingot.ir.functor import Mutator, Visitor, collect_vars, substitute
from ingot.ir.structural import structural_equal
from ingot.tir.function import PrimFunc
from ingot.tir.stmt import (
    Allocate, BufferStore, Evaluate, For, ForKind, IfThenElse, LetStmt, SeqStmt, Stmt,
)

__all__ = [
    "GPULoweringError", "Kernel", "DeviceFunction", "split_host_device", "insert_syncs",
    "THREAD_TAGS", "SYNC_OP", "storage_sync", "is_storage_sync",
]

#: Thread axes that define the launch grid (``vthread`` loops are serial loops in a kernel).
THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y", "threadIdx.z")
#: The intrinsic of a block-wide barrier (TVM's name); printed as ``__syncthreads()``.
SYNC_OP = "tvm_storage_sync"


class GPULoweringError(CodegenError):
    """A lowered function cannot run as CUDA kernels (unbound loop, bad launch extent, ...)."""


def storage_sync(scope: str = "shared") -> Evaluate:
    """The statement ``T.tvm_storage_sync("shared")`` (a ``__syncthreads()``).

    Example:
        >>> str(storage_sync().value.op)
        'tvm_storage_sync'
    """
    return Evaluate(Call("int32", SYNC_OP, [StringImm(scope)]))


def is_storage_sync(stmt: Any) -> bool:
    """Whether ``stmt`` is a `storage_sync` statement.

    Example:
        >>> is_storage_sync(storage_sync()), is_storage_sync(Evaluate(0))
        (True, False)
    """
    return isinstance(stmt, Evaluate) and isinstance(stmt.value, Call) and stmt.value.op == SYNC_OP


@dataclasses.dataclass(frozen=True, eq=False)
class Kernel:
    """One device kernel: ``body`` uses ``thread_vars[tag]`` for the thread indices;
    ``launch[tag]`` is the extent of each launched axis (host expressions); ``buffers`` and
    ``scalars`` are its parameters in order.

    Example:
        >>> # k.launch == {"blockIdx.x": 8, "threadIdx.x": 128}; k.body: B[bx * 128 + tx] = ...
    """

    name: str
    body: Stmt
    thread_vars: dict
    launch: dict
    buffers: tuple
    scalars: tuple

    def threads_per_block(self) -> "int | None":
        """The constant number of threads of a block (``None`` if symbolic).

        Example:
            >>> # k.threads_per_block() == 128
        """
        total = 1
        for tag, extent in self.launch.items():
            if tag.startswith("threadIdx"):
                value = as_const_int(extent)
                if value is None:
                    return None
                total *= value
        return total


@dataclasses.dataclass(frozen=True, eq=False)
class DeviceFunction:
    """A PrimFunc split for the GPU: host ``workspaces`` (global-scope buffers the launcher
    allocates on the device) and the ``kernels`` to launch, in order.

    Example:
        >>> # dev = split_host_device(func); [k.name for k in dev.kernels] == ["main_kernel0"]
    """

    func: PrimFunc
    workspaces: tuple
    kernels: tuple


# ----------------------------------------------------------------------------------------------
# Small analyses
# ----------------------------------------------------------------------------------------------


def _host_vars(func: PrimFunc) -> "list[Var]":
    """Scalar parameters and symbolic dimensions of parameter buffers: what the host knows."""
    out: list[Var] = [p for p in func.params if isinstance(p, Var)]
    for p in func.params:
        if isinstance(p, Buffer):
            for dim in p.shape:
                for v in collect_vars(dim):
                    if not any(v is w for w in out):
                        out.append(v)
    return out


def _uses_only(expr: PrimExpr, allowed: Iterable[Var]) -> bool:
    ids = {id(v) for v in allowed}
    return all(id(v) in ids for v in collect_vars(expr))


class _ThreadLoops(Visitor):
    """All thread-bound loops of a kernel (tag -> list of loops), rejecting nested same tags."""

    def __init__(self, kernel_name: str) -> None:
        self.kernel_name = kernel_name
        self.loops: dict[str, list[For]] = {}
        self._active: list[str] = []

    def visit_For(self, node: For) -> None:
        tag = node.thread_binding if node.kind == ForKind.THREAD_BINDING else None
        if tag in THREAD_TAGS:
            if tag in self._active:
                raise GPULoweringError(
                    f"{self.kernel_name}: loop {node.loop_var.name!r} is bound to {tag} inside another loop "
                    f"bound to {tag}; bind each thread axis once per path (fuse the loops first)"
                )
            self.loops.setdefault(tag, []).append(node)
            self._active.append(tag)
            self.generic_visit(node)
            self._active.pop()
        else:
            self.generic_visit(node)


def _contains_thread_loop(stmt: Stmt) -> bool:
    found = []

    class _Find(Visitor):
        def visit_For(self, node: For) -> None:
            if node.kind == ForKind.THREAD_BINDING and node.thread_binding in THREAD_TAGS:
                found.append(node)
            elif not found:
                self.generic_visit(node)

    _Find().visit(stmt)
    return bool(found)


class _SharedAccess(Visitor):
    """Data Vars of ``shared`` buffers read and written under a statement."""

    def __init__(self) -> None:
        self.reads: set[int] = set()
        self.writes: set[int] = set()
        self.keep: list[Var] = []

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        if node.buffer.scope == "shared":
            self.reads.add(id(node.buffer.data))
            self.keep.append(node.buffer.data)
        self.generic_visit(node)

    def visit_BufferStore(self, node: BufferStore) -> None:
        if node.buffer.scope == "shared":
            self.writes.add(id(node.buffer.data))
            self.keep.append(node.buffer.data)
        self.generic_visit(node)


def _shared_access(stmt: Stmt) -> "tuple[frozenset, frozenset]":
    v = _SharedAccess()
    v.visit(stmt)
    return frozenset(v.reads), frozenset(v.writes)


# ----------------------------------------------------------------------------------------------
# Step 2: guard statements that every thread of an unbound axis would execute
# ----------------------------------------------------------------------------------------------


class _RedundancyGuard(Mutator):
    def __init__(self, kernel_name: str, launch: dict, thread_vars: dict) -> None:
        self.kernel_name = kernel_name
        self.block_axes = [t for t in launch if t.startswith("blockIdx") and as_const_int(launch[t]) != 1]
        self.thread_axes = [t for t in launch if t.startswith("threadIdx") and as_const_int(launch[t]) != 1]
        self.thread_vars = thread_vars
        self.bound: list[str] = []

    def visit_For(self, node: For) -> Stmt:
        tag = node.thread_binding if node.kind == ForKind.THREAD_BINDING else None
        if tag in THREAD_TAGS:
            self.bound.append(tag)
            body = self.visit(node.body)
            self.bound.pop()
            return node if body is node.body else node.replace(body=body)
        return self._leaf_or_descend(node)

    def visit_SeqStmt(self, node: SeqStmt) -> Stmt:
        return self.generic_visit(node)

    def visit_Allocate(self, node: Allocate) -> Stmt:
        return self.generic_visit(node)

    def visit_LetStmt(self, node: LetStmt) -> Stmt:
        return self.generic_visit(node)

    def visit_IfThenElse(self, node: IfThenElse) -> Stmt:
        return self._leaf_or_descend(node)

    def visit_BufferStore(self, node: BufferStore) -> Stmt:
        return self._leaf_or_descend(node)

    def visit_Evaluate(self, node: Evaluate) -> Stmt:
        if isinstance(node.value, (IntImm, FloatImm)):
            return node
        return self._leaf_or_descend(node)

    def visit_AssertStmt(self, node) -> Stmt:
        return self._leaf_or_descend(node)

    def _leaf_or_descend(self, node: Stmt) -> Stmt:
        if _contains_thread_loop(node):
            return self.generic_visit(node)
        missing_blocks = [t for t in self.block_axes if t not in self.bound]
        if missing_blocks:
            raise GPULoweringError(
                f"{self.kernel_name}: a statement ({type(node).__name__} `{_short(node)}`) is not under any loop "
                f"bound to {missing_blocks[0]}, so every block would run it; put it inside the "
                f"{missing_blocks[0]} loop (compute_at / reorder) or into its own kernel"
            )
        missing = [t for t in self.thread_axes if t not in self.bound]
        if not missing:
            return node
        cond: PrimExpr = EQ(self.thread_vars[missing[0]], 0)
        for tag in missing[1:]:
            cond = And(cond, EQ(self.thread_vars[tag], 0))
        return IfThenElse(cond, node)


def _short(node: Any, limit: int = 80) -> str:
    text = " ".join(str(node).split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


# ----------------------------------------------------------------------------------------------
# Step 3: __syncthreads insertion
# ----------------------------------------------------------------------------------------------

_EMPTY: "tuple[frozenset, frozenset]" = (frozenset(), frozenset())


def _union(a, b):
    return (a[0] | b[0], a[1] | b[1])


class _SyncPlanner:
    """State = (shared buffers written, shared buffers read) since the last barrier."""

    def __init__(self, launch: dict, uniform_vars: "list[Var]") -> None:
        self.launch = launch
        self.uniform = {id(v) for v in uniform_vars}
        self.keep = list(uniform_vars)

    def _is_uniform_expr(self, e: PrimExpr) -> bool:
        return all(id(v) in self.uniform for v in collect_vars(e))

    def _add_uniform(self, var: Var) -> None:
        self.keep.append(var)
        self.uniform.add(id(var))

    def plan(self, stmt: Stmt, state) -> "tuple[Stmt, Any]":
        if isinstance(stmt, SeqStmt):
            out = []
            for s in stmt.seq:
                s, state = self._plan_child(s, state, out)
                out.append(s)
            return SeqStmt(out), state
        out: list[Stmt] = []
        s, state = self._plan_child(stmt, state, out)
        out.append(s)
        return (out[0] if len(out) == 1 else SeqStmt(out)), state

    def _plan_child(self, s: Stmt, state, out: list) -> "tuple[Stmt, Any]":
        """Plan ``s`` after the statements in ``out`` (may append a barrier to ``out``)."""
        if is_storage_sync(s):
            return s, _EMPTY
        # A conflict with anything inside ``s`` puts the barrier before ``s`` (as high as possible:
        # not once per iteration of a loop in it); conflicts within ``s`` are planned inside it.
        reads, writes = _shared_access(s)
        pending_w, pending_r = state
        if (reads & pending_w) or (writes & pending_r) or (writes & pending_w):
            out.append(storage_sync())
            state = _EMPTY
        compound = self._descend(s, state)
        if compound is not None:
            return compound
        return s, _union(state, (writes, reads))

    def _descend(self, s: Stmt, state):
        """Plan inside a statement every thread of the block executes, else ``None``."""
        if isinstance(s, SeqStmt):
            return self.plan(s, state)
        if isinstance(s, (Allocate,)):
            body, state = self.plan(s.body, state)
            return s.replace(body=body), state
        if isinstance(s, LetStmt) and self._is_uniform_expr(s.value):
            self._add_uniform(s.var)
            body, state = self.plan(s.body, state)
            return s.replace(body=body), state
        if not isinstance(s, For):
            return None
        tag = s.thread_binding if s.kind == ForKind.THREAD_BINDING else None
        if tag in THREAD_TAGS:
            full = as_const_int(s.min) == 0 and structural_equal(s.extent, self.launch[tag])
            if tag.startswith("blockIdx"):
                self._add_uniform(s.loop_var)
            elif not full:
                return None  # a guarded thread loop: not every thread arrives at a barrier in it
            body, state = self.plan(s.body, state)
            return s.replace(body=body), state
        if not (self._is_uniform_expr(s.min) and self._is_uniform_expr(s.extent)):
            return None
        # A serial loop: the state at the end of an iteration flows into the next one. Iterate
        # until the state at the loop head is stable (sets only grow, so this ends quickly).
        self._add_uniform(s.loop_var)
        entry = state
        for _ in range(4):
            body, end = self.plan(s.body, entry)
            new_entry = _union(entry, end)
            if new_entry == entry:
                break
            entry = new_entry
        return s.replace(body=body), _union(state, end)


def insert_syncs(stmt: Stmt, launch: dict, uniform_vars: "Iterable[Var]" = ()) -> Stmt:
    """Insert ``tvm_storage_sync("shared")`` where a statement reads (or overwrites) a shared
    buffer that an earlier statement of the same block wrote (or read), since the last barrier.

    ``launch`` maps thread tags to launch extents (a thread loop with a smaller extent is
    guarded, so no barrier is placed inside it); ``uniform_vars`` are the variables whose value
    is the same in every thread (host scalars).

    Example:
        >>> from ingot.ir import Var, decl_buffer
        >>> S = decl_buffer((4,), "float32", "S", scope="shared")
        >>> O = decl_buffer((4,), "float32", "O")
        >>> tx, ty = Var("tx"), Var("ty")
        >>> fill = For(tx, 0, 4, ForKind.THREAD_BINDING, BufferStore(S, 1.0, [tx]), thread_binding="threadIdx.x")
        >>> use = For(ty, 0, 4, ForKind.THREAD_BINDING, BufferStore(O, S[3 - ty], [ty]), thread_binding="threadIdx.x")
        >>> out = insert_syncs(SeqStmt([fill, use]), {"threadIdx.x": IntImm("int32", 4)})
        >>> [is_storage_sync(s) for s in out.seq]
        [False, True, False]
    """
    launch = {k: (v if isinstance(v, PrimExpr) else IntImm("int32", int(v))) for k, v in launch.items()}
    threads = [as_const_int(e) for t, e in launch.items() if t.startswith("threadIdx")]
    if all(n == 1 for n in threads):
        return stmt  # one thread per block: program order is enough
    planner = _SyncPlanner(launch, list(uniform_vars))
    new, _ = planner.plan(stmt, _EMPTY)
    if not isinstance(stmt, SeqStmt) and isinstance(new, SeqStmt) and len(new.seq) == 1:
        return new.seq[0]
    return new


# ----------------------------------------------------------------------------------------------
# Step 4: thread loops -> thread variables
# ----------------------------------------------------------------------------------------------


class _BindThreads(Mutator):
    def __init__(self, launch: dict, thread_vars: dict) -> None:
        self.launch = launch
        self.thread_vars = thread_vars

    def visit_For(self, node: For) -> Stmt:
        body = self.visit(node.body)
        if node.kind != ForKind.THREAD_BINDING:
            return node if body is node.body else node.replace(body=body)
        tag = node.thread_binding
        if tag not in THREAD_TAGS:  # vthread: a serial loop inside the thread
            return For(node.loop_var, node.min, node.extent, ForKind.SERIAL, body, annotations=node.annotations)
        tv = self.thread_vars[tag]
        value: PrimExpr = tv if tv.dtype == node.loop_var.dtype else cast(tv, node.loop_var.dtype)
        if as_const_int(node.min) != 0:
            value = value + node.min
        body = substitute(body, {node.loop_var: value})
        if not structural_equal(node.extent, self.launch[tag]):
            extent = node.extent if node.extent.dtype == tv.dtype else cast(node.extent, tv.dtype)
            body = IfThenElse(LT(tv, extent), body)
        return body


# ----------------------------------------------------------------------------------------------
# Step 5: the kernel's parameters
# ----------------------------------------------------------------------------------------------


class _FreeVars(Visitor):
    """Variables (and buffer data Vars) used in a kernel body but defined outside it."""

    def __init__(self) -> None:
        self.defined: set[int] = set()
        self.used: dict[int, Var] = {}

    def _use(self, v: Var) -> None:
        if id(v) not in self.defined and id(v) not in self.used:
            self.used[id(v)] = v

    def visit_Var(self, node: Var) -> None:
        self._use(node)

    def visit_BufferLoad(self, node: BufferLoad) -> None:
        self._use(node.buffer.data)
        self.visit(node.indices)

    def visit_BufferStore(self, node: BufferStore) -> None:
        self._use(node.buffer.data)
        self.visit(node.value)
        self.visit(node.indices)

    def visit_For(self, node: For) -> None:
        self.visit(node.min)
        self.visit(node.extent)
        self.defined.add(id(node.loop_var))
        self.visit(node.body)

    def visit_LetStmt(self, node: LetStmt) -> None:
        self.visit(node.value)
        self.defined.add(id(node.var))
        self.visit(node.body)

    def visit_Let(self, node: Let) -> None:
        self.visit(node.value)
        self.defined.add(id(node.var))
        self.visit(node.body)

    def visit_Allocate(self, node: Allocate) -> None:
        self.defined.add(id(node.buffer.data))
        self.visit(node.body)


# ----------------------------------------------------------------------------------------------
# The host walk
# ----------------------------------------------------------------------------------------------


class _Splitter:
    def __init__(self, func: PrimFunc, name: str) -> None:
        self.func = func
        self.name = name
        self.host_vars = _host_vars(func)
        self.workspaces: list[Buffer] = []
        self.kernels: list[Kernel] = []
        self.pointer_owner: dict[int, Buffer] = {}
        self.local_owner: dict[int, str] = {}  # id(host-level local Allocate) -> kernel using it
        for p in func.params:
            if isinstance(p, Buffer):
                self.pointer_owner[id(p.data)] = p

    def unbound(self, what: str) -> GPULoweringError:
        return GPULoweringError(
            f"{self.name}: {what} is outside every thread-bound loop: unbound loop in a GPU function; "
            "bind it with sch.bind(loop, \"blockIdx.x\") / sch.bind(loop, \"threadIdx.x\") or it would "
            "run on one thread"
        )

    def walk(self, stmt: Stmt, locals_: "tuple[Allocate, ...]") -> None:
        if isinstance(stmt, SeqStmt):
            for s in stmt.seq:
                self.walk(s, locals_)
        elif isinstance(stmt, Allocate):
            scope = stmt.buffer.scope
            if scope in ("global", ""):
                self.workspaces.append(stmt.buffer)
                self.pointer_owner[id(stmt.buffer.data)] = stmt.buffer
                self.walk(stmt.body, locals_)
            elif scope == "local":
                self.walk(stmt.body, (*locals_, stmt))
            else:
                raise GPULoweringError(
                    f"{self.name}: buffer {stmt.buffer.name!r} with scope {scope!r} is allocated outside the "
                    "kernels, but shared memory only lives as long as one thread block; move its producer "
                    "under the consumer's blockIdx loop (sch.compute_at) so it is allocated inside the kernel"
                )
        elif isinstance(stmt, For):
            if stmt.kind == ForKind.THREAD_BINDING and stmt.thread_binding in THREAD_TAGS:
                self.kernels.append(self.make_kernel(stmt, locals_))
            else:
                raise self.unbound(f"loop {stmt.loop_var.name!r} ({stmt.kind})")
        elif isinstance(stmt, BufferStore):
            raise self.unbound(f"the store to buffer {stmt.buffer.name!r}")
        elif isinstance(stmt, Evaluate):
            if not isinstance(stmt.value, (IntImm, FloatImm)):
                raise self.unbound(f"the call `{_short(stmt.value)}`")
        else:
            raise NotImplementedError(
                f"{self.name}: a {type(stmt).__name__} at the top level of a GPU function is not supported "
                f"(`{_short(stmt)}`); the host part may only hold kernels (thread-bound loops) and allocations"
            )

    def make_kernel(self, root: For, locals_: "tuple[Allocate, ...]") -> Kernel:
        kname = f"{self.name}_kernel{len(self.kernels)}"
        body: Stmt = root
        # Host-level local buffers used by this kernel become per-thread arrays inside it.
        for alloc in reversed(locals_):
            fv = _FreeVars()
            fv.visit(root)
            if id(alloc.buffer.data) in fv.used:
                body = Allocate(alloc.buffer, body)
                self._claim_local(alloc, kname)

        # Step 1. Launch extents.
        finder = _ThreadLoops(kname)
        finder.visit(body)
        launch: dict[str, PrimExpr] = {}
        for tag in THREAD_TAGS:
            loops = finder.loops.get(tag)
            if not loops:
                continue
            extents = [lp.extent for lp in loops]
            if all(structural_equal(e, extents[0]) for e in extents):
                extent = extents[0]
            elif tag.startswith("threadIdx") and all(as_const_int(e) is not None for e in extents):
                extent = max(extents, key=as_const_int)
            else:
                raise GPULoweringError(
                    f"{kname}: loops bound to {tag} have different extents "
                    f"({', '.join(str(e) for e in extents)}); a launch axis needs one extent "
                    "(threadIdx loops may differ only when all extents are constants)"
                )
            if not _uses_only(extent, self.host_vars):
                raise GPULoweringError(
                    f"{kname}: the extent `{extent}` of the loop bound to {tag} uses variables the host does not "
                    "know; launch extents must be constants or expressions of scalar parameters and "
                    "buffer dimensions"
                )
            if as_const_int(extent) is not None and as_const_int(extent) <= 0:
                raise GPULoweringError(f"{kname}: the loop bound to {tag} has extent {extent}; it must be positive")
            launch[tag] = extent
        threads = [as_const_int(e) for t, e in launch.items() if t.startswith("threadIdx")]
        if all(n is not None for n in threads):
            total = 1
            for n in threads:
                total *= n
            if total > 1024:
                raise GPULoweringError(
                    f"{kname}: {total} threads per block ({', '.join(f'{t}={e}' for t, e in launch.items() if t.startswith('threadIdx'))}); "
                    "CUDA allows at most 1024: split the threadIdx loops further"
                )
        thread_vars = {tag: Var(tag.replace(".", "_"), "int32") for tag in launch}

        # Step 2. Redundant execution of statements outside a thread axis.
        body = _RedundancyGuard(kname, launch, thread_vars).visit(body)
        # Step 3. Barriers between shared-memory writes and reads.
        body = insert_syncs(body, launch, self.host_vars)
        # Step 4. Thread loops -> thread indices.
        body = _BindThreads(launch, thread_vars).visit(body)

        # Step 5. Parameters.
        fv = _FreeVars()
        for tv in thread_vars.values():
            fv.defined.add(id(tv))
        fv.visit(body)
        buffers: list[Buffer] = []
        scalars: list[Var] = []
        host_ids = {id(v): v for v in self.host_vars}
        for key, var in fv.used.items():
            if key in self.pointer_owner:
                buffers.append(self.pointer_owner[key])
            elif key in host_ids:
                scalars.append(var)
            else:
                raise GPULoweringError(
                    f"{kname}: variable {var.name!r} ({var.dtype}) is used in the kernel but defined neither in it "
                    "nor by the function's parameters"
                )
        order = {id(b): k for k, b in enumerate([*(p for p in self.func.params if isinstance(p, Buffer)),
                                                 *self.workspaces])}
        buffers.sort(key=lambda b: order[id(b)])
        sorder = {id(v): k for k, v in enumerate(self.host_vars)}
        scalars.sort(key=lambda v: sorder[id(v)])
        return Kernel(kname, body, thread_vars, launch, tuple(buffers), tuple(scalars))

    def _claim_local(self, alloc: Allocate, kname: str) -> None:
        owner = self.local_owner
        if id(alloc) in owner and owner[id(alloc)] != kname:
            raise GPULoweringError(
                f"{self.name}: local buffer {alloc.buffer.name!r} is used by two kernels ({owner[id(alloc)]}, "
                f"{kname}); registers do not survive a kernel, give it scope 'global' to pass values between kernels"
            )
        owner[id(alloc)] = kname


def split_host_device(func: PrimFunc, name: str = "main") -> DeviceFunction:
    """Split the lowered ``func`` into device kernels and host workspaces (see the module note).

    Raises `GPULoweringError` for a loop or store outside every thread-bound loop ("unbound
    loop in a GPU function; bind it with sch.bind ..."), a launch extent the host cannot
    compute, more than 1024 threads per block, or shared memory allocated outside a kernel.

    Example:
        >>> from ingot.ir import Var, decl_buffer
        >>> A = decl_buffer((4,), "float32", "A"); i = Var("i")
        >>> split_host_device(PrimFunc([A], For(i, 0, 4, ForKind.SERIAL, BufferStore(A, 0.0, [i]))))
        Traceback (most recent call last):
        ...
        ingot.codegen.cuda.split.GPULoweringError: main: loop 'i' (serial) is outside every thread-bound loop: unbound loop in a GPU function; bind it with sch.bind(loop, "blockIdx.x") / sch.bind(loop, "threadIdx.x") or it would run on one thread
    """
    splitter = _Splitter(func, name)
    splitter.walk(func.body, ())
    return DeviceFunction(func, tuple(splitter.workspaces), tuple(splitter.kernels))
