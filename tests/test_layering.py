"""Ingot's packages form layers (docs/architecture.md, "Layers and import direction"): every import
goes down that list, and no two packages import each other, directly or round a loop.

Note: the check reads the source, not the running interpreter, so function-level imports (the
ones written inside a function to keep ``import ingot`` fast) count as much as top-level ones,
and so do the module names given to ``importlib.import_module`` and the ``("ingot.x.y", "name")``
entries of lazy-import tables. The layer list is parsed from docs/architecture.md, so the doc
and the code cannot drift apart.
"""
from __future__ import annotations

import ast
import os
import re

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PACKAGE = os.path.join(ROOT, "ingot")
DOC = os.path.join(ROOT, "docs", "architecture.md")

#: Modules allowed to import upward, each with the reason. Nothing else in ingot may import them.
COMPATIBILITY_MODULES = {
    # the model workflow moved to ingot.workflow; this alias keeps old user code working
    "ingot.driver.model": "re-exports ingot.workflow.model for code written before ingot.workflow",
    # TVM's spelling `from ingot.script import relax as R`: the R namespace lives in ingot.graph.script
    "ingot.script.relax": "re-exports ingot.graph.script (the R namespace) under TVM's name",
}
#: ``ingot/__init__.py`` is the package's front door: its lazy table names the entry points of
#: every layer (``ingot.build``, ``ingot.compile``, ...) and is not part of any layer.
FRONT_DOOR = "ingot"


def layer_order() -> list[str]:
    """The top-level packages of ingot, lowest layer first, as docs/architecture.md lists them."""
    text = open(DOC).read()
    section = text.split("## Layers and import direction", 1)[1]
    block = section.split("```", 2)[1]
    return re.findall(r"^ingot\.(\w+)\s", block, flags=re.MULTILINE)


def module_name(path: str) -> str:
    rel = os.path.relpath(path, ROOT)[:-len(".py")].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def iter_modules():
    for dirpath, dirnames, filenames in os.walk(PACKAGE):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(filenames):
            if f.endswith(".py"):
                yield os.path.join(dirpath, f)


def imported_names(path: str) -> list[tuple[str, int]]:
    """(absolute module name, line) of every ingot import in the file, wherever it is written."""
    name = module_name(path)
    package = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]
    tree = ast.parse(open(path).read(), filename=path)
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(a.name, node.lineno) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))
            else:
                base = node.module or ""
            found.append((base, node.lineno))
            found += [(f"{base}.{a.name}", node.lineno) for a in node.names if a.name != "*"]
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args:
            arg = node.args[0]
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                found.append((arg.value, node.lineno))
            elif isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
                found.append((str(arg.values[0].value).rstrip("."), node.lineno))
        elif isinstance(node, ast.Tuple) and node.elts:  # lazy tables: ("ingot.x.y", "attr")
            first = node.elts[0]
            if isinstance(first, ast.Constant) and isinstance(first.value, str) and \
                    re.fullmatch(r"ingot(\.\w+)+", first.value):
                found.append((first.value, node.lineno))
    return [(m, line) for m, line in found if m == "ingot" or m.startswith("ingot.")]


def _is_import_module(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or \
        (isinstance(func, ast.Name) and func.id == "import_module")


def top_package(module: str) -> "str | None":
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else None


def package_edges() -> dict:
    """{(importing package, imported package): [(module, line, imported name), ...]}."""
    edges: dict = {}
    for path in iter_modules():
        name = module_name(path)
        src = top_package(name)
        if name == FRONT_DOOR or name in COMPATIBILITY_MODULES:
            continue
        for imported, line in imported_names(path):
            dst = top_package(imported)
            if dst is not None and dst != src:
                edges.setdefault((src, dst), []).append((name, line, imported))
    return edges


def test_the_layer_list_names_every_package():
    layers = layer_order()
    assert len(layers) == len(set(layers)), f"docs/architecture.md lists a package twice: {layers}"
    packages = {f[:-3] if f.endswith(".py") else f for f in os.listdir(PACKAGE)
                if not f.startswith(("_", ".")) and (f.endswith(".py") or os.path.isdir(os.path.join(PACKAGE, f)))}
    assert packages == set(layers), (
        f"docs/architecture.md's layer list and ingot/ differ: not listed {sorted(packages - set(layers))}, "
        f"listed but missing {sorted(set(layers) - packages)}")


def test_imports_only_go_down_the_layers():
    rank = {p: i for i, p in enumerate(layer_order())}
    upward = [f"{m}:{line} imports {imported} ({src} is below {dst} in docs/architecture.md)"
              for (src, dst), sites in sorted(package_edges().items()) if rank[dst] > rank[src]
              for m, line, imported in sites]
    assert not upward, "imports that go up the layer list:\n" + "\n".join(upward)


def test_no_package_import_cycle():
    graph: dict = {}
    for src, dst in package_edges():
        graph.setdefault(src, set()).add(dst)
    cycles = _find_cycles(graph)
    assert not cycles, "package import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


def _package_of(imported: str) -> "str | None":
    """The package (directory) that holds module ``imported`` (or is it)."""
    parts = imported.split(".")
    while parts:
        path = os.path.join(ROOT, *parts)
        if os.path.isdir(path):
            return ".".join(parts)
        if os.path.isfile(path + ".py"):
            return ".".join(parts[:-1])
        parts = parts[:-1]
    return None


def _find_cycles(graph: dict) -> list:
    cycles, state = [], {}

    def visit(node: str, stack: list) -> None:
        state[node] = "open"
        for nxt in sorted(graph.get(node, ())):
            if state.get(nxt) == "open":
                cycles.append(stack[stack.index(nxt):] + [nxt])
            elif nxt not in state:
                visit(nxt, stack + [nxt])
        state[node] = "done"

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    return cycles


def test_no_import_cycle_between_subpackages():
    """At every depth (ingot.tune.tasks, ingot.tir.schedule, ...): no two sub-packages import each
    other round a loop. A sub-package importing from its own ancestors (ingot.tir.schedule from
    ingot.tir) is how it reaches its package's modules and does not count."""
    graph: dict = {}
    for path in iter_modules():
        name = module_name(path)
        if name == FRONT_DOOR or name in COMPATIBILITY_MODULES:
            continue
        src = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]
        for imported, _ in imported_names(path):
            dst = _package_of(imported)
            if dst is not None and dst != src and not src.startswith(dst + "."):
                graph.setdefault(src, set()).add(dst)
    cycles = _find_cycles(graph)
    assert not cycles, "sub-package import cycles: " + "; ".join(" -> ".join(c) for c in cycles)


@pytest.mark.parametrize("compat", sorted(COMPATIBILITY_MODULES))
def test_nothing_in_ingot_imports_a_compatibility_module(compat):
    users = [f"{module_name(p)}:{line}" for p in iter_modules() if module_name(p) != compat
             for imported, line in imported_names(p) if imported == compat or imported.startswith(compat + ".")]
    assert not users, f"{compat} ({COMPATIBILITY_MODULES[compat]}) is for user code only; imported by {users}"


def test_compatibility_module_keeps_the_moved_names():
    import ingot.driver.model as old
    import ingot.workflow as workflow

    for name in ("load", "compile", "run", "profile", "load_package", "Package", "Model", "check_inputs"):
        assert getattr(old, name) is getattr(workflow, name)


def test_the_disk_cache_owner_imports_none_of_its_users():
    """`ingot.codegen.disk_cache` owns the on-disk cache; the compilers and the kernel source cache
    call it, never the other way round (issue #20: toolchain and disk_cache imported each other)."""
    path = os.path.join(PACKAGE, "codegen", "disk_cache.py")
    users = ("ingot.codegen.toolchain", "ingot.codegen.cuda", "ingot.codegen.build", "ingot.driver")
    bad = [f"line {line}: {m}" for m, line in imported_names(path) if m.startswith(users)]
    assert not bad, "ingot.codegen.disk_cache imports its users: " + ", ".join(bad)
