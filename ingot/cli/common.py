"""What every ``ingot`` subcommand shares: the one-line error (`CLIError`), the context that turns an
expected failure into one (`errors`), the step timer (`step`) and the ``--input-shapes`` parser.

Note: the subcommands live in their own modules (`ingot.cli.tune`, `ingot.cli.cache`) and
`ingot.cli.main` imports them to register them; they take these helpers from here, so no
subcommand imports `ingot.cli.main` back.

Example:
    >>> parse_shapes("data:1x3x8x8,mask:1x?")
    {'data': [1, 3, 8, 8], 'mask': [1, None]}
"""
from __future__ import annotations

import contextlib
import os
import time
from typing import Any, Iterator

import click


class CLIError(click.ClickException):
    """A one-line error (exit code 1)."""

    def show(self, file: Any = None) -> None:
        click.echo(f"error: {self.message}", err=True)


@contextlib.contextmanager
def errors() -> Iterator[None]:
    # Expected failures become one line; INGOT_DEBUG=1 re-raises for the traceback.
    try:
        yield
    except (click.ClickException, click.exceptions.Exit, click.Abort):
        raise
    except Exception as exc:
        if os.environ.get("INGOT_DEBUG"):
            raise
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise CLIError(f"{type(exc).__name__}: {first}") from None


@contextlib.contextmanager
def step(message: str) -> Iterator[None]:
    click.echo(f"{message} ...", err=True, nl=False)
    t0 = time.perf_counter()
    try:
        yield
    except BaseException:
        click.echo(" failed", err=True)
        raise
    click.echo(f" done ({time.perf_counter() - t0:.1f} s)", err=True)


def parse_shapes(spec: "str | None") -> dict:
    """``"data:1x3x224x224,mask:1x128"`` → ``{"data": [1, 3, 224, 224], "mask": [1, 128]}``
    (``?`` or ``-1`` keeps a dim symbolic).

    Example:
        >>> parse_shapes("data:1x3x8x8")
        {'data': [1, 3, 8, 8]}
    """
    out: dict = {}
    if not spec:
        return out
    for item in spec.split(","):
        name, sep, dims = item.strip().rpartition(":")
        if not sep or not name:
            raise CLIError(f"--input-shapes entry {item!r} must look like NAME:1x3x224x224")
        try:
            out[name] = [None if d in ("?", "-1") else int(d) for d in dims.split("x")] if dims else []
        except ValueError:
            raise CLIError(f"--input-shapes entry {item!r}: dims must be integers separated by 'x'") from None
    return out
