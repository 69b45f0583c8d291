"""AOT: a static execution plan as one exported C function that runs the whole graph.

Note (DESIGN.md "Executor overhead"): small models are dominated by per-call cost, so a plan
whose shapes are all static and whose steps are all ``call_tir`` becomes one packed C entry
``ingot_graph_<name>`` in the same translation unit as the kernels:

    args = [weights (handle), workspace (handle), inputs... (DLTensor), outputs... (DLTensor)]

It checks the inputs and outputs (ndim, dtype, shape, alignment, device) with the prelude's
checkers, builds a DLTensor on the stack for every weight (``weights + offset``, the offsets of
the weights blob) and every intermediate (``workspace + offset``, the static memory plan), and
calls the kernels' packed entries in sequence; a kernel's error code and message are returned
as they are. Function outputs are written in place by the kernel that produces them (copied when
the output is an input, a weight, or a value returned twice). Weights and the workspace are
passed once per call as two pointers, so the Python side makes exactly one foreign call per
inference; the weights stay in a binary blob (never in the C source).

A ``call_tir`` with constant ``tir_vars`` passes them as int arguments after the outputs;
plans with symbolic ``tir_vars`` are refused by `ingot.graph.plan.is_aot_compatible` (as are
plans with symbolic shapes). Plans with symbolic shapes, packed calls or calls of other graph functions have no AOT entry;
they run on the Python plan interpreter (`ingot.graph.executor`).

Example:
    >>> plan = {"name": "main", "inputs": [{"name": "x", "shape": [4], "dtype": "float32"}], "steps": [],
    ...         "values": [], "output": ["input", 0], "memory": {"offsets": {}, "workspace_bytes": 0}}
    >>> "memcpy" in emit_aot_function(plan, "ingot_graph_main", {}, [])
    True
"""
from __future__ import annotations

from typing import Any

from ingot.codegen.prelude import c_string_literal
from ingot.runtime.dtype import dtype_to_dlpack

from .plan import nbytes_of


def _flatten_output(ref: Any) -> list:
    return [r for sub in ref[1] for r in _flatten_output(sub)] if ref[0] == "tuple" else [ref]


class _Writer:
    def __init__(self) -> None:
        self.lines: list[str] = []
        self.shapes: dict[tuple, str] = {}

    def line(self, text: str) -> None:
        self.lines.append("  " + text)

    def shape(self, dims: list) -> str:
        key = tuple(dims)
        name = self.shapes.get(key)
        if name is None:
            name = self.shapes[key] = f"ingot_shape{len(self.shapes)}"
        return name


def _dltensor(w: _Writer, var: str, data: str, desc: dict) -> None:
    code, bits, lanes = dtype_to_dlpack(desc["dtype"])
    ndim = len(desc["shape"])
    shape = w.shape(desc["shape"]) if ndim else "NULL"
    w.line(f"DLTensor {var} = {{(void*)({data}), {{kDLCPU, 0}}, {ndim}, {{{code}, {bits}, {lanes}}}, "
           f"{shape}, NULL, 0}};")


#: An AOT entry of more C than this many characters (an unrolled recurrent layer: thousands of kernel
#: calls, each with its address-taken DLTensors) is compiled by gcc at -O0: gcc -O3's alias walking and
#: dead-store elimination grow superlinearly with the address-taken locals of one frame (a 2-layer
#: bidirectional LSTM at T=32: 194 KB, 10.7 s of gcc at -O3, 1.0 s at -O0), while the entry only
#: stores pointers and calls kernels. ResNet-50's entry is 42 KB: ordinary models are unaffected.
AOT_O0_CHARS = 128_000

_GCC_O0 = ('#if defined(__GNUC__) && !defined(__clang__)\n__attribute__((optimize("O0")))\n#endif\n')


def emit_aot_function(plan: dict, symbol: str, kernel_symbols: dict, constants: list) -> str:
    """C text of the AOT entry ``symbol`` running ``plan``.

    ``kernel_symbols`` maps each kernel name to its packed entry's C symbol; ``constants`` are the
    weights blob layout (``{"shape", "dtype", "offset", "nbytes"}`` per constant).
    """
    w = _Writer()
    inputs = plan["inputs"]
    outputs = _flatten_output(plan["output"])
    n_in, n_out = len(inputs), len(outputs)
    memory = plan["memory"]
    out_descs = [_ref_desc(plan, r, constants) for r in outputs]

    # Step 1: check the arguments (the kernels check again what they receive; these checks give
    # messages in terms of the graph function's own parameters).
    w.line(f"static const char ingot_fn[] = {c_string_literal(plan['name'])};")
    w.line(f"INGOT_CHECK(ingot_check_num_args(ingot_fn, num_args, {2 + n_in + n_out}, err, err_len));")
    w.line("char* ingot_w = (char*)args[0].v_handle;")
    w.line("char* ingot_ws = (char*)args[1].v_handle;")
    if constants:
        w.line("if (INGOT_UNLIKELY(ingot_w == NULL)) return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT, "
               "\"%s: the weights pointer is NULL\", ingot_fn);")
    if memory["workspace_bytes"]:
        w.line("if (INGOT_UNLIKELY(ingot_ws == NULL)) return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT, "
               "\"%s: the workspace pointer is NULL\", ingot_fn);")
    params = [(inp["name"], inp) for inp in inputs] + [(f"output{k}", d) for k, d in enumerate(out_descs)]
    for k, (pname, desc) in enumerate(params, start=2):
        code, bits, lanes = dtype_to_dlpack(desc["dtype"])
        lit = c_string_literal(pname)
        w.line(f"INGOT_CHECK(ingot_check_tensor(ingot_fn, {lit}, args[{k}], type_codes[{k}], {len(desc['shape'])}, "
               f"{code}, {bits}, {lanes}, err, err_len));")
        w.line(f"INGOT_CHECK(ingot_check_device(ingot_fn, {lit}, args[{k}], kDLCPU, err, err_len));")
        for d, dim in enumerate(desc["shape"]):
            w.line(f"INGOT_CHECK(ingot_check_dim(ingot_fn, {lit}, {d}, INGOT_TENSOR(args, {k})->shape[{d}], "
                   f"INT64_C({dim}), err, err_len));")

    # Step 2: where each tensor lives. Outputs produced by a step are written in place.
    direct: dict[int, int] = {}
    for k, ref in enumerate(outputs):
        if ref[0] == "value" and ref[1] not in direct:
            direct[ref[1]] = 2 + n_in + k
    used_consts = sorted({a[1] for s in plan["steps"] for a in s["args"] if a[0] == "const"}
                         | {r[1] for r in outputs if r[0] == "const"})
    for c in used_consts:
        _dltensor(w, f"ingot_c{c}", f"ingot_w + {constants[c]['offset']}", constants[c])
    for v, desc in enumerate(plan["values"]):
        if v in direct:
            continue
        _dltensor(w, f"ingot_v{v}", f"ingot_ws + {memory['offsets'][str(v)]}", desc)

    def tensor_ptr(ref: Any) -> str:
        kind, index = ref[0], ref[1]
        if kind == "input":
            return f"INGOT_TENSOR(args, {2 + index})"
        if kind == "const":
            return f"&ingot_c{index}"
        return f"INGOT_TENSOR(args, {direct[index]})" if index in direct else f"&ingot_v{index}"

    # Step 3: the kernels, in order.
    for step in plan["steps"]:
        refs = list(step["args"]) + [["value", v] for v in step["outs"]]
        if step.get("extern") is not None:
            _extern_call(w, step, [tensor_ptr(r) for r in refs])
            continue
        scalars = list(step.get("scalars", ()))
        if not all(isinstance(d, int) for d in scalars):
            raise ValueError(f"AOT entry {symbol}: kernel {step['func']} takes symbolic scalar arguments "
                             f"{scalars}; such plans run on the Python executor (is_aot_compatible is False)")
        n = len(refs) + len(scalars)
        codes = ["INGOT_ARG_TENSOR"] * len(refs) + ["INGOT_ARG_INT"] * len(scalars)
        w.line("{")
        w.line(f"  IngotValue a[{n}];")
        w.line(f"  int32_t c[{n}] = {{{', '.join(codes)}}};")
        for j, r in enumerate(refs):
            w.line(f"  a[{j}].v_handle = {tensor_ptr(r)};")
        for j, value in enumerate(scalars, start=len(refs)):
            w.line(f"  a[{j}].v_int64 = INT64_C({value});")
        w.line(f"  INGOT_CHECK({kernel_symbols[step['func']]}(a, c, {n}, err, err_len));")
        w.line("}")

    # Step 4: outputs not written by a kernel are copied.
    for k, ref in enumerate(outputs):
        dst = 2 + n_in + k
        if ref[0] == "value" and direct.get(ref[1]) == dst:
            continue
        src = tensor_ptr(ref)
        w.line(f"memcpy(ingot_tensor_data(INGOT_TENSOR(args, {dst})), ingot_tensor_data({src}), "
               f"{nbytes_of(out_descs[k])});")
    w.line("(void)ingot_w; (void)ingot_ws;")
    w.line("return INGOT_OK;")

    shapes = [f"static int64_t {name}[] = {{{', '.join(f'INT64_C({d})' for d in dims)}}};"
              for dims, name in w.shapes.items()]
    head = (f"INGOT_EXPORT int32_t {symbol}(IngotValue* args, int32_t* type_codes, int32_t num_args, char* err, "
            f"int32_t err_len) {{")
    if sum(len(line) for line in w.lines) > AOT_O0_CHARS:
        head = _GCC_O0 + head
    return "\n".join(shapes + [head] + w.lines + ["}"]) + "\n"


#: The table of external (BYOC) region entries in a library with AOT entries that call them:
#: filled after loading (`ingot.graph.executor.bind_external_entries`) with each region's
#: ``int32_t f(void **args)``.
EXTERN_TABLE = "ingot_graph_externs"


def _extern_call(w: _Writer, step: dict, tensors: list) -> None:
    """Call external region ``step["func"]`` through slot ``step["extern"]`` of `EXTERN_TABLE`
    with the data pointers of its inputs then outputs."""
    lit = c_string_literal(step["func"])
    w.line("{")
    w.line(f"  void* a[{len(tensors)}];")
    for j, t in enumerate(tensors):
        w.line(f"  a[{j}] = ingot_tensor_data({t});")
    w.line(f"  int32_t (*f)(void**) = (int32_t (*)(void**)){EXTERN_TABLE}[{step['extern']}];")
    w.line(f"  if (INGOT_UNLIKELY(f == NULL)) return ingot_set_error(err, err_len, INGOT_ERR_RUNTIME, \"%s: external "
           f"region %s is not bound; load the model with ingot.graph.load_executable\", ingot_fn, {lit});")
    w.line("  int32_t rc = f(a);")
    w.line(f"  if (INGOT_UNLIKELY(rc != 0)) return ingot_set_error(err, err_len, INGOT_ERR_RUNTIME, \"%s: external "
           f"region %s failed (code %d)\", ingot_fn, {lit}, (int)rc);")
    w.line("}")


def extern_table_c(keys: "list[str]") -> str:
    """The C declaration of `EXTERN_TABLE` with one slot per external region; ``keys`` (one per
    slot: region symbol and a hash of its module) go into the source so that a library is shared
    through the compile cache only by models whose regions are the same.

    Example:
        >>> extern_table_c(["cblas_main_0 ab12"]).splitlines()[-1]
        'INGOT_EXPORT void* ingot_graph_externs[1] = {0};'
    """
    lines = [f"/* external region slot {k}: {key} */" for k, key in enumerate(keys)]
    return "\n".join(lines + [f"INGOT_EXPORT void* {EXTERN_TABLE}[{max(1, len(keys))}] = {{0}};"])


def _ref_desc(plan: dict, ref: Any, constants: list) -> dict:
    kind, index = ref[0], ref[1]
    if kind == "input":
        return plan["inputs"][index]
    if kind == "const":
        return constants[index]
    return plan["values"][index]


def aot_metadata(plan: dict, symbol: str, constants: list) -> dict:
    """The module-metadata entry of the AOT function (so ``lib[name]`` checks its arguments).

    Example:
        >>> plan = {"name": "main", "inputs": [{"name": "x", "shape": [4], "dtype": "float32"}],
        ...         "values": [], "output": ["input", 0]}
        >>> [p["name"] for p in aot_metadata(plan, "ingot_graph_main", [])["params"]]
        ['weights', 'workspace', 'x', 'output0']
    """
    params = [{"name": "weights", "kind": "handle"}, {"name": "workspace", "kind": "handle"}]
    for inp in plan["inputs"]:
        params.append({"name": inp["name"], "kind": "tensor", "dtype": inp["dtype"], "shape": list(inp["shape"])})
    for k, ref in enumerate(_flatten_output(plan["output"])):
        desc = _ref_desc(plan, ref, constants)
        params.append({"name": f"output{k}", "kind": "tensor", "dtype": desc["dtype"], "shape": list(desc["shape"]),
                       "output": True})
    return {"symbol": symbol, "params": params}


def output_descs(plan: dict, constants: list) -> list:
    """Shape/dtype of each flattened output of a static plan."""
    return [_ref_desc(plan, r, constants) for r in _flatten_output(plan["output"])]
