"""benchmarks/ stays a set of scripts a user can find and a rule cannot be steered by: every script
is listed in benchmarks/README.md with its question, and no script overwrites an attribute of a
schedule-rule module (variants are fields of a rule's policy, set through the pass context:
STYLE.md 13, docs/performance.md "Default schedules").

Note: the scripts are read, not run (they time things and need torch/onnxruntime); the checks are
on their source.
"""
from __future__ import annotations

import ast
import os

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BENCHMARKS = os.path.join(ROOT, "benchmarks")
#: Modules whose attributes a benchmark must not overwrite: the default-schedule rules, and the
#: choices made for them before scheduling (the Winograd tile, PackWeights' layouts).
RULE_PACKAGE = "ingot.ops.schedule"
RULE_MODULES = (RULE_PACKAGE, "ingot.ops.winograd", "ingot.graph.transform.pack_weights")


def _is_rule_module(name: str) -> bool:
    return any(name == m or name.startswith(m + ".") for m in RULE_MODULES)


def scripts() -> list[str]:
    """Paths of benchmarks/ relative to it: the scripts and the one-off experiments."""
    found = []
    for sub in ("", "experiments"):
        folder = os.path.join(BENCHMARKS, sub)
        found += [os.path.join(sub, f) if sub else f for f in sorted(os.listdir(folder))
                  if f.endswith((".py", ".c", ".sh")) and f != "__init__.py"]
    return found


def rule_module_overwrites(source: str, filename: str = "<script>") -> list[str]:
    """``name.attr = ...`` / ``setattr(name, ...)`` where ``name`` is bound to one of
    `RULE_MODULES` (or a module under them) by an import in ``source``, as "line: text".

    >>> rule_module_overwrites("from ingot.ops.schedule import winograd as WS\\nWS.MIN_ROW_TILES = 1\\n")
    ['2: WS.MIN_ROW_TILES = ...']
    """
    tree = ast.parse(source, filename=filename)
    bound = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            bound |= {a.asname or a.name for a in node.names
                      if _is_rule_module(node.module) or _is_rule_module(f"{node.module}.{a.name}")}
        elif isinstance(node, ast.Import):
            bound |= {a.asname for a in node.names if a.asname and _is_rule_module(a.name)}
    found = []
    for node in ast.walk(tree):
        targets = []
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            for t in (node.targets if isinstance(node, ast.Assign) else [node.target]):
                targets += t.elts if isinstance(t, ast.Tuple) else [t]
            for t in targets:
                if isinstance(t, ast.Attribute) and isinstance(t.value, ast.Name) and t.value.id in bound:
                    found.append(f"{node.lineno}: {t.value.id}.{t.attr} = ...")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "setattr" \
                and node.args and isinstance(node.args[0], ast.Name) and node.args[0].id in bound:
            found.append(f"{node.lineno}: setattr({node.args[0].id}, ...)")
    return found


def test_every_script_is_listed_in_the_readme():
    readme = open(os.path.join(BENCHMARKS, "README.md")).read()
    missing = [s for s in scripts() if f"`{s}`" not in readme and s not in ("common.py", "setup_tvm.sh")]
    assert not missing, f"benchmarks/README.md does not list {missing}: add each with its question and command"


@pytest.mark.parametrize("script", [s for s in scripts() if s.endswith(".py")])
def test_no_script_overwrites_a_rule_module(script):
    path = os.path.join(BENCHMARKS, script)
    found = rule_module_overwrites(open(path).read(), path)
    assert not found, (f"benchmarks/{script} overwrites attributes of rule modules {found}: make the "
                       "variant a field of the rule's policy (ConvNhwcPolicy, WinogradSchedulePolicy, GemvPolicy, "
                       "WinogradTilePolicy) and pass it through PassContext(config=...)")


def test_the_check_sees_assignments_tuples_and_setattr():
    src = ("import ingot.ops.schedule.reduction as red\nfrom ingot.ops.schedule import winograd as WS\n"
           "from ingot.ops import winograd as W\nfrom ingot.graph.transform import pack_weights as pw\n"
           "from ingot.ops import nn\nW.choose_tile, WS._blocked = 1, 2\nsetattr(red, 'GEMV_ROW_GROUPS', ())\n"
           "x = WS.MIN_ROW_TILES\npw._gemv_rows = None\nnn.pad_hw = None\n")
    assert sorted(rule_module_overwrites(src)) == ["6: W.choose_tile = ...", "6: WS._blocked = ...",
                                                   "7: setattr(red, ...)", "9: pw._gemv_rows = ..."]
