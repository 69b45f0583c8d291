"""Per kernel: a dynamic-batch model's kernels against their static twins (issue #17).

A model exported with a dynamic batch (``torch.onnx.export(..., dynamo=True, dynamic_shapes=...)``) is
imported twice from the same ONNX file: as is (the batch a symbolic dim) and with ``shape_dict`` fixing
the batch (the static twin). Both go through the default graph pipeline; the i-th fused kernel of one
is paired with the i-th of the other when their names and parameter shapes agree (the symbolic batch
bound to ``--batch``). Each pair is default-scheduled, compiled, and timed with the runtime's
``time_evaluator`` on the same preallocated buffers, static and dynamic interleaved, so the ratio is
the kernels' own (no executor, no allocation per call). Prints per kernel static ms, dynamic ms and
dynamic/static, then the sum.

``--source DIR`` also writes each pair's generated C (``<kernel>.static.c``, ``<kernel>.dynamic.c``)
to read the worst pairs. ``--compare`` also builds the dynamic kernels with the pass config
``tir.widen_index_casts=False`` (the lowering before #17: widening casts left in the indices) and
times them in the same rounds (column ``unwidened``).

Usage:
    python benchmarks/dynamic_kernels.py --models mobilenet_v2,resnet50 [--batch 1] [--top 0] \
        [--kernels conv] [--repeat 5] [--compare] [--source /tmp/dyn-src]
"""
from __future__ import annotations

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))


def export_dynamic(name: str, workdir: str) -> str:
    """The ONNX file of the full-size zoo model ``name`` exported with a dynamic batch (dynamo exporter;
    exported on first use to ``<workdir>/<name>_dynbatch.onnx``).

    Example:
        >>> export_dynamic("mobilenet_v2", "/tmp/ingot-models")   # doctest: +SKIP
        '/tmp/ingot-models/mobilenet_v2_dynbatch.onnx'
    """
    path = os.path.join(workdir, f"{name}_dynbatch.onnx")
    if os.path.exists(path):
        return path
    import torch

    from ingot.testing import architectures

    module, x = architectures.build(name, "full")
    torch.manual_seed(0)
    torch.backends.mha.set_fastpath_enabled(False)  # the fused attention path has no ONNX export
    os.makedirs(workdir, exist_ok=True)
    tmp = path + ".tmp.onnx"
    # a batch-1 example would let torch.export specialize the batch to 1
    with torch.no_grad():
        torch.onnx.export(module.eval(), (torch.from_numpy(np.concatenate([x, x])),), tmp, input_names=["data"],
                          dynamo=True, dynamic_shapes=({0: torch.export.Dim("batch", min=1, max=64)},),
                          external_data=False)
    os.replace(tmp, path)
    return path


def _kernels(mod) -> list:
    """``[(name, PrimFunc)]`` of the fused kernels of a built graph module, in name order."""
    from ingot.tir.function import PrimFunc

    out = [(str(getattr(k, "name_hint", k)), f) for k, f in mod.functions.items() if isinstance(f, PrimFunc)]
    return sorted(out, key=lambda kv: kv[0])


def _shapes(func, env: dict) -> "list[tuple] | None":
    """The parameter buffers' shapes of ``func`` with symbolic dims bound from ``env`` (a dim first
    seen is bound to ``env['*']``, the batch); None when a dim is an expression."""
    from ingot.ir.expr import IntImm, Var

    shapes = []
    for buf in func.buffer_params:
        dims = []
        for d in buf.shape:
            if isinstance(d, IntImm) or isinstance(d, int):
                dims.append(int(d))
            elif isinstance(d, Var):
                dims.append(env.setdefault(d.name, env["*"]))
            else:
                return None
        shapes.append((tuple(dims), str(buf.dtype)))
    return shapes


def pairs(name: str, workdir: str, target: str, batch: int) -> list:
    """``[(kernel, static PrimFunc, dynamic PrimFunc, [(shape, dtype)] of the params)]`` of model
    ``name`` (see the module docstring).

    Example:
        >>> pairs("mobilenet_v2", "/tmp/ingot-models", "llvm -num-cores=2", 1)[0][0]   # doctest: +SKIP
        'fused_conv2d_add_clip'
    """
    import ingot
    from ingot.graph.transform import default_build_pipeline
    from ingot.target import Target

    path = export_dynamic(name, workdir)
    tgt = Target(target)
    dyn = _kernels(default_build_pipeline(tgt, "auto")(ingot.load(path, cache=False).mod))
    static = _kernels(default_build_pipeline(tgt, "auto")(
        ingot.load(path, shape_dict={"data": [batch, 3, 224, 224]}, cache=False).mod))
    by_name = dict(static)
    out = []
    for kname, dfunc in dyn:
        sfunc = by_name.get(kname)
        if sfunc is None:
            continue
        dshapes, sshapes = _shapes(dfunc, {"*": batch}), _shapes(sfunc, {"*": batch})
        if dshapes is None or dshapes != sshapes or dfunc.scalar_params or sfunc.scalar_params:
            continue
        if all(isinstance(d, int) for b in dfunc.buffer_params for d in b.shape):
            continue  # no symbolic dim: both are the same kernel
        out.append((kname, sfunc, dfunc, sshapes))
    return out


def _schedule(func, tgt):
    from ingot.ops.schedule.default import schedule_blocks
    from ingot.tir.schedule import Schedule

    return schedule_blocks(Schedule(func), tgt).mod["main"]


def measure(name: str, workdir: str, target: str, batch: int, repeat: int, number_ms: int,
            only: str = "", source_dir: "str | None" = None, compare: bool = False) -> list:
    """``[(kernel, static s, dynamic s, unwidened dynamic s or None)]``: medians of ``repeat``
    interleaved rounds (see the module docstring).

    Example:
        >>> measure("mobilenet_v2", "/tmp/ingot-models", "llvm -num-cores=2", 1, 5, 20)[0]   # doctest: +SKIP
        ('fused_conv2d_add_clip', 1.1e-4, 1.2e-4)
    """
    import ingot
    from ingot.ir import IRModule
    from ingot.ir.transform import PassContext
    from ingot.target import Target

    tgt = Target(target)
    found = [p for p in pairs(name, workdir, target, batch) if only in p[0]]
    funcs = {}
    for k, (_kname, sfunc, dfunc, _) in enumerate(found):
        funcs[f"s{k}"] = _schedule(sfunc, tgt).with_attr("global_symbol", f"s{k}")
        funcs[f"d{k}"] = _schedule(dfunc, tgt).with_attr("global_symbol", f"d{k}")
    lib = ingot.build(IRModule(funcs), tgt)
    libs = {"s": lib, "d": lib}
    if compare:
        with PassContext(config={"tir.widen_index_casts": False}):
            libs["u"] = ingot.build(IRModule({k: f for k, f in funcs.items() if k.startswith("d")}), tgt)
    if source_dir:
        os.makedirs(source_dir, exist_ok=True)
        for k, (kname, _, _, _) in enumerate(found):
            for tag, key in (("static", f"s{k}"), ("dynamic", f"d{k}")):
                single = ingot.build(IRModule({key: funcs[key]}), tgt)
                with open(os.path.join(source_dir, f"{name}.{kname}.{tag}.c"), "w") as f:
                    f.write(single.get_source())
    dev = ingot.cpu(0)
    rng = np.random.default_rng(0)
    rows = []
    for k, (kname, _, _, shapes) in enumerate(found):
        args = [ingot.nd.array(rng.standard_normal(s).astype(dt) if dt.startswith("float") else np.zeros(s, dt))
                for s, dt in shapes]
        evs = {tag: lib_.time_evaluator(f"{'d' if tag == 'u' else tag}{k}", dev, number=1, repeat=1,
                                        min_repeat_ms=number_ms) for tag, lib_ in libs.items()}
        times: dict = {tag: [] for tag in evs}
        for _ in range(repeat):
            for tag, ev in evs.items():
                times[tag].append(ev(*args).mean)
        med = {tag: float(np.median(t)) for tag, t in times.items()}
        rows.append((kname, med["s"], med["d"], med.get("u")))
    return rows


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--models", default="mobilenet_v2,resnet50")
    p.add_argument("--target", default="llvm -num-cores=2")
    p.add_argument("--workdir", default="/tmp/ingot-models")
    p.add_argument("--batch", type=int, default=1)
    p.add_argument("--repeat", type=int, default=5, help="interleaved rounds (median)")
    p.add_argument("--min-repeat-ms", type=int, default=20, help="each timed round lasts at least this")
    p.add_argument("--kernels", default="", help="only kernels whose name contains this")
    p.add_argument("--top", type=int, default=0, help="print only the N worst ratios (0: all)")
    p.add_argument("--source", default=None, help="write each pair's generated C into this folder")
    p.add_argument("--compare", action="store_true",
                   help="also time the dynamic kernels lowered with tir.widen_index_casts=False (before #17)")
    args = p.parse_args(argv)
    for name in args.models.split(","):
        rows = measure(name, args.workdir, args.target, args.batch, args.repeat, args.min_repeat_ms,
                       args.kernels, args.source, args.compare)
        shown = sorted(rows, key=lambda r: -r[2] / r[1])[:args.top] if args.top else rows
        print(f"# {name} batch {args.batch} {args.target}: {len(rows)} kernel pairs")
        extra = f" {'unwidened ms':>12s} {'ratio':>6s}" if args.compare else ""
        print(f"{'kernel':48s} {'static ms':>10s} {'dynamic ms':>10s} {'ratio':>6s}{extra}")
        for kname, s, d, u in list(shown) + [("total", *(sum(r[i] or 0.0 for r in rows) for i in (1, 2, 3)))]:
            extra = f" {u * 1e3:12.4f} {u / max(s, 1e-12):6.2f}" if args.compare else ""
            print(f"{kname:48s} {s * 1e3:10.4f} {d * 1e3:10.4f} {d / max(s, 1e-12):6.2f}{extra}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
