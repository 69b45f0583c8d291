"""A hand-written C module against the prelude ABI: what the C code generator must emit.

Functions:
  add(A: float32[4, 8], B: float32[4, 8], C: float32[4, 8])   C = A + B (static shape)
  axpy(X: float32[n], Y: float32[n], alpha: float32, Out: float32[n])  Out = alpha*X + Y
  scale_rows(A: float64[m, 16], s: float64[m], Out: float64[m, 16])  (OpenMP parallel)
  fill(Out: int32[n], value: int32)
  fail_at_runtime(X: float32[2])  always returns INGOT_ERR_RUNTIME
"""

from ingot.codegen.prelude import C_PRELUDE, emit_metadata_c, emit_source_c

KERNELS = r"""
/* ---- add: static shape ---- */
INGOT_EXPORT int32_t ingot_add(IngotValue* args, int32_t* type_codes, int32_t num_args,
                               char* err, int32_t err_len) {
  INGOT_CHECK(ingot_check_num_args("add", num_args, 3, err, err_len));
  INGOT_CHECK(ingot_check_tensor("add", "A", args[0], type_codes[0], 2, kDLFloat, 32, 1, err, err_len));
  INGOT_CHECK(ingot_check_device("add", "A", args[0], kDLCPU, err, err_len));
  INGOT_CHECK(ingot_check_dim("add", "A", 0, INGOT_TENSOR(args, 0)->shape[0], 4, err, err_len));
  INGOT_CHECK(ingot_check_dim("add", "A", 1, INGOT_TENSOR(args, 0)->shape[1], 8, err, err_len));
  INGOT_CHECK(ingot_check_tensor("add", "B", args[1], type_codes[1], 2, kDLFloat, 32, 1, err, err_len));
  INGOT_CHECK(ingot_check_dim("add", "B", 0, INGOT_TENSOR(args, 1)->shape[0], 4, err, err_len));
  INGOT_CHECK(ingot_check_dim("add", "B", 1, INGOT_TENSOR(args, 1)->shape[1], 8, err, err_len));
  INGOT_CHECK(ingot_check_tensor("add", "C", args[2], type_codes[2], 2, kDLFloat, 32, 1, err, err_len));
  INGOT_CHECK(ingot_check_dim("add", "C", 0, INGOT_TENSOR(args, 2)->shape[0], 4, err, err_len));
  INGOT_CHECK(ingot_check_dim("add", "C", 1, INGOT_TENSOR(args, 2)->shape[1], 8, err, err_len));
  {
    const float* INGOT_RESTRICT A = (const float*)ingot_tensor_data(INGOT_TENSOR(args, 0));
    const float* INGOT_RESTRICT B = (const float*)ingot_tensor_data(INGOT_TENSOR(args, 1));
    float* INGOT_RESTRICT C = (float*)ingot_tensor_data(INGOT_TENSOR(args, 2));
    for (int64_t i = 0; i < 32; ++i) C[i] = A[i] + B[i];
  }
  return INGOT_OK;
}

/* ---- axpy: symbolic n bound by X, checked on Y and Out ---- */
INGOT_EXPORT int32_t ingot_axpy(IngotValue* args, int32_t* type_codes, int32_t num_args,
                                char* err, int32_t err_len) {
  int64_t n;
  float alpha;
  INGOT_CHECK(ingot_check_num_args("axpy", num_args, 4, err, err_len));
  INGOT_CHECK(ingot_check_tensor("axpy", "X", args[0], type_codes[0], 1, kDLFloat, 32, 1, err, err_len));
  n = INGOT_TENSOR(args, 0)->shape[0];
  INGOT_CHECK(ingot_check_tensor("axpy", "Y", args[1], type_codes[1], 1, kDLFloat, 32, 1, err, err_len));
  INGOT_CHECK(ingot_check_dim_equal("axpy", "Y", 0, INGOT_TENSOR(args, 1)->shape[0], "n", n, err, err_len));
  INGOT_CHECK(ingot_check_scalar("axpy", "alpha", type_codes[2], INGOT_ARG_FLOAT, err, err_len));
  alpha = (float)ingot_arg_float(args[2], type_codes[2]);
  INGOT_CHECK(ingot_check_tensor("axpy", "Out", args[3], type_codes[3], 1, kDLFloat, 32, 1, err, err_len));
  INGOT_CHECK(ingot_check_dim_equal("axpy", "Out", 0, INGOT_TENSOR(args, 3)->shape[0], "n", n, err, err_len));
  {
    const float* INGOT_RESTRICT X = (const float*)ingot_tensor_data(INGOT_TENSOR(args, 0));
    const float* INGOT_RESTRICT Y = (const float*)ingot_tensor_data(INGOT_TENSOR(args, 1));
    float* INGOT_RESTRICT Out = (float*)ingot_tensor_data(INGOT_TENSOR(args, 3));
    #pragma omp simd
    for (int64_t i = 0; i < n; ++i) Out[i] = alpha * X[i] + Y[i];
  }
  return INGOT_OK;
}

/* ---- scale_rows: mixed static/symbolic dims, OpenMP parallel ---- */
INGOT_EXPORT int32_t ingot_scale_rows(IngotValue* args, int32_t* type_codes, int32_t num_args,
                                      char* err, int32_t err_len) {
  int64_t m;
  INGOT_CHECK(ingot_check_num_args("scale_rows", num_args, 3, err, err_len));
  INGOT_CHECK(ingot_check_tensor("scale_rows", "A", args[0], type_codes[0], 2, kDLFloat, 64, 1, err, err_len));
  m = INGOT_TENSOR(args, 0)->shape[0];
  INGOT_CHECK(ingot_check_dim("scale_rows", "A", 1, INGOT_TENSOR(args, 0)->shape[1], 16, err, err_len));
  INGOT_CHECK(ingot_check_tensor("scale_rows", "s", args[1], type_codes[1], 1, kDLFloat, 64, 1, err, err_len));
  INGOT_CHECK(ingot_check_dim_equal("scale_rows", "s", 0, INGOT_TENSOR(args, 1)->shape[0], "m", m, err, err_len));
  INGOT_CHECK(ingot_check_tensor("scale_rows", "Out", args[2], type_codes[2], 2, kDLFloat, 64, 1, err, err_len));
  INGOT_CHECK(ingot_check_dim_equal("scale_rows", "Out", 0, INGOT_TENSOR(args, 2)->shape[0], "m", m, err, err_len));
  INGOT_CHECK(ingot_check_dim("scale_rows", "Out", 1, INGOT_TENSOR(args, 2)->shape[1], 16, err, err_len));
  {
    const double* A = (const double*)ingot_tensor_data(INGOT_TENSOR(args, 0));
    const double* s = (const double*)ingot_tensor_data(INGOT_TENSOR(args, 1));
    double* Out = (double*)ingot_tensor_data(INGOT_TENSOR(args, 2));
    #pragma omp parallel for schedule(static)
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < 16; ++j) Out[i * 16 + j] = A[i * 16 + j] * s[i];
  }
  return INGOT_OK;
}

/* ---- fill: int scalar ---- */
INGOT_EXPORT int32_t ingot_fill(IngotValue* args, int32_t* type_codes, int32_t num_args,
                                char* err, int32_t err_len) {
  int64_t n;
  int32_t value;
  INGOT_CHECK(ingot_check_num_args("fill", num_args, 2, err, err_len));
  INGOT_CHECK(ingot_check_tensor("fill", "Out", args[0], type_codes[0], 1, kDLInt, 32, 1, err, err_len));
  n = INGOT_TENSOR(args, 0)->shape[0];
  INGOT_CHECK(ingot_check_scalar("fill", "value", type_codes[1], INGOT_ARG_INT, err, err_len));
  INGOT_CHECK(ingot_check_int_range("fill", "value", args[1].v_int64, INT32_MIN, INT32_MAX, "int32", err, err_len));
  value = (int32_t)args[1].v_int64;
  {
    int32_t* Out = (int32_t*)ingot_tensor_data(INGOT_TENSOR(args, 0));
    for (int64_t i = 0; i < n; ++i) Out[i] = value;
  }
  return INGOT_OK;
}

/* ---- fail_at_runtime ---- */
INGOT_EXPORT int32_t ingot_fail_at_runtime(IngotValue* args, int32_t* type_codes, int32_t num_args,
                                           char* err, int32_t err_len) {
  INGOT_CHECK(ingot_check_num_args("fail_at_runtime", num_args, 1, err, err_len));
  INGOT_CHECK(ingot_check_tensor("fail_at_runtime", "X", args[0], type_codes[0], 1, kDLFloat, 32, 1, err, err_len));
  return ingot_set_error(err, err_len, INGOT_ERR_RUNTIME,
                         "fail_at_runtime: could not allocate %d bytes of workspace", 1 << 20);
}
"""


def _tensor(name, dtype, shape, output=False):
    p = {"name": name, "kind": "tensor", "dtype": dtype, "shape": list(shape)}
    if output:
        p["output"] = True
    return p


METADATA = {
    "version": 1,
    "target": "llvm -mcpu=native",
    "functions": {
        "add": {"symbol": "ingot_add", "params": [
            _tensor("A", "float32", [4, 8]), _tensor("B", "float32", [4, 8]),
            _tensor("C", "float32", [4, 8], output=True)]},
        "axpy": {"symbol": "ingot_axpy", "params": [
            _tensor("X", "float32", ["n"]), _tensor("Y", "float32", ["n"]),
            {"name": "alpha", "kind": "scalar", "dtype": "float32"},
            _tensor("Out", "float32", ["n"], output=True)]},
        "scale_rows": {"symbol": "ingot_scale_rows", "params": [
            _tensor("A", "float64", ["m", 16]), _tensor("s", "float64", ["m"]),
            _tensor("Out", "float64", ["m", 16])]},
        "fill": {"symbol": "ingot_fill", "params": [
            _tensor("Out", "int32", ["n"]),
            {"name": "value", "kind": "scalar", "dtype": "int32"}]},
        "fail_at_runtime": {"symbol": "ingot_fail_at_runtime", "params": [
            _tensor("X", "float32", [2])]},
    },
}


def module_source(include_source: bool = True, metadata: dict | None = None) -> str:
    """The full C source of the test module (prelude + kernels + metadata [+ source])."""
    md = dict(metadata or METADATA)
    md["source_included"] = include_source
    body = C_PRELUDE + KERNELS + "\n" + emit_metadata_c(md)
    if include_source:
        body += emit_source_c(C_PRELUDE + KERNELS)
    return body
