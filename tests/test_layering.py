"""Ingot's packages form layers (docs/architecture.md, "Layers and import direction"): every import
goes down that list, and no two packages import each other, directly or round a loop.

Note: the check reads the source, not the running interpreter, so function-level imports (the
ones written inside a function to keep ``import ingot`` fast) count as much as top-level ones,
and so do the module names given to ``importlib.import_module`` and the ``("ingot.x.y", "name")``
entries of lazy-import tables. The layer list is parsed from docs/architecture.md, so the doc
and the code cannot drift apart. Inside a package, modules must not import each other round a loop
at import time (`test_no_module_import_cycle`; the note above it says what counts).
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


def import_base(node: ast.ImportFrom, package: str) -> str:
    """The absolute module a ``from ... import`` statement in ``package`` reads from."""
    if not node.level:
        return node.module or ""
    parts = package.split(".")
    return ".".join(parts[:len(parts) - (node.level - 1)] + ([node.module] if node.module else []))


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
            base = import_base(node, package)
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


# ----------------------------------------------------------------------------- module cycles
# Note: inside one package, modules may import each other in any direction, but not round a loop at
# import time: a loop works only while every module in it happens to be imported in one order, and
# breaks (ImportError on a partly initialized module) when a user imports another module first.
# The check reads what runs at import time: statements outside function bodies (class bodies, `if`,
# `try` and `with` blocks included; `if TYPE_CHECKING:` blocks excluded, they never run). Python
# semantics decide what a statement depends on: ``from pkg import sub`` where ``sub`` is a module
# needs ``pkg.sub`` only (the package is already initializing), while ``from pkg import name`` of a
# name defined or re-exported by ``pkg/__init__.py`` needs that ``__init__`` to have run that far.
# Function-level imports run later and may point back; across packages they are held to the layer
# order by the tests above.


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or \
        (isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _module_exists(root: str, module: str) -> bool:
    path = os.path.join(root, *module.split("."))
    return os.path.isfile(path + ".py") or os.path.isfile(os.path.join(path, "__init__.py"))


def import_time_imports(path: str, root: str = ROOT) -> list[tuple[str, int]]:
    """(module, line) of every import that runs when the module at ``path`` is imported: the modules
    it needs initialized (see the note above), whatever package they are in."""
    name = module_name_under(path, root)
    package = name if path.endswith("__init__.py") else name.rsplit(".", 1)[0]
    found: list = []

    def visit(statements: list) -> None:
        for node in statements:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                continue
            if isinstance(node, ast.If) and _is_type_checking(node.test):
                visit(node.orelse)
                continue
            if isinstance(node, ast.Import):
                found.extend((a.name, node.lineno) for a in node.names)
            elif isinstance(node, ast.ImportFrom):
                base = import_base(node, package)
                submodules = [f"{base}.{a.name}" for a in node.names
                              if a.name != "*" and _module_exists(root, f"{base}.{a.name}")]
                found.extend((m, node.lineno) for m in submodules)
                if len(submodules) < len(node.names):  # a name of base itself (its __init__ for a package)
                    found.append((base, node.lineno))
            for field in ("body", "orelse", "finalbody", "handlers"):  # class/if/try/with/for bodies
                inner = getattr(node, field, None)
                if isinstance(inner, list) and inner and isinstance(inner[0], (ast.stmt, ast.excepthandler)):
                    visit(inner)

    visit(ast.parse(open(path).read(), filename=path).body)
    return found


def module_name_under(path: str, root: str) -> str:
    rel = os.path.relpath(path, root)[:-len(".py")].replace(os.sep, ".")
    return rel[:-len(".__init__")] if rel.endswith(".__init__") else rel


def module_import_cycles(package_dir: str, root: str) -> list[list[tuple[str, int, str]]]:
    """The import-time cycles among the modules under ``package_dir``: one list per strongly connected
    component of more than one module, as (module, line, imported module) edges inside it."""
    edges: dict = {}
    for dirpath, dirnames, filenames in os.walk(package_dir):
        dirnames[:] = sorted(d for d in dirnames if d != "__pycache__")
        for f in sorted(f for f in filenames if f.endswith(".py")):
            path = os.path.join(dirpath, f)
            name = module_name_under(path, root)
            for imported, line in import_time_imports(path, root):
                if imported != name and _module_exists(root, imported):
                    edges.setdefault(name, {}).setdefault(imported, line)
    return [[(a, edges[a][b], b) for a in component for b in sorted(edges.get(a, {})) if b in component]
            for component in _strongly_connected(edges)]


def _strongly_connected(edges: dict) -> list[set]:
    """Tarjan's components of more than one node, iteratively (package graphs are deep)."""
    index: dict = {}
    low: dict = {}
    stack: list = []
    on_stack: set = set()
    components: list = []
    for start in sorted(edges):
        if start in index:
            continue
        work = [(start, iter(sorted(edges.get(start, {}))))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for nxt in successors:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(sorted(edges.get(nxt, {})))))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    if len(component) > 1:
                        components.append(component)
    return components


def test_no_module_import_cycle():
    cycles = module_import_cycles(PACKAGE, ROOT)
    assert not cycles, "modules that import each other at import time (move the shared piece down into a " \
        "module both import, or make one import go the other way / into the function that needs it):\n" + \
        "\n".join("  " + "; ".join(f"{a}:{line} -> {b}" for a, line, b in c) for c in cycles)


def _write_tree(root, files: dict) -> None:
    for rel, text in files.items():
        path = os.path.join(str(root), rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as f:
            f.write(text)


def test_module_cycle_check_finds_the_loops_python_would_trip_on(tmp_path):
    _write_tree(tmp_path, {
        "pkg/__init__.py": "from .a import A\n",
        # a -> b -> a (b's import sits in a class body: it still runs at import time)
        "pkg/a.py": "from .b import B\nA = 1\n",
        "pkg/b.py": "class B:\n    from pkg.a import A\n",
        # c needs a name of the package's __init__, which needs d, which needs c
        "pkg/sub/__init__.py": "from .d import D\nX = 1\n",
        "pkg/sub/c.py": "from pkg.sub import X\n",
        "pkg/sub/d.py": "import pkg.sub.c\nD = 2\n",
    })
    found = sorted(sorted(a for a, _, _ in c) for c in module_import_cycles(str(tmp_path / "pkg"), str(tmp_path)))
    assert found == [["pkg.a", "pkg.b"], ["pkg.sub", "pkg.sub.c", "pkg.sub.d"]]


def test_module_cycle_check_lets_through_what_python_imports_fine(tmp_path):
    _write_tree(tmp_path, {
        # the package re-exports its modules, which take their siblings as submodules: no loop
        "pkg/__init__.py": "from .a import A\nfrom .b import B\n",
        "pkg/a.py": "from . import b\nA = 1\n",
        "pkg/b.py": "import typing\nif typing.TYPE_CHECKING:\n    from .a import A\nB = 2\n"
                    "def f():\n    from .a import A\n    return A\n",
    })
    assert module_import_cycles(str(tmp_path / "pkg"), str(tmp_path)) == []
