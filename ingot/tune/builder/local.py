"""`LocalBuilder`: lower + C codegen + compile in a pool of long-lived worker processes.

Note: starting a Python worker costs far more than lowering a small kernel (TVM 0.27 spends
about 12 s per builder process on this machine), so the pool is created once, on first use, and
reused for every batch; workers import Ingot once. The compile cache of
`ingot.codegen.toolchain` (keyed by the C source and flags) makes rebuilding an identical
candidate free. A worker that dies (e.g. killed for memory) breaks the pool: the batch's
unfinished candidates are recorded as errors and a fresh pool is started for the next batch. A
candidate that takes longer than ``timeout_s`` is an error too, and the pool is restarted
because a running task cannot be cancelled.

Example:
    >>> # b = LocalBuilder(max_workers=2)
    >>> # [r] = b.build([BuilderInput(sch.mod, "llvm -num-cores=2")]); r.artifact_path
"""
from __future__ import annotations

import concurrent.futures as cf
import os
import traceback
from typing import Any, Optional, Sequence

from .base import Builder, BuilderInput, BuilderResult


def build_candidate(mod: Any, target: str, cache_dir: "str | None" = None) -> str:
    """Lower a scheduled module, generate C and compile it; returns the shared library path
    (runs in a builder worker; also callable directly).

    Example:
        >>> # path = build_candidate(sch.mod, "llvm -num-cores=2")
    """
    from ingot.codegen.build import compile_options_for
    from ingot.codegen.c import generate_c
    from ingot.codegen.toolchain import compile_shared_library
    from ingot.driver.build import lower
    from ingot.target import as_target

    target = as_target(target)
    with target:
        lowered = lower(mod)
    source = generate_c(lowered, target)
    return compile_shared_library(source.code, compile_options_for(target), cache_dir=cache_dir)


def _worker_build(mod: Any, target: str, cache_dir: "str | None") -> "tuple[Optional[str], Optional[str]]":
    try:
        return build_candidate(mod, target, cache_dir), None
    except Exception as err:  # any failure is this candidate's error, never the tuner's
        tb = traceback.format_exc(limit=4)
        return None, f"BuildError: {type(err).__name__}: {err}\n{tb[-1500:]}"


def _worker_ready() -> int:
    # Imported up front so the first real build does not pay the import cost.
    import ingot.codegen.build  # noqa: F401
    import ingot.driver.build  # noqa: F401

    return os.getpid()


class LocalBuilder(Builder):
    """Builds candidates in parallel in ``max_workers`` long-lived processes.

    ``max_workers``: default the number of CPU cores. ``timeout_s``: per-candidate limit.
    ``cache_dir``: the compile cache (default: Ingot's user cache directory).

    Example:
        >>> # with LocalBuilder(max_workers=2) as b: results = b.build(inputs)
    """

    def __init__(self, max_workers: "int | None" = None, timeout_s: float = 120.0,
                 cache_dir: "str | os.PathLike | None" = None):
        self.max_workers = int(max_workers or os.cpu_count() or 1)
        if self.max_workers < 1:
            raise ValueError(f"LocalBuilder: max_workers must be >= 1, got {max_workers}")
        self.timeout_s = float(timeout_s)
        self.cache_dir = os.fspath(cache_dir) if cache_dir is not None else None
        self._pool: Optional[cf.ProcessPoolExecutor] = None
        self.pools_started = 0

    def _get_pool(self) -> cf.ProcessPoolExecutor:
        if self._pool is None:
            # forkserver/spawn, not fork, and __main__ hidden while workers start: see _process.
            from .._process import context, hidden_main

            with hidden_main():
                self._pool = cf.ProcessPoolExecutor(max_workers=self.max_workers, mp_context=context())
                self.pools_started += 1
                ready = [self._pool.submit(_worker_ready) for _ in range(self.max_workers)]
                for f in ready:
                    f.result()
        return self._pool

    def build(self, inputs: Sequence[BuilderInput]) -> "list[BuilderResult]":
        """Build every input (in parallel); one `BuilderResult` per input, in order.

        Example:
            >>> # [r.artifact_path or r.error_msg for r in LocalBuilder().build(inputs)]
        """
        if not inputs:
            return []
        pool = self._get_pool()
        futures = [pool.submit(_worker_build, i.mod, str(i.target), self.cache_dir) for i in inputs]
        results: list[BuilderResult] = []
        deadline_broken = False
        for fut in futures:
            try:
                path, err = fut.result(timeout=self.timeout_s if not deadline_broken else 0.01)
                results.append(BuilderResult(path, err))
            except cf.TimeoutError:
                deadline_broken = True
                results.append(BuilderResult(error_msg=f"BuildError: timed out after {self.timeout_s:.0f} s"))
            except cf.process.BrokenProcessPool as err:
                deadline_broken = True
                results.append(BuilderResult(error_msg=f"BuildError: builder worker died ({err})"))
        if deadline_broken:
            self._restart()
        return results

    def _restart(self) -> None:
        pool, self._pool = self._pool, None
        if pool is not None:
            # A hung task cannot be cancelled: end the workers this builder started.
            for proc in list(getattr(pool, "_processes", {}).values()):
                if proc.is_alive():
                    proc.kill()
            pool.shutdown(wait=False, cancel_futures=True)

    def shutdown(self) -> None:
        """Stop the worker processes (a later `build` starts new ones)."""
        if self._pool is not None:
            self._pool.shutdown(wait=True, cancel_futures=True)
            self._pool = None

    def __enter__(self) -> "LocalBuilder":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def __del__(self) -> None:
        try:
            self._restart()
        except Exception:
            pass
