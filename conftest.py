"""Pytest setup for the doctest run over the package (``pytest --doctest-modules ingot``, part of
scripts/test.sh): docstring examples are tests too (STYLE.md 14).

Note: a module whose examples cannot run yet goes into ``collect_ignore`` with the reason; take it
out when its examples pass (``pytest --doctest-modules <path>``). None is left out now.
"""
collect_ignore: list = []
