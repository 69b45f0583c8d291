"""The ``cblas`` backend: dense / matmul / batch matmul (+ bias add, relu epilogues) on BLAS ``sgemm``.

Note: each region becomes one C function ``int32_t <global_symbol>(void **args)`` (inputs, then
outputs) that runs with the build target's thread count (OpenBLAS's per-thread
``openblas_set_num_threads_local``, restored after the region) and calls ``cblas_sgemm`` for every GEMM (``cblas_sgemv`` for a single row: sgemm does
not forward it to its matrix-vector kernels) and runs the epilogues as C loops; it is
compiled (cached by content, like every Ingot library) into a small shared library. The BLAS is
found at run time, not link time: `find_blas` looks for OpenBLAS where this machine has it
without a network (numpy's bundled ``scipy_openblas64_``, scipy's ``scipy_openblas``, the
``scipy-openblas32`` wheel, a system ``libopenblas``/``libcblas``) and passes the address of its
``sgemm`` to the library once, so a call runs C only from the plan step to the BLAS kernel.

What it accepts (`CblasBackend.patterns`; the partition report gives the reason for a refusal):
  * ``linear`` (dense, ``x @ W.T + b``): float32, static shapes, 2-D weight: one sgemm with
    ``transB`` (the weight's ``(N, K)`` row-major layout is read as is, never copied);
  * ``matmul``: float32, static shapes, rank >= 2 operands; a 2-D right operand makes one sgemm
    over the flattened rows, equal batch axes make one sgemm per batch (batch_matmul); a broadcast
    batch axis is refused;
  * epilogues, never alone: ``add`` after an offloaded GEMM, add or relu (the other operand: of the
    output's shape, of its last axis — a bias —, or a scalar), ``relu`` after a GEMM or an add.

Example:
    >>> find_blas().sgemm_symbol in ("scipy_cblas_sgemm64_", "scipy_cblas_sgemm", "cblas_sgemm")
    True
"""
from __future__ import annotations

import base64
import ctypes
import dataclasses
import glob
import hashlib
import json
import os
from typing import Any

import numpy as np

from ingot.graph.expr import Call, Constant, Function, Tuple, Var
from ingot.graph.external import Pattern
from ingot.graph.struct_info import TensorStructInfo
from ingot.ir.error import IRError

from .base import Backend, RuntimeModule, register_backend

INSTALL_HINT = ("install a BLAS: `pip install scipy-openblas32` (or numpy, whose wheel bundles OpenBLAS), "
                "or the system's `apt install libopenblas0`")


@dataclasses.dataclass(frozen=True)
class BlasLibrary:
    """A BLAS found on this host: library path, ``sgemm`` symbol, 64-bit integers or not, and the
    symbol that sets its thread count (None if it has none).

    Example:
        >>> find_blas().path.endswith(".so") or ".so." in find_blas().path
        True
    """

    path: str
    sgemm_symbol: str
    ilp64: bool
    threads_symbol: "str | None"


def _candidates() -> list:
    out = []
    try:
        import numpy

        root = os.path.dirname(os.path.dirname(numpy.__file__))
        for p in sorted(glob.glob(os.path.join(root, "numpy.libs", "libscipy_openblas64_*.so*"))):
            out.append((p, "scipy_cblas_sgemm64_", True, "scipy_openblas_set_num_threads64_"))
        for p in sorted(glob.glob(os.path.join(root, "scipy.libs", "libscipy_openblas-*.so*"))):
            out.append((p, "scipy_cblas_sgemm", False, "scipy_openblas_set_num_threads"))
    except ImportError:  # pragma: no cover - numpy is a dependency of ingot
        pass
    try:
        import scipy_openblas32  # type: ignore[import-not-found]

        for p in sorted(glob.glob(os.path.join(scipy_openblas32.get_lib_dir(), "libscipy_openblas*.so*"))):
            out.append((p, "scipy_cblas_sgemm", False, "scipy_openblas_set_num_threads"))
    except ImportError:
        pass
    for name in ("libopenblas.so.0", "libopenblas.so", "libcblas.so.3", "libblas.so.3"):
        out.append((name, "cblas_sgemm", False, "openblas_set_num_threads"))
    return out


_FOUND: "list[BlasLibrary | None]" = []


def find_blas() -> BlasLibrary:
    """The first BLAS with a ``cblas_sgemm`` on this host; raises naming what to install.

    Example:
        >>> find_blas().ilp64 in (True, False)
        True
    """
    if _FOUND:
        if _FOUND[0] is None:
            raise IRError(f"cblas backend: no BLAS with cblas_sgemm found on this host; {INSTALL_HINT}")
        return _FOUND[0]
    found = None
    for path, symbol, ilp64, threads in _candidates():
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        if hasattr(lib, symbol):
            found = BlasLibrary(path, symbol, ilp64, threads if hasattr(lib, threads) else None)
            break
    _FOUND.append(found)
    return find_blas()


def set_num_threads(n: int) -> None:
    """Set the thread count of the BLAS the cblas backend uses (it has its own thread pool; with
    numpy's bundled OpenBLAS this is numpy's BLAS too).

    Example:
        >>> set_num_threads(1)
    """
    blas = find_blas()
    if blas.threads_symbol is not None:
        fn = getattr(ctypes.CDLL(blas.path), blas.threads_symbol)
        fn.argtypes = [ctypes.c_int64 if blas.ilp64 and blas.threads_symbol.endswith("64_") else ctypes.c_int]
        fn(int(n))


# ------------------------------------------------------------------ patterns

def _sinfos(call: Call) -> list:
    return [a.struct_info for a in call.args] + [call.struct_info]


def _float32_static(call: Call) -> "str | None":
    for s in _sinfos(call):
        if not isinstance(s, TensorStructInfo) or s.shape is None:
            return f"needs tensors of known shape, got {s}"
        if str(s.dtype) != "float32":
            return f"sgemm is float32 only, got {s.dtype}"
        if not all(isinstance(d, int) for d in s.shape):
            return f"needs static shapes, got {tuple(s.shape)} (symbolic dims run natively)"
    return None


def _check_linear(call: Call) -> "str | None":
    why = _float32_static(call)
    if why is None and len(call.args[0].struct_info.shape) < 1:
        return "input must have rank >= 1"
    return why


def _check_matmul(call: Call) -> "str | None":
    why = _float32_static(call)
    if why is not None:
        return why
    sa, sb = call.args[0].struct_info.shape, call.args[1].struct_info.shape
    if len(sa) < 2 or len(sb) < 2:
        return f"1-D operands (shapes {tuple(sa)}, {tuple(sb)}) are matrix-vector products; run natively"
    if len(sb) > 2 and tuple(sa[:-2]) != tuple(sb[:-2]):
        return f"batch axes {tuple(sa[:-2])} vs {tuple(sb[:-2])} broadcast; needs equal batch axes or a 2-D right operand"
    return None


def _add_kind(out: tuple, other: tuple) -> "str | None":
    size = int(np.prod(other)) if other else 1
    if tuple(other) == tuple(out):
        return "same"
    if size == 1:
        return "scalar"
    if out and size == out[-1] and other[-1] == out[-1]:
        return "bias"
    return None


def _add_operands(call: Call) -> "tuple[Any, Any, str] | None":
    """``(main operand, other operand, kind)`` of an epilogue add, None when unsupported."""
    out = tuple(call.struct_info.shape)
    a, b = call.args
    for main, other in ((a, b), (b, a)):
        if tuple(main.struct_info.shape) == out:
            kind = _add_kind(out, tuple(other.struct_info.shape))
            if kind is not None:
                return main, other, kind
    return None


def _check_add(call: Call) -> "str | None":
    why = _float32_static(call)
    if why is not None:
        return why
    if _add_operands(call) is None:
        return (f"operand shapes {tuple(call.args[0].struct_info.shape)} and {tuple(call.args[1].struct_info.shape)}: "
                f"the epilogue adds an operand of the output's shape, of its last axis, or a scalar")
    return None


# ------------------------------------------------------------------ C code

_PRELUDE = r"""#include <stdint.h>
#include <stdlib.h>
typedef void (*ingot_sgemm32_t)(int, int, int, int, int, int, float, const float *, int, const float *, int,
                                float, float *, int);
typedef void (*ingot_sgemm64_t)(int, int, int, int64_t, int64_t, int64_t, float, const float *, int64_t,
                                const float *, int64_t, float, float *, int64_t);
typedef void (*ingot_sgemv32_t)(int, int, int, int, float, const float *, int, const float *, int, float, float *,
                                int);
typedef void (*ingot_sgemv64_t)(int, int, int64_t, int64_t, float, const float *, int64_t, const float *, int64_t,
                                float, float *, int64_t);
static void *ingot_sgemm_ptr = 0;
static void *ingot_sgemv_ptr = 0;
static int ingot_sgemm_ilp64 = 0;
/* OpenBLAS's openblas_set_num_threads_local: the calling thread's BLAS thread count (returns the
   previous one), so a region runs with the build target's threads and restores numpy's after. */
static int (*ingot_blas_threads_local)(int) = 0;

int ingot_cblas_init(void *sgemm, void *sgemv, void *threads_local, int ilp64) {
  ingot_sgemm_ptr = sgemm;
  ingot_sgemv_ptr = sgemv;
  ingot_blas_threads_local = (int (*)(int))threads_local;
  ingot_sgemm_ilp64 = ilp64;
  return 0;
}

/* C[M, N] = A[M, K] @ op(B) + beta * C, row-major; op(B) = B^T (B is [N, K]) when trans_b. */
static void ingot_gemm(int trans_b, int64_t M, int64_t N, int64_t K, const float *A, int64_t lda,
                       const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
  const int row_major = 101, no_trans = 111, trans = 112;
  if (M == 1 && ingot_sgemv_ptr) {
    /* One row: a matrix-vector product. sgemm does not forward M = 1 to its GEMV kernels
       (y = op(B)^T x: B [N, K] row-major is read as is when trans_b, else transposed). */
    int t = trans_b ? no_trans : trans;
    int64_t rows = trans_b ? N : K, cols = trans_b ? K : N;
    if (ingot_sgemm_ilp64)
      ((ingot_sgemv64_t)ingot_sgemv_ptr)(row_major, t, rows, cols, 1.0f, B, ldb, A, 1, beta, C, 1);
    else
      ((ingot_sgemv32_t)ingot_sgemv_ptr)(row_major, t, (int)rows, (int)cols, 1.0f, B, (int)ldb, A, 1, beta, C, 1);
    return;
  }
  if (ingot_sgemm_ilp64)
    ((ingot_sgemm64_t)ingot_sgemm_ptr)(row_major, no_trans, trans_b ? trans : no_trans, M, N, K, 1.0f, A, lda,
                                       B, ldb, beta, C, ldc);
  else
    ((ingot_sgemm32_t)ingot_sgemm_ptr)(row_major, no_trans, trans_b ? trans : no_trans, (int)M, (int)N, (int)K,
                                       1.0f, A, (int)lda, B, (int)ldb, beta, C, (int)ldc);
}
"""


def _shape(e: Any) -> tuple:
    return tuple(e.struct_info.shape)


def _size(shape: tuple) -> int:
    return int(np.prod(shape)) if shape else 1


class _RegionEmitter:
    """C for one region function; one small method per operator (`_EMIT`)."""

    def __init__(self, func: Function, symbol: str, threads: int = 1):
        self.func = func
        self.symbol = symbol
        self.threads = int(threads)
        self.names: dict = {}
        self.lines: list = []
        self.temps: list = []

    def buf(self, e: Any) -> str:
        if isinstance(e, Constant):
            raise IRError(f"cblas codegen ({self.symbol}): constant operands must be lifted to parameters "
                          f"(ingot.graph.external.lower_external_functions does it); build with ingot.graph.build")
        try:
            return self.names[id(e)]
        except KeyError:
            raise IRError(f"cblas codegen ({self.symbol}): `{e}` is not a parameter or a value of the region") from None

    def _buffers(self, bindings: list, out_ids: dict, fused: dict) -> dict:
        """The buffer of each value: its output argument, its epilogue's buffer (updated in place,
        `_in_place`), or a temporary."""
        alias = _in_place(bindings, out_ids, fused)
        buffers: dict = {}
        for b in reversed(bindings):  # an epilogue's buffer is known before its operand's
            key = id(b.var)
            if key in fused.values():
                continue
            if key in out_ids:
                buffers[key] = out_ids[key]
            elif key in alias and alias[key] in buffers:
                buffers[key] = buffers[alias[key]]
            else:
                buffers[key] = f"t{len(self.temps)}"
                self.temps.append((buffers[key], _size(_shape(b.var))))
        return buffers

    def emit(self) -> "tuple[str, int, int]":
        func = self.func
        body = func.body.body
        outs = list(body.fields) if isinstance(body, Tuple) else [body]
        for k, p in enumerate(func.params):
            self.names[id(p)] = f"in{k}"
        out_ids = {}
        for k, o in enumerate(outs):
            if not isinstance(o, Var) or id(o) in out_ids or id(o) in self.names:
                raise IRError(f"cblas codegen ({self.symbol}): result field {k} `{o}` must be a distinct value "
                              f"computed in the region (PartitionGraph makes regions of that form)")
            out_ids[id(o)] = f"out{k}"
        bindings = [b for blk in func.body.blocks for b in blk.bindings]
        for b in bindings:
            v = b.value
            if not isinstance(v, Call) or getattr(v.op, "name", None) not in _EMIT:
                raise IRError(f"cblas codegen ({self.symbol}): cannot emit `{b.var.name_hint} = {v}`; the cblas "
                              f"pattern table accepts linear, matmul and add/relu epilogues")
        fused = _fusable_adds(bindings, out_ids)
        buffers = self._buffers(bindings, out_ids, fused)
        for b in bindings:
            v = b.value
            if id(b.var) in fused.values():
                continue  # a GEMM emitted by the add it feeds (straight into the add's output, beta = 1)
            name = self.names[id(b.var)] = buffers[id(b.var)]
            if id(b.var) in fused:
                main, other, kind = _add_operands(v)
                gemm = next(g for g in bindings if g.var is main).value
                self.lines.append(_fill(name, self.buf(other), kind, _shape(v)))
                _EMIT[gemm.op.name](self, gemm, name, beta="1.0f")
            else:
                _EMIT[v.op.name](self, v, name)
        n_in, n_out = len(func.params), len(outs)
        head = [f"int32_t {c_symbol(self.symbol)}(void **args) {{", "  if (!ingot_sgemm_ptr) return -1;"]
        head += [f"  const float *in{k} = (const float *)args[{k}];" for k in range(n_in)]
        head += [f"  float *out{k} = (float *)args[{n_in + k}];" for k in range(n_out)]
        for name, size in self.temps:
            nbytes = (size * 4 + 63) // 64 * 64
            head.append(f"  float *{name} = (float *)aligned_alloc(64, {nbytes});")
            head.append(f"  if (!{name}) return -2;")
        head.append(f"  int ingot_prev_threads = ingot_blas_threads_local ? ingot_blas_threads_local({self.threads}) : 0;")
        tail = ["  if (ingot_blas_threads_local) ingot_blas_threads_local(ingot_prev_threads);"]
        tail += [f"  free({name});" for name, _ in self.temps] + ["  return 0;", "}"]
        return _PRELUDE + "\n" + "\n".join(head + self.lines + tail) + "\n", n_in, n_out


def _in_place(bindings: list, out_ids: dict, fused: dict) -> dict:
    """``{id(var): id(consumer var)}`` for each value whose only reader is an elementwise epilogue
    (relu, or an add reading it as its full-shape operand): the epilogue updates its buffer in place."""
    uses: dict = {}
    for b in bindings:
        for a in b.value.args:
            uses[id(a)] = uses.get(id(a), 0) + 1
    out = {}
    for b in bindings:
        v = b.value
        if v.op.name == "relu":
            main = v.args[0]
        elif v.op.name == "add" and id(b.var) not in fused:
            main = _add_operands(v)[0]
        else:
            continue
        if isinstance(main, Var) and uses.get(id(main)) == 1 and id(main) not in out_ids \
                and id(main) not in fused.values():
            out[id(main)] = id(b.var)
    return out


def _fusable_adds(bindings: list, out_ids: dict) -> dict:
    """``{id(add var): id(gemm var)}`` for each epilogue add whose region operand is a GEMM without
    its own bias, read by nothing else: the add's other operand is written into the output first
    and the GEMM accumulates onto it (``beta = 1``), saving a pass over the output and a buffer."""
    uses: dict = {}
    for b in bindings:
        for a in b.value.args:
            uses[id(a)] = uses.get(id(a), 0) + 1
    producers = {id(b.var): b.value for b in bindings}
    fused = {}
    for b in bindings:
        if b.value.op.name != "add":
            continue
        main, _, _ = _add_operands(b.value)
        gemm = producers.get(id(main))
        if gemm is not None and gemm.op.name in ("linear", "matmul") and len(gemm.args) == 2 \
                and uses.get(id(main)) == 1 and id(main) not in out_ids and id(main) not in fused.values():
            fused[id(b.var)] = id(main)
    return fused


def _fill(out: str, other: str, kind: str, shape: tuple) -> str:
    index = {"same": "i", "scalar": "0", "bias": f"i % {shape[-1]}"}[kind]
    return f"  for (int64_t i = 0; i < {_size(shape)}; ++i) {out}[i] = {other}[{index}];"


def c_symbol(symbol: str) -> str:
    """The C name of region ``symbol`` (graph function names may hold characters C does not accept).

    Example:
        >>> c_symbol("cblas_my-net.v2_0")
        'cblas_my_net_v2_0'
    """
    from ingot.codegen.sanitize import sanitize_identifier

    return sanitize_identifier(symbol)


def _emit_linear(em: _RegionEmitter, call: Call, out: str, beta: str = "0.0f") -> None:
    x, w = call.args[0], call.args[1]
    sx, sw = _shape(x), _shape(w)
    n, k = sw
    m = _size(sx[:-1])
    if len(call.args) == 3:
        bias = em.buf(call.args[2])
        em.lines.append(f"  for (int64_t i = 0; i < {m}; ++i) for (int64_t j = 0; j < {n}; ++j) "
                        f"{out}[i * {n} + j] = {bias}[j];")
        beta = "1.0f"
    em.lines.append(f"  ingot_gemm(1, {m}, {n}, {k}, {em.buf(x)}, {k}, {em.buf(w)}, {k}, {beta}, {out}, {n});")


def _emit_matmul(em: _RegionEmitter, call: Call, out: str, beta: str = "0.0f") -> None:
    a, b = call.args
    sa, sb = _shape(a), _shape(b)
    k, n = sb[-2], sb[-1]
    if len(sb) == 2:
        m = _size(sa[:-1])
        em.lines.append(f"  ingot_gemm(0, {m}, {n}, {k}, {em.buf(a)}, {k}, {em.buf(b)}, {n}, {beta}, {out}, {n});")
        return
    m, batch = sa[-2], _size(sa[:-2])
    em.lines.append(f"  for (int64_t b = 0; b < {batch}; ++b) ingot_gemm(0, {m}, {n}, {k}, {em.buf(a)} + b * {m * k}, "
                    f"{k}, {em.buf(b)} + b * {k * n}, {n}, {beta}, {out} + b * {m * n}, {n});")


def _emit_add(em: _RegionEmitter, call: Call, out: str) -> None:
    main, other, kind = _add_operands(call)
    size = _size(_shape(call))
    index = {"same": "i", "scalar": "0", "bias": f"i % {_shape(call)[-1]}"}[kind]
    em.lines.append(f"  for (int64_t i = 0; i < {size}; ++i) {out}[i] = {em.buf(main)}[i] + {em.buf(other)}[{index}];")


def _emit_relu(em: _RegionEmitter, call: Call, out: str) -> None:
    x = em.buf(call.args[0])
    em.lines.append(f"  for (int64_t i = 0; i < {_size(_shape(call))}; ++i) "
                    f"{out}[i] = {x}[i] > 0.0f ? {x}[i] : 0.0f;")


_EMIT = {"linear": _emit_linear, "matmul": _emit_matmul, "add": _emit_add, "relu": _emit_relu}


def region_source(func: Function) -> str:
    """The C source of a region function (its constants lifted to parameters).

    Example:
        >>> from ingot import graph as G
        >>> x = G.Var("x", G.TensorStructInfo((2, 8), "float32"))
        >>> w = G.Var("w", G.TensorStructInfo((4, 8), "float32"))
        >>> f = G.Function([x, w], G.SeqExpr([], x), attrs={"global_symbol": "f"})
        >>> y = G.Var("y", G.TensorStructInfo((2, 4), "float32"))
        >>> f = G.Function([x, w], G.SeqExpr([G.BindingBlock([G.VarBinding(y, G.op.linear(x, w))])], y),
        ...                attrs={"global_symbol": "cblas_main_0"})
        >>> "ingot_gemm(1, 2, 4, 8" in region_source(f)
        True
    """
    symbol = str(func.attrs.get("global_symbol", "cblas_region"))
    return _RegionEmitter(func, symbol).emit()[0]


# ------------------------------------------------------------------ runtime module

class CblasModule(RuntimeModule):
    """One offloaded region: its C source compiled into a small library that calls the host's sgemm.

    ``run(*inputs, *outputs)`` takes C-contiguous float32 arrays (the region's parameters, then its
    outputs). Saved as JSON bytes with the source and the compiled library; loading uses the
    library (no compiler needed), or recompiles the source when the library does not load here.

    Example:
        >>> m = CblasModule.load_from_bytes(CblasModule("f", region_source_example(), 2, 1).save_to_bytes())
        >>> a = np.ones((2, 8), "float32"); w = np.ones((4, 8), "float32"); out = np.empty((2, 4), "float32")
        >>> m.run(a, w, out); float(out[0, 0])
        8.0
    """

    backend = "cblas"

    def __init__(self, symbol: str, source: str, num_inputs: int, num_outputs: int, library: "bytes | None" = None):
        self.symbol, self.source = symbol, source
        self.num_inputs, self.num_outputs = num_inputs, num_outputs
        blas = find_blas()  # first: a host without BLAS fails here, naming what to install
        self.path = self._library_path(library)
        self._lib = ctypes.CDLL(self.path)
        self._lib.ingot_cblas_init.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int]
        handle = ctypes.CDLL(blas.path)

        def address(symbol: str) -> "int | None":
            return ctypes.cast(getattr(handle, symbol), ctypes.c_void_p).value if hasattr(handle, symbol) else None

        self._lib.ingot_cblas_init(address(blas.sgemm_symbol), address(blas.sgemm_symbol.replace("sgemm", "sgemv")),
                                   address("openblas_set_num_threads_local"), int(blas.ilp64))
        self._fn = getattr(self._lib, c_symbol(symbol))
        self._fn.argtypes = [ctypes.c_void_p]
        self._fn.restype = ctypes.c_int32
        self._argv = ctypes.c_void_p * (num_inputs + num_outputs)

    def _library_path(self, library: "bytes | None") -> str:
        from ingot.codegen.toolchain import CompileOptions, cache_dir, compile_shared_library, write_atomic

        if library is not None:
            path = cache_dir() / "byoc" / f"cblas_{hashlib.sha256(library).hexdigest()[:24]}.so"
            if not path.exists():
                path.parent.mkdir(parents=True, exist_ok=True)
                write_atomic(path, library)
            try:
                ctypes.CDLL(str(path))
                return str(path)
            except OSError:
                pass  # built for another host: recompile the source below
        return compile_shared_library(self.source, CompileOptions(openmp=False))

    def c_entry(self) -> int:
        """Address of the region's C function ``int32_t f(void **args)``: the model's AOT entry
        calls it directly."""
        return ctypes.cast(self._fn, ctypes.c_void_p).value

    def run(self, *args: Any) -> None:
        if len(args) != self.num_inputs + self.num_outputs:
            raise IRError(f"{self.symbol}: takes {self.num_inputs} inputs and {self.num_outputs} outputs, "
                          f"got {len(args)} arrays")
        for k, a in enumerate(args):
            if not isinstance(a, np.ndarray) or a.dtype != np.float32 or not a.flags.c_contiguous:
                raise IRError(f"{self.symbol}: argument {k} must be a C-contiguous float32 numpy array, "
                              f"got {getattr(a, 'dtype', type(a).__name__)}")
        rc = self._fn(self._argv(*[a.ctypes.data for a in args]))
        if rc != 0:
            raise IRError(f"{self.symbol}: the cblas region failed (code {rc}: -1 BLAS not initialized, "
                          f"-2 out of memory)")

    def save_to_bytes(self) -> bytes:
        with open(self.path, "rb") as fh:
            library = fh.read()
        return json.dumps({"version": 1, "symbol": self.symbol, "source": self.source, "num_inputs": self.num_inputs,
                           "num_outputs": self.num_outputs,
                           "library": base64.b64encode(library).decode()}).encode()

    @classmethod
    def load_from_bytes(cls, data: bytes) -> "CblasModule":
        d = json.loads(data)
        if d.get("version") != 1:
            raise IRError(f"cblas module format version {d.get('version')!r} is not readable by this Ingot "
                          f"(reads 1); re-export the model")
        library = base64.b64decode(d["library"]) if d.get("library") else None
        return cls(d["symbol"], d["source"], d["num_inputs"], d["num_outputs"], library)

    def __repr__(self) -> str:
        return f"<CblasModule {self.symbol} inputs={self.num_inputs} outputs={self.num_outputs}>"


def region_source_example() -> str:
    """The C of a small region (``linear`` of ``(2, 8)`` by ``(4, 8)``), for examples and tests.

    Example:
        >>> "int32_t f(void **args)" in region_source_example()
        True
    """
    from ingot.graph.expr import BindingBlock, SeqExpr, VarBinding

    x = Var("x", TensorStructInfo((2, 8), "float32"))
    w = Var("w", TensorStructInfo((4, 8), "float32"))
    y = Var("y", TensorStructInfo((2, 4), "float32"))
    from ingot.graph.op import linear

    f = Function([x, w], SeqExpr([BindingBlock([VarBinding(y, linear(x, w))])], y), attrs={"global_symbol": "f"})
    return region_source(f)


class CblasBackend(Backend):
    """Dense / matmul / batch matmul with bias and relu epilogues on the host BLAS's ``sgemm``.

    Example:
        >>> sorted({p.op for p in CblasBackend().patterns()})
        ['add', 'linear', 'matmul', 'relu']
    """

    name = "cblas"

    def patterns(self) -> list:
        gemms = ("linear", "matmul")
        return [
            Pattern("cblas.dense", "linear", _check_linear),
            Pattern("cblas.matmul", "matmul", _check_matmul),
            Pattern("cblas.bias_add", "add", _check_add, after=gemms + ("add", "relu")),
            Pattern("cblas.relu", "relu", _float32_static, after=gemms + ("add",)),
        ]

    def codegen(self, func: Function, target: Any) -> CblasModule:
        from ingot.runtime.threads import num_threads_for_target
        from ingot.target import as_target

        symbol = str(func.attrs["global_symbol"])
        # The BLAS runs the region with the target's threads (-num-cores), like Ingot's kernels.
        threads = num_threads_for_target(as_target(target))
        source, n_in, n_out = _RegionEmitter(func, symbol, threads).emit()
        return CblasModule(symbol, source, n_in, n_out)


register_backend(CblasBackend)
