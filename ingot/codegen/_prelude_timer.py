"""The timing helpers of the C prelude: ``ingot_time_function`` and ``ingot_time_function_flushed``.

Note: `ingot.codegen.prelude` pastes `TIMER_C` into every module (it is part of the runtime ABI,
see that module). ``ingot_time_function`` follows TVM's ``time_evaluator``: ``repeat`` repeats of
``number`` back-to-back calls. Back-to-back calls keep a kernel's weights and outputs in cache,
which inside a model they are not (there they come from L3 or DRAM: ResNet-50's kernels ran
1.1-1.7x slower in the model than in such loops). ``ingot_time_function_flushed`` therefore
flushes the cache lines of the tensor arguments its ``flush`` mask selects (ABI version 3; the
Python default is TVM's ``cache_flush_cpu_non_first_arg``, every argument but the first) before
*each* call and times each call alone. Inside a model the activations are hot (the previous kernel
has just written them) and the weights are cold, so the model tuner flushes exactly the kernel's
weight arguments (`ingot.tune.runner.RunnerConfig.cache_flush`).

Example::

    >>> from ingot.codegen._prelude_timer import TIMER_C
    >>> "ingot_time_function_flushed" in TIMER_C and "clflush" in TIMER_C
    True
"""

TIMER_C = r"""INGOT_INLINE double ingot_now_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* The argument checks both timers share: the function and output pointers, and TVM's ranges
 * (number >= 1, repeat >= 1, min_repeat_ms >= 0); the error names the timer ``who``. */
INGOT_INLINE int32_t ingot_check_timer_args(const char* who, const void* fn, const double* out,
                                            int32_t number, int32_t repeat, int32_t min_repeat_ms,
                                            char* err, int32_t err_len) {
  if (fn == NULL || out == NULL) {
    return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT,
                           "%s: function and output pointers must be non-NULL", who);
  }
  if (number < 1 || repeat < 1 || min_repeat_ms < 0) {
    return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT,
                           "%s: expects number >= 1, repeat >= 1 and min_repeat_ms >= 0, got "
                           "number=%d repeat=%d min_repeat_ms=%d",
                           who, (int)number, (int)repeat, (int)min_repeat_ms);
  }
  return INGOT_OK;
}

/* TVM time_evaluator semantics: one warm-up call; then `repeat` repeats, each running `number`
 * calls; if min_repeat_ms > 0, `number` grows (and stays grown) until one repeat lasts at least
 * min_repeat_ms. out_seconds_per_repeat[r] = mean seconds per call of repeat r. */
INGOT_WEAK_EXPORT int32_t ingot_time_function(void* fn, IngotValue* args, int32_t* codes,
                                              int32_t n, int32_t number, int32_t repeat,
                                              int32_t min_repeat_ms,
                                              double* out_seconds_per_repeat, char* err,
                                              int32_t err_len) {
  union {
    void* p;
    IngotPackedFunc f;
  } u;
  int32_t r, rc;
  int64_t num = number;
  u.p = fn;
  rc = ingot_check_timer_args("ingot_time_function", fn, out_seconds_per_repeat, number, repeat,
                              min_repeat_ms, err, err_len);
  if (rc != 0) return rc;
  rc = u.f(args, codes, n, err, err_len); /* warm-up */
  if (rc != 0) return rc;
  for (r = 0; r < repeat; ++r) {
    double duration_ms = 0.0;
    int zero_times = 0;
    do {
      double t0, t1;
      int64_t j;
      if (duration_ms > 0.0) {
        double grow = (double)min_repeat_ms / (duration_ms / (double)num) + 1.0;
        double golden = (double)num * 1.618;
        double next = grow > golden ? grow : golden;
        num = next > 1e9 ? (int64_t)1000000000 : (int64_t)next;
      }
      t0 = ingot_now_seconds();
      for (j = 0; j < num; ++j) {
        rc = u.f(args, codes, n, err, err_len);
        if (rc != 0) return rc;
      }
      t1 = ingot_now_seconds();
      duration_ms = (t1 - t0) * 1e3;
      if (duration_ms <= 0.0) {
        duration_ms = 0.0;
        zero_times++;
      }
    } while (duration_ms < (double)min_repeat_ms && zero_times < 10);
    out_seconds_per_repeat[r] = duration_ms / 1e3 / (double)num;
  }
  return INGOT_OK;
}

/* ----------------------------------------------- timing with cold caches */
/* Write back and invalidate every cache line of [p, p + nbytes). clflush(opt) (Arm: dc civac) is
 * coherent: it evicts the line from the caches of *every* core, so flushing from the calling thread
 * also empties what the other OpenMP threads of a parallel kernel hold in their private L2 (checked
 * by measurement, docs/tuning.md). The fence makes the flush complete before the clock starts.
 * Returns -1 where the CPU has no user-mode flush instruction. */
INGOT_INLINE int32_t ingot_flush_bytes(const void* p, size_t nbytes) {
#if defined(__x86_64__) || defined(__i386__)
  const size_t line = 64; /* the clflush line size of every x86-64 CPU (CPUID.1:EBX[15:8] * 8) */
#elif defined(__aarch64__)
  uint64_t ctr;
  size_t line;
  __asm__ volatile("mrs %0, ctr_el0" : "=r"(ctr));
  line = (size_t)4 << ((ctr >> 16) & 15); /* DminLine: the smallest data-cache line */
#endif
#if defined(__x86_64__) || defined(__i386__) || defined(__aarch64__)
  const char* c = (const char*)((uintptr_t)p & ~(uintptr_t)(line - 1));
  const char* end = (const char*)p + nbytes;
  for (; c < end; c += line) {
#if defined(__aarch64__)
    __asm__ volatile("dc civac, %0" : : "r"(c) : "memory");
#elif defined(__CLFLUSHOPT__)
    /* clflushopt: the same eviction, but not ordered with the other flushes: 4 MB in 0.25 ms
     * here, where clflush takes 3-9 ms (each clflush waits for the previous one) */
    __builtin_ia32_clflushopt(c);
#else
    __builtin_ia32_clflush(c);
#endif
  }
#if defined(__aarch64__)
  __asm__ volatile("dsb ish" : : : "memory");
#else
  __builtin_ia32_mfence();
#endif
  return 0;
#else
  (void)p;
  (void)nbytes;
  return -1;
#endif
}

/* Bytes spanned by a CPU tensor's elements (strides in elements, DLPack; NULL strides: compact). */
INGOT_INLINE size_t ingot_tensor_span_bytes(const DLTensor* t) {
  size_t elem = ((size_t)t->dtype.bits * (size_t)t->dtype.lanes + 7) / 8, span = 1;
  int32_t i;
  for (i = 0; i < t->ndim; ++i) {
    int64_t extent = t->shape[i], stride;
    if (extent <= 0) return 0;
    stride = t->strides == NULL ? 0 : (t->strides[i] < 0 ? -t->strides[i] : t->strides[i]);
    span = t->strides == NULL ? span * (size_t)extent : span + (size_t)(extent - 1) * (size_t)stride;
  }
  return span * elem;
}

/* Flush the tensor arguments i with flush[i] != 0 (the caller's choice: TVM's default is every
 * argument but the first; the model tuner flushes a kernel's weights, which inside a model come
 * from L3/DRAM, and not its activations, which the previous kernel has just written). A selected
 * argument that is not a CPU tensor is an error naming its index: silently skipping it would time
 * a different cache state than the caller asked for. */
INGOT_INLINE int32_t ingot_flush_args(IngotValue* args, int32_t* codes, int32_t n,
                                      const int8_t* flush, char* err, int32_t err_len) {
  int32_t i;
  for (i = 0; i < n; ++i) {
    const DLTensor* t = (const DLTensor*)args[i].v_handle;
    if (!flush[i]) continue;
    if (codes[i] != INGOT_ARG_TENSOR || t == NULL || t->data == NULL) {
      return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT,
                             "cache flush: argument %d is selected for flushing but is not a tensor "
                             "(type code %d); select only tensor arguments",
                             (int)i, (int)codes[i]);
    }
    if (t->device.device_type != kDLCPU && t->device.device_type != kDLCUDAHost) {
      return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT,
                             "cache flush: argument %d is on device type %d; only CPU memory can be "
                             "flushed (time device kernels without cache_flush)",
                             (int)i, (int)t->device.device_type);
    }
    if (ingot_flush_bytes((const char*)t->data + t->byte_offset, ingot_tensor_span_bytes(t)) != 0) {
      return ingot_set_error(err, err_len, INGOT_ERR_RUNTIME,
                             "cache flush is not supported on this CPU architecture (no user-mode "
                             "cache-line flush instruction); time without cache_flush");
    }
  }
  return INGOT_OK;
}

/* ingot_time_function with cold caches: every call of every repeat is preceded by
 * ingot_flush_args (the arguments with flush[i] != 0; `flush` has n entries) and timed alone (the flush is outside the timed region); a repeat runs at
 * least `number` calls and, with min_repeat_ms > 0, until its timed calls add up to that long.
 * out_seconds_per_repeat[r] = mean seconds per call of repeat r. TVM flushes once per repeat,
 * so there only the first of `number` calls is cold; here each one is. A separate symbol rather
 * than a flags argument to ingot_time_function: a library built before this helper existed has
 * no such symbol, so asking it for a cold timing fails loudly at lookup. ABI version 3 added the
 * `flush` mask; the runtime reads ingot_abi_version before calling it and refuses a version-2
 * library (same symbol, no mask), which would be called with the wrong arguments. */
INGOT_WEAK_EXPORT int32_t ingot_time_function_flushed(void* fn, IngotValue* args, int32_t* codes,
                                                      int32_t n, const int8_t* flush,
                                                      int32_t number, int32_t repeat,
                                                      int32_t min_repeat_ms,
                                                      double* out_seconds_per_repeat, char* err,
                                                      int32_t err_len) {
  union {
    void* p;
    IngotPackedFunc f;
  } u;
  int32_t r, rc;
  u.p = fn;
  rc = ingot_check_timer_args("ingot_time_function_flushed", fn, out_seconds_per_repeat, number,
                              repeat, min_repeat_ms, err, err_len);
  if (rc != 0) return rc;
  if (n > 0 && (args == NULL || codes == NULL || flush == NULL)) {
    return ingot_set_error(err, err_len, INGOT_ERR_ARGUMENT,
                           "ingot_time_function_flushed: argument, type-code and flush-mask "
                           "pointers must be non-NULL");
  }
  rc = u.f(args, codes, n, err, err_len); /* warm-up: page faults, OpenMP thread start */
  if (rc != 0) return rc;
  for (r = 0; r < repeat; ++r) {
    double total = 0.0;
    int64_t calls = 0;
    /* the cap keeps a clock that never advances from looping forever under min_repeat_ms */
    while (calls < number || (total * 1e3 < (double)min_repeat_ms && calls < 100000000)) {
      double t0;
      rc = ingot_flush_args(args, codes, n, flush, err, err_len);
      if (rc != 0) return rc;
#ifdef _OPENMP
      /* Wake the OpenMP team (outside the timed region): a flush can outlast the workers' spin
       * wait, and a sleeping worker makes the timed call pay a futex wake-up (a scheduler time
       * slice on a loaded machine), which inside a model, kernels back to back, it never pays. */
#pragma omp parallel
      {
        __asm__ volatile("" : : : "memory");
      }
#endif
      t0 = ingot_now_seconds();
      rc = u.f(args, codes, n, err, err_len);
      total += ingot_now_seconds() - t0;
      if (rc != 0) return rc;
      calls++;
    }
    out_seconds_per_repeat[r] = total / (double)calls;
  }
  return INGOT_OK;
}
"""
