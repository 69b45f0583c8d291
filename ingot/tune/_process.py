"""Starting tuner worker processes safely from any script.

Note: with the ``spawn`` and ``forkserver`` start methods, a new process re-imports the parent's
``__main__`` module, so a user script without an ``if __name__ == "__main__":`` guard (the
usual way to write a tuning script, and what TVM users expect to work) would start tuning again
in every worker. Workers only need Ingot, so while they start we hide the main module's file and
spec; nothing from ``__main__`` is ever sent to a worker. ``fork`` is not used: the tuner has
threads (xgboost, the progress bar) and forking a threaded process can deadlock.

Example:
    >>> with hidden_main():
    ...     pass   # start processes here
"""
from __future__ import annotations

import contextlib
import multiprocessing as mp
import sys
import threading

_LOCK = threading.Lock()


def context():
    """The multiprocessing context for tuner workers (forkserver where available, else spawn).

    Example:
        >>> context().get_start_method() in ("forkserver", "spawn")
        True
    """
    return mp.get_context("forkserver" if "forkserver" in mp.get_all_start_methods() else "spawn")


@contextlib.contextmanager
def hidden_main():
    """Hide ``__main__.__file__``/``__spec__`` while worker processes start (see the note)."""
    main = sys.modules.get("__main__")
    with _LOCK:
        saved = {}
        if main is not None:
            for attr in ("__file__", "__spec__"):
                if attr in main.__dict__:
                    saved[attr] = main.__dict__[attr]
            main.__dict__.pop("__file__", None)
            if "__spec__" in main.__dict__:
                main.__spec__ = None
        try:
            yield
        finally:
            if main is not None:
                main.__dict__.update(saved)
