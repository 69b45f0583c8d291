"""The measuring child process of `LocalRunner` (runs one candidate at a time).

Note: this module runs in the child; it only imports the runtime and numpy, so the child starts
quickly. Random inputs and the reference outputs are made once per workload and kept; each
candidate runs on fresh copies of the inputs, and every argument (outputs and inputs, which a
correct kernel leaves alone) is compared with the reference's. The checking run is timed too: a
candidate already `RunnerConfig.slow_cutoff` times slower than the workload's best is not timed
again. With `RunnerConfig.cache_flush` every timed call starts with cold caches (the workload's
best is then a cold time too: one child measures with one config).

Example:
    >>> # started by LocalRunner; messages are ("run", RunnerInput, RunnerConfig) tuples
"""
from __future__ import annotations

import hashlib
import math
import time
import traceback

import numpy as np


#: Best mean seconds per workload key seen by this child (the slow cutoff's yardstick). Kept apart
#: from the input/reference cache, which is keyed by the reference library too: a workload's
#: default schedule is measured without a reference, its search candidates with one.
_BEST: dict = {}


def _random_args(args_info, key: str) -> "list[np.ndarray]":
    seed = int(hashlib.sha256(key.encode()).hexdigest()[:8], 16)
    rng = np.random.default_rng(seed)
    arrays = []
    for info in args_info:
        dtype, shape = (info.dtype, info.shape) if hasattr(info, "dtype") else (info[0], info[1])
        if any(not isinstance(d, int) for d in shape):
            raise ValueError(f"runner: argument shape {shape} is symbolic; measure a static-shape workload")
        np_dtype = np.dtype(dtype)
        if np_dtype.kind == "f":
            a = rng.uniform(-1.0, 1.0, size=shape).astype(np_dtype)
        elif np_dtype.kind == "b":
            a = rng.integers(0, 2, size=shape).astype(np_dtype)
        else:
            a = rng.integers(0, 8, size=shape).astype(np_dtype)
        arrays.append(_aligned_copy(a))
    return arrays


def _aligned_copy(a: np.ndarray) -> np.ndarray:
    """A C-contiguous copy of ``a`` whose data is 64-byte aligned, as Ingot's own NDArrays and the
    model executor's buffers are (and TVM's runner's). numpy's own copies of arrays over 64 KiB sit
    16 bytes past a page boundary (the allocator's header): every 64-byte vector load then spans
    two cache lines, which made the 128³ GEMM 1.2x slower on one thread and ranked candidates by
    how they suffer from misalignment, a case no model run has."""
    from ingot.runtime.ndarray import aligned_empty

    out = aligned_empty(a.shape, a.dtype)
    out[...] = a
    return out


def _load(path: str, func_name: str, num_threads: int):
    from ingot.runtime.module import Module

    lib = Module(path)
    if num_threads:
        lib.set_num_threads(num_threads)
    return lib, lib[func_name]


def _compare(got, want, cfg) -> "str | None":
    for index, (g, w) in enumerate(zip(got, want)):
        if g.dtype.kind == "f":
            scale = float(np.max(np.abs(w))) if w.size else 0.0
            if not np.allclose(g, w, rtol=cfg.rtol, atol=cfg.atol * max(scale, 1.0), equal_nan=True):
                err = float(np.max(np.abs(g.astype("float64") - w)))
                return f"WrongResult: argument {index} differs from the unscheduled function's (max abs error {err:.3g})"
        elif not np.array_equal(g, w):
            return f"WrongResult: argument {index} differs from the unscheduled function's"
    return None


def main(conn) -> None:
    """Serve measurement requests on ``conn`` until ``None`` arrives."""
    import ingot.runtime  # noqa: F401  (import once, before the first request)

    references: dict = {}
    conn.send(("ready", None))
    while True:
        msg = conn.recv()
        if msg is None:
            return
        _, inp, cfg = msg
        try:
            conn.send(("ok", _measure(inp, cfg, references)))
        except _WrongResult as err:
            conn.send(("error", str(err)))
        except Exception as err:
            conn.send(("error", f"RunnerError: {type(err).__name__}: {err}\n{traceback.format_exc(limit=3)[-800:]}"))


def _measure(inp, cfg, references: dict) -> list:
    from ingot.runtime.device import cpu

    key = (inp.workload_key, inp.reference_path, inp.func_name)
    if key not in references:
        base = _random_args(inp.args_info, inp.workload_key or inp.artifact_path)
        expected = None
        if inp.reference_path is not None and cfg.check_correctness:
            expected = [_aligned_copy(a) for a in base]
            _, ref = _load(inp.reference_path, inp.func_name, inp.num_threads)
            ref(*expected)
        references.clear()  # one workload at a time: keep memory flat
        references[key] = (base, expected)
    base, expected = references[key]
    if len(_BEST) > 1024:
        _BEST.clear()
    best = _BEST.setdefault(inp.workload_key or inp.artifact_path, [math.inf])
    lib, fn = _load(inp.artifact_path, inp.func_name, inp.num_threads)
    args = [_aligned_copy(a) for a in base]
    t0 = time.perf_counter()
    fn(*args)
    first = time.perf_counter() - t0
    if expected is not None:
        problem = _compare(args, expected, cfg)
        if problem is not None:
            raise _WrongResult(problem)
    cutoff = float(getattr(cfg, "slow_cutoff", 0.0) or 0.0)
    if cutoff > 0 and first > cutoff * best[0] and first * 1e3 > cfg.min_repeat_ms:
        return [first]   # hopeless: its first run is the measurement (RunnerConfig.slow_cutoff)
    timer = lib.time_evaluator(inp.func_name, cpu(0), **cfg.timing(inp))
    results = [float(s) for s in timer(*args).results]
    best[0] = min(best[0], sum(results) / len(results))
    return results


class _WrongResult(Exception):
    pass
