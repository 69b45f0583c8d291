"""The thread-count policy (`ingot.runtime.threads`) on fake environments, affinity sets and
cgroup files, and the per-library count in compiled code (issue 18). No timings."""
import ctypes
import os
import threading

import numpy as np
import pytest

from ingot.runtime.threads import (cgroup_cpu_limit, check_num_threads, default_num_threads,
                                   num_threads_for_target)


def _cgroup(tmp_path, files: dict, own: str = "/"):
    """A fake cgroup tree (``files``: relative path -> content) and /proc/self/cgroup naming ``own``."""
    root = tmp_path / "cgroup"
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
    root.mkdir(parents=True, exist_ok=True)
    proc = root.parent / "proc_self_cgroup"
    proc.write_text(f"0::{own}\n")
    return str(root), str(proc)


def _default(tmp_path, files=None, own="/", environ=None, affinity=(0, 1)):
    root, proc = _cgroup(tmp_path, files or {}, own)
    return default_num_threads(environ=environ or {}, affinity=set(affinity), cgroup_root=root, proc_cgroup=proc)


def test_no_limits_uses_the_affinity_mask(tmp_path):
    assert _default(tmp_path, affinity=range(8)) == 8
    assert _default(tmp_path / "m", files={"cpu.max": "max 100000"}, affinity=(0, 1)) == 2


def test_affinity_restricts(tmp_path):
    assert _default(tmp_path, affinity=(1,)) == 1


def test_cgroup_v2_quota_of_one_cpu_on_two_cores_runs_one_thread(tmp_path):
    assert _default(tmp_path, files={"cpu.max": "100000 100000"}, affinity=(0, 1)) == 1


def test_cgroup_v2_fractional_quota_rounds_up(tmp_path):
    assert _default(tmp_path, files={"cpu.max": "150000 100000"}, affinity=range(4)) == 2
    assert _default(tmp_path / "h", files={"cpu.max": "50000 100000"}, affinity=range(4)) == 1


def test_cgroup_v2_quota_never_raises_above_affinity(tmp_path):
    assert _default(tmp_path, files={"cpu.max": "800000 100000"}, affinity=(0, 1)) == 2


def test_cgroup_v2_tightest_limit_along_the_own_path_wins(tmp_path):
    files = {"cpu.max": "max 100000", "a/cpu.max": "300000 100000", "a/b/cpu.max": "max 100000"}
    assert _default(tmp_path, files=files, own="/a/b", affinity=range(8)) == 3
    root, proc = _cgroup(tmp_path, files, "/a/b")
    assert cgroup_cpu_limit(root, proc) == 3.0


def test_cgroup_v1_quota(tmp_path):
    files = {"cpu/cpu.cfs_quota_us": "100000", "cpu/cpu.cfs_period_us": "100000"}
    assert _default(tmp_path, files=files, affinity=(0, 1)) == 1
    unlimited = {"cpu/cpu.cfs_quota_us": "-1", "cpu/cpu.cfs_period_us": "100000"}
    assert _default(tmp_path / "u", files=unlimited, affinity=(0, 1)) == 2


def test_omp_num_threads_is_the_users_choice(tmp_path):
    files = {"cpu.max": "100000 100000"}
    assert _default(tmp_path, files=files, environ={"OMP_NUM_THREADS": "3"}) == 3
    free = tmp_path / "free"
    assert _default(free, environ={"OMP_NUM_THREADS": "4,2"}, affinity=range(8)) == 4
    # not a positive number: ignored, as OpenMP ignores it
    assert _default(free, environ={"OMP_NUM_THREADS": "lots"}, affinity=(0, 1)) == 2
    assert _default(free, environ={"OMP_NUM_THREADS": "0"}, affinity=(0, 1)) == 2


def test_garbage_cgroup_files_are_ignored(tmp_path):
    assert _default(tmp_path, files={"cpu.max": "nonsense"}, affinity=(0, 1)) == 2
    assert _default(tmp_path / "e", files={"cpu.max": ""}, affinity=(0, 1)) == 2


def test_target_num_cores_is_a_ceiling(monkeypatch):
    from ingot.runtime import threads
    from ingot.target import Target

    monkeypatch.setattr(threads, "default_num_threads", lambda **kw: 2)
    assert num_threads_for_target(Target("llvm -num-cores=64")) == 2
    assert num_threads_for_target(Target("llvm -num-cores=1")) == 1
    assert num_threads_for_target(Target("llvm")) == 2


def test_check_num_threads_names_the_argument():
    assert check_num_threads(3) == 3
    assert check_num_threads(None) == default_num_threads()
    with pytest.raises(ValueError, match="set_num_threads"):
        check_num_threads(-1, "Package.set_num_threads(n)")
    with pytest.raises(ValueError, match="positive int"):
        check_num_threads(1.5)


# ------------------------------------------------------------------ compiled code

_TEAM = r"""
/* How many threads the parallel loop ran on (the team size seen inside it). */
INGOT_EXPORT int32_t ingot_team_probe(IngotValue* args, int32_t* type_codes, int32_t num_args, char* err,
                                      int32_t err_len) {
  (void)type_codes; (void)num_args; (void)err; (void)err_len;
  int32_t* out = (int32_t*)((DLTensor*)args[0].v_handle)->data;
  out[0] = 0;
  #pragma omp parallel for schedule(static) num_threads(ingot_team_size())
  for (int i = 0; i < 64; ++i) {
    int n = omp_get_num_threads();
    #pragma omp atomic write
    out[0] = n;
  }
  return 0;
}
"""


@pytest.fixture(scope="module")
def probe_lib(tmp_path_factory):
    from ingot.codegen.prelude import C_PRELUDE
    from ingot.codegen.toolchain import compile_shared_library
    from ingot.runtime.module import Module

    os.environ.setdefault("INGOT_CACHE_DIR", str(tmp_path_factory.mktemp("cache")))
    return Module(compile_shared_library(C_PRELUDE + _TEAM))


def _team(lib):
    out = np.zeros(1, "int32")
    lib["ingot_team_probe"](out)
    return int(out[0])


def test_library_thread_count_holds_for_every_calling_thread(probe_lib):
    if os.cpu_count() < 2:
        pytest.skip("needs 2 CPUs for OpenMP to give a team of 2")
    assert probe_lib.set_num_threads(2) == 2
    assert _team(probe_lib) == 2
    assert probe_lib.set_num_threads(1) == 1 and probe_lib.get_num_threads() == 1
    seen = []
    t = threading.Thread(target=lambda: seen.append(_team(probe_lib)))
    t.start()
    t.join()
    assert seen == [1] and _team(probe_lib) == 1  # another Python thread sees the library's count
    assert probe_lib.set_num_threads(0) == default_num_threads()


def test_library_loaded_with_cdll_releases_the_gil(probe_lib):
    assert isinstance(probe_lib._lib, ctypes.CDLL) and not isinstance(probe_lib._lib, ctypes.PyDLL)


def test_small_parallel_nests_run_on_one_thread_large_ones_fork():
    from ingot.codegen.c.printer import PARALLEL_MIN_STORES, _parallel_pragma
    from ingot.ir import Var
    from ingot.ir.buffer import decl_buffer
    from ingot.tir.stmt import BufferStore, For, ForKind

    def nest(n):
        i = Var("i", "int32")
        b = decl_buffer((n,), "float32", "B")
        return For(i, 0, n, ForKind.PARALLEL, BufferStore(b, 0.0, [i]))

    small, large = _parallel_pragma(nest(64)), _parallel_pragma(nest(PARALLEL_MIN_STORES))
    assert small.endswith("num_threads(ingot_team_size()) if(0)")
    assert large.endswith("num_threads(ingot_team_size())")
