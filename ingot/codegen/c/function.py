"""One lowered PrimFunc as C: a static kernel plus its exported packed entry (the ABI wrapper).

Note: the kernel takes typed arguments (``float* INGOT_RESTRICT A, int32_t n, char* err,
int32_t err_len``) so the C compiler sees plain pointers; the entry
``int32_t ingot_<name>(IngotValue* args, int32_t* type_codes, int32_t num_args, char* err,
int32_t err_len)`` checks every argument with the prelude's checkers, binds symbolic
dimensions from the tensors' shapes, and calls the kernel.

Binding order (as TVM's ``ArgBinder``): scalar parameters first (they may name a dimension),
then the tensors in parameter order; the first occurrence of a dimension variable binds it, later
ones are checked against it (``ingot_check_dim_equal``), static dimensions are checked with
``ingot_check_dim``, and dimensions that are expressions (``n * 2``) are checked once all
variables are bound.

Example:
    >>> from ingot.ir import Var, decl_buffer
    >>> from ingot.tir import PrimFunc, For, ForKind, BufferStore
    >>> n = Var("n")
    >>> A = decl_buffer((n,), "float32", "A")
    >>> i = Var("i")
    >>> f = PrimFunc([A], For(i, 0, n, ForKind.SERIAL, BufferStore(A, A[i] + 1.0, [i])))
    >>> from ingot.codegen.c.types import CHelpers
    >>> text, md = emit_function(f, "main", "ingot_main", "ingot_kernel_main", CHelpers())
    >>> md["params"][0]["shape"]
    ['n']
"""
from __future__ import annotations

from typing import Any

from ingot.codegen.prelude import c_string_literal
from ingot.codegen.sanitize import NameTable
from ingot.ir.buffer import Buffer
from ingot.ir.dtype import DataType
from ingot.ir.expr import Var, as_const_int
from ingot.ir.functor import Visitor
from ingot.runtime.dtype import dtype_to_dlpack
from ingot.tir.function import PrimFunc

from .intrinsics import extern_names
from .printer import CPrinter, CodegenError, CodeWriter
from .types import CHelpers, elem_value_type, storage_type

__all__ = ["emit_function", "WRAPPER_LOCALS"]

#: Identifiers of the entry's own parameters; user names are kept away from them.
WRAPPER_LOCALS = ("args", "type_codes", "num_args", "err", "err_len")

_INT_RANGES = {
    8: ("INT8_MIN", "INT8_MAX"), 16: ("INT16_MIN", "INT16_MAX"), 32: ("INT32_MIN", "INT32_MAX"),
}
_UINT_RANGES = {8: "UINT8_MAX", 16: "UINT16_MAX", 32: "UINT32_MAX"}


class _ExternCollector(Visitor):
    """Names of extern C functions called in a body (reserved so locals cannot shadow them)."""

    def __init__(self) -> None:
        self.names: set[str] = set()

    def visit_Call(self, node) -> None:
        self.names.update(extern_names(node))
        self.generic_visit(node)


def _scalar_arg_code(dtype: DataType) -> str:
    return "INGOT_ARG_FLOAT" if dtype.is_float else "INGOT_ARG_INT"


def emit_function(func: PrimFunc, name: str, symbol: str, kernel_symbol: str,
                  helpers: CHelpers) -> "tuple[str, dict[str, Any]]":
    """C text (kernel + entry) and the metadata entry of the lowered ``func``.

    ``name`` is the function's name in the module (used in messages and metadata), ``symbol``
    and ``kernel_symbol`` the already unique C identifiers of the entry and the kernel.
    """
    collector = _ExternCollector()
    collector.visit(func.body)
    names = NameTable(reserved=(*WRAPPER_LOCALS, *collector.names))
    printer = CPrinter(helpers, names, name)
    noalias = bool(func.attrs.get("tir.noalias", False))
    printer.noalias = noalias
    printer.outlined = []  # parallel loop bodies as restrict-pointer functions (printer note)
    printer.outline_prefix = kernel_symbol

    # Step 1. Name the parameters and the symbolic dimensions (kernel argument order).
    kernel_params: list[str] = []
    scalar_params = [p for p in func.params if isinstance(p, Var)]
    for p in func.params:
        if isinstance(p, Buffer):
            ptr = printer.bind_buffer(p)
            qual = " INGOT_RESTRICT" if noalias else ""
            kernel_params.append(f"{storage_type(p.dtype)}*{qual} {ptr}")
    for p in scalar_params:
        kernel_params.append(f"{printer.value_type(p.dtype)} {printer.bind_var(p)}")
    dim_vars: list[Var] = []
    for p in func.params:
        if isinstance(p, Buffer):
            for dim in p.shape:
                if isinstance(dim, Var) and printer.names.lookup(dim) is None:
                    printer.bind_var(dim, nonneg=True)
                    dim_vars.append(dim)
                    kernel_params.append(f"{printer.value_type(dim.dtype)} {printer.names.lookup(dim)}")

    # Step 2. The kernel body.
    printer.writer.indent = 1
    printer.print_stmt(func.body)
    body = printer.writer.text()
    kw = CodeWriter()
    for text in printer.outlined:
        kw.lines.append(text.rstrip("\n"))
    kw.line(f"static int32_t {kernel_symbol}({', '.join([*kernel_params, 'char* err', 'int32_t err_len'])}) {{")
    if printer.failures:
        kw.line("  int32_t ingot_fail = 0;")
    kw.lines.append(body.rstrip("\n")) if body else None
    for code, message in enumerate(printer.failures, start=1):
        kw.line(f"  if (ingot_fail == {code}) return ingot_set_error(err, err_len, INGOT_ERR_RUNTIME, "
                f"\"%s\", {c_string_literal(message)});")
    kw.line("  (void)err;")
    kw.line("  (void)err_len;")
    kw.line("  return INGOT_OK;")
    kw.line("}")

    # Step 3. The packed entry: check, bind, call.
    w = CodeWriter()
    w.line(f"INGOT_EXPORT int32_t {symbol}(IngotValue* args, int32_t* type_codes, int32_t num_args, "
           "char* err, int32_t err_len) {")
    w.indent = 1
    w.line(f"static const char ingot_fn[] = {c_string_literal(name)};")
    w.line(f"INGOT_CHECK(ingot_check_num_args(ingot_fn, num_args, {len(func.params)}, err, err_len));")
    index = {id(p): k for k, p in enumerate(func.params)}
    md_params: list[dict[str, Any]] = [{} for _ in func.params]
    for p in scalar_params:
        md_params[index[id(p)]] = _emit_scalar(w, printer, p, index[id(p)])
    deferred: list[str] = []
    bound: set[int] = {id(p) for p in scalar_params}
    call_args: list[str] = []
    for p in func.params:
        if isinstance(p, Buffer):
            md_params[index[id(p)]] = _emit_tensor(w, printer, p, index[id(p)], bound, deferred)
            call_args.append(f"({storage_type(p.dtype)}*)ingot_tensor_data(ingot_t{index[id(p)]})")
    for line in deferred:
        w.line(line)
    call_args += [printer.names.lookup(p) for p in scalar_params]
    call_args += [printer.names.lookup(v) for v in dim_vars]
    w.line(f"return {kernel_symbol}({', '.join([*call_args, 'err', 'err_len'])});")
    w.indent = 0
    w.line("}")
    return kw.text() + "\n" + w.text(), {"symbol": symbol, "params": md_params}


def _emit_scalar(w: CodeWriter, printer: CPrinter, p: Var, k: int) -> "dict[str, Any]":
    """Unpack scalar parameter ``p`` (argument ``k``) with type and range checks."""
    cname = printer.names.lookup(p)
    pname = c_string_literal(p.name)
    dtype = p.dtype
    if dtype.is_handle:
        w.line(f"void* {cname} = args[{k}].v_handle;")
        return {"name": p.name, "kind": "handle"}
    if dtype.lanes > 1:
        raise CodegenError(f"scalar parameter {p.name!r} has vector dtype {dtype}; parameters must be scalars")
    w.line(f"INGOT_CHECK(ingot_check_scalar(ingot_fn, {pname}, type_codes[{k}], {_scalar_arg_code(dtype)}, "
           "err, err_len));")
    ctype = elem_value_type(dtype)
    if dtype.is_float:
        value = f"ingot_arg_float(args[{k}], type_codes[{k}])"
        if dtype.code == "bfloat":
            value = f"{printer.helpers.require('ingot_bf16_round')}((float){value})"
        w.line(f"{ctype} {cname} = ({ctype}){value};")
    elif dtype.is_bool:
        w.line(f"{ctype} {cname} = args[{k}].v_int64 != 0;")
    else:
        lo, hi = (_INT_RANGES.get(dtype.bits) if dtype.is_int else ("0", _UINT_RANGES.get(dtype.bits))) or (None, None)
        if hi is not None:
            w.line(f"INGOT_CHECK(ingot_check_int_range(ingot_fn, {pname}, args[{k}].v_int64, {lo}, {hi}, "
                   f"{c_string_literal(str(dtype))}, err, err_len));")
        w.line(f"{ctype} {cname} = ({ctype})args[{k}].v_int64;")
    return {"name": p.name, "kind": "scalar", "dtype": str(dtype)}


def _emit_tensor(w: CodeWriter, printer: CPrinter, p: Buffer, k: int, bound: "set[int]",
                 deferred: "list[str]") -> "dict[str, Any]":
    """Check tensor parameter ``p`` (argument ``k``) and bind/check its dimensions."""
    pname = c_string_literal(p.name)
    code, bits, lanes = dtype_to_dlpack(str(p.dtype))
    t = f"ingot_t{k}"
    w.line(f"INGOT_CHECK(ingot_check_tensor(ingot_fn, {pname}, args[{k}], type_codes[{k}], {p.ndim}, "
           f"{code}, {bits}, {lanes}, err, err_len));")
    w.line(f"INGOT_CHECK(ingot_check_device(ingot_fn, {pname}, args[{k}], kDLCPU, err, err_len));")
    w.line(f"DLTensor* {t} = INGOT_TENSOR(args, {k});")
    shape: list[Any] = []
    for d, dim in enumerate(p.shape):
        actual = f"{t}->shape[{d}]"
        static = as_const_int(dim)
        if static is not None:
            w.line(f"INGOT_CHECK(ingot_check_dim(ingot_fn, {pname}, {d}, {actual}, INT64_C({static}), err, err_len));")
            shape.append(static)
        elif isinstance(dim, Var):
            cname = printer.names.lookup(dim)
            if id(dim) in bound:
                w.line(f"INGOT_CHECK(ingot_check_dim_equal(ingot_fn, {pname}, {d}, {actual}, "
                       f"{c_string_literal(cname)}, (int64_t){cname}, err, err_len));")
            else:
                bound.add(id(dim))
                ctype = elem_value_type(dim.dtype)
                if dim.dtype.bits < 64:
                    hi = _INT_RANGES.get(dim.dtype.bits, (None, "INT32_MAX"))[1]
                    w.line(f"INGOT_CHECK(ingot_check_int_range(ingot_fn, {pname}, {actual}, 0, {hi}, "
                           f"{c_string_literal(str(dim.dtype))}, err, err_len));")
                w.line(f"{ctype} {cname} = ({ctype}){actual};")
            shape.append(cname)
        else:
            try:
                expected = printer.expr(dim)
            except CodegenError:
                shape.append(None)  # uses a variable no argument binds: checked by nobody
                continue
            deferred.append(f"INGOT_CHECK(ingot_check_dim(ingot_fn, {pname}, {d}, {actual}, "
                            f"(int64_t)({expected}), err, err_len));")
            shape.append(None)
    return {"name": p.name, "kind": "tensor", "dtype": str(p.dtype), "shape": shape}
