"""`LocalRunner`: measures candidates in ONE long-lived child process, with a timeout.

Note: measurements must not overlap (they would share cores), so one child is enough; keeping it
alive avoids a Python start per candidate. A candidate that crashes the child (segfault, abort)
or does not answer within ``timeout_s`` is recorded as an error, the child is killed if needed
and a new one is started for the next candidate. Reference outputs are computed once per
workload in the child (and again after a restart).

Example:
    >>> # runner = LocalRunner(RunnerConfig(number=3, timeout_s=5))
    >>> # [res] = runner.run([RunnerInput(path, args_info, ref_path, wl.shash)])
"""
from __future__ import annotations

import multiprocessing as mp
import signal
from typing import Optional, Sequence

from .base import Runner, RunnerConfig, RunnerInput, RunnerResult


class LocalRunner(Runner):
    """Runs candidates one after another in a child process (restarted after a crash or hang).

    Example:
        >>> # with LocalRunner() as r: results = r.run(inputs)
    """

    def __init__(self, config: "RunnerConfig | None" = None, start_timeout_s: float = 60.0):
        self.config = config or RunnerConfig()
        self.start_timeout_s = float(start_timeout_s)
        self._proc: Optional[mp.process.BaseProcess] = None
        self._conn = None
        self.restarts = 0

    # -- child management ------------------------------------------------------------------------
    def _ensure_child(self) -> None:
        if self._proc is not None and self._proc.is_alive():
            return
        from .._process import context, hidden_main
        from . import _child

        ctx = context()
        parent, child = ctx.Pipe()
        proc = ctx.Process(target=_child.main, args=(child,), daemon=True, name="ingot-tune-runner")
        with hidden_main():
            proc.start()
        child.close()
        if not parent.poll(self.start_timeout_s):
            proc.kill()
            raise RuntimeError(f"LocalRunner: the measuring process did not start within {self.start_timeout_s} s")
        parent.recv()
        self._proc, self._conn = proc, parent

    def _kill_child(self) -> None:
        proc, self._proc = self._proc, None
        if proc is not None:
            if proc.is_alive():
                proc.kill()
            proc.join(5)
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    # -- running -----------------------------------------------------------------------------------
    def run(self, inputs: Sequence[RunnerInput]) -> "list[RunnerResult]":
        """Measure each input in turn; one `RunnerResult` per input.

        Example:
            >>> # [r.run_secs or r.error_msg for r in runner.run(inputs)]
        """
        return [self.run_one(i) for i in inputs]

    def run_one(self, inp: RunnerInput) -> RunnerResult:
        """Measure one candidate (see `run`)."""
        self._ensure_child()
        try:
            self._conn.send(("run", inp, self.config))
            if not self._conn.poll(self.config.timeout_s):
                self._kill_child()
                self.restarts += 1
                return RunnerResult(error_msg=f"RunnerError: timed out after {self.config.timeout_s} s "
                                              "(the candidate hangs or is far too slow)")
            status, payload = self._conn.recv()
        except (EOFError, BrokenPipeError, ConnectionResetError, OSError):
            code = self._proc.exitcode if self._proc is not None else None
            if self._proc is not None:
                self._proc.join(5)
                code = self._proc.exitcode
            self._kill_child()
            self.restarts += 1
            return RunnerResult(error_msg=f"RunnerError: the candidate crashed the measuring process ({_describe_exit(code)})")
        if status == "ok":
            return RunnerResult(run_secs=payload)
        return RunnerResult(error_msg=payload)

    def shutdown(self) -> None:
        """Stop the child process."""
        if self._proc is not None and self._proc.is_alive() and self._conn is not None:
            try:
                self._conn.send(None)
                self._proc.join(2)
            except (BrokenPipeError, OSError):
                pass
        self._kill_child()

    def __enter__(self) -> "LocalRunner":
        return self

    def __exit__(self, *exc) -> None:
        self.shutdown()

    def __del__(self) -> None:
        try:
            self._kill_child()
        except Exception:
            pass


def _describe_exit(code: "int | None") -> str:
    if code is None:
        return "exit status unknown"
    if code < 0:
        try:
            return f"killed by {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"
