"""Progress reporting for task schedulers: TVM's per-task table and a live progress bar.

Note: uses ``rich`` when installed (a live bar on a terminal, a table), else plain text; every
line also goes to the ``ingot.tune`` logger, which `tune_tir` points at ``work_dir/logs``.

Example:
    >>> print(format_table([{"id": 0, "name": "matmul", "flop": 2e6, "weight": 1, "gflops": 10.0,
    ...                      "latency_us": 200.0, "trials": 16, "done": False}]).splitlines()[0])
     ID | Name   |    FLOP | Weight | GFLOP/s | Latency (us) | Trials | Done
"""
from __future__ import annotations

import logging
import math
import sys

logger = logging.getLogger("ingot.tune")

_HEADERS = ("ID", "Name", "FLOP", "Weight", "GFLOP/s", "Latency (us)", "Trials", "Done")


def _cells(row: dict) -> list:
    lat = row.get("latency_us")
    gf = row.get("gflops")
    return [str(row["id"]), str(row["name"]), f"{int(row['flop'])}", f"{row['weight']:g}",
            f"{gf:.2f}" if gf is not None and math.isfinite(gf) else "N/A",
            f"{lat:.2f}" if lat is not None and math.isfinite(lat) else "N/A",
            str(row["trials"]), "Y" if row["done"] else ""]


def format_table(rows: list) -> str:
    """The per-task table as plain text (ID | Name | FLOP | Weight | GFLOP/s | Latency | Trials | Done).

    Example:
        >>> "Latency (us)" in format_table([])
        True
    """
    cells = [_cells(r) for r in rows]
    widths = [max([len(h)] + [len(c[i]) for c in cells]) for i, h in enumerate(_HEADERS)]
    left = {1}
    def line(values):
        return " | ".join(v.ljust(w) if i in left else v.rjust(w) for i, (v, w) in enumerate(zip(values, widths)))
    out = [" " + line(_HEADERS), "-" * (sum(widths) + 3 * len(widths))]
    out += [" " + line(c) for c in cells]
    return "\n".join(out)


class Progress:
    """A live bar of trials done out of the budget, plus the table after each round.

    ``verbose``: 0 silent (log only), 1 bar + table.

    Example:
        >>> p = Progress(total=16, verbose=0); p.advance(4); p.close()
    """

    def __init__(self, total: int, verbose: int = 1):
        self.total, self.verbose, self.done = int(total), int(verbose), 0
        self._rich = None
        if self.verbose:
            try:
                from rich.console import Console
                from rich.progress import BarColumn, MofNCompleteColumn, Progress as RichProgress, TimeElapsedColumn

                self._console = Console(file=sys.stderr)
                self._rich = RichProgress("[bold]tuning", BarColumn(), MofNCompleteColumn(), TimeElapsedColumn(),
                                          console=self._console, transient=False)
                self._task = self._rich.add_task("tuning", total=self.total)
                self._rich.start()
            except ImportError:
                self._rich = None

    def advance(self, n: int) -> None:
        self.done += n
        if self._rich is not None:
            self._rich.update(self._task, completed=min(self.done, self.total))
        elif self.verbose:
            print(f"[ingot.tune] trials {self.done}/{self.total}", file=sys.stderr)

    def table(self, rows: list, total_latency_us: float) -> None:
        text = format_table(rows)
        logger.info("\n%s\nTotal trials: %d; total weighted latency: %.2f us", text, self.done, total_latency_us)
        if not self.verbose:
            return
        if self._rich is not None:
            from rich.table import Table

            t = Table(*_HEADERS)
            for r in rows:
                t.add_row(*_cells(r))
            self._rich.console.print(t)
        else:
            print(text, file=sys.stderr)

    def close(self) -> None:
        if self._rich is not None:
            self._rich.stop()
            self._rich = None
