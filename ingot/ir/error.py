"""Base error classes shared by all layers.

Example:
    >>> issubclass(IngotError, Exception)
    True
"""


class IngotError(Exception):
    """Base of every error Ingot raises on purpose."""


class IRError(IngotError, ValueError):
    """Malformed IR: a node or function breaks an invariant (the message names it and the fix)."""
