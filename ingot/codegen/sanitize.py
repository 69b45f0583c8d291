"""Turning arbitrary names (from model files, users, passes) into safe C identifiers.

Note: every identifier that reaches generated C goes through `NameTable.get` (variables,
buffers, functions) and every piece of text through `ingot.codegen.prelude.c_string_literal`.
Raw names are never printed in comments. A safe identifier matches ``[A-Za-z_][A-Za-z0-9_]*``,
is not a C keyword or a name the generated code relies on (libc/libm functions, prelude macros,
the ``ingot_``/``INGOT_`` namespace), does not start with ``_`` (reserved), and is unique within
its table (one table per C scope: the module for symbols, each function for its locals).

Example:
    >>> sanitize_identifier('x"; system("rm -rf /')
    'x_system_rm_rf'
    >>> t = NameTable()
    >>> t.get("a b"), t.get("a_b"), t.get("int")
    ('a_b', 'a_b_1', 'int_')
"""
from __future__ import annotations

import re
from typing import Any, Iterable

__all__ = ["C_KEYWORDS", "RESERVED_NAMES", "NameTable", "sanitize_identifier"]

C_KEYWORDS = frozenset("""
auto break case char const continue default do double else enum extern float for goto if inline int
long register restrict return short signed sizeof static struct switch typedef union unsigned void
volatile while _Alignas _Alignof _Atomic _Bool _Complex _Generic _Imaginary _Noreturn _Static_assert
_Thread_local _Float16 bool true false asm typeof __restrict__ __attribute__ alignas alignof
""".split())

# Names of functions, types and macros the generated code (or the prelude) uses: a local
# variable with one of these names would shadow it.
RESERVED_NAMES = frozenset("""
abs labs llabs fabs fabsf exp expf exp2 exp2f expm1 expm1f log logf log2 log2f log10 log10f log1p
log1pf sqrt sqrtf tanh tanhf erf erff sin sinf cos cosf tan tanf asin asinf acos acosf atan atanf
sinh sinhf cosh coshf asinh asinhf acosh acoshf atanh atanhf floor floorf ceil ceilf round roundf
trunc truncf nearbyint nearbyintf pow powf atan2 atan2f fmod fmodf copysign copysignf hypot hypotf
isnan isinf isfinite fmin fminf fmax fmaxf memcpy memset malloc free calloc realloc aligned_alloc
posix_memalign printf snprintf vsnprintf sprintf fprintf puts exit abort assert errno stdin stdout
stderr size_t ptrdiff_t intptr_t uintptr_t int8_t int16_t int32_t int64_t uint8_t uint16_t uint32_t
uint64_t NULL INFINITY NAN HUGE_VAL HUGE_VALF EOF M_PI M_E DLTensor DLDevice DLDataType
""".split())

_RESERVED_PREFIXES = ("ingot_", "INGOT_", "DL", "kDL", "omp_", "__")


def sanitize_identifier(name: Any, default: str = "v") -> str:
    """A valid, non-reserved C identifier derived from ``name`` (not yet made unique).

    Runs of characters outside ``[A-Za-z0-9_]`` become one ``_``; a leading digit or ``_`` gets a
    ``v`` prefix; keywords and reserved names get a trailing ``_``.

    Example:
        >>> sanitize_identifier("main); /*"), sanitize_identifier("3x"), sanitize_identifier("for")
        ('main', 'v3x', 'for_')
    """
    text = re.sub(r"[^A-Za-z0-9_]+", "_", str(name)).strip("_")
    if not text:
        text = default
    if text[0].isdigit():
        text = default + text
    if text.startswith(_RESERVED_PREFIXES):
        text = default + "_" + text
    if text in C_KEYWORDS or text in RESERVED_NAMES:
        text += "_"
    return text


class NameTable:
    """Unique C identifiers within one scope; the same key always gets the same name.

    ``get(name, key)`` returns the identifier for ``key`` (an IR object such as a `Var`, compared
    by identity; defaults to the name itself), creating ``name``, ``name_1``, ... on first use.
    ``reserve`` blocks names (e.g. extern functions called from the scope).

    Example:
        >>> from ingot.ir import Var
        >>> t = NameTable()
        >>> i, j = Var("i"), Var("i")
        >>> t.get(i.name, i), t.get(j.name, j), t.get(i.name, i)
        ('i', 'i_1', 'i')
    """

    def __init__(self, reserved: Iterable[str] = (), parent: "NameTable | None" = None):
        self._used: set[str] = set(reserved)
        self._by_key: dict[int, tuple[Any, str]] = {}
        self._counters: dict[str, int] = {}
        self._parent = parent

    def reserve(self, names: Iterable[str]) -> None:
        """Make ``names`` unavailable in this table."""
        self._used.update(names)

    def _taken(self, name: str) -> bool:
        table: "NameTable | None" = self
        while table is not None:
            if name in table._used:
                return True
            table = table._parent
        return False

    def get(self, name: Any, key: Any = None) -> str:
        """The identifier of ``key`` (created from ``name`` on first use)."""
        if key is not None:
            hit = self._by_key.get(id(key))
            if hit is not None and hit[0] is key:
                return hit[1]
        base = sanitize_identifier(name)
        candidate = base
        n = self._counters.get(base, 0)
        while self._taken(candidate):
            n += 1
            candidate = f"{base}_{n}"
        self._counters[base] = n
        self._used.add(candidate)
        if key is not None:
            # Keep a reference to the key so its id() stays unique while the table lives.
            self._by_key[id(key)] = (key, candidate)
        return candidate

    def unique(self, identifier: str) -> str:
        """``identifier`` (already valid C, e.g. a generated ``ingot_...`` symbol) made unique
        here by a ``_N`` suffix, and reserved.

        Example:
            >>> t = NameTable(reserved=["ingot_main"])
            >>> t.unique("ingot_main")
            'ingot_main_1'
        """
        candidate, n = identifier, 0
        while self._taken(candidate):
            n += 1
            candidate = f"{identifier}_{n}"
        self._used.add(candidate)
        return candidate

    def lookup(self, key: Any) -> "str | None":
        """The identifier already given to ``key`` here or in a parent table, else ``None``."""
        table: "NameTable | None" = self
        while table is not None:
            hit = table._by_key.get(id(key))
            if hit is not None and hit[0] is key:
                return hit[1]
            table = table._parent
        return None
