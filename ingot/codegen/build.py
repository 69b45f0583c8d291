"""Build a lowered IRModule into a loaded runtime Module (TVM's ``codegen.build_module``).

Note: the whole module is one C translation unit compiled by one compiler call
(`ingot.codegen.toolchain.compile_shared_library`), whose cache is keyed by the source, the
command and the compiler version: building the same module twice runs the compiler once. The
target chooses the flags: host ``llvm``/``c`` → ``-march=native``; ``-mcpu=X`` →
``-march=X``; ``-opt-level=N`` → ``-ON``; ``-fast-math`` → ``-ffast-math``; OpenMP always
on. After loading, the module's parallel loops are set to use ``target.num_cores`` threads.

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

from typing import Any

from ingot.codegen.c import CSource, generate_c
from ingot.codegen.toolchain import CompileOptions, compile_shared_library, compile_to_assembly
from ingot.ir.module import IRModule
from ingot.target import Target, as_target
from ingot.tir.function import PrimFunc

__all__ = ["build_module", "compile_options_for", "generate_source", "module_assembly"]


def compile_options_for(target: "Target | str") -> CompileOptions:
    """The C compiler options a CPU ``target`` asks for.

    Example:
        >>> compile_options_for("llvm -mcpu=znver5").march
        'znver5'
        >>> compile_options_for("llvm").march
        'native'
    """
    target = as_target(target)
    if not target.is_cpu:
        raise ValueError(
            f"target {str(target)!r} is not a CPU target; the C backend builds for 'llvm' or 'c' "
            "(CUDA modules are built by ingot.codegen.cuda)"
        )
    options = CompileOptions(march=target.mcpu or "native")
    if "opt-level" in target.attrs:
        options = options.replace(opt_level=min(3, int(target.attrs["opt-level"])))
    extra: list[str] = []
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

    target = as_target(target)
    source = generate_c(_as_module(mod), target)
    path = compile_shared_library(source.code, _options_for_source(target, source.code), cache_dir=cache_dir)
    lib = Module(path, source=source.code)
    lib.set_num_threads(target.num_cores)
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


def hot_loop_report(assembly: str) -> dict:
    """Facts of the micro-kernel in ``assembly`` (AT&T syntax, as `module_assembly` returns it):
    among the loops (a label and a conditional jump back to it), the one with the most FMAs, the
    shortest on a tie — its ``fma`` count, ``zmm`` (FMAs on zmm registers), ``stack`` (accesses
    through %rsp/%rbp: spills and reloads; 0 means the accumulators stay in registers), ``stores``
    (zmm stores to memory) and ``instructions``.

    Example:
        >>> asm = ".L3:; vfmadd231ps %zmm1, %zmm2, %zmm0; jne .L3".replace(";", chr(10))
        >>> hot_loop_report(asm)["zmm"]
        1
    """
    import re

    lines = assembly.splitlines()
    labels = {ln[:-1]: n for n, ln in enumerate(lines) if re.match(r"^\.L\w+:$", ln)}
    best = {"fma": 0, "zmm": 0, "stack": 0, "stores": 0, "instructions": 0}
    for n, ln in enumerate(lines):
        m = re.match(r"^\s+j\w+\s+(\.L\w+)$", ln)
        if not m or m.group(1) not in labels or labels[m.group(1)] >= n:
            continue
        body = lines[labels[m.group(1)]:n + 1]
        fma = sum(1 for b in body if re.match(r"\s+vfmadd\w+\s", b))
        if fma > best["fma"] or (fma == best["fma"] and fma and len(body) < best["instructions"]):
            best = {"fma": fma,
                    "zmm": sum(1 for b in body if re.match(r"\s+vfmadd\w+\s.*%zmm", b)),
                    "stack": sum(1 for b in body if re.search(r"\((%rsp|%rbp)", b)),
                    "stores": sum(1 for b in body if re.match(r"\s+vmov\w+\s+%zmm\d+, .*\(", b)),
                    "instructions": len(body)}
    return best


def _options_for_source(target: Target, code: str) -> CompileOptions:
    options = compile_options_for(target)
    if "_Float16" in code:
        # GCC emulates _Float16 in float and, with -ffp-contract=fast, fuses a*b+c across the
        # rounding casts the printer inserts: float16 results would differ from numpy's.
        options = options.replace(fp_contract="off")
    return options
