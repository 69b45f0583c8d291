"""Size cap and LRU eviction of the kernel cache (ingot.codegen.disk_cache), touch on hit,
concurrent processes, and the `ingot cache` command. Tiny caps, fake entries, small C files."""
import ctypes
import json
import multiprocessing as mp
import os
import shutil
import time

import pytest

from ingot.codegen import disk_cache
from ingot.codegen.toolchain import compile_shared_library, find_compiler

KEY = "ab" + "0" * 62


def _entry(root, name, size, age_s, sub=""):
    """A fake cache file ``name`` (64 hex digits + suffix) of ``size`` bytes, last used ``age_s`` ago."""
    path = os.path.join(root, sub, name[:2], name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(b"x" * size)
    t = time.time() - age_s
    os.utime(path, (t, t))
    return path


def _key(i, suffix):
    return f"{i:02x}" + f"{i:062x}" + suffix


def test_evict_lru_down_to_low_water_keeps_recent_and_foreign(tmp_path):
    root = str(tmp_path)
    old = [_entry(root, _key(i, ".so"), 1000, 10_000 - i * 100) for i in range(8)]  # old[0] least recent
    recent = _entry(root, _key(20, ".json"), 1000, 5, sub="kernel-c")
    young_tmp = _entry(root, _key(21, ".so.abc.tmp"), 1000, 1200)  # a compiler may still write it
    foreign = [_entry(root, "notes.txt", 5000, 99_999), _entry(root, "zz-" + "0" * 62, 5000, 99_999)]
    os.makedirs(tmp_path / "mine")
    (tmp_path / "mine" / ("c" * 64)).write_bytes(b"y" * 5000)  # not a bucket directory
    report = disk_cache.evict(root, max_size=5000, min_age_s=60)
    # 10 kB of entries over a 5 kB cap: LRU first, down to 0.8 x 5000 = 4000 bytes.
    assert report.bytes_before == 10_000 and report.bytes_after == 4000 and report.files_removed == 6
    assert [os.path.exists(p) for p in old] == [False] * 6 + [True] * 2
    assert os.path.exists(recent) and os.path.exists(young_tmp)
    assert all(os.path.exists(p) for p in foreign) and (tmp_path / "mine" / ("c" * 64)).exists()
    # The cap can hold less than the recent files: they stay, the report says so.
    report = disk_cache.evict(root, max_size=0, min_age_s=60)
    assert os.path.exists(recent) and report.files_kept_recent == 2


def test_cap_lives_in_the_directory_and_the_check_is_cheap(tmp_path):
    root = str(tmp_path)
    assert disk_cache.limits(root).max_size == disk_cache.DEFAULT_MAX_SIZE == 2 * 1024 ** 3
    assert disk_cache.set_max_size("4k", root) == 4096
    lim = disk_cache.configure(root, min_age_s=0, check_every=3, min_scan_interval_s=0)
    assert lim.max_size == 4096 and disk_cache.limits(root) == lim
    with pytest.raises(TypeError, match="unknown limit"):
        disk_cache.configure(root, max_bytes=1)
    with pytest.raises(ValueError, match="not understood"):
        disk_cache.set_max_size("lots", root)
    assert disk_cache.maybe_evict(root) is not None  # no marker yet: walks once
    assert disk_cache.maybe_evict(root, added_bytes=100) is None  # under the cap: marker only
    assert json.loads((tmp_path / disk_cache.USAGE_FILE).read_text())["bytes"] == 100
    paths = [_entry(root, _key(i, ".o"), 1000, 100 - i) for i in range(6)]
    assert disk_cache.maybe_evict(root, added_bytes=6000).files_removed == 3  # estimate over the cap
    assert [os.path.exists(p) for p in paths] == [False] * 3 + [True] * 3


def test_another_process_evicting_is_skipped(tmp_path):
    import fcntl

    fd = os.open(tmp_path / disk_cache.LOCK_FILE, os.O_RDWR | os.O_CREAT)
    pid = os.fork()
    if pid == 0:  # the child holds the lock briefly
        fcntl.flock(fd, fcntl.LOCK_EX)
        time.sleep(1.0)
        os._exit(0)
    time.sleep(0.3)
    try:
        assert disk_cache.evict(str(tmp_path), max_size=0).skipped
    finally:
        os.waitpid(pid, 0)
        os.close(fd)
    assert not disk_cache.evict(str(tmp_path), max_size=0).skipped


needs_cc = pytest.mark.skipif(not (shutil.which("cc") or shutil.which("gcc")), reason="no C compiler")



@needs_cc
def test_compile_cache_touches_on_hit_and_stays_under_cap(tmp_path):
    find_compiler()
    root = str(tmp_path)
    first = compile_shared_library("int v0(void) { return 0; }", cache_dir=root)
    t = time.time() - 3600
    os.utime(first, (t, t))
    assert compile_shared_library("int v0(void) { return 0; }", cache_dir=root) == first
    assert time.time() - os.stat(first).st_mtime < 60  # the hit marked it used
    one = os.path.getsize(first) + os.path.getsize(first[:-3] + ".c")
    disk_cache.configure(root, max_size=4 * one, min_age_s=0, check_every=1, min_scan_interval_s=0)
    for i in range(1, 10):
        path = compile_shared_library(f"int v{i}(void) {{ return {i}; }}", cache_dir=root)
        assert ctypes.CDLL(path)[f"v{i}"]() == i
        assert disk_cache.stats(root).bytes <= 4 * one + one  # trimmed at each write
    assert disk_cache.stats(root).files < 20


def _hammer(root, worker, n, out):
    """Compile n libraries and load each at once, while the other worker evicts."""
    ok = 0
    for i in range(n):
        path = compile_shared_library(f"int w{worker}_{i}(void) {{ return {i}; }}", cache_dir=root)
        ok += ctypes.CDLL(path)[f"w{worker}_{i}"]() == i
    out.put(ok)


@needs_cc
def test_two_processes_never_lose_a_file_they_are_about_to_load(tmp_path):
    root = str(tmp_path)
    for i in range(40):  # an old cache far over the cap: every check evicts
        _entry(root, _key(i, ".so"), 4096, 7200 + i)
    disk_cache.configure(root, max_size=8192, min_age_s=30, check_every=1, min_scan_interval_s=0)
    ctx = mp.get_context("fork")
    out = ctx.Queue()
    procs = [ctx.Process(target=_hammer, args=(root, w, 6, out)) for w in range(2)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
    assert [p.exitcode for p in procs] == [0, 0]
    assert sorted(out.get() for _ in procs) == [6, 6]
    assert disk_cache.stats(root).by_kind.get("library", [0])[0] == 12  # only the old fakes went


def test_kernel_cache_stats_clear_and_cli(tmp_path):
    from click.testing import CliRunner

    from ingot.cli.main import main
    from ingot.driver import kernel_cache

    root = str(tmp_path)
    _entry(root, _key(1, ".json"), 300, 5, sub="kernel-c")
    _entry(root, _key(2, ".so"), 700, 5000)
    s = kernel_cache.stats(root)
    assert (s.files, s.bytes) == (2, 1000) and s.by_kind == {"kernel-c": [1, 300], "library": [1, 700]}
    runner = CliRunner()
    res = runner.invoke(main, ["cache", "--dir", root])
    assert res.exit_code == 0 and "2 files" in res.output and "kernel-c" in res.output
    res = runner.invoke(main, ["cache", "--dir", root, "-M", "500"])
    assert res.exit_code == 0 and disk_cache.limits(root).max_size == 500
    res = runner.invoke(main, ["cache", "--dir", root, "--evict"])
    assert res.exit_code == 0 and "evicted: 1 files" in res.output  # the old library; the recent entry stays
    res = runner.invoke(main, ["cache", "--dir", root, "--max-size", "big"])
    assert res.exit_code == 1 and "--max-size" in res.output
    assert kernel_cache.clear(root).files_removed == 1 and kernel_cache.stats(root).files == 0
    assert disk_cache.limits(root).max_size == 500  # the setting survives a clear
