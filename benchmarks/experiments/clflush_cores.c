/* Does a cache flush issued on core 0 evict lines held in core 1's private L2? (Ingot's cold-cache
 * timer flushes from the calling thread only; a 2-thread kernel's second thread has its own L2.)
 * Each of 2 OpenMP threads (pinned) sums its own 1 MiB half of a buffer and times itself.
 * Thread 1's read time is measured: warm (no flush), after thread 0 (master) flushed the whole
 * buffer (clflush, and clflushopt), and after thread 1 itself flushed its half.
 *   gcc -O2 -march=native -fopenmp benchmarks/experiments/clflush_cores.c -o /tmp/clflush_cores
 *   OMP_PROC_BIND=true OMP_PLACES=cores /tmp/clflush_cores */
#include <omp.h>
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
#define HALF (1u << 20)
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static void flush(const char* p, size_t n) { for (size_t i = 0; i < n; i += 64) __builtin_ia32_clflush(p + i); __builtin_ia32_mfence(); }
static void flushopt(const char* p, size_t n) { for (size_t i = 0; i < n; i += 64) __builtin_ia32_clflushopt(p + i); __builtin_ia32_mfence(); }
int main(void) {
  char* buf = aligned_alloc(64, 2 * HALF);
  for (size_t i = 0; i < 2 * HALF; ++i) buf[i] = (char)i;
  double best[4] = {1e9, 1e9, 1e9, 1e9};
  volatile long sink = 0;
  for (int rep = 0; rep < 200; ++rep) {
    for (int mode = 0; mode < 4; ++mode) {
      double t1 = 0;
      #pragma omp parallel num_threads(2)
      {
        int me = omp_get_thread_num();
        const long* mine = (const long*)(buf + me * HALF);
        long s = 0;
        for (size_t i = 0; i < HALF / 8; ++i) s += mine[i];   /* touch: bring my half into my L2 */
        #pragma omp barrier
        if (mode == 1 && me == 0) flush(buf, 2 * HALF);        /* master flushes everything */
        if (mode == 2 && me == 1) flush(buf + HALF, HALF);     /* thread 1 flushes its own half */
        if (mode == 3 && me == 0) flushopt(buf, 2 * HALF);     /* master, with clflushopt */
        #pragma omp barrier
        double t0 = now();
        for (size_t i = 0; i < HALF / 8; ++i) s += mine[i];
        double dt = now() - t0;
        if (me == 1) t1 = dt;
        sink += s;
      }
      if (t1 < best[mode]) best[mode] = t1;
    }
  }
  printf("thread 1 reading its 1 MiB half (min of 200, us): warm %.1f | after core-0 clflush of all %.1f | "
         "after core-0 clflushopt of all %.1f | after its own clflush %.1f\n",
         best[0] * 1e6, best[1] * 1e6, best[3] * 1e6, best[2] * 1e6);
  return 0;
}
