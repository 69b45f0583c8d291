"""Exceptions raised by the Ingot runtime.

Note: ``ArgumentError`` derives from both ``TypeError`` and ``ValueError`` so callers can
catch it the Python way (``except TypeError`` for a wrong kind of argument, ``except
ValueError`` for a wrong shape) as well as with ``except IngotRuntimeError``.

Example::

    >>> from ingot.runtime.errors import ArgumentError
    >>> issubclass(ArgumentError, ValueError) and issubclass(ArgumentError, TypeError)
    True
"""

from ingot.ir.error import IngotError


class IngotRuntimeError(IngotError, RuntimeError):
    """Base class of every error raised by ``ingot.runtime``.

    Example::

        >>> try:
        ...     raise IngotRuntimeError("boom")
        ... except RuntimeError as e:
        ...     str(e)
        'boom'
    """


class ArgumentError(IngotRuntimeError, TypeError, ValueError):
    """A compiled function was called with a wrong argument (count, kind, dtype, shape, layout).

    Example::

        >>> isinstance(ArgumentError("main: expects 3 arguments, got 2"), TypeError)
        True
    """


class KernelError(IngotRuntimeError):
    """A compiled kernel reported a failure while running (not an argument problem).

    Example::

        >>> str(KernelError("main: failed to allocate workspace"))
        'main: failed to allocate workspace'
    """


class ModuleLoadError(IngotRuntimeError, OSError):
    """A shared library could not be loaded or its metadata is unusable.

    Example::

        >>> issubclass(ModuleLoadError, OSError)
        True
    """


class FunctionNotFoundError(IngotRuntimeError, KeyError):
    """A function name is neither in a module nor in the global registry.

    Example::

        >>> str(FunctionNotFoundError("module has no function 'mian'; did you mean 'main'?"))
        "module has no function 'mian'; did you mean 'main'?"
    """

    def __str__(self) -> str:  # KeyError would print the repr of the message
        return str(self.args[0]) if self.args else ""
