"""How many threads parallel loops use: the one policy of the runtime.

Note: a compiled library's parallel loops run on ``ingot_num_threads`` OpenMP threads, a count
kept per library (``Module.set_num_threads``; ``#pragma omp parallel for num_threads(...)``
reads it, so it holds for every calling thread, not only the one that set it). Unless the user
sets it (``ingot.run(..., num_threads=N)``, ``Package.set_num_threads``, ``ingot run
--threads``), a library gets `default_num_threads`: what the system lets this process use —

1. ``OMP_NUM_THREADS`` when set (the standard way a user says "use N"; the first entry of a
   nested list ``"4,2"``), else
2. the CPUs of the process's affinity mask (``os.sched_getaffinity(0)``: ``taskset``, cpusets),
3. capped by the cgroup CPU quota (v2 ``cpu.max`` ``"<quota> <period>"`` or ``"max ..."``; v1
   ``cpu.cfs_quota_us`` / ``cpu.cfs_period_us``), rounded up: a container limited to 1 CPU on a
   2-core host runs 1 thread, one limited to 1.5 CPUs runs 2.

A build-time ``-num-cores=N`` (the target) is what the schedules were tiled for; at load it is a
ceiling, capped by the same system limit (`num_threads_for_target`): a package built on a large
machine does not oversubscribe a small one.

Why more threads than allowed CPUs hurts: an OpenMP loop ends at a barrier, so a loop split over
two threads where only one CPU is granted waits for the descheduled thread's next time slice
(milliseconds) on every kernel. Within the count, a library's thread pool also adapts at run time:
while its joins come back late (a core busy with another process) it runs loops on one thread fewer,
probing the full team now and then (docs/runtime.md "Adaptive team"; ``Module.set_adaptive_team``).

Example:
    >>> default_num_threads(environ={"OMP_NUM_THREADS": "3"}, affinity={0, 1})
    3
    >>> default_num_threads(environ={}, affinity={0, 1}, cgroup_root="/nonexistent")
    2
"""
from __future__ import annotations

import math
import os
from typing import Any, Mapping

__all__ = ["default_num_threads", "cgroup_cpu_limit", "num_threads_for_target", "check_num_threads"]


def _omp_num_threads(environ: Mapping[str, str]) -> "int | None":
    """The first positive integer of ``OMP_NUM_THREADS`` (None when unset or not a number,
    which OpenMP ignores too)."""
    value = environ.get("OMP_NUM_THREADS", "").split(",")[0].strip()
    try:
        n = int(value)
    except ValueError:
        return None
    return n if n > 0 else None


def _read(path: str) -> "str | None":
    try:
        with open(path) as f:
            return f.read().strip()
    except OSError:
        return None


def _own_cgroup_dirs(cgroup_root: str, proc_cgroup: str) -> list:
    """Directories whose CPU limits apply to this process, innermost first: its cgroup v2 path
    from ``/proc/self/cgroup`` (``0::/a/b``) and each parent up to the root, then the root
    itself (inside a container's cgroup namespace the own path is ``/``: the root is the
    container's group)."""
    dirs = []
    text = _read(proc_cgroup) or ""
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3 and parts[0] == "0" and parts[1] == "":
            rel = parts[2].strip().strip("/")
            while rel:
                dirs.append(os.path.join(cgroup_root, rel))
                rel = os.path.dirname(rel)
    dirs.append(cgroup_root)
    return dirs


def cgroup_cpu_limit(cgroup_root: str = "/sys/fs/cgroup", proc_cgroup: str = "/proc/self/cgroup") -> "float | None":
    """The CPUs a cgroup quota grants this process (e.g. ``1.5``), or None when unlimited or
    unknown. Reads cgroup v2 ``cpu.max`` along the process's own cgroup path (the tightest
    wins), else cgroup v1 ``cpu/cpu.cfs_quota_us`` and ``cpu.cfs_period_us``.

    Example:
        >>> import os, tempfile
        >>> d = tempfile.mkdtemp()
        >>> with open(os.path.join(d, "cpu.max"), "w") as f:
        ...     _ = f.write("150000 100000")
        >>> cgroup_cpu_limit(d, proc_cgroup="/nonexistent")
        1.5
    """
    limits = []
    for d in _own_cgroup_dirs(cgroup_root, proc_cgroup):
        text = _read(os.path.join(d, "cpu.max"))
        if text:
            fields = text.split()
            if len(fields) >= 1 and fields[0] != "max":
                try:
                    quota, period = int(fields[0]), int(fields[1]) if len(fields) > 1 else 100000
                except ValueError:
                    continue
                if quota > 0 and period > 0:
                    limits.append(quota / period)
    if limits:
        return min(limits)
    for v1 in ("cpu", "cpu,cpuacct", "cpuacct,cpu"):
        quota, period = (_read(os.path.join(cgroup_root, v1, f)) for f in ("cpu.cfs_quota_us", "cpu.cfs_period_us"))
        try:
            q, p = int(quota or ""), int(period or "")
        except ValueError:
            continue
        if q > 0 and p > 0:
            return q / p
    return None


def default_num_threads(*, environ: "Mapping[str, str] | None" = None, affinity: "Any | None" = None,
                        cgroup_root: str = "/sys/fs/cgroup", proc_cgroup: str = "/proc/self/cgroup") -> int:
    """The thread count parallel loops use unless the user sets one (see the module note):
    ``OMP_NUM_THREADS`` if set, else the CPUs of the affinity mask capped by the cgroup quota
    (rounded up); at least 1. The arguments replace the process's own environment, affinity set
    and cgroup files (tests).

    Example:
        >>> default_num_threads(environ={}, affinity={0, 1, 2, 3}, cgroup_root="/nonexistent")
        4
    """
    environ = os.environ if environ is None else environ
    n = _omp_num_threads(environ)
    if n is not None:
        return n
    if affinity is None:
        try:
            affinity = os.sched_getaffinity(0)
        except (AttributeError, OSError):  # not Linux
            affinity = range(os.cpu_count() or 1)
    n = max(1, len(affinity))
    limit = cgroup_cpu_limit(cgroup_root, proc_cgroup)
    if limit is not None:
        n = min(n, max(1, math.ceil(limit - 1e-9)))
    return n


def num_threads_for_target(target: Any) -> int:
    """Threads for a library built for ``target`` (an ``ingot.target.Target``): its explicit
    ``-num-cores`` capped by `default_num_threads`, else `default_num_threads`.

    Example:
        >>> from ingot.target import Target
        >>> num_threads_for_target(Target("llvm -num-cores=64")) <= default_num_threads()
        True
    """
    allowed = default_num_threads()
    explicit = (getattr(target, "attrs", None) or {}).get("num-cores")
    return min(int(explicit), allowed) if explicit else allowed


def check_num_threads(n: Any, what: str = "num_threads") -> int:
    """``n`` as a positive int thread count; ``None`` or ``0`` means `default_num_threads`.

    Example:
        >>> check_num_threads(2)
        2
    """
    if n is None or (isinstance(n, int) and not isinstance(n, bool) and n == 0):
        return default_num_threads()
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"{what} must be a positive int (or 0/None for the system default, "
                         f"{default_num_threads()} here), got {n!r}")
    return n
