"""BYOC partitioning (AnnotateTarget → MergeCompilerRegions → PartitionGraph): structure of the
partitioned module on small graphs (chains, a diamond that would make a cycle, several outputs,
constants inside a region, a value used by two regions). No compiler needed."""
import numpy as np

import ingot.byoc  # noqa: F401 - registers the cblas pattern table
from ingot import graph as G
from ingot.graph.transform import (
    AnnotateTarget, MergeCompilerRegions, PartitionGraph, format_partition_report, partition_report,
)
from ingot.ir import IRModule


def T(shape, dtype="float32"):
    return G.TensorStructInfo(shape, dtype)


def partition(mod, merge=True):
    mod = AnnotateTarget(["cblas"])(mod)
    if merge:
        mod = MergeCompilerRegions()(mod)
    return PartitionGraph()(mod)


def regions(mod):
    return {n: f for n, f in mod.functions.items() if isinstance(f, G.Function) and f.attrs.get("Compiler")}


def ops_of(func):
    return [b.value.op.name for blk in func.body.blocks for b in blk.bindings if isinstance(b.value.op, G.Op)]


def dense_chain():
    x = G.Var("x", T((4, 16)))
    w1 = G.const(np.ones((32, 16), "float32"))
    b1 = G.const(np.ones((32,), "float32"))
    w2 = G.const(np.ones((8, 32), "float32"))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        with bb.dataflow():
            h = bb.emit(G.op.relu(bb.emit(G.op.add(bb.emit(G.op.linear(x, w1)), b1))))
            out = bb.emit_output(G.op.linear(h, w2))
        bb.emit_func_output(out)
    return bb.get()


def test_dense_chain_becomes_one_region_with_constants_inside():
    mod = partition(dense_chain())
    regs = regions(mod)
    assert list(regs) == ["cblas_main_0"]
    f = regs["cblas_main_0"]
    assert f.attrs["Compiler"] == "cblas" and f.attrs["global_symbol"] == "cblas_main_0" and f.attrs["Primitive"]
    assert ops_of(f) == ["linear", "add", "relu", "linear"]
    assert len(f.params) == 1  # the weights stay bound inside the region
    assert ops_of(mod["main"]) == []  # main only calls the region
    text = mod.script()
    assert '"Compiler": "cblas"' in text and "cblas_main_0" in text


def test_without_merge_each_annotated_call_is_its_own_region():
    mod = partition(dense_chain(), merge=False)
    assert sorted(regions(mod)) == [f"cblas_main_{k}" for k in range(4)]


def test_epilogue_alone_is_not_offloaded_and_report_says_why():
    x = G.Var("x", T((4, 16)))
    w = G.Var("w", T((8, 16), "float16"))
    bb = G.BlockBuilder()
    with bb.function("main", [x, w]):
        r = bb.emit(G.op.relu(x))
        h = bb.emit(G.op.astype(r, "float16"))
        bb.emit_func_output(bb.emit(G.op.linear(h, w)))
    mod = bb.get()
    rows = partition_report(mod, ["cblas"])
    by_op = {r["op"]: r for r in rows}
    assert not by_op["relu"]["accepted"] and "epilogue" in by_op["relu"]["reason"]
    assert not by_op["linear"]["accepted"] and "float32" in by_op["linear"]["reason"]
    cast = next(r for r in rows if r["op"] not in ("relu", "linear"))
    assert not cast["accepted"] and "no pattern" in cast["reason"]
    assert "native" in format_partition_report(rows)
    assert regions(partition(mod)) == {}


def diamond():
    # a = dense(x); b = relu(a) [cblas]; c = exp(a) [native]; d = add(b, c) [cblas epilogue of b]
    x = G.Var("x", T((4, 16)))
    w = G.Var("w", T((16, 16)))
    bb = G.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            a = bb.emit(G.op.linear(x, w))
            b = bb.emit(G.op.relu(a))
            c = bb.emit(G.op.exp(a))
            d = bb.emit_output(G.op.add(b, c))
        bb.emit_func_output(d)
    return bb.get()


def test_diamond_merge_that_would_make_a_cycle_is_refused():
    ann = AnnotateTarget(["cblas"])(diamond())
    assert [i for i, _ in ann["main"].attrs["byoc.annotations"]] == [0, 1, 3]
    merged = MergeCompilerRegions()(ann)
    region_of = {i: r for i, _, r in merged["main"].attrs["byoc.regions"]}
    assert region_of[0] == region_of[1] and region_of[3] != region_of[0]
    mod = PartitionGraph()(merged)
    regs = regions(mod)
    assert sorted(regs) == ["cblas_main_0", "cblas_main_1"]
    assert ops_of(regs["cblas_main_0"]) == ["linear", "relu"]
    assert ops_of(regs["cblas_main_1"]) == ["add"]
    # dense's result is used natively (exp) and relu's by the second region: two outputs
    assert isinstance(regs["cblas_main_0"].body.body, G.Tuple)
    assert len(regs["cblas_main_0"].body.body.fields) == 2
    # the caller stays in dependency order: every variable is bound before it is used
    bound = {id(p) for p in mod["main"].params}
    for blk in mod["main"].body.blocks:
        for b in blk.bindings:
            from ingot.graph.transform.partition_graph import _operand_vars
            assert all(id(v) in bound for v in _operand_vars(b.value)), str(b.value)
            bound.add(id(b.var))


def test_value_used_by_two_regions_and_natively():
    x = G.Var("x", T((4, 16)))
    w = G.Var("w", T((16, 16)))
    bb = G.BlockBuilder()
    with bb.function("main", [x, w]):
        a = bb.emit(G.op.linear(x, w))
        s = bb.emit(G.op.sigmoid(a))
        p = bb.emit(G.op.linear(s, w))
        q = bb.emit(G.op.matmul(s, w))
        bb.emit_func_output(bb.emit(G.op.add(bb.emit(G.op.tanh(p)), bb.emit(G.op.tanh(q)))))
    mod = partition(bb.get())
    regs = regions(mod)
    assert sorted(regs) == ["cblas_main_0", "cblas_main_1", "cblas_main_2"]
    # s (native) feeds two regions
    users = [n for n, f in regs.items() if any(p.name_hint == "lv1" for p in f.params)]
    assert len(users) == 2


def test_interleaved_regions_outline_in_order():
    # Two independent chains interleaved: both merge into their own region.
    x = G.Var("x", T((4, 16)))
    w = G.Var("w", T((16, 16)))
    bb = G.BlockBuilder()
    with bb.function("main", [x, w]):
        a1 = bb.emit(G.op.linear(x, w))
        e = bb.emit(G.op.exp(x))
        a2 = bb.emit(G.op.relu(a1))
        b1 = bb.emit(G.op.linear(e, w))
        b2 = bb.emit(G.op.relu(b1))
        bb.emit_func_output(bb.emit(G.op.subtract(a2, b2)))
    mod = partition(bb.get())
    regs = regions(mod)
    assert [ops_of(regs[n]) for n in sorted(regs)] == [["linear", "relu"], ["linear", "relu"]]


def test_module_without_candidates_is_unchanged_but_for_attrs():
    x = G.Var("x", T((4,)))
    bb = G.BlockBuilder()
    with bb.function("main", [x]):
        bb.emit_func_output(bb.emit(G.op.exp(x)))
    mod = partition(bb.get())
    assert list(mod.function_names) == ["main"]
    assert "byoc.annotations" not in mod["main"].attrs
    assert isinstance(mod, IRModule)


def test_native_value_the_region_reads_is_bound_before_the_region_call():
    # a = dense(x) [cblas]; c = exp(x) [native, between]; d = a + c [cblas]: one region {a, d} that
    # reads c, so the call goes after c's binding.
    x = G.Var("x", T((4, 16)))
    w = G.Var("w", T((16, 16)))
    bb = G.BlockBuilder()
    with bb.function("main", [x, w]):
        with bb.dataflow():
            a = bb.emit(G.op.linear(x, w))
            c = bb.emit(G.op.exp(x))
            d = bb.emit_output(G.op.add(a, c))
        bb.emit_func_output(d)
    mod = partition(bb.get())
    regs = regions(mod)
    assert [ops_of(f) for f in regs.values()] == [["linear", "add"]]
    bindings = [b for blk in mod["main"].body.blocks for b in blk.bindings]
    assert [getattr(b.value.op, "name", getattr(b.value.op, "name_hint", None)) for b in bindings] == ["exp", "cblas_main_0"]


def test_regions_that_would_wait_for_each_other_are_not_merged(two_regions_graph):
    merged = MergeCompilerRegions()(AnnotateTarget(["cblas"])(two_regions_graph))
    region_of = {i: r for i, _, r in merged["main"].attrs["byoc.regions"]}
    assert region_of[2] == region_of[3] == region_of[4]  # b1, b2, b3
    assert region_of[0] != region_of[5]                    # a1 and a2 stay apart
    mod = PartitionGraph()(merged)
    bound = {id(p) for p in mod["main"].params}
    from ingot.graph.transform.partition_graph import _operand_vars
    for blk in mod["main"].body.blocks:
        for b in blk.bindings:
            assert all(id(v) in bound for v in _operand_vars(b.value)), str(b.value)
            bound.add(id(b.var))


def test_relax_style_passes_give_the_same_partition(two_regions_graph):
    from ingot.graph.transform import FuseOpsByPattern, MergeCompositeFunctions
    from ingot.ir import structural_equal

    for mod in (dense_chain(), diamond(), two_regions_graph):
        fused = FuseOpsByPattern(["cblas"])(mod)
        composites = [f.attrs["Composite"] for f in regions(fused).values()]
        assert composites and all(c.startswith("cblas.") for c in composites)
        relax_style = MergeCompositeFunctions()(fused)
        tvm_style = partition(mod)
        assert sorted(relax_style.function_names) == sorted(tvm_style.function_names)
        for name in tvm_style.function_names:
            assert structural_equal(relax_style[name], tvm_style[name]), name


def test_region_names_never_replace_an_existing_function():
    mod = dense_chain()
    y = G.Var("y", T((1,)))
    taken = G.Function([y], G.SeqExpr([], y))
    mod = mod.with_function("cblas_main_0", taken)
    out = partition(mod)
    assert "Compiler" not in out["cblas_main_0"].attrs and out["cblas_main_0"].params[0].name_hint == "y"
    assert "cblas_main_1" in out.function_names and out["cblas_main_1"].attrs["Compiler"] == "cblas"
