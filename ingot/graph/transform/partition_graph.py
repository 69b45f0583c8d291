"""BYOC partitioning: AnnotateTarget → MergeCompilerRegions → PartitionGraph (TVM's passes).

Note: the three passes hand parts of a graph function to external backends (``ingot.byoc``).
  * `AnnotateTarget(targets)` asks each backend's pattern table (`ingot.graph.external`) about
    every operator call, in binding order: a pattern's ``check`` accepts or refuses it (with a
    reason), an epilogue pattern (``after=``) only follows a call already accepted for the same
    backend. The decisions go to the function's attr ``"byoc.annotations"``: ``((binding index,
    target), ...)`` over the bindings of all blocks in order (valid until the bindings change: run
    the three passes in a row, as `ingot.byoc.partition` does). `partition_report` lists every
    candidate op: accepted or not, and why.
  * `MergeCompilerRegions()` starts with one region per annotated binding and merges a region into
    the region of the producer of one of its operands (same target, same binding block) unless the
    union would be *re-entered*: a path leaves the union and comes back into it (a diamond whose
    other branch runs natively), other regions counting as one node each. Outlining such a union
    would make the region call wait for a value that waits for the region: a cycle. Attr ``"byoc.regions"``: ``((index, target, region), ...)``.
  * `PartitionGraph()` outlines each region into a function ``<target>_<func>_<k>`` with attrs
    ``Compiler``, ``global_symbol`` and ``Primitive``; its parameters are the values the region reads
    from outside (constants stay bound inside), its result the values used outside it (a tuple when
    several). The region's bindings are replaced by one call (plus tuple items bound to the original
    variables, so later uses are unchanged), placed after the outside bindings the region depends on.

Example (a dense + relu chain offloaded whole):
    >>> from ingot import graph as G
    >>> import ingot.byoc  # registers the cblas pattern table
    >>> x = G.Var("x", G.TensorStructInfo((2, 8), "float32"))
    >>> w = G.Var("w", G.TensorStructInfo((4, 8), "float32"))
    >>> bb = G.BlockBuilder()
    >>> with bb.function("main", [x, w]):
    ...     with bb.dataflow():
    ...         y = bb.emit(G.op.relu(bb.emit(G.op.linear(x, w))))
    ...         out = bb.emit_output(G.op.exp(y))
    ...     bb.emit_func_output(out)
    >>> mod = PartitionGraph()(MergeCompilerRegions()(AnnotateTarget(["cblas"])(bb.get())))
    >>> sorted(mod.function_names)
    ['cblas_main_0', 'main']
    >>> mod["cblas_main_0"].attrs["Compiler"]
    'cblas'
"""
from __future__ import annotations

from typing import Any, Sequence

from ingot.ir import IRModule
from ingot.ir.module import GlobalVar

from ..expr import Call, DataflowBlock, DataflowVar, Function, Op, SeqExpr, Tuple, TupleGetItem, Var, VarBinding
from ._util import make_pass, remap, used_vars

ANNOTATIONS = "byoc.annotations"
REGIONS = "byoc.regions"


def _bindings(func: Function) -> list:
    """``[(block index, binding)]`` over all blocks, in order (the annotation index space)."""
    return [(k, b) for k, blk in enumerate(func.body.blocks) for b in blk.bindings]


def _operand_vars(value: Any) -> list:
    out: list = []

    def walk(e: Any) -> None:
        if isinstance(e, Var):
            out.append(e)
        elif isinstance(e, Call):
            for a in e.args:
                walk(a)
        elif isinstance(e, Tuple):
            for f in e.fields:
                walk(f)
        elif isinstance(e, TupleGetItem):
            walk(e.tuple_value)

    walk(value)
    return out


def annotate_function(func: Function, targets: Sequence[str]) -> "tuple[list, list]":
    """``(annotations, report)`` of ``func`` for ``targets`` (first target that accepts wins).

    ``annotations``: ``[(binding index, target)]``; ``report``: one dict per operator call with
    ``index``, ``binding``, ``op``, ``target`` (or None), ``accepted``, ``reason`` (and ``pattern``
    when accepted).

    Example: see `partition_report`.
    """
    from ..external import get_patterns

    tables = [(t, get_patterns(t)) for t in targets]
    accepted: dict = {}  # id(var) -> (target, op name)
    annotations, report = [], []
    for i, (_, b) in enumerate(_bindings(func)):
        v = b.value
        if not isinstance(v, Call) or not isinstance(v.op, Op) or v.op.name in ("call_tir", "call_dps_packed"):
            continue
        entry = {"index": i, "binding": b.var.name_hint, "op": v.op.name, "target": None, "accepted": False,
                 "reason": f"no pattern of {list(targets)} matches {v.op.name}"}
        reasons = []
        for target, patterns in tables:
            for p in patterns:
                if p.op != v.op.name:
                    continue
                if p.after is not None:
                    producers = [accepted.get(id(a)) for a in _operand_vars(v)]
                    if not any(pr is not None and pr[0] == target and pr[1] in p.after for pr in producers):
                        reasons.append(f"{p.name}: an epilogue, accepted only after {'/'.join(p.after)} "
                                       f"offloaded to {target}")
                        continue
                why = p.check(v)
                if why is None:
                    entry.update(target=target, accepted=True, reason=f"matches {p.name}", pattern=p.name)
                    break
                reasons.append(f"{p.name}: {why}")
            if entry["accepted"]:
                break
        if entry["accepted"]:
            accepted[id(b.var)] = (entry["target"], v.op.name)
            annotations.append((i, entry["target"]))
        elif reasons:
            entry["reason"] = "; ".join(reasons)
        report.append(entry)
    return annotations, report


def partition_report(mod: IRModule, targets: Sequence[str]) -> "list[dict]":
    """Each candidate operator call of ``mod``'s graph functions: accepted by which target or not, and why.

    Example:
        >>> from ingot import graph as G
        >>> import ingot.byoc
        >>> x = G.Var("x", G.TensorStructInfo((2, 8), "float16"))
        >>> w = G.Var("w", G.TensorStructInfo((4, 8), "float16"))
        >>> bb = G.BlockBuilder()
        >>> with bb.function("main", [x, w]):
        ...     bb.emit_func_output(bb.emit(G.op.linear(x, w)))
        >>> [(r["op"], r["accepted"]) for r in partition_report(bb.get(), ["cblas"])]
        [('linear', False)]
    """
    rows = []
    for name, func in mod.functions.items():
        if isinstance(func, Function) and not func.attrs.get("Primitive") and not func.attrs.get("Compiler"):
            for row in annotate_function(func, list(targets))[1]:
                rows.append({"function": name, **row})
    return rows


def format_partition_report(rows: "list[dict]") -> str:
    """The report as text, one line per candidate op.

    Example:
        >>> print(format_partition_report([{"function": "main", "binding": "lv", "op": "relu",
        ...     "target": None, "accepted": False, "reason": "no pattern"}]))
        main  lv = relu: native (no pattern)
    """
    return "\n".join(f"{r['function']}  {r['binding']} = {r['op']}: "
                     + (f"{r['target']} ({r['reason']})" if r["accepted"] else f"native ({r['reason']})")
                     for r in rows)


def _graph_funcs(mod: IRModule) -> list:
    return [(n, f) for n, f in mod.functions.items()
            if isinstance(f, Function) and not f.attrs.get("Primitive") and not f.attrs.get("Compiler")]


def AnnotateTarget(targets: "Sequence[str] | str") -> Any:  # noqa: N802 - TVM's pass name
    """Mark the operator calls that the pattern tables of ``targets`` accept (attr ``byoc.annotations``).

    Example: see the module note; `partition_report` shows the decisions.
    """
    targets = [targets] if isinstance(targets, str) else list(targets)

    def run(mod: IRModule) -> IRModule:
        for name, func in _graph_funcs(mod):
            annotations, _ = annotate_function(func, targets)
            mod = mod.with_function(name, func.with_attr(ANNOTATIONS, tuple(annotations)))
        return mod

    return make_pass(run, "AnnotateTarget")


def _successors(func: Function) -> "list[list[int]]":
    """Consumers (binding indices) of each binding, within its own block."""
    items = _bindings(func)
    index = {id(b.var): i for i, (_, b) in enumerate(items)}
    succ: list = [[] for _ in items]
    for i, (blk, b) in enumerate(items):
        for v in _operand_vars(b.value):
            j = index.get(id(v))
            if j is not None and items[j][0] == blk:
                succ[j].append(i)
    return succ


def reenters(union: set, succ: "list[list[int]]", region: "dict | None" = None,
             members: "dict | None" = None) -> "int | None":
    """A binding outside ``union`` on a path that leaves ``union`` and comes back, else None.

    Other regions count as one node each (``region``: binding → region id, ``members``: region id →
    bindings): a region runs after all of its inputs and produces all of its outputs at once, so a
    path that reaches one member continues from every member. Two regions can each be convex and
    still wait for each other: region A's second call needs B's output while B reads A's first.

    Example:
        >>> reenters({0, 2}, [[1, 2], [2], []])   # 0 -> 1 -> 2 leaves and re-enters {0, 2}
        1
        >>> reenters({0, 3}, [[1], [], [3], []], {1: 1, 2: 1}, {1: {1, 2}})  # 0 -> region {1, 2} -> 3
        1
    """
    region, members = region or {}, members or {}
    # Bindings after the last one of the union and of every multi-binding region cannot lead back.
    bound = max([max(union)] + [max(m) for m in members.values() if len(m) > 1])
    stack = [j for i in union for j in succ[i] if j not in union]
    seen: set = set()
    while stack:
        j = stack.pop()
        if j in seen or j > bound:
            continue
        group = members.get(region.get(j), {j}) if j in region else {j}
        seen |= group
        for m in group:
            for k in succ[m]:
                if k in union:
                    return j
                if k not in seen:
                    stack.append(k)
    return None


def merge_regions(func: Function) -> "tuple[list, list]":
    """``(regions, refused)`` of an annotated ``func``: ``[(index, target, region id)]`` and the
    merges refused because they would create a cycle (``[(index, producer index, via index)]``).

    Example: see `MergeCompilerRegions`.
    """
    annotations = dict(func.attrs.get(ANNOTATIONS, ()))
    items = _bindings(func)
    index = {id(b.var): i for i, (_, b) in enumerate(items)}
    succ = _successors(func)
    region = {i: i for i in annotations}
    members = {i: {i} for i in annotations}
    refused = []
    for i in sorted(annotations):
        for v in _operand_vars(items[i][1].value):
            j = index.get(id(v))
            if j is None or j not in annotations or annotations[j] != annotations[i] or items[j][0] != items[i][0]:
                continue
            ri, rj = region[i], region[j]
            if ri == rj:
                continue
            union = members[ri] | members[rj]
            others = {r: m for r, m in members.items() if r not in (ri, rj)}
            via = reenters(union, succ, region, others)
            if via is not None:
                refused.append((i, j, via))
                continue
            keep, drop = min(ri, rj), max(ri, rj)
            for k in members[drop]:
                region[k] = keep
            members[keep] = union
            del members[drop]
    return [(i, annotations[i], region[i]) for i in sorted(annotations)], refused


def MergeCompilerRegions() -> Any:  # noqa: N802 - TVM's pass name
    """Merge adjacent annotated calls of one target into regions, refusing merges that would make
    a cycle (attr ``byoc.regions``). Without it, `PartitionGraph` outlines each annotated call alone.

    Example:
        >>> from ingot import graph as G
        >>> import ingot.byoc
        >>> x = G.Var("x", G.TensorStructInfo((2, 8), "float32"))
        >>> w = G.Var("w", G.TensorStructInfo((8, 8), "float32"))
        >>> bb = G.BlockBuilder()
        >>> with bb.function("main", [x, w]):
        ...     a = bb.emit(G.op.linear(x, w))
        ...     bb.emit_func_output(bb.emit(G.op.linear(a, w)))
        >>> mod = MergeCompilerRegions()(AnnotateTarget("cblas")(bb.get()))
        >>> mod["main"].attrs["byoc.regions"]
        ((0, 'cblas', 0), (1, 'cblas', 0))
    """
    def run(mod: IRModule) -> IRModule:
        for name, func in _graph_funcs(mod):
            if ANNOTATIONS in func.attrs:
                regions, _ = merge_regions(func)
                mod = mod.with_function(name, func.with_attr(REGIONS, tuple(regions)))
        return mod

    return make_pass(run, "MergeCompilerRegions")


def _outline(func: Function, member_vars: set, target: str, symbol: str) -> "tuple[Function, Function]":
    """``(new caller, region function)`` for the region made of the bindings of ``member_vars``
    (``id``s of their variables: indices move as other regions are outlined)."""
    items = _bindings(func)
    members = [i for i, (_, b) in enumerate(items) if id(b.var) in member_vars]
    member_set = set(members)
    region_vars = {id(items[i][1].var) for i in members}
    block = items[members[0]][0]
    # Step 1. inputs: variables read by the region and bound outside it (in order of first use).
    inputs: list = []
    for i in members:
        for v in _operand_vars(items[i][1].value):
            if id(v) not in region_vars and all(v is not u for u in inputs):
                inputs.append(v)
    # Step 2. outputs: region variables used after it (by other bindings or the function result).
    outside_uses: dict = {}
    for i, (_, b) in enumerate(items):
        if i not in member_set:
            used_vars(b.value, outside_uses)
    used_vars(func.body.body, outside_uses)
    outputs = [items[i][1].var for i in members if id(items[i][1].var) in outside_uses] or [items[members[-1]][1].var]
    # Step 3. the region function: fresh parameters and variables.
    params = [Var(v.name_hint, v.struct_info) for v in inputs]
    vmap = {v: p for v, p in zip(inputs, params)}
    inner = []
    out_ids = {id(v) for v in outputs}
    for i in members:
        b = items[i][1]
        nv = (Var if id(b.var) in out_ids else DataflowVar)(b.var.name_hint, b.var.struct_info)
        inner.append(VarBinding(nv, remap(b.value, vmap)))
        vmap[b.var] = nv
    result = vmap[outputs[0]] if len(outputs) == 1 else Tuple([vmap[o] for o in outputs])
    region_func = Function(params, SeqExpr([DataflowBlock(inner)], result), result.struct_info,
                           {"Compiler": target, "global_symbol": symbol, "Primitive": True})
    # Step 4. the caller: the region's call goes after the outside bindings of its span that the
    # region depends on (MergeCompilerRegions made sure none of them depends on the region).
    first = members[0]
    needed: set = set()
    index = {id(b.var): i for i, (_, b) in enumerate(items)}
    stack = [index[id(v)] for v in inputs if id(v) in index]
    while stack:
        j = stack.pop()
        if j in needed or j < first or j in member_set:
            continue
        needed.add(j)
        stack.extend(index[id(v)] for v in _operand_vars(items[j][1].value) if id(v) in index)
    call = Call(GlobalVar(symbol), inputs, struct_info=result.struct_info)
    if len(outputs) == 1:
        region_bindings = [VarBinding(outputs[0], call)]
    else:
        tup = (DataflowVar if isinstance(func.body.blocks[block], DataflowBlock) else Var)(
            f"{symbol}_out", result.struct_info)
        region_bindings = [VarBinding(tup, call)] + [VarBinding(o, TupleGetItem(tup, k)) for k, o in enumerate(outputs)]
    order = list(range(first)) + sorted(needed) + ["region"] + \
        [j for j in range(first, len(items)) if j not in needed and j not in member_set]
    blocks: list = [[] for _ in func.body.blocks]
    for j in order:
        if j == "region":
            blocks[block].extend(region_bindings)
        else:
            blocks[items[j][0]].append(items[j][1])
    new_blocks = [type(blk)(bs) for blk, bs in zip(func.body.blocks, blocks)]
    attrs = {k: v for k, v in func.attrs.items() if k not in (ANNOTATIONS, REGIONS)}
    caller = Function(func.params, SeqExpr(new_blocks, func.body.body), func.ret_struct_info, attrs)
    return caller, region_func


def PartitionGraph() -> Any:  # noqa: N802 - TVM's pass name
    """Outline each annotated region into a function with attrs ``Compiler``, ``global_symbol``
    (``<target>_<function>_<k>``) and ``Primitive``, called from the original function.

    Example: see the module note.
    """
    def run(mod: IRModule) -> IRModule:
        counters: dict = {}
        for name, func in _graph_funcs(mod):
            if REGIONS in func.attrs:
                regions = list(func.attrs[REGIONS])
            elif ANNOTATIONS in func.attrs:
                regions = [(i, t, i) for i, t in func.attrs[ANNOTATIONS]]
            else:
                continue
            items = _bindings(func)
            groups: dict = {}
            for i, target, r in regions:
                groups.setdefault(r, (target, []))[1].append(i)
            ordered = sorted(groups.values(), key=lambda g: g[1][0])
            symbols = []
            for target, _ in ordered:
                k = counters.get((target, name), 0)
                while f"{target}_{name}_{k}" in mod.functions:  # a function of that name exists already
                    k += 1
                counters[(target, name)] = k + 1
                symbols.append(f"{target}_{name}_{k}")
            for (target, members), symbol in zip(ordered, symbols):
                func, region_func = _outline(func, {id(items[i][1].var) for i in members}, target, symbol)
                mod = mod.with_function(symbol, region_func)
            attrs = {k: v for k, v in func.attrs.items() if k not in (ANNOTATIONS, REGIONS)}
            mod = mod.with_function(name, Function(func.params, func.body, func.ret_struct_info, attrs))
        return mod

    return make_pass(run, "PartitionGraph")


def FuseOpsByPattern(targets: "Sequence[str] | str") -> Any:  # noqa: N802 - Relax's pass name
    """Relax's spelling of the first half: every call a backend's pattern table accepts becomes its own
    function with attrs ``Composite`` (the pattern's name, e.g. ``"cblas.dense"``), ``Compiler``,
    ``global_symbol`` and ``Primitive``. `MergeCompositeFunctions` then groups them into regions;
    the two give the same partition as AnnotateTarget → MergeCompilerRegions → PartitionGraph.

    Example:
        >>> from ingot import graph as G
        >>> import ingot.byoc
        >>> x = G.Var("x", G.TensorStructInfo((2, 8), "float32"))
        >>> w = G.Var("w", G.TensorStructInfo((8, 8), "float32"))
        >>> bb = G.BlockBuilder()
        >>> with bb.function("main", [x, w]):
        ...     bb.emit_func_output(bb.emit(G.op.relu(bb.emit(G.op.linear(x, w)))))
        >>> mod = FuseOpsByPattern(["cblas"])(bb.get())
        >>> [mod[n].attrs["Composite"] for n in ("cblas_main_0", "cblas_main_1")]
        ['cblas.dense', 'cblas.relu']
        >>> sorted(MergeCompositeFunctions()(mod).function_names)
        ['cblas_main_0', 'main']
    """
    targets = [targets] if isinstance(targets, str) else list(targets)

    def run(mod: IRModule) -> IRModule:
        for name, func in _graph_funcs(mod):
            annotations, report = annotate_function(func, targets)
            if not annotations:
                continue
            patterns = {r["index"]: r["pattern"] for r in report if r["accepted"]}
            singles = func.with_attr(REGIONS, tuple((i, t, i) for i, t in annotations))
            before = set(mod.function_names)
            mod = PartitionGraph()(mod.with_function(name, singles))
            # PartitionGraph names the regions in binding order, as the annotations are listed.
            made = [n for n in mod.function_names if n not in before]
            for (i, _), symbol in zip(annotations, sorted(made, key=lambda n: int(n.rsplit("_", 1)[1]))):
                mod = mod.with_function(symbol, mod[symbol].with_attr("Composite", patterns[i]))
        return mod

    return make_pass(run, "FuseOpsByPattern")


def MergeCompositeFunctions() -> Any:  # noqa: N802 - Relax's pass name
    """Group the composite functions made by `FuseOpsByPattern` into regions (the same merge rules as
    `MergeCompilerRegions`, no cycles) and outline each region as one ``Compiler`` function.

    Example: see `FuseOpsByPattern`.
    """
    def run(mod: IRModule) -> IRModule:
        composite = {n: f for n, f in mod.functions.items()
                     if isinstance(f, Function) and "Composite" in f.attrs and f.attrs.get("Compiler")}
        if not composite:
            return mod
        for name, func in _graph_funcs(mod):
            blocks, annotations, i = [], [], 0
            for blk in func.body.blocks:
                bindings = []
                for b in blk.bindings:
                    v = b.value
                    callee = composite.get(v.op.name_hint) if isinstance(v, Call) and isinstance(v.op, GlobalVar) else None
                    if callee is not None:
                        [inner] = [ib for cb in callee.body.blocks for ib in cb.bindings]
                        b = VarBinding(b.var, remap(inner.value, dict(zip(callee.params, v.args))))
                        annotations.append((i, str(callee.attrs["Compiler"])))
                    bindings.append(b)
                    i += 1
                blocks.append(type(blk)(bindings))
            if annotations:
                func = Function(func.params, SeqExpr(blocks, func.body.body), func.ret_struct_info,
                                {**func.attrs, ANNOTATIONS: tuple(annotations)})
                mod = mod.with_function(name, func)
        for n in composite:
            mod = mod.without_function(n)
        return PartitionGraph()(MergeCompilerRegions()(mod))

    return make_pass(run, "MergeCompositeFunctions")
