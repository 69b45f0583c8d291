"""The C prelude every generated Ingot module starts with, and C literal helpers.

Note: the prelude *is* the ABI between generated code and the runtime. It defines

* the DLPack structs (``DLDevice``, ``DLDataType``, ``DLTensor``; exact DLPack layout),
* ``IngotValue`` (an 8-byte union) and the type codes ``INGOT_ARG_*``,
* the packed calling convention ``int32_t SYMBOL(IngotValue* args, int32_t* type_codes,
  int32_t num_args, char* err, int32_t err_len)`` (typedef ``IngotPackedFunc``), returning
  ``INGOT_OK`` (0) or ``INGOT_ERR_ARGUMENT`` / ``INGOT_ERR_RUNTIME`` after writing a message,
* ``static inline`` argument checkers (``ingot_check_num_args``, ``ingot_check_tensor``,
  ``ingot_check_dim``, ``ingot_check_dim_equal``, ``ingot_check_scalar``, ...) that format
  messages with ``snprintf`` into the caller's buffer (thread-safe, no globals),
* exported helpers every module carries: ``ingot_time_function`` (TVM ``time_evaluator``
  semantics, CLOCK_MONOTONIC), ``ingot_time_function_flushed`` (the same with a cache flush of
  every argument but the first before each call, TVM's ``cache_flush_cpu_non_first_arg``; since
  ABI version 2), ``ingot_set_num_threads``, ``ingot_get_num_threads``,
  ``ingot_set_adaptive_team`` and ``ingot_pool_counters`` (the thread pool's adaptive team,
  see the parallel-loop note in the C text), ``ingot_abi_version``. They are weak symbols so
  that several Ingot translation units can be linked into one library.

A generated module is::

    C_PRELUDE
    <kernels>
    INGOT_EXPORT int32_t ingot_main(IngotValue* args, int32_t* type_codes, int32_t num_args,
                                    char* err, int32_t err_len) { ...checks...; ...; return 0; }
    emit_metadata_c({...})            # const char ingot_module_metadata[]
    emit_source_c(source)             # optional: const char ingot_module_source[]

Example::

    >>> from ingot.codegen.prelude import C_PRELUDE, c_string_literal
    >>> "ingot_check_tensor" in C_PRELUDE
    True
    >>> c_string_literal('say "hi"\\n')
    '"say \\\\"hi\\\\"\\\\n"'
"""

from __future__ import annotations

import json
import re

from ingot.runtime import abi
from ingot.runtime.metadata import validate_metadata

from ._prelude_timer import TIMER_C

__all__ = [
    "C_PRELUDE",
    "c_string_literal",
    "emit_metadata_c",
    "emit_source_c",
    "validate_metadata",
]

_PRELUDE_TEMPLATE = r"""/* ===== Ingot C prelude, ABI version @ABI_VERSION@ (generated; do not edit) ===== */
#ifndef INGOT_PRELUDE_H_
#define INGOT_PRELUDE_H_

#if !defined(_POSIX_C_SOURCE) || _POSIX_C_SOURCE < 200809L
#undef _POSIX_C_SOURCE
#define _POSIX_C_SOURCE 200809L /* clock_gettime, posix_memalign under -std=c11 */
#endif
#ifndef _DEFAULT_SOURCE
#define _DEFAULT_SOURCE 1 /* M_PI and friends */
#endif

#include <stdint.h>
#include <stddef.h>
#include <string.h>
#include <stdio.h>
#include <math.h>
#include <stdlib.h>
#include <stdarg.h>
#include <time.h>
#include <sched.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define INGOT_ABI_VERSION @ABI_VERSION@

#ifdef __cplusplus
#define INGOT_EXTERN_C extern "C"
#else
#define INGOT_EXTERN_C
#endif
#if defined(_WIN32)
#define INGOT_EXPORT INGOT_EXTERN_C __declspec(dllexport)
#define INGOT_WEAK_EXPORT INGOT_EXPORT
#else
/* Exported functions and data of a module: INGOT_EXPORT int32_t ingot_main(...) */
#define INGOT_EXPORT INGOT_EXTERN_C __attribute__((visibility("default")))
#define INGOT_WEAK_EXPORT INGOT_EXPORT __attribute__((weak))
#endif
#define INGOT_INLINE static inline
#if defined(__GNUC__) || defined(__clang__)
#define INGOT_PRINTF(fmt_idx, arg_idx) __attribute__((format(printf, fmt_idx, arg_idx)))
#define INGOT_LIKELY(x) __builtin_expect(!!(x), 1)
#define INGOT_UNLIKELY(x) __builtin_expect(!!(x), 0)
#define INGOT_RESTRICT __restrict__
#else
#define INGOT_PRINTF(fmt_idx, arg_idx)
#define INGOT_LIKELY(x) (x)
#define INGOT_UNLIKELY(x) (x)
#define INGOT_RESTRICT
#endif

/* ---------------------------------------------------------------- DLPack */
#ifndef DLPACK_DLPACK_H_
#define DLPACK_DLPACK_H_
typedef enum {
  kDLCPU = 1, kDLCUDA = 2, kDLCUDAHost = 3, kDLOpenCL = 4, kDLVulkan = 7, kDLMetal = 8,
  kDLVPI = 9, kDLROCM = 10, kDLROCMHost = 11, kDLExtDev = 12, kDLCUDAManaged = 13,
  kDLOneAPI = 14, kDLWebGPU = 15, kDLHexagon = 16
} DLDeviceType;
typedef struct {
  DLDeviceType device_type;
  int32_t device_id;
} DLDevice;
typedef enum {
  kDLInt = 0U, kDLUInt = 1U, kDLFloat = 2U, kDLOpaqueHandle = 3U, kDLBfloat = 4U,
  kDLComplex = 5U, kDLBool = 6U
} DLDataTypeCode;
typedef struct {
  uint8_t code;
  uint8_t bits;
  uint16_t lanes;
} DLDataType;
typedef struct {
  void* data;
  DLDevice device;
  int32_t ndim;
  DLDataType dtype;
  int64_t* shape;
  int64_t* strides;
  uint64_t byte_offset;
} DLTensor;
#endif /* DLPACK_DLPACK_H_ */

/* ------------------------------------------------------ calling convention */
typedef union {
  int64_t v_int64;
  double v_float64;
  void* v_handle;
} IngotValue;

#define INGOT_ARG_INT @ARG_INT@    /* v_int64 */
#define INGOT_ARG_FLOAT @ARG_FLOAT@  /* v_float64 */
#define INGOT_ARG_HANDLE @ARG_HANDLE@ /* v_handle: opaque pointer */
#define INGOT_ARG_NULL @ARG_NULL@   /* v_handle == NULL */
#define INGOT_ARG_TENSOR @ARG_TENSOR@ /* v_handle: DLTensor* */

#define INGOT_OK @OK@
#define INGOT_ERR_RUNTIME (@ERR_RUNTIME@)  /* failure while running */
#define INGOT_ERR_ARGUMENT (@ERR_ARGUMENT@) /* an argument check failed */

/* Every exported function: returns INGOT_OK, or an error code after writing a
 * NUL-terminated message into err[0..err_len). */
typedef int32_t (*IngotPackedFunc)(IngotValue* args, int32_t* type_codes, int32_t num_args,
                                   char* err, int32_t err_len);

/* The DLTensor* held by argument i. */
#define INGOT_TENSOR(args, i) ((DLTensor*)(args)[(i)].v_handle)
/* Return the error code of a failing check: INGOT_CHECK(ingot_check_dim(...)); */
#define INGOT_CHECK(expr)                      \
  do {                                         \
    int32_t ingot_check_rc_ = (expr);          \
    if (INGOT_UNLIKELY(ingot_check_rc_ != 0))  \
      return ingot_check_rc_;                  \
  } while (0)

/* ------------------------------------------------------------- messages */
/* Write a formatted message into err (if any) and return code. */
INGOT_INLINE int32_t ingot_set_error(char* err, int32_t err_len, int32_t code, const char* fmt, ...)
    INGOT_PRINTF(4, 5);
INGOT_INLINE int32_t ingot_set_error(char* err, int32_t err_len, int32_t code, const char* fmt, ...) {
  if (err != NULL && err_len > 0) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, (size_t)err_len, fmt, ap);
    va_end(ap);
    err[err_len - 1] = '\0';
  }
  return code;
}

/* "float32", "int8", "bool", "float32x4" into buf; returns buf. */
INGOT_INLINE const char* ingot_dtype_name(uint8_t code, uint8_t bits, uint16_t lanes, char* buf,
                                          size_t len) {
  const char* base = NULL;
  switch (code) {
    case kDLInt: base = "int"; break;
    case kDLUInt: base = "uint"; break;
    case kDLFloat: base = "float"; break;
    case kDLBfloat: base = "bfloat"; break;
    case kDLComplex: base = "complex"; break;
    case kDLOpaqueHandle: base = "handle"; break;
    case kDLBool: base = "bool"; break;
    default: break;
  }
  if (base == NULL) {
    snprintf(buf, len, "<unknown dtype code=%u bits=%u lanes=%u>", (unsigned)code, (unsigned)bits,
             (unsigned)lanes);
  } else if (code == kDLBool) {
    if (lanes == 1) snprintf(buf, len, "bool");
    else snprintf(buf, len, "boolx%u", (unsigned)lanes);
  } else if (lanes == 1) {
    snprintf(buf, len, "%s%u", base, (unsigned)bits);
  } else {
    snprintf(buf, len, "%s%ux%u", base, (unsigned)bits, (unsigned)lanes);
  }
  return buf;
}

/* "int", "float", "tensor", ... for a type code. */
INGOT_INLINE const char* ingot_arg_kind_name(int32_t code) {
  switch (code) {
    case INGOT_ARG_INT: return "int";
    case INGOT_ARG_FLOAT: return "float";
    case INGOT_ARG_HANDLE: return "handle";
    case INGOT_ARG_NULL: return "None";
    case INGOT_ARG_TENSOR: return "tensor";
    default: return "an unknown type code";
  }
}

INGOT_INLINE const char* ingot_device_name(int32_t device_type) {
  switch (device_type) {
    case kDLCPU: return "cpu";
    case kDLCUDA: return "cuda";
    case kDLCUDAHost: return "cuda_host";
    default: return "device";
  }
}

/* --------------------------------------------------------------- checks */
/* main: expects 3 arguments, got 2 */
INGOT_INLINE int32_t ingot_check_num_args(const char* func, int32_t num_args, int32_t expected,
                                          char* err, int32_t err_len) {
  if (INGOT_LIKELY(num_args == expected)) return INGOT_OK;
  return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT, "%s: expects %d argument%s, got %d",
                         func, (int)expected, expected == 1 ? "" : "s", (int)num_args);
}

/* Checks that argument `param` is a DLTensor of ndim/dtype, with non-NULL data, compact
 * row-major layout (strides NULL or compact; extent-1 axes may have any stride), and data
 * (plus byte_offset) aligned to the element size. Read data through ingot_tensor_data(). */
INGOT_INLINE int32_t ingot_check_tensor(const char* func, const char* param, IngotValue v,
                                        int32_t code, int ndim, uint8_t dtype_code, uint8_t bits,
                                        uint16_t lanes, char* err, int32_t err_len) {
  const DLTensor* t;
  int d;
  if (INGOT_UNLIKELY(code != INGOT_ARG_TENSOR)) {
    return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT,
                           "%s: argument '%s' expects a tensor, got %s", func, param,
                           ingot_arg_kind_name(code));
  }
  t = (const DLTensor*)v.v_handle;
  if (INGOT_UNLIKELY(t == NULL)) {
    return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT,
                           "%s: argument '%s' expects a tensor, got a NULL DLTensor pointer", func,
                           param);
  }
  if (INGOT_UNLIKELY(t->ndim != ndim)) {
    return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT,
                           "%s: argument '%s' expects ndim %d, got %d", func, param, ndim,
                           (int)t->ndim);
  }
  if (INGOT_UNLIKELY(t->dtype.code != dtype_code || t->dtype.bits != bits ||
                     t->dtype.lanes != lanes)) {
    char want[48], got[48];
    return ingot_set_error(
        err, err_len, INGOT_ERR_ARGUMENT, "%s: argument '%s' expects dtype %s, got %s", func,
        param, ingot_dtype_name(dtype_code, bits, lanes, want, sizeof(want)),
        ingot_dtype_name(t->dtype.code, t->dtype.bits, t->dtype.lanes, got, sizeof(got)));
  }
  if (INGOT_UNLIKELY(t->data == NULL)) {
    return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT,
                           "%s: argument '%s' has a NULL data pointer", func, param);
  }
  if (INGOT_UNLIKELY(ndim > 0 && t->shape == NULL)) {
    return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT,
                           "%s: argument '%s' has a NULL shape pointer", func, param);
  }
  for (d = 0; d < ndim; ++d) {
    if (INGOT_UNLIKELY(t->shape[d] < 0)) {
      return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT,
                             "%s: argument '%s' dimension %d is negative (%lld)", func, param, d,
                             (long long)t->shape[d]);
    }
  }
  if (t->strides != NULL) {
    int64_t expected_stride = 1;
    int empty = 0;
    for (d = 0; d < ndim; ++d) empty |= (t->shape[d] == 0);
    for (d = ndim - 1; d >= 0 && !empty; --d) {
      if (t->shape[d] != 1 && t->strides[d] != expected_stride) {
        return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT,
                               "%s: argument '%s' must be a contiguous (row-major) tensor", func,
                               param);
      }
      expected_stride *= t->shape[d];
    }
  }
  {
    uintptr_t align = (uintptr_t)((bits + 7) / 8);
    uintptr_t addr = (uintptr_t)t->data + (uintptr_t)t->byte_offset;
    if (align > 1 && (addr % align) != 0) {
      char want[48];
      return ingot_set_error(
          err, err_len, INGOT_ERR_ARGUMENT,
          "%s: argument '%s' data pointer %p is not aligned to %u bytes (the size of %s)", func,
          param, (void*)addr, (unsigned)align,
          ingot_dtype_name(dtype_code, bits, 1, want, sizeof(want)));
    }
  }
  return INGOT_OK;
}

/* The first element of a tensor checked by ingot_check_tensor (data + byte_offset). */
INGOT_INLINE void* ingot_tensor_data(const DLTensor* t) {
  return (void*)((char*)t->data + t->byte_offset);
}

/* main: argument 'A' is on cuda(0), but this function expects cpu memory */
INGOT_INLINE int32_t ingot_check_device(const char* func, const char* param, IngotValue v,
                                        int32_t device_type, char* err, int32_t err_len) {
  const DLTensor* t = (const DLTensor*)v.v_handle;
  int32_t actual = (int32_t)t->device.device_type;
  int ok = actual == device_type || (device_type == kDLCPU && actual == kDLCUDAHost);
  if (INGOT_LIKELY(ok)) return INGOT_OK;
  return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT,
                         "%s: argument '%s' is on %s(%d), but this function expects %s memory",
                         func, param, ingot_device_name(actual), (int)t->device.device_id,
                         ingot_device_name(device_type));
}

/* Static dimension: main: argument 'B' dimension 1 expects 128, got 64 */
INGOT_INLINE int32_t ingot_check_dim(const char* func, const char* param, int dim_index,
                                     int64_t actual, int64_t expected, char* err,
                                     int32_t err_len) {
  if (INGOT_LIKELY(actual == expected)) return INGOT_OK;
  return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT,
                         "%s: argument '%s' dimension %d expects %lld, got %lld", func, param,
                         dim_index, (long long)expected, (long long)actual);
}

/* A symbolic dimension already bound (to `bound`) by an earlier argument:
 * main: argument 'B' dimension 0 expects n = 128 (bound by an earlier argument), got 64 */
INGOT_INLINE int32_t ingot_check_dim_equal(const char* func, const char* param, int dim_index,
                                           int64_t actual, const char* symbol, int64_t bound,
                                           char* err, int32_t err_len) {
  if (INGOT_LIKELY(actual == bound)) return INGOT_OK;
  return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT,
                         "%s: argument '%s' dimension %d expects %s = %lld (bound by an earlier "
                         "argument), got %lld",
                         func, param, dim_index, symbol, (long long)bound, (long long)actual);
}

/* Scalar parameter: main: argument 'n' expects an int scalar, got tensor */
INGOT_INLINE int32_t ingot_check_scalar(const char* func, const char* param, int32_t code,
                                        int32_t expected_code, char* err, int32_t err_len) {
  if (INGOT_LIKELY(code == expected_code)) return INGOT_OK;
  if (expected_code == INGOT_ARG_FLOAT && code == INGOT_ARG_INT) return INGOT_OK; /* widened by caller */
  return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT,
                         "%s: argument '%s' expects %s scalar, got %s", func, param,
                         expected_code == INGOT_ARG_INT ? "an int" : "a float",
                         ingot_arg_kind_name(code));
}

/* A float scalar argument, also accepting an int type code (converted). */
INGOT_INLINE double ingot_arg_float(IngotValue v, int32_t code) {
  return code == INGOT_ARG_INT ? (double)v.v_int64 : v.v_float64;
}

/* Integer scalar range: main: argument 'n' value 4294967296 does not fit in int32 */
INGOT_INLINE int32_t ingot_check_int_range(const char* func, const char* param, int64_t value,
                                           int64_t lo, int64_t hi, const char* dtype_name,
                                           char* err, int32_t err_len) {
  if (INGOT_LIKELY(value >= lo && value <= hi)) return INGOT_OK;
  return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT,
                         "%s: argument '%s' value %lld does not fit in %s", func, param,
                         (long long)value, dtype_name);
}

/* ------------------------------------------- vectorizable float32 math */
/* Branch-free, errno-free float32 exp/tanh/sigmoid/erf. libm's expf/tanhf/erff are opaque scalar
 * calls that GCC cannot vectorize; these are static inline selects and FMAs, so a loop calling
 * them is vectorized at -O3 (zmm with AVX-512). Special values are handled by the arithmetic
 * itself plus selects (?: on values that are all computed), never by branches on the data.
 * float64 keeps libm. Accuracy (tests/codegen/test_vector_math.py): exp <= 2 ulp (also for
 * denormal results), tanh/sigmoid/erf <= 1e-6 absolute. */
INGOT_INLINE float ingot_f32_from_bits(int32_t bits) {
  float f;
  memcpy(&f, &bits, sizeof(f));
  return f;
}
INGOT_INLINE int32_t ingot_f32_to_bits(float f) {
  int32_t bits;
  memcpy(&bits, &f, sizeof(bits));
  return bits;
}
/* c ? a : b as a bit blend: GCC turns float ?: with a constant arm into branches (jump
 * threading), which stops if-conversion and so vectorization; a mask blend never branches. */
INGOT_INLINE float ingot_select_f32(int c, float a, float b) {
  int32_t m = -(int32_t)(c != 0);
  return ingot_f32_from_bits((ingot_f32_to_bits(a) & m) | (ingot_f32_to_bits(b) & ~m));
}

/* exp(x) = 2^k * exp(r), k = round(x / ln 2), |r| <= ln2 / 2 (Cephes' expf polynomial). */
INGOT_INLINE float ingot_expf(float x) {
  /* Step 1: clamp. Below -120 the result rounds to +0, above 89 it overflows to +inf; NaN
   * fails both comparisons and flows through (k is zeroed so the int conversion is defined). */
  float xc = ingot_select_f32(x < -120.0f, -120.0f, x);
  xc = ingot_select_f32(xc > 89.0f, 89.0f, xc);
  xc = ingot_select_f32(xc == xc, xc, 0.0f);
  /* Step 2: k = round-half-away(x * log2(e)) via truncation (robust under -ffast-math). */
  float t = xc * 1.44269504088896341f;
  int32_t k = (int32_t)(t + ingot_select_f32(t < 0.0f, -0.5f, 0.5f));
  float kf = (float)k;
  /* Step 3: r = x - k ln2 in two parts (Cody-Waite) so r is exact to float precision. */
  float r = xc - kf * 0.693359375f;
  r = r - kf * -2.12194440e-4f;
  /* Step 4: exp(r) = 1 + r + r^2 P(r) on [-ln2/2, ln2/2]. */
  float p = 1.9875691500e-4f;
  p = p * r + 1.3981999507e-3f;
  p = p * r + 8.3334519073e-3f;
  p = p * r + 4.1665795894e-2f;
  p = p * r + 1.6666665459e-1f;
  p = p * r + 5.0000001201e-1f;
  float y = p * (r * r) + r + 1.0f;
  /* Step 5: scale by 2^k as 2^k1 * 2^k2 (k in [-173, 128]: both halves are normal floats), so
   * overflow gives inf and denormal results are rounded once, by the last multiply. */
  int32_t k1 = k / 2;
  int32_t k2 = k - k1;
  y = y * ingot_f32_from_bits((int32_t)((uint32_t)(k1 + 127) << 23));
  y = y * ingot_f32_from_bits((int32_t)((uint32_t)(k2 + 127) << 23));
  return ingot_select_f32(x == x, y, x);
}

/* 1 / (1 + exp(-x)): exp(+inf) = inf gives 0, exp(-inf) = 0 gives 1. */
INGOT_INLINE float ingot_sigmoidf(float x) { return 1.0f / (1.0f + ingot_expf(-x)); }

/* |x| < 0.625: odd polynomial (Cephes tanhf, keeps relative accuracy near 0);
 * else sign(x) (1 - 2 / (exp(2|x|) + 1)), which saturates to +-1 through exp = inf. */
INGOT_INLINE float ingot_tanhf(float x) {
  float a = fabsf(x);
  float s = x * x;
  float p = -5.70498872745e-3f;
  p = p * s + 2.06390887954e-2f;
  p = p * s - 5.37397155531e-2f;
  p = p * s + 1.33314422036e-1f;
  p = p * s - 3.33332819422e-1f;
  float small = p * s * x + x;
  float big = copysignf(1.0f - 2.0f / (ingot_expf(2.0f * a) + 1.0f), x);
  return ingot_select_f32(a < 0.625f, small, big);
}

/* |x| < 0.9: x P(x^2); else sign(x) (1 - exp(Q(|x|))) with Q ~ log(erfc) on [0.9, 4]
 * (erf(x) rounds to +-1 beyond 4). Coefficients: weighted minimax fits (rel. error ~1e-8 for
 * P, 6e-11 on erfc for Q) rounded to float. */
INGOT_INLINE float ingot_erff(float x) {
  float a = fabsf(x);
  float s = x * x;
  float p = -6.111292168498039e-4f;
  p = p * s + 5.016228649765253e-3f;
  p = p * s - 2.678195759654045e-2f;
  p = p * s + 1.1282230168581009e-1f;
  p = p * s - 3.761253356933594e-1f;
  p = p * s + 1.1283791065216064f;
  float small = p * x;
  float t = ingot_select_f32(a > 4.0f, 4.0f, a);
  float q = -2.0828591004828922e-5f;
  q = q * t + 4.3139324407093227e-4f;
  q = q * t - 4.1562533006072044e-3f;
  q = q * t + 2.5080611929297447e-2f;
  q = q * t - 1.0822037607431412e-1f;
  q = q * t - 6.334008574485779e-1f;
  q = q * t - 1.1294883489608765f;
  q = q * t + 1.6920457710511982e-4f;
  float big = copysignf(1.0f - ingot_expf(q), x);
  return ingot_select_f32(a < 0.9f, small, big);
}

/* ----------------------------------------------------------- workspace */
/* 64-byte aligned scratch memory for generated code; NULL on failure.
 * Blocks of at least INGOT_WS_POOL_MIN bytes are kept for reuse in a small pool per library (as
 * TVM's WorkspacePool): glibc serves such blocks by mmap and unmaps them on free, so a kernel with
 * a 1.8 MB intermediate took ~900 page faults per call, and zeroing the fresh pages evicted the
 * model's data from the caches. The pool holds at most INGOT_WS_POOL_SLOTS blocks (the largest
 * freed ones); a spin lock guards it because parallel loops and concurrent callers may allocate at
 * once. Each block carries its capacity in a 64-byte header. */
#ifndef INGOT_WS_POOL_MIN /* benchmarks define it as ((size_t)-1) to measure without the pool */
#define INGOT_WS_POOL_MIN ((size_t)64 * 1024)
#endif
#define INGOT_WS_POOL_SLOTS 8
#define INGOT_WS_HEADER ((size_t)64)
typedef struct { void* base; size_t capacity; } ingot_ws_block_t;
static ingot_ws_block_t ingot_ws_pool[INGOT_WS_POOL_SLOTS];
static volatile char ingot_ws_lock;

INGOT_INLINE void ingot_ws_acquire(void) {
  /* The section it guards is a few loads and stores; but on a busy machine the holder can be
   * descheduled in it, so after a short spin the waiter gives its CPU away instead of spinning
   * through the holder's wait for a time slice. */
  for (int spins = 0; __atomic_test_and_set(&ingot_ws_lock, __ATOMIC_ACQUIRE); ++spins) {
    if (spins >= 64) sched_yield();
  }
}
INGOT_INLINE void ingot_ws_release(void) { __atomic_clear(&ingot_ws_lock, __ATOMIC_RELEASE); }

INGOT_INLINE void* ingot_alloc_workspace(size_t nbytes) {
  if (nbytes == 0) nbytes = 64;
  if (nbytes >= INGOT_WS_POOL_MIN) {
    /* Step 1: the smallest pooled block that fits. */
    void* base = NULL;
    ingot_ws_acquire();
    int best = -1;
    for (int i = 0; i < INGOT_WS_POOL_SLOTS; ++i) {
      if (ingot_ws_pool[i].base != NULL && ingot_ws_pool[i].capacity >= nbytes &&
          (best < 0 || ingot_ws_pool[i].capacity < ingot_ws_pool[best].capacity)) best = i;
    }
    if (best >= 0) {
      base = ingot_ws_pool[best].base;
      ingot_ws_pool[best].base = NULL;
    }
    ingot_ws_release();
    if (base != NULL) return (char*)base + INGOT_WS_HEADER;
  }
  /* Step 2: a fresh block. */
  void* base = NULL;
  if (posix_memalign(&base, 64, nbytes + INGOT_WS_HEADER) != 0) return NULL;
  *(size_t*)base = nbytes;
  return (char*)base + INGOT_WS_HEADER;
}

INGOT_INLINE void ingot_free_workspace(void* p) {
  if (p == NULL) return;
  void* base = (char*)p - INGOT_WS_HEADER;
  size_t capacity = *(size_t*)base;
  if (capacity >= INGOT_WS_POOL_MIN) {
    /* Keep it in an empty slot, else in place of the smallest pooled block if that is smaller. */
    void* evicted = base;
    ingot_ws_acquire();
    int slot = -1;
    for (int i = 0; i < INGOT_WS_POOL_SLOTS; ++i) {
      if (ingot_ws_pool[i].base == NULL) { slot = i; break; }
      if (slot < 0 || ingot_ws_pool[i].capacity < ingot_ws_pool[slot].capacity) slot = i;
    }
    if (ingot_ws_pool[slot].base == NULL || ingot_ws_pool[slot].capacity < capacity) {
      evicted = ingot_ws_pool[slot].base;
      ingot_ws_pool[slot].base = base;
      ingot_ws_pool[slot].capacity = capacity;
    }
    ingot_ws_release();
    free(evicted);
    return;
  }
  free(base);
}

/* ------------------------------------------------- exported module helpers */
INGOT_WEAK_EXPORT const int32_t ingot_abi_version = INGOT_ABI_VERSION;

@TIMER_C@
/* Threads of this library's parallel loops. Every `omp parallel for` says
 * num_threads(ingot_team_size()), so the count holds for whichever thread calls the library
 * (omp_set_num_threads would set it for the calling thread only, and for every library that
 * thread calls). 0: OpenMP's default. One variable per library: weak (the library's translation
 * units share one) and hidden (other libraries keep their own). */
__attribute__((weak, visibility("hidden"))) volatile int32_t ingot_num_threads_var = 0;

INGOT_INLINE int ingot_team_size(void) {
  int32_t n = ingot_num_threads_var;
#ifdef _OPENMP
  return n > 0 ? (int)n : omp_get_max_threads();
#else
  return n > 0 ? (int)n : 1;
#endif
}

/* Sets this library's thread count (n <= 0: OpenMP's default); returns the count in effect. */
INGOT_WEAK_EXPORT int32_t ingot_set_num_threads(int32_t n) {
  ingot_num_threads_var = n > 0 ? n : 0;
  return (int32_t)ingot_team_size();
}

INGOT_WEAK_EXPORT int32_t ingot_get_num_threads(void) { return (int32_t)ingot_team_size(); }

/* ------------------------------------------------------------ parallel loops
 * ingot_parallel_for(begin, end, task, ctx) runs task(ctx, i) for i in [begin, end) on the
 * library's team. The range is cut into one contiguous slot per thread (OpenMP's static split,
 * which the schedules are made for: each thread's data stays its own); a thread -- the caller too --
 * claims a slot and takes its tasks from the front. A thread whose slot is empty steals single tasks
 * from the back of another slot, so the tail of a thread the OS has descheduled (a busy core) moves to
 * a free one task by task, and the caller waits only for tasks some thread is running.
 * Why not `omp parallel for`: its join barrier waits for every thread of the team, also one the OS
 * has not scheduled yet; beside a busy core that costs a time slice per loop (BERT ran 15x slower
 * beside one busy core, BENCHMARKS.md "Session 9"). Why not finer chunks from one counter: they break
 * the one-range-per-thread split (ResNet-50 ran 5% slower on a quiet machine with four per thread).
 * Workers spin a few tens of microseconds for the next loop (a model's kernels follow each other
 * closely), then sleep on a condition variable.
 * One pool per library (weak + hidden: its translation units share it, other libraries keep theirs);
 * one loop at a time on it: a second thread calling the library meanwhile runs its loop by itself.
 * Adaptive team (on unless ingot_set_adaptive_team(0)): stealing cannot move a task whose thread the OS
 * descheduled in the middle of it, and the join then waits for that thread's next time slice (the p99
 * beside a busy core). The caller times each loop: a join that waited much longer than a task takes
 * (INGOT_POOL_LATE_NS and INGOT_POOL_LATE_TASKS tasks) was late; and what the team gained over the
 * caller alone: n tasks at the caller's own mean task time, minus the loop's time. The gains add up in a
 * running sum that forgets 1/INGOT_POOL_GAIN_WINDOW of itself per loop. A late join that leaves the sum
 * below zero (the team lost more time waiting than its other threads saved: a busy core that takes
 * the worker for a slice now and then while it helps little; not a worker that preempts a busy process
 * for short loops and helps on most of them) caps the team at one thread fewer (on 2 cores: the caller
 * alone) for a hold that starts at INGOT_POOL_HOLD_MIN_NS. Then the full team runs again (a probe), the
 * sum going on from where it was: once at least INGOT_POOL_PROBE_LOOPS loops in which another thread ran
 * tasks have brought it back to zero or above, the cap goes and the next hold halves; a late join that
 * leaves it below zero keeps the cap and doubles the hold (up to INGOT_POOL_HOLD_MAX_NS); after
 * INGOT_POOL_PROBE_MAX_LOOPS loops with neither, the cap stays for another hold as long. Only the
 * threads that claim a slot take part in a loop, so a capped team does not get its descheduled thread
 * back through stealing.
 * C11 atomics: generated kernels are C; a C++ file including the prelude does without the pool. */
#ifndef __cplusplus
#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

typedef int32_t (*ingot_task_fn)(void* ctx, int64_t i);

#define INGOT_POOL_MAX_WORKERS 255
#define INGOT_POOL_SPIN 2000 /* pause instructions a worker waits for the next loop before it sleeps */
#define INGOT_POOL_IDLE_S 2  /* seconds a sleeping worker waits for a loop before it leaves */
/* A join that waits longer than this and than INGOT_POOL_LATE_TASKS of the caller's mean task waited
 * for a descheduled thread: a time slice is milliseconds, a quiet join's skew is at most a task. */
#define INGOT_POOL_LATE_NS 200000
#define INGOT_POOL_LATE_TASKS 3
/* The running sum of the team's gains forgets 1/this of itself per loop: about this many loops, several
 * model calls (a model call has dozens of loops; beside a busy core a late join comes every few hundred
 * loops: it must be weighed against the gains of all the loops between two of them). */
#define INGOT_POOL_GAIN_WINDOW 512
#define INGOT_POOL_HOLD_MIN_NS 20000000LL   /* first hold of a capped team: 20 ms, then probe */
#define INGOT_POOL_PROBE_LOOPS 32            /* helped loops a probe needs at least to lift the cap */
#define INGOT_POOL_PROBE_MAX_LOOPS 512       /* a probe that neither lifts the cap nor fails ends here */
#define INGOT_POOL_HOLD_MAX_NS 2000000000LL /* longest hold: a failed probe costs one time slice */

/* One thread's share of the current loop: tasks [lo, hi) relative to `begin`, packed as lo << 32 | hi
 * so that the owner (front) and thieves (back) take tasks with one compare-and-swap, and how many of
 * the slot's tasks have finished (counted where the task was taken: the owner's own cache line while
 * nobody steals). A cache line each: one owner's updates must not slow another's. */
typedef struct {
  _Atomic uint64_t range;
  _Atomic int64_t done;
} __attribute__((aligned(64))) ingot_pool_slot_t;

typedef struct {
  pthread_mutex_t mu;
  pthread_cond_t wake;
  _Atomic int32_t n_workers;
  _Atomic int32_t quit;
  _Atomic int32_t busy;        /* a caller owns the pool */
  _Atomic uint32_t gen;        /* generation of the current loop; workers wait for it to change */
  _Atomic uint64_t claim;      /* gen << 32 | next slot: a claim is valid only for its generation */
  _Atomic int32_t fail;
  /* The current loop; rewritten only once every task of the last is done, and before the slots that
   * publish it: a thread that takes a task from a slot reads the loop the task belongs to. */
  ingot_task_fn fn;
  void* ctx;
  int64_t begin;
  _Atomic int32_t n_slots;    /* read by a late thread while the next loop is set up: either value is safe */
  /* Adaptive team state: read and written only by the caller that owns the pool (busy), whose
   * atomic_exchange/store of busy orders one owner's writes before the next owner's reads. */
  int32_t cap;                /* 0: the full team; else at most this many threads until hold_until */
  int64_t gain_ns;            /* running sum of what the team gained over the caller alone */
  int64_t hold_until_ns;
  int64_t hold_ns;            /* the next hold */
  int32_t probe_left;         /* > 0: probing the full team; loops it may still take */
  int32_t probe_helped;       /* loops of this probe in which another thread ran tasks */
  /* Loops on the pool, late joins, loops run by a capped team, probes, ns waited at late joins
   * (ingot_pool_counters). */
  _Atomic int64_t counters[5];
  ingot_pool_slot_t slots[INGOT_POOL_MAX_WORKERS + 1];
} ingot_pool_t;

__attribute__((weak, visibility("hidden"))) ingot_pool_t ingot_pool = {
    .mu = PTHREAD_MUTEX_INITIALIZER, .wake = PTHREAD_COND_INITIALIZER};

INGOT_INLINE void ingot_cpu_relax(void) {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

/* Take one task from a slot, from its front (the owner) or its back (a thief); 0 when it is empty.
 * Every take is a claim on the slot's current contents, so a thread still taking after its loop
 * ended takes (and runs) a task of the next loop, which is as good. */
INGOT_INLINE int ingot_pool_take(ingot_pool_slot_t* slot, int from_back, int64_t* task) {
  uint64_t r = atomic_load_explicit(&slot->range, memory_order_relaxed);
  for (;;) {
    uint32_t lo = (uint32_t)(r >> 32), hi = (uint32_t)r;
    if (lo >= hi) return 0;
    uint64_t rest = from_back ? ((uint64_t)lo << 32 | (hi - 1)) : ((uint64_t)(lo + 1) << 32 | hi);
    if (atomic_compare_exchange_weak_explicit(&slot->range, &r, rest, memory_order_acq_rel, memory_order_relaxed)) {
      *task = from_back ? hi - 1 : lo;
      return 1;
    }
  }
}

INGOT_INLINE void ingot_pool_run_task(ingot_pool_t* p, ingot_pool_slot_t* slot, int64_t task) {
  int32_t r = p->fn(p->ctx, p->begin + task);
  if (r != 0) atomic_store_explicit(&p->fail, r, memory_order_relaxed);
  atomic_fetch_add_explicit(&slot->done, 1, memory_order_release);
}

/* Claim a slot of loop `gen` and run its tasks; then steal from the other slots until all are empty.
 * A thread that finds every slot claimed (a worker beyond the loop's team, or one woken after the team
 * got going) leaves the loop to its team: a capped team must not get its late thread back by stealing.
 * Returns how many tasks this thread ran. */
INGOT_INLINE int64_t ingot_pool_run(ingot_pool_t* p, uint32_t gen) {
  uint64_t c = atomic_load_explicit(&p->claim, memory_order_acquire);
  for (;;) {
    if ((uint32_t)(c >> 32) != gen) return 0; /* a newer loop: its own wake-up brings this thread back */
    if ((int64_t)(c & 0xffffffffu) >= atomic_load_explicit(&p->n_slots, memory_order_relaxed))
      return 0; /* every slot has its owner */
    if (atomic_compare_exchange_weak_explicit(&p->claim, &c, c + 1, memory_order_acq_rel, memory_order_acquire))
      break;
  }
  int32_t n_slots = atomic_load_explicit(&p->n_slots, memory_order_relaxed);
  int32_t own = (int32_t)(c & 0xffffffffu);
  int64_t task, ran = 0;
  if (own >= n_slots) return 0; /* claimed while the next, smaller loop was set up: nothing of ours */
  while (ingot_pool_take(&p->slots[own], 0, &task)) {
    ingot_pool_run_task(p, &p->slots[own], task);
    ++ran;
  }
  for (int stole = 1; stole;) {
    stole = 0;
    for (int32_t k = 1; k <= n_slots; ++k) {
      ingot_pool_slot_t* victim = &p->slots[(own + k) % n_slots];
      while (ingot_pool_take(victim, 1, &task)) {
        ingot_pool_run_task(p, victim, task);
        ++ran;
        stole = 1;
      }
    }
  }
  return ran;
}

static void* ingot_pool_worker(void* arg) {
  ingot_pool_t* p = &ingot_pool;
  uint32_t seen = (uint32_t)(uintptr_t)arg;
  for (;;) {
    uint32_t gen = atomic_load_explicit(&p->gen, memory_order_acquire);
    for (int s = 0; gen == seen && s < INGOT_POOL_SPIN; ++s) {
      ingot_cpu_relax();
      gen = atomic_load_explicit(&p->gen, memory_order_acquire);
    }
    if (gen == seen) {
      pthread_mutex_lock(&p->mu);
      while ((gen = atomic_load(&p->gen)) == seen && !atomic_load(&p->quit)) {
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += INGOT_POOL_IDLE_S;
        if (pthread_cond_timedwait(&p->wake, &p->mu, &until) != 0 && atomic_load(&p->gen) == seen) {
          /* Idle for a while (a library loaded and no longer called: a tuning run loads hundreds):
           * leave. The next loop starts a worker again; until then its caller runs the tasks. */
          atomic_fetch_sub(&p->n_workers, 1);
          pthread_mutex_unlock(&p->mu);
          return NULL;
        }
      }
      pthread_mutex_unlock(&p->mu);
    }
    if (atomic_load(&p->quit)) {
      atomic_fetch_sub(&p->n_workers, 1);
      return NULL;
    }
    seen = gen;
    ingot_pool_run(p, gen);
  }
}

/* Start workers up to `want` (the caller owns the pool); returns how many there are. Workers are
 * detached: each leaves by itself (idle, or the library going away). */
INGOT_INLINE int ingot_pool_grow(ingot_pool_t* p, int want) {
  if (want > INGOT_POOL_MAX_WORKERS) want = INGOT_POOL_MAX_WORKERS;
  while (atomic_load(&p->n_workers) < want) {
    pthread_t thread;
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
    atomic_fetch_add(&p->n_workers, 1);
    int failed = pthread_create(&thread, &attr, ingot_pool_worker, (void*)(uintptr_t)atomic_load(&p->gen));
    pthread_attr_destroy(&attr);
    if (failed) {
      atomic_fetch_sub(&p->n_workers, 1);
      break;
    }
  }
  return atomic_load(&p->n_workers);
}

/* A forked child has only the thread that forked: the parent's workers do not exist there, and the
 * pool's mutex may have been held by one of them. The child starts from an empty pool (its first
 * loop starts its own workers). Registered at load time rather than checked with getpid() in every
 * loop (a system call per parallel loop); each translation unit registers one, and they are idempotent.
 * glibc drops a library's fork handlers when the library is unloaded. */
static void ingot_pool_after_fork_in_child(void) {
  ingot_pool_t* p = &ingot_pool;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->wake, NULL);
  atomic_store(&p->n_workers, 0);
  atomic_store(&p->busy, 0);
  atomic_store(&p->quit, 0);
  p->cap = 0; /* the child's own loops find out whether its cores are busy */
  p->gain_ns = 0;
  p->probe_left = 0;
}

__attribute__((constructor)) static void ingot_pool_register_fork_handler(void) {
  pthread_atfork(NULL, NULL, ingot_pool_after_fork_in_child);
}

/* The library is going away (process exit; Ingot never unloads a library it loaded): wake the
 * workers so that they leave, and wait a little for them (each translation unit registers one). */
__attribute__((destructor)) static void ingot_pool_stop(void) {
  ingot_pool_t* p = &ingot_pool;
  if (atomic_load(&p->n_workers) == 0) return;
  pthread_mutex_lock(&p->mu);
  atomic_store(&p->quit, 1);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < 1000 && atomic_load(&p->n_workers) > 0; ++i) sched_yield();
}

/* Whether the pool adapts its team to late joins (see the parallel-loop note); per library, like the
 * thread count. */
__attribute__((weak, visibility("hidden"))) _Atomic int32_t ingot_pool_adaptive_var = 1;

/* Turns the adaptive team on (1) or off (0) for this library's parallel loops; returns the previous
 * setting. Off, a loop always runs on the full team (the A/B baseline). */
INGOT_WEAK_EXPORT int32_t ingot_set_adaptive_team(int32_t on) {
  return atomic_exchange(&ingot_pool_adaptive_var, on != 0 ? 1 : 0);
}

/* Copies up to n of: loops run on the pool, late joins, loops run by a capped team, probes, nanoseconds
 * the caller waited at late joins, and the current cap (0: none) into out; returns how many it wrote.
 * The cap is a snapshot (another caller may own the pool). */
INGOT_WEAK_EXPORT int32_t ingot_pool_counters(int64_t* out, int32_t n) {
  ingot_pool_t* p = &ingot_pool;
  int32_t k = 0;
  for (; k < n && k < 5; ++k) out[k] = atomic_load_explicit(&p->counters[k], memory_order_relaxed);
  if (k < n) out[k++] = (int64_t)__atomic_load_n(&p->cap, __ATOMIC_RELAXED);
  return k;
}

INGOT_INLINE int64_t ingot_pool_now_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

INGOT_INLINE void ingot_pool_count(ingot_pool_t* p, int k) {
  atomic_fetch_add_explicit(&p->counters[k], 1, memory_order_relaxed);
}

/* After a loop of n tasks on `team` threads whose caller ran `ran` of them in own_ns and then waited
 * wait_ns at the join: count a late join and, with the adaptive team on, update it (the caller owns the
 * pool). */
INGOT_INLINE void ingot_pool_adapt(ingot_pool_t* p, int adaptive, int64_t team, int probing, int64_t n,
                                   int64_t ran, int64_t own_ns, int64_t wait_ns, int64_t now) {
  int64_t mean_task = own_ns / (ran > 0 ? ran : 1);
  int late = wait_ns > INGOT_POOL_LATE_NS && wait_ns > INGOT_POOL_LATE_TASKS * mean_task;
  if (late) {
    ingot_pool_count(p, 1);
    atomic_fetch_add_explicit(&p->counters[4], wait_ns, memory_order_relaxed);
  }
  if (!adaptive || ran == 0) return; /* counted only; or no task of the caller's to measure by */
  /* The caller alone would have taken n tasks at its own pace; the team took own + wait. */
  p->gain_ns += n * mean_task - (own_ns + wait_ns);
  if (p->hold_ns < INGOT_POOL_HOLD_MIN_NS) p->hold_ns = INGOT_POOL_HOLD_MIN_NS;
  p->gain_ns -= p->gain_ns / INGOT_POOL_GAIN_WINDOW;
  if (probing) {
    p->probe_helped += ran < n;
    if (late && p->gain_ns < 0) { /* still losing to a busy core: hold longer before the next probe */
      p->hold_ns = p->hold_ns * 2 > INGOT_POOL_HOLD_MAX_NS ? INGOT_POOL_HOLD_MAX_NS : p->hold_ns * 2;
      p->hold_until_ns = now + p->hold_ns;
      p->probe_left = 0;
    } else if (p->probe_helped >= INGOT_POOL_PROBE_LOOPS && p->gain_ns >= 0) { /* the team pays: lift the cap */
      __atomic_store_n(&p->cap, 0, __ATOMIC_RELAXED);
      p->hold_ns /= 2;
      p->probe_left = 0;
    } else if (--p->probe_left == 0) { /* no late join, but no gain either: hold as long again */
      p->hold_until_ns = now + p->hold_ns;
    }
  } else {
    if (late && p->gain_ns < 0) {
      __atomic_store_n(&p->cap, (int32_t)(team - 1), __ATOMIC_RELAXED);
      p->hold_until_ns = now + p->hold_ns;
      p->probe_left = 0;
    }
  }
}

INGOT_INLINE int32_t ingot_serial_for(int64_t begin, int64_t end, ingot_task_fn fn, void* ctx) {
  int32_t fail = 0;
  for (int64_t i = begin; i < end; ++i) {
    int32_t r = fn(ctx, i);
    if (r != 0) fail = r;
  }
  return fail;
}

/* Runs fn(ctx, i) for i in [begin, end) on the library's threads; returns the last nonzero status. */
__attribute__((weak, visibility("hidden"))) int32_t ingot_parallel_for(int64_t begin, int64_t end,
                                                                      ingot_task_fn fn, void* ctx) {
  int64_t n = end - begin;
  if (n > (int64_t)UINT32_MAX) { /* a slot counts tasks in 32 bits: run a huge range in two halves */
    int32_t first = ingot_parallel_for(begin, begin + n / 2, fn, ctx);
    int32_t second = ingot_parallel_for(begin + n / 2, end, fn, ctx);
    return second != 0 ? second : first;
  }
  int64_t team = ingot_team_size();
  if (team > n) team = n;
  ingot_pool_t* p = &ingot_pool;
  if (team <= 1 || atomic_exchange(&p->busy, 1)) return ingot_serial_for(begin, end, fn, ctx);
  int adaptive = atomic_load_explicit(&ingot_pool_adaptive_var, memory_order_relaxed);
  int probing = 0;
  int64_t t0 = ingot_pool_now_ns(); /* late joins are counted with the adaptive team off too (A/B) */
  if (adaptive) {
    if (p->cap > 0 && team > p->cap) {
      if (p->probe_left == 0 && t0 < p->hold_until_ns) {
        team = p->cap;
        ingot_pool_count(p, 2);
      } else {
        if (p->probe_left == 0) { /* the hold is over: does the full team pay again? */
          p->probe_left = INGOT_POOL_PROBE_MAX_LOOPS;
          p->probe_helped = 0;
          ingot_pool_count(p, 3);
        }
        probing = 1;
      }
    }
    if (team <= 1) {
      atomic_store(&p->busy, 0);
      return ingot_serial_for(begin, end, fn, ctx);
    }
  }
  int workers = ingot_pool_grow(p, (int)team - 1);
  if (workers == 0) {
    atomic_store(&p->busy, 0);
    return ingot_serial_for(begin, end, fn, ctx);
  }
  if (team > workers + 1) team = workers + 1;
  pthread_mutex_lock(&p->mu);
  p->fn = fn;
  p->ctx = ctx;
  p->begin = begin;
  atomic_store_explicit(&p->n_slots, (int32_t)team, memory_order_relaxed);
  atomic_store(&p->fail, 0);
  /* Slot t gets tasks [t*n/team, (t+1)*n/team): the static split. Published after the loop above. */
  for (int64_t t = 0; t < team; ++t) {
    atomic_store_explicit(&p->slots[t].done, 0, memory_order_relaxed);
    atomic_store_explicit(&p->slots[t].range, (uint64_t)(t * n / team) << 32 | (uint64_t)((t + 1) * n / team),
                          memory_order_release);
  }
  uint32_t gen = atomic_load(&p->gen) + 1;
  atomic_store_explicit(&p->claim, (uint64_t)gen << 32, memory_order_release);
  atomic_store_explicit(&p->gen, gen, memory_order_release);
  pthread_cond_broadcast(&p->wake);
  pthread_mutex_unlock(&p->mu);
  int64_t ran = ingot_pool_run(p, gen);
  int64_t t1 = ingot_pool_now_ns();
  /* Nothing is left to take: wait for the tasks other threads are running. */
  for (int64_t t = 0; t < team; ++t) {
    int64_t size = (t + 1) * n / team - t * n / team;
    for (long s = 0; atomic_load_explicit(&p->slots[t].done, memory_order_acquire) < size; ++s) {
      if (s < 100000) ingot_cpu_relax(); else sched_yield(); /* a task whose thread was preempted */
    }
  }
  ingot_pool_count(p, 0);
  int64_t t2 = ingot_pool_now_ns();
  ingot_pool_adapt(p, adaptive, team, probing, n, ran, t1 - t0, t2 - t1, t2);
  int32_t fail = atomic_load(&p->fail);
  atomic_store(&p->busy, 0);
  return fail;
}
#endif /* __cplusplus */

#endif /* INGOT_PRELUDE_H_ */
/* ===== end of Ingot C prelude ===== */
"""


def _render_prelude() -> str:
    values = {
        "ABI_VERSION": abi.ABI_VERSION,
        "ARG_INT": abi.ARG_INT,
        "ARG_FLOAT": abi.ARG_FLOAT,
        "ARG_HANDLE": abi.ARG_HANDLE,
        "ARG_NULL": abi.ARG_NULL,
        "ARG_TENSOR": abi.ARG_TENSOR,
        "OK": abi.OK,
        "ERR_RUNTIME": abi.ERR_RUNTIME,
        "ERR_ARGUMENT": abi.ERR_ARGUMENT,
    }
    text = _PRELUDE_TEMPLATE.replace("@TIMER_C@", TIMER_C)
    for key, value in values.items():
        text = text.replace(f"@{key}@", str(value))
    assert re.search(r"@[A-Z_]+@", text) is None, "unfilled prelude placeholder"
    return text


#: The C text every generated module starts with (see the module docstring).
C_PRELUDE: str = _render_prelude()


# ----------------------------------------------------------------- C literals

_SIMPLE_ESCAPES = {
    "\\": "\\\\",
    '"': '\\"',
    "\n": "\\n",
    "\t": "\\t",
    "\r": "\\r",
    "?": "\\?",  # never form a trigraph (-std=c11 enables them)
}


def _escape_tokens(s: str) -> list[str]:
    """One C token per source byte: printable ASCII as is, the rest as 3-digit octal."""
    out: list[str] = []
    for ch in s:
        if ch in _SIMPLE_ESCAPES:
            out.append(_SIMPLE_ESCAPES[ch])
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            # Octal escapes stop after 3 digits, so a following digit cannot extend them
            # (hex escapes would swallow it). Non-ASCII text is stored as UTF-8 bytes.
            out.extend(f"\\{b:03o}" for b in ch.encode("utf-8", "surrogatepass"))
    return out


def c_string_literal(s: str, max_line: int = 0) -> str:
    """A C string literal whose bytes are the UTF-8 encoding of ``s``.

    Safe for any text: quotes, backslashes, newlines, control and non-ASCII characters,
    ``*/`` and trigraph sequences. ``s`` must not contain NUL (C strings end there). With
    ``max_line > 0`` the literal is split into adjacent literals of at most that many
    characters, one per line, which C concatenates.

    Example::

        >>> print(c_string_literal('a"b\\\\c'))
        "a\\"b\\\\c"
        >>> print(c_string_literal("é"))
        "\\303\\251"
    """
    if "\x00" in s:
        raise ValueError(
            "c_string_literal: text contains a NUL character, which would end the C string; "
            "remove it or encode the text (e.g. base64) first"
        )
    if _NEEDS_OCTAL.search(s) is not None:
        return _literal_lines(_escape_tokens(s), max_line)
    # Fast path for printable ASCII (a model's embedded source is megabytes): str.replace escapes
    # in C, and a source line longer than max_line is cut without tokenizing. The output is the
    # token loop's (tests/codegen/test_string_literal.py); 10x faster on ResNet-50's 1.5 MB source.
    escaped = (s.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t").replace("\r", "\\r")
               .replace("?", "\\?").split("\n"))
    if max_line <= 0 or sum(map(len, escaped)) + 2 * (len(escaped) - 1) <= max_line:
        return '"' + "\\n".join(escaped) + '"'
    lines: list[str] = []
    for k, part in enumerate(escaped):
        last = k == len(escaped) - 1
        if last and not part:
            break
        part = part if last else part + "\\n"
        if len(part) <= max_line:
            lines.append('"' + part + '"')
            continue
        # Greedy cuts every max_line characters, moved back one where the cut would split a
        # two-character escape: from a token boundary, a run of backslashes is whole "\\\\"
        # tokens plus at most one escape's first character, so an odd run ends mid-token.
        i, n = 0, len(part)
        while i < n:
            j = min(i + max_line, n)
            run = 0
            while j - 1 - run >= i and part[j - 1 - run] == "\\":
                run += 1
            if run % 2 and j < n:
                j = j - 1 if j - 1 > i else j + 1
            lines.append('"' + part[i:j] + '"')
            i = j
    return "\n    ".join(lines)


#: Characters that `_escape_tokens` writes as octal escapes (the fast path handles the rest).
_NEEDS_OCTAL = re.compile(r"[^ -~\n\t\r]")


def _literal_lines(tokens: "list[str]", max_line: int) -> str:
    """Escaped ``tokens`` as one literal, or adjacent literals of at most ``max_line`` characters
    broken after each newline."""
    if max_line <= 0 or sum(map(len, tokens)) <= max_line:
        return '"' + "".join(tokens) + '"'
    lines, cur, width = [], [], 0
    for tok in tokens:
        if cur and width + len(tok) > max_line:
            lines.append('"' + "".join(cur) + '"')
            cur, width = [], 0
        cur.append(tok)
        width += len(tok)
        if tok == "\\n":  # keep source lines readable: break after each newline
            lines.append('"' + "".join(cur) + '"')
            cur, width = [], 0
    if cur:
        lines.append('"' + "".join(cur) + '"')
    return "\n    ".join(lines)


def _json_default(obj):
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    raise TypeError(
        f"module metadata value {obj!r} of type {type(obj).__name__} is not JSON-serializable; "
        "convert it to int/float/str/list/dict first"
    )


def emit_metadata_c(metadata: dict) -> str:
    """C definition of ``ingot_module_metadata``: the metadata dict as an escaped JSON string.

    Example::

        >>> text = emit_metadata_c({"version": 1, "target": "c",
        ...                         "functions": {"main": {"symbol": "ingot_main", "params": []}}})
        >>> text.startswith("INGOT_EXPORT const char ingot_module_metadata[] =")
        True
    """
    md = validate_metadata(metadata)
    text = json.dumps(md, ensure_ascii=False, separators=(",", ":"), default=_json_default,
                      allow_nan=False)
    return (
        f"INGOT_EXPORT const char {abi.SYM_METADATA}[] =\n    "
        + c_string_literal(text, max_line=100)
        + ";\n"
    )


def emit_source_c(source: str) -> str:
    """C definition of ``ingot_module_source`` holding ``source`` (for ``Module.get_source()``).

    Example::

        >>> emit_source_c("int x;").splitlines()[1].strip()
        '"int x;";'
    """
    return (
        f"INGOT_EXPORT const char {abi.SYM_SOURCE}[] =\n    "
        + c_string_literal(source, max_line=100)
        + ";\n"
    )
