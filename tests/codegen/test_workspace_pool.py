"""The C prelude's workspace pool: large blocks are reused across kernel calls, never shared.

Kernels allocate intermediates over the stack limit with ``ingot_alloc_workspace``; blocks of
at least 64 KiB go back to a per-library pool on free instead of to glibc (which unmaps them:
a page fault per 4 KiB on the next call). A C harness drives the allocator directly.
"""
import shutil
import subprocess

import pytest

from ingot.codegen.prelude import C_PRELUDE

pytestmark = pytest.mark.compiler

HARNESS = r"""
#include <assert.h>
int main(void) {
  /* Step 1: a freed large block is handed out again for a request that fits. */
  float* a = (float*)ingot_alloc_workspace(1 << 20);
  assert(a != NULL && ((size_t)a % 64) == 0);
  a[0] = 1.0f; a[(1 << 18) - 1] = 2.0f;
  ingot_free_workspace(a);
  float* b = (float*)ingot_alloc_workspace(1 << 19);
  assert(b == a);
  /* Step 2: a block in use is never handed out twice; a too-small pooled block is not used. */
  float* c = (float*)ingot_alloc_workspace(1 << 19);
  assert(c != b);
  ingot_free_workspace(c);
  float* d = (float*)ingot_alloc_workspace(1 << 21);
  assert(d != c && d != b);
  ingot_free_workspace(b); ingot_free_workspace(d);
  /* Step 3: small blocks go straight back to malloc; zero bytes is a valid request. */
  void* s = ingot_alloc_workspace(0);
  assert(s != NULL);
  ingot_free_workspace(s);
  ingot_free_workspace(NULL);
  /* Step 4: threads allocating at once get disjoint blocks (each writes and checks its own). */
  int bad = 0;
  #pragma omp parallel for num_threads(4) reduction(+:bad)
  for (int it = 0; it < 4000; ++it) {
    size_t n = (size_t)(16384 + (it % 7) * 8192);
    int* w = (int*)ingot_alloc_workspace(n * sizeof(int));
    for (size_t k = 0; k < n; k += 97) w[k] = it;
    for (size_t k = 0; k < n; k += 97) bad += w[k] != it;
    ingot_free_workspace(w);
  }
  assert(bad == 0);
  /* Step 5: the pool keeps at most its slot count; freeing many blocks keeps the largest. */
  void* many[20];
  for (int i = 0; i < 20; ++i) many[i] = ingot_alloc_workspace((size_t)(65536 + i * 4096));
  for (int i = 0; i < 20; ++i) ingot_free_workspace(many[i]);
  void* big = ingot_alloc_workspace((size_t)(65536 + 19 * 4096));
  assert(big == many[19]);
  ingot_free_workspace(big);
  return 0;
}
"""


def test_workspace_pool_reuses_large_blocks_and_never_shares_them(tmp_path):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    src = tmp_path / "pool.c"
    src.write_text(C_PRELUDE + HARNESS)
    exe = tmp_path / "pool"
    subprocess.run([cc, "-O1", "-fopenmp", "-Wall", "-Werror=unused-variable", str(src), "-o", str(exe), "-lm"],
                   check=True, capture_output=True, text=True)
    run = subprocess.run([str(exe)], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
