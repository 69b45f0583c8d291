"""Build a lowered IRModule into a loaded runtime Module (TVM's ``codegen.build_module``).

Note: `build_module` compiles the whole module as one C translation unit compiled by one compiler call
(`ingot.codegen.toolchain.compile_shared_library`), whose cache is keyed by the source, the
command and the compiler version: building the same module twice runs the compiler once. The
target chooses the flags: host ``llvm``/``c`` → ``-march=native``; ``-mcpu=X`` →
``-march=X``; ``-opt-level=N`` → ``-ON``; ``-fast-math`` → ``-ffast-math``; OpenMP always
on. After loading, the module's parallel loops are set to use ``target.num_cores`` threads.
Graph modules go through the per-kernel pieces below (`KernelSource`, `link_kernel_sources`):
cached per kernel before lowering, and split into translation units compiled in parallel.

Example:
    >>> from ingot.ir import IRModule, Var, decl_buffer
    >>> from ingot.tir import PrimFunc, For, ForKind, BufferStore
    >>> A = decl_buffer((4,), "float32", "A")
    >>> i = Var("i")
    >>> f = PrimFunc([A], For(i, 0, 4, ForKind.SERIAL, BufferStore(A, A[i] + 1.0, [i])))
    >>> lib = build_module(IRModule({"main": f}), "llvm")      # doctest: +SKIP
    >>> import numpy as np; a = np.zeros(4, "float32"); lib["main"](a); a   # doctest: +SKIP
    array([1., 1., 1., 1.], dtype=float32)
"""
from __future__ import annotations

import dataclasses
import heapq
from typing import Any, Sequence

from ingot.codegen.c import CSource, generate_c
from ingot.codegen.toolchain import (CompileError, CompileOptions, ToolchainError, compile_jobs, compile_object,
                                     compile_shared_library, compile_shared_library_units, compile_to_assembly,
                                     compiler_accepts_cpu, march_flags)
from ingot.ir.module import IRModule
from ingot.target import Target, as_target
from ingot.tir.function import PrimFunc

__all__ = ["KernelSource", "OverlappedLink", "assemble_source", "build_module", "compile_options_for", "emit_kernel_source",
           "generate_source", "kernel_symbols", "link_kernel_sources", "module_assembly",
           "translation_units"]

#: A module is split into several translation units (compiled in parallel, linked into one
#: library) only when its kernels hold at least this much C: below it the gcc phase is short
#: and one more compiler start-up (~50 ms for the prelude) plus the link step would cost more
#: than the parallelism saves. Tuning candidates (one kernel) never split.
SPLIT_MIN_CHARS = 60_000

#: What one kernel costs gcc besides its own C, in characters of kernel C: its share of the
#: prelude and helpers (measured: the prelude alone ~0.05-0.1 s, a 50 KB conv kernel ~0.2 s).
UNIT_OVERHEAD_CHARS = 20_000


def compile_options_for(target: "Target | str") -> CompileOptions:
    """The C compiler options a CPU ``target`` asks for.

    Example:
        >>> compile_options_for("llvm -mcpu=haswell").march
        'haswell'
        >>> compile_options_for("llvm").march
        'native'
    """
    target = as_target(target)
    if not target.is_cpu:
        raise ValueError(
            f"target {str(target)!r} is not a CPU target; the C backend builds for 'llvm' or 'c' "
            "(CUDA modules are built by ingot.codegen.cuda)"
        )
    # A named CPU compiles for that CPU, not the host: -mcpu=haswell on an AVX-512 host is AVX2 code.
    march, feature_flags = march_flags(target.cpu)
    mtune = target.attrs.get("mtune")
    if mtune and not compiler_accepts_cpu(mtune, "mtune"):
        raise ToolchainError(f"target {str(target)!r}: the C compiler does not know -mtune={mtune}; name a gcc "
                             "CPU such as haswell, skylake-avx512, znver3 or generic")
    options = CompileOptions(march=march, mtune=target.cpu.mtune)
    if "opt-level" in target.attrs:
        options = options.replace(opt_level=min(3, int(target.attrs["opt-level"])))
    extra: list[str] = list(feature_flags)
    if target.cpu.vector_bits < 512 and target.cpu.has("avx512f"):
        extra.append(f"-mprefer-vector-width={target.cpu.vector_bits}")  # -vector-width narrows
    if target.attrs.get("fast-math"):
        extra.append("-ffast-math")
    if target.attrs.get("mattr"):
        # LLVM-style "+avx2,-fma" → GCC "-mavx2 -mno-fma".
        for feature in target.attrs["mattr"]:
            sign, name = feature[:1], feature[1:]
            if sign not in "+-" or not name.replace("-", "").replace(".", "").isalnum():
                raise ValueError(f"target {str(target)!r}: -mattr entries look like +avx2 or -fma, got {feature!r}")
            extra.append(f"-m{name}" if sign == "+" else f"-mno-{name}")
    return options.replace(extra_flags=tuple(extra)) if extra else options


def _as_module(mod: "IRModule | PrimFunc") -> IRModule:
    if isinstance(mod, PrimFunc):
        return IRModule({"main": mod})
    if not isinstance(mod, IRModule):
        raise TypeError(f"build_module expects a lowered IRModule or PrimFunc, got {type(mod).__name__}")
    return mod


def generate_source(mod: "IRModule | PrimFunc", target: "Target | str | None" = None) -> CSource:
    """The C source (and metadata) of a lowered module for ``target``, without compiling.

    Example:
        >>> from ingot.ir import decl_buffer
        >>> from ingot.tir import Evaluate
        >>> "ingot_main" in generate_source(PrimFunc([decl_buffer((1,), "int32", "x")], Evaluate(0))).code
        True
    """
    return generate_c(_as_module(mod), as_target(target))


def build_module(mod: "IRModule | PrimFunc", target: "Target | str | None" = None, *,
                 cache_dir: Any = None):
    """Compile a lowered module and load it: returns an `ingot.runtime.Module`.

    ``lib.get_source()`` returns the generated C; ``lib["name"](*arrays)`` calls a function.

    Example:
        >>> lib = build_module(lowered_mod, "llvm -num-cores=2")   # doctest: +SKIP
        >>> lib.get_num_threads()                                   # doctest: +SKIP
        2
    """
    from ingot.runtime.module import Module
    from ingot.runtime.threads import num_threads_for_target

    target = as_target(target)
    source = generate_c(_as_module(mod), target)
    path = compile_shared_library(source.code, _options_for_source(target, source.code), cache_dir=cache_dir)
    lib = Module(path, source=source.code)
    lib.set_num_threads(num_threads_for_target(target))
    return lib


def module_assembly(mod: "IRModule | PrimFunc", target: "Target | str | None" = None) -> str:
    """The assembly the C compiler makes of a lowered module (to inspect SIMD code).

    Example:
        >>> "zmm" in module_assembly(vectorized_mod, "llvm -mcpu=znver5")   # doctest: +SKIP
        True
    """
    target = as_target(target)
    code = generate_c(_as_module(mod), target).code
    return compile_to_assembly(code, _options_for_source(target, code))


def hot_loop_report(assembly: str, vector_bits: int = 512) -> dict:
    """Facts of the micro-kernel in ``assembly`` (AT&T syntax, as `module_assembly` returns it):
    among the loops (a label and a conditional jump back to it), the one with the most FMAs, the
    shortest on a tie — its ``fma`` count, ``vector`` (FMAs on full-width registers of
    ``vector_bits``: zmm for 512, ymm for 256, xmm for 128), ``zmm`` (FMAs on zmm registers),
    ``stack`` (accesses through %rsp/%rbp: spills and reloads; 0 means the accumulators stay in
    registers), ``vector_stack`` (those that move a vector register: the tile's own spills; the
    rest are address registers reloaded, cheaper), ``stores`` (full-width vector stores to memory) and ``instructions``.

    Example:
        >>> asm = ".L3:; vfmadd231ps %ymm1, %ymm2, %ymm0; jne .L3".replace(";", chr(10))
        >>> r = hot_loop_report(asm, vector_bits=256)
        >>> r["fma"], r["vector"], r["zmm"]
        (1, 1, 0)
    """
    import re

    reg = {512: "zmm", 256: "ymm"}.get(vector_bits, "xmm")
    lines = assembly.splitlines()
    labels = {ln[:-1]: n for n, ln in enumerate(lines) if re.match(r"^\.L\w+:$", ln)}
    best = {"fma": 0, "vector": 0, "zmm": 0, "stack": 0, "vector_stack": 0, "stores": 0, "instructions": 0}
    for n, ln in enumerate(lines):
        m = re.match(r"^\s+j\w+\s+(\.L\w+)$", ln)
        if not m or m.group(1) not in labels or labels[m.group(1)] >= n:
            continue
        body = lines[labels[m.group(1)]:n + 1]
        fma = sum(1 for b in body if re.match(r"\s+vfmadd\w+\s", b))
        if fma > best["fma"] or (fma == best["fma"] and fma and len(body) < best["instructions"]):
            best = {"fma": fma,
                    "vector": sum(1 for b in body if re.match(rf"\s+vfmadd\w+\s.*%{reg}", b)),
                    "zmm": sum(1 for b in body if re.match(r"\s+vfmadd\w+\s.*%zmm", b)),
                    "stack": sum(1 for b in body if re.search(r"\((%rsp|%rbp)", b)),
                    "vector_stack": sum(1 for b in body if re.search(r"\((%rsp|%rbp)", b) and re.search(r"%[xyz]mm", b)),
                    "stores": sum(1 for b in body if re.match(rf"\s+vmov\w+\s+%{reg}\d+, .*\(", b)),
                    "instructions": len(body)}
    return best


def _options_for_source(target: Target, code: str) -> CompileOptions:
    options = compile_options_for(target)
    if "_Float16" in code:
        # GCC emulates _Float16 in float and, with -ffp-contract=fast, fuses a*b+c across the
        # rounding casts the printer inserts: float16 results would differ from numpy's.
        options = options.replace(fp_contract="off")
    return options


# ------------------------------------------------------------------ kernels as separate pieces
#
# Note: `generate_c` prints a whole module in one go. A graph module is instead assembled from
# one `KernelSource` per kernel, because (1) a kernel's C can then be cached on its own, before
# lowering (`ingot.driver.kernel_cache`), and (2) the kernels can be spread over several
# translation units that gcc compiles in parallel. `assemble_source` of the pieces is
# byte-for-byte `generate_c` of the lowered module (a test checks it), so the two paths make
# the same library.


@dataclasses.dataclass(frozen=True)
class KernelSource:
    """The C of one lowered kernel: its text (static kernel + exported packed entry), its
    metadata entry, and the typedefs/inline helpers it uses (``(name, C text)`` pairs, in first-use
    order). ``name`` is the function's name in the module; ``symbol``/``kernel_symbol`` its C names.

    Example:
        >>> from ingot.ir import decl_buffer
        >>> from ingot.tir import Evaluate
        >>> k = emit_kernel_source(PrimFunc([decl_buffer((2,), "int8", "x")], Evaluate(0)), "f",
        ...                        "ingot_f", "ingot_kernel_f")
        >>> k.metadata["symbol"], k.typedefs
        ('ingot_f', ())
    """

    name: str
    symbol: str
    kernel_symbol: str
    text: str
    metadata: dict
    typedefs: tuple = ()
    helpers: tuple = ()

    def to_json(self) -> dict:
        """A JSON-compatible dict (`from_json` reads it back).

        Example:
            >>> KernelSource("f", "ingot_f", "ingot_kernel_f", "", {"symbol": "ingot_f", "params": []}).to_json()["name"]
            'f'
        """
        return {"name": self.name, "symbol": self.symbol, "kernel_symbol": self.kernel_symbol,
                "text": self.text, "metadata": self.metadata,
                "typedefs": [list(p) for p in self.typedefs], "helpers": [list(p) for p in self.helpers]}

    @classmethod
    def from_json(cls, data: Any) -> "KernelSource":
        """Read `to_json`'s dict back; raises ``ValueError`` naming the bad field when it is malformed.

        Example:
            >>> k = KernelSource("f", "ingot_f", "ingot_kernel_f", "", {"symbol": "ingot_f", "params": []})
            >>> KernelSource.from_json(k.to_json()) == k
            True
        """
        def pairs(field: str) -> tuple:
            value = data.get(field)
            if not isinstance(value, list) or not all(
                    isinstance(p, list) and len(p) == 2 and all(isinstance(x, str) for x in p) for p in value):
                raise ValueError(f"kernel source entry: field {field!r} is not a list of [name, text] pairs")
            return tuple(tuple(p) for p in value)

        if not isinstance(data, dict):
            raise ValueError(f"kernel source entry: expected a JSON object, got {type(data).__name__}")
        for field in ("name", "symbol", "kernel_symbol", "text"):
            if not isinstance(data.get(field), str):
                raise ValueError(f"kernel source entry: field {field!r} is missing or not a string")
        md = data.get("metadata")
        if not (isinstance(md, dict) and md.get("symbol") == data["symbol"] and isinstance(md.get("params"), list)):
            raise ValueError("kernel source entry: field 'metadata' does not describe the entry's symbol")
        return cls(data["name"], data["symbol"], data["kernel_symbol"], data["text"], md,
                   pairs("typedefs"), pairs("helpers"))


def kernel_symbols(names: Sequence[str]) -> "list[tuple[str, str]]":
    """The C symbols ``(entry, kernel)`` that `generate_c` gives functions named ``names`` (in
    module order): ``ingot_<name>`` and ``ingot_kernel_<name>``, made unique across the module.

    Example:
        >>> kernel_symbols(["main", "main"])
        [('ingot_main', 'ingot_kernel_main'), ('ingot_main_1', 'ingot_kernel_main_1')]
    """
    from ingot.codegen.c import _PRELUDE_SYMBOLS
    from ingot.codegen.sanitize import NameTable, sanitize_identifier

    table = NameTable(reserved=_PRELUDE_SYMBOLS)
    out = []
    for name in names:
        base = sanitize_identifier(name)
        out.append((table.unique(f"ingot_{base}"), table.unique(f"ingot_kernel_{base}")))
    return out


def emit_kernel_source(func: PrimFunc, name: str, symbol: str, kernel_symbol: str) -> KernelSource:
    """The C of one lowered ``func`` as a `KernelSource` (what `generate_c` prints for it).

    Example:
        >>> from ingot.ir import decl_buffer
        >>> from ingot.tir import Evaluate
        >>> k = emit_kernel_source(PrimFunc([decl_buffer((2,), "int8", "x")], Evaluate(0)), "f",
        ...                        "ingot_f", "ingot_kernel_f")
        >>> "INGOT_EXPORT int32_t ingot_f(" in k.text
        True
    """
    from ingot.codegen.c.function import emit_function
    from ingot.codegen.c.types import CHelpers

    helpers = CHelpers()
    text, md = emit_function(func, name, symbol, kernel_symbol, helpers)
    # CHelpers keeps its registrations in insertion-ordered dicts; the pieces keep that order.
    return KernelSource(name, symbol, kernel_symbol, text, md,
                        tuple(helpers._typedefs.items()), tuple(helpers._functions.items()))


def _render_helpers(pieces: Sequence[KernelSource]) -> str:
    # Merging the per-kernel registrations in kernel order gives the order one shared CHelpers
    # would have had (first use wins), so the text equals CHelpers.render's.
    typedefs: dict[str, str] = {}
    functions: dict[str, str] = {}
    for p in pieces:
        for name, text in p.typedefs:
            typedefs.setdefault(name, text)
        for name, text in p.helpers:
            functions.setdefault(name, text)
    parts = list(typedefs.values())
    if parts:
        parts.append("")
    parts.extend(functions.values())
    return "\n".join(parts) + ("\n" if parts else "")


def _check_unique(pieces: Sequence[KernelSource]) -> None:
    from ingot.codegen.c import check_unique_name

    seen: set[str] = set()
    for p in pieces:
        check_unique_name(p.name, seen)


def assemble_source(pieces: Sequence[KernelSource], target: "Target | str | None" = None,
                    include_source: bool = True) -> CSource:
    """One C translation unit of the kernels ``pieces`` (in order): exactly the `CSource` that
    `generate_c` makes of the module they were emitted from.

    Example:
        >>> from ingot.ir import decl_buffer
        >>> from ingot.tir import Evaluate
        >>> f = PrimFunc([decl_buffer((2,), "int8", "x")], Evaluate(0))
        >>> k = emit_kernel_source(f, "main", "ingot_main", "ingot_kernel_main")
        >>> assemble_source([k], "llvm").code == generate_c(f, "llvm").code
        True
    """
    from ingot.codegen.c import C_PRELUDE
    from ingot.codegen.prelude import emit_metadata_c, emit_source_c
    from ingot.runtime import abi

    _check_unique(pieces)
    metadata = {"version": abi.METADATA_VERSION, "target": str(as_target(target)),
                "functions": {p.name: p.metadata for p in pieces}, "source_included": include_source}
    code = (C_PRELUDE + "\n" + _render_helpers(pieces) + "\n" + "\n".join(p.text for p in pieces) + "\n"
            + emit_metadata_c(metadata))
    if include_source:
        code = code + emit_source_c(code)
    return CSource(code, metadata)


def _entry_prototypes(pieces: Sequence[KernelSource]) -> str:
    return _symbol_prototypes([p.symbol for p in pieces])


def _symbol_prototypes(symbols: Sequence[str]) -> str:
    return "".join(f"INGOT_EXPORT int32_t {s}(IngotValue* args, int32_t* type_codes, int32_t num_args, "
                   "char* err, int32_t err_len);\n" for s in symbols)


def translation_units(pieces: Sequence[KernelSource], tail: str, units: int,
                      tail_weight: "int | None" = None) -> "list[str]":
    """Split a module into at most ``units`` C translation units that link into the same library
    as the one-unit source: each unit is the prelude, the helpers its kernels use and its kernels
    (static kernels stay private to their unit; the exported entries are what the library exports);
    ``tail`` (code after the kernels: AOT entries, ``ingot_module_metadata``/``ingot_module_source``)
    goes into the lightest unit with prototypes of the kernel entries it may call. The prelude's
    exported helpers are weak symbols, so their copies in several units link to one.

    Kernels are spread by weight (heaviest first onto the lightest unit), keeping their module
    order inside a unit. A kernel weighs its C length plus `UNIT_OVERHEAD_CHARS`, a proxy for its
    gcc time; the tail weighs ``tail_weight`` (default its length). ``units <= 1`` gives the
    one-unit text.

    Example:
        >>> from ingot.ir import decl_buffer
        >>> from ingot.tir import Evaluate
        >>> ks = [emit_kernel_source(PrimFunc([decl_buffer((2,), "int8", "x")], Evaluate(0)), f"f{i}",
        ...                          f"ingot_f{i}", f"ingot_kernel_f{i}") for i in range(3)]
        >>> len(translation_units(ks, "", 2))
        2
    """
    from ingot.codegen.c import C_PRELUDE

    _check_unique(pieces)
    units = max(1, min(int(units), len(pieces)))
    if units == 1:
        return [C_PRELUDE + "\n" + _render_helpers(pieces) + "\n" + "\n".join(p.text for p in pieces) + "\n" + tail]
    # Longest processing time first onto the lightest unit (a heap of (load, unit)); the tail is
    # item -1.
    weights = {i: len(p.text) + UNIT_OVERHEAD_CHARS for i, p in enumerate(pieces)}
    weights[-1] = len(tail) if tail_weight is None else int(tail_weight)
    heap = [(0, u) for u in range(units)]
    groups: list[list[int]] = [[] for _ in range(units)]
    tail_unit = 0
    for i in sorted(weights, key=lambda i: (-weights[i], i)):
        load, u = heapq.heappop(heap)
        if i == -1:
            tail_unit = u
        else:
            groups[u].append(i)
        heapq.heappush(heap, (load + weights[i], u))
    out = []
    for u, members in enumerate(groups):
        group = [pieces[i] for i in sorted(members)]
        text = C_PRELUDE + "\n" + _render_helpers(group) + "\n" + "\n".join(p.text for p in group) + "\n"
        if u == tail_unit and tail:
            others = [p for p in pieces if p not in group]
            text += "\n/* entries defined in the module's other translation units */\n" + _entry_prototypes(others)
            text += tail
        out.append(text)
    return out


def link_kernel_sources(pieces: Sequence[KernelSource], tail: str, options: CompileOptions, *,
                        cache_dir: Any = None, jobs: "int | None" = None, tail_weight: "int | None" = None,
                        overlap: "OverlappedLink | None" = None) -> str:
    """Compile kernels ``pieces`` plus ``tail`` into one shared library; returns its path.

    A module with at least `SPLIT_MIN_CHARS` of kernel C and more than one kernel is split into
    `translation_units` (one per compile job) compiled in parallel and linked; a smaller one is
    one unit and one compiler call (no thread pool, no link step), as `compile_shared_library`.
    ``tail_weight`` estimates the tail's gcc cost (see `translation_units`). With ``overlap`` (an
    `OverlappedLink` that was fed the kernels while they were lowered) a module it splits is
    linked from its units, most of them compiled already. A compiler error names the kernel
    whose C it points at.

    Example:
        >>> path = link_kernel_sources(pieces, aot_and_metadata, compile_options_for("llvm"))  # doctest: +SKIP
    """
    try:
        if overlap is not None:
            units = overlap.units(pieces, tail, options)
            if len(units) > 1:
                return overlap.link(units, options)
        jobs = compile_jobs() if jobs is None else max(1, int(jobs))
        size = sum(len(p.text) for p in pieces)
        units = jobs if (len(pieces) > 1 and size >= SPLIT_MIN_CHARS) else 1
        sources = translation_units(pieces, tail, units, tail_weight)
        if len(sources) == 1:
            return compile_shared_library(sources[0], options, cache_dir=cache_dir)
        return compile_shared_library_units(sources, options, cache_dir=cache_dir, jobs=jobs)
    except CompileError as exc:
        raise _naming_kernel(exc, pieces) from None


def _naming_kernel(exc: CompileError, pieces: Sequence[KernelSource]) -> CompileError:
    """``exc`` with the kernel its first error line points into named up front (the unit's saved
    source is searched for each kernel's text); ``exc`` itself when no kernel is found."""
    import re

    match = re.search(r"\.c:(\d+):\d+: (?:fatal )?error", exc.stderr)
    try:
        with open(exc.source_path, encoding="utf-8", errors="replace") as f:
            source = f.read()
    except (OSError, ValueError):
        return exc
    if match is None:
        return exc
    line = int(match.group(1))
    for p in pieces:
        at = source.find(p.text) if p.text else -1
        if at >= 0 and source.count("\n", 0, at) < line <= source.count("\n", 0, at + len(p.text)) + 1:
            return CompileError(f"C compilation of kernel {p.name!r} failed (gcc error at line {line} of its "
                                f"translation unit): fix its schedule or report the generated C\n{exc}",
                                command=exc.command, stderr=exc.stderr, source_path=exc.source_path,
                                returncode=exc.returncode)
    return exc


# ------------------------------------------------------------------ overlapping gcc with lowering
#
# Note: lowering a graph module's kernels is Python on one core, and gcc used to start only after
# the last kernel was lowered. `OverlappedLink` instead compiles translation units in background
# threads (waiting on gcc processes, so the GIL is free) while the next kernels are lowered: the
# AOT entries as soon as the graph is planned (they only need the kernels' symbols) and the
# kernels in consecutive batches of about `OVERLAP_UNIT_CHARS` as they come. While kernels are
# still being lowered the lowering thread counts as one of the `compile_jobs`, so a 2-core machine
# runs one gcc beside Python; at `link` every job runs gcc. The partition is a function of the
# final pieces and tail alone (`OverlappedLink.units`); a unit compiled ahead is used only when its
# text and options are the ones the partition asks for (a kernel whose schedule was replaced, or
# a float16 kernel that changes the module's options, is simply compiled again), and the objects
# go through the ordinary object cache (`ingot.codegen.toolchain.compile_object`), so
# `compile_shared_library_units` then only links. The library's source (``get_source``) does not
# depend on the partition.

#: Kernel C (plus `UNIT_OVERHEAD_CHARS` per kernel) in one translation unit compiled while the
#: next kernels are lowered: large enough that gcc's per-unit start-up (the prelude: about 0.25 s
#: of compiler CPU) stays a small share, small enough that the last, partial unit left when
#: lowering ends is short.
OVERLAP_UNIT_CHARS = 300_000

#: The AOT entries get a unit of their own, compiled first, when their gcc weight (characters x
#: ``aot_weight``) is at least this: below it they cost gcc less than one more unit and link step.
OVERLAP_AOT_MIN_WEIGHT = SPLIT_MIN_CHARS


class OverlappedLink:
    """Compiles a graph module's translation units while its kernels are still being lowered.

    Use as a context manager around lowering and the final `link_kernel_sources` call: leaving the
    block cancels units not yet started and waits for the running compilers, so an error (in
    lowering or in gcc) leaves no compiler process behind. Feed `add_entries` (the AOT entries'
    text and the kernels' entry symbols, known before lowering) and `add_kernel` (each kernel's
    C once final); a compile error of a background unit is raised by the next call (naming the
    kernel) or by `link`.

    Example:
        >>> with OverlappedLink(compile_options_for("llvm")) as overlap:            # doctest: +SKIP
        ...     overlap.add_entries(aot_entries, entry_symbols, aot_weight=12)
        ...     for piece in lowered_kernels:
        ...         overlap.add_kernel(piece)
        ...     path = link_kernel_sources(pieces, aot_entries + metadata, options, overlap=overlap)
    """

    def __init__(self, options: CompileOptions, *, cache_dir: Any = None, jobs: "int | None" = None):
        import threading
        from concurrent.futures import ThreadPoolExecutor

        self.options = options
        self.cache_dir = cache_dir
        self.jobs = compile_jobs() if jobs is None else max(1, int(jobs))
        self._entries = ("", (), 0)
        self._batch: list[KernelSource] = []
        self._seen: list[KernelSource] = []
        self._units: dict = {}  # (options, unit text) -> Future of its object path
        self._pool = ThreadPoolExecutor(max_workers=self.jobs, thread_name_prefix="ingot-cc") if self.jobs > 1 else None
        # One compile slot per job; the lowering thread holds one until `link`.
        self._slots = threading.Semaphore(self.jobs)
        self._slots.acquire()
        self._lowering = True

    def __enter__(self) -> "OverlappedLink":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def close(self) -> None:
        """Cancel units not started and wait for the compilers that run (idempotent).

        Example:
            >>> OverlappedLink(compile_options_for("llvm"), jobs=1).close()
        """
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
        self._release_lowering_slot()

    def _release_lowering_slot(self) -> None:
        if self._lowering:
            self._lowering = False
            self._slots.release()

    def add_entries(self, text: str, symbols: Sequence[str], aot_weight: int = 1) -> None:
        """The AOT entries' C ``text`` (the start of the module's tail) calling kernel entries
        ``symbols``: compiled now, as their own unit, when they weigh enough (module note).

        Example:
            >>> OverlappedLink(compile_options_for("llvm"), jobs=1).add_entries("", [])
        """
        self._entries = (text, tuple(symbols), int(aot_weight))
        if text and len(text) * int(aot_weight) >= OVERLAP_AOT_MIN_WEIGHT:
            self._submit(_entries_unit(self._entries[1], text), self.options)

    def add_kernel(self, piece: KernelSource) -> None:
        """The final C of the next kernel in module order; a full batch starts compiling.

        Example:
            >>> from ingot.ir import decl_buffer
            >>> from ingot.tir import Evaluate
            >>> k = emit_kernel_source(PrimFunc([decl_buffer((2,), "int8", "x")], Evaluate(0)), "f",
            ...                        "ingot_f", "ingot_kernel_f")
            >>> OverlappedLink(compile_options_for("llvm"), jobs=1).add_kernel(k)
        """
        self._raise_failed()
        self._seen.append(piece)
        self._batch.append(piece)
        if _weight(self._batch) >= OVERLAP_UNIT_CHARS:
            if "_Float16" in "".join(p.text for p in self._batch):
                self.options = self.options.replace(fp_contract="off")  # `_options_for_source`'s rule
            self._submit(_unit_text(self._batch, ""), self.options)
            self._batch = []

    def units(self, pieces: Sequence[KernelSource], tail: str, options: CompileOptions) -> "list[str]":
        """The translation units of kernels ``pieces`` plus ``tail`` (a function of them alone):
        full batches of consecutive kernels, the AOT entries (when ``tail`` starts with the text
        given to `add_entries` and they weigh enough), and a last unit of the remaining kernels
        and the rest of the tail. One unit (no split) with a single compile job.

        Example:
            >>> units = OverlappedLink(compile_options_for("llvm"), jobs=1).units([], "int x;", compile_options_for("llvm"))
            >>> len(units), units[0].endswith("int x;")
            (1, True)
        """
        _check_unique(pieces)
        if self.jobs == 1:
            return translation_units(pieces, tail, 1)
        out, batch = [], []
        for p in pieces:
            batch.append(p)
            if _weight(batch) >= OVERLAP_UNIT_CHARS:
                out.append(_unit_text(batch, ""))
                batch = []
        entries, _, aot_weight = self._entries
        symbols = [p.symbol for p in pieces]
        if entries and tail.startswith(entries) and len(entries) * aot_weight >= OVERLAP_AOT_MIN_WEIGHT:
            out.append(_entries_unit(symbols, entries))
            tail = tail[len(entries):]
        if len(out) == 0:
            return translation_units(pieces, tail, 1)
        done = {p.symbol for p in pieces} - {p.symbol for p in batch}
        last = tail if not tail else "\n/* entries defined in the module's other translation units */\n" + \
            _entry_prototypes([p for p in pieces if p.symbol in done]) + tail
        out.append(_unit_text(batch, last))
        return out

    def link(self, units: Sequence[str], options: CompileOptions) -> str:
        """Compile the ``units`` not compiled ahead (every job now), wait for all, link them
        (`ingot.codegen.toolchain.compile_shared_library_units`, which finds the objects cached).

        Example:
            >>> overlap.link(overlap.units(pieces, tail, options), options)      # doctest: +SKIP
        """
        self._release_lowering_slot()
        futures = [self._submit(u, options) for u in units]
        for f in futures:
            f.result()  # re-raises a unit's CompileError
        return compile_shared_library_units(list(units), options, cache_dir=self.cache_dir, jobs=self.jobs)

    def _submit(self, text: str, options: CompileOptions):
        from concurrent.futures import Future

        key = (options, text)
        if key not in self._units:
            if self._pool is None:  # one job: compiled by `link`'s call, in this thread
                self._units[key] = Future()
                self._units[key].set_result(None)
            else:
                self._units[key] = self._pool.submit(self._compile, text, options)
        return self._units[key]

    def _compile(self, text: str, options: CompileOptions) -> str:
        with self._slots:
            return compile_object(text, options, cache_dir=self.cache_dir)

    def _raise_failed(self) -> None:
        for f in self._units.values():
            if f.done() and not f.cancelled() and f.exception() is not None:
                exc = f.exception()
                raise (_naming_kernel(exc, self._seen) if isinstance(exc, CompileError) else exc) from None


def _weight(group: Sequence[KernelSource]) -> int:
    return sum(len(p.text) + UNIT_OVERHEAD_CHARS for p in group)


def _unit_text(group: Sequence[KernelSource], tail: str) -> str:
    from ingot.codegen.c import C_PRELUDE

    return C_PRELUDE + "\n" + _render_helpers(group) + "\n" + "\n".join(p.text for p in group) + "\n" + tail


def _entries_unit(symbols: Sequence[str], entries: str) -> str:
    from ingot.codegen.c import C_PRELUDE

    return (C_PRELUDE + "\n/* entries defined in the module's other translation units */\n"
            + _symbol_prototypes(symbols) + entries)
