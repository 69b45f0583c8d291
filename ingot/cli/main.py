"""The ``ingot`` command (TVM's tvmc): compile, run, inspect, bench.

Note: every command turns an expected failure (bad file, unsupported ops, wrong input) into one
line on stderr and exit code 1 — no traceback (``INGOT_DEBUG=1`` shows it). Outputs are written
only after everything succeeded (`Package.export` writes into a temporary directory and renames).

Example:
    $ ingot compile model.onnx -o model.ingot --input-shapes data:1x3x224x224
    $ ingot run model.ingot --inputs inputs.npz --print-top 5
    $ ingot inspect model.onnx
    $ ingot bench model.ingot --repeat 50
    $ ingot cache --show-stats
"""
from __future__ import annotations

import os
import sys
import time
from typing import Any

import click
import numpy as np

from .cache import cache_cmd as _cache_cmd  # `ingot cache`
from .common import CLIError, parse_shapes  # noqa: F401 - parse_shapes: ingot.cli.main's public name
from .common import errors as _errors
from .common import step as _step
from .tune import tune_cmd as _tune_cmd  # `ingot tune`


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="ingot", message="ingot %(version)s")
def main() -> None:
    """Ingot: compile ONNX models to native code and run them."""


@main.command("compile")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("-o", "--output", required=True, type=click.Path(), help="package to write (a .ingot directory)")
@click.option("--target", default="llvm", show_default=True, help='target string, e.g. "llvm -num-cores=2"')
@click.option("--input-shapes", default=None, help="NAME:1x3x224x224[,NAME2:...] fixes input shapes")
@click.option("--tuning-records", default=None, type=click.Path(exists=True), help="tuning database to apply")
@click.option("--layout", default="auto", show_default=True, type=click.Choice(["auto", "NHWC", "NCHW"]),
              help="activation layout of conv networks: auto = NHWC on CPUs, NCHW on CUDA; NCHW keeps the model's")
@click.option("--byoc", multiple=True, metavar="BACKEND",
              help="hand the ops an external backend accepts to it (e.g. cblas: dense/matmul on BLAS sgemm); repeatable")
@click.option("--byoc-policy", default="all", show_default=True, type=click.Choice(["all", "cost"]),
              help="all: every op the backend accepts; cost: only regions measured faster than Ingot's kernels")
@click.option("--fallback", default=None, type=click.Choice(["onnxruntime"]),
              help="run the ONNX ops Ingot cannot compile on this runtime (the rest compiles natively)")
@click.option("--no-cache", is_flag=True,
              help="neither read nor write the compiled-package cache (always import and compile)")
def compile_cmd(model: str, output: str, target: str, input_shapes: "str | None", tuning_records: "str | None",
                layout: str = "auto", byoc: "tuple[str, ...]" = (), byoc_policy: str = "all",
                fallback: "str | None" = None, no_cache: bool = False) -> None:
    """Compile MODEL (.onnx) into a package directory."""
    from ingot.workflow import model as M

    shapes = parse_shapes(input_shapes)
    with _errors():
        with _step(f"importing {model}"):
            m = M.load(model, shape_dict=shapes or None, fallback=fallback, cache=not no_cache)
        with _step(f"compiling for {target}"):
            package = M.compile(m, target=target, tuning_records=tuning_records, layout=layout, byoc=list(byoc) or None,
                                byoc_policy="cost" if byoc_policy == "cost" else None, fallback=fallback,
                                cache=not no_cache)
        if package.fallback_ops:
            ops = ", ".join(f"{r['onnx_op']} ({r['node'] or r['binding']})" for r in package.fallback_ops)
            click.echo(f"fallback: {len(package.fallback_ops)} op(s) run on {fallback}: {ops}")
        if byoc:
            rows = package.partition_report
            taken = sum(1 for r in rows if r["accepted"])
            regions = len(package.executable.external)
            click.echo(f"byoc: {', '.join(byoc)} took {taken} of {len(rows)} candidate ops, {regions} region(s) external")
        with _step(f"writing {output}"):
            package.export(output)
    click.echo(f"wrote {output}")


def _load_inputs(path: "str | None", package: Any) -> dict:
    if path is None:
        rng = np.random.default_rng(0)
        out = {}
        for i in package.inputs:
            if not all(isinstance(d, int) for d in i.shape):
                raise CLIError(f"input {i.name!r} has symbolic shape {list(i.shape)}; give --inputs FILE.npz")
            out[i.name] = i.example(rng)
        return out
    if not os.path.isfile(path):
        raise CLIError(f"--inputs {path}: no such file")
    try:
        with np.load(path, allow_pickle=False) as data:
            return {k: data[k] for k in data.files}
    except Exception as exc:
        raise CLIError(f"--inputs {path}: not a readable .npz file ({type(exc).__name__})") from None


@main.command("run")
@click.argument("package", type=click.Path(file_okay=False))
@click.option("--inputs", default=None, type=click.Path(dir_okay=False), help=".npz of named inputs (random if omitted)")
@click.option("--outputs", default=None, type=click.Path(dir_okay=False), help="write the outputs to this .npz")
@click.option("--print-top", default=0, type=int, help="print the N largest entries of each output")
@click.option("--device", default="cpu", show_default=True)
@click.option("--threads", default=None, type=click.IntRange(min=1),
              help="threads for parallel loops (default: what the system allows: OMP_NUM_THREADS, CPU affinity, "
                   "cgroup CPU quota)")
def run_cmd(package: str, inputs: "str | None", outputs: "str | None", print_top: int, device: str,
            threads: "int | None") -> None:
    """Run a compiled PACKAGE on inputs from an .npz file."""
    from ingot.workflow import model as M

    with _errors():
        pkg = M.load_package(package)
        feed = _load_inputs(inputs, pkg)
        result = M.run(pkg, feed, device=device, num_threads=threads)
    strings = {name for name, value in result.items() if value.dtype == object}  # string tensors
    for name, value in result.items():
        click.echo(f"{name}: shape {list(value.shape)} {'string' if name in strings else value.dtype}")
        if print_top > 0 and name not in strings:
            flat = value.reshape(-1)
            top = np.argsort(-flat.astype("float64"), kind="stable")[:print_top]  # bool and ints too
            for rank, k in enumerate(top, 1):
                click.echo(f"  {rank}. index {int(k)}  value {flat[k]:.6g}")
    if outputs:
        with _errors():
            tmp = outputs + ".tmp.npz"
            # string outputs as numpy str arrays: an object array would need pickle to load back
            np.savez(tmp, **{k: v.astype(str) if k in strings else v for k, v in result.items()})
            os.replace(tmp, outputs)
        click.echo(f"wrote {outputs}")


def _table(title: str, columns: list, rows: list) -> None:
    try:
        from rich.console import Console
        from rich.table import Table
    except ImportError:
        click.echo(title)
        for r in rows:
            click.echo("  " + "  ".join(str(c) for c in r))
        return
    t = Table(title=title)
    for c in columns:
        t.add_column(c)
    for r in rows:
        t.add_row(*[str(c) for c in r])
    Console().print(t)


@main.command("inspect")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--json", "as_json", is_flag=True, help="print the report as JSON")
@click.option("--no-import", is_flag=True,
              help="skip the trial import (faster on big models; attribute-level problems go unreported)")
def inspect_cmd(model: str, as_json: bool = False, no_import: bool = False) -> None:
    """Say, before compiling, what MODEL needs: opset and IR version, inputs (dynamic dims marked),
    op counts, unsupported ops with reasons, unsupported data types. Exit code 0 either way."""
    from ingot.frontend.onnx import inspect_model

    with _errors():
        report = inspect_model(model, try_import=not no_import)
    if as_json:
        import json

        click.echo(json.dumps(report.to_dict(), indent=2, default=str))
        return
    kb = report.param_bytes / 1e6
    producer = f", produced by {report.producer}" if report.producer else ""
    click.echo(f"{model}: opset {report.opset}, IR version {report.ir_version}{producer}; "
               f"{report.num_params:,} parameters ({kb:.1f} MB)")

    def dims(shape: Any) -> str:
        return "(no shape)" if shape is None else "[" + ", ".join("?" if d is None else str(d) for d in shape) + "]"

    _table("inputs", ["name", "shape", "dtype", "dynamic"],
           [(i.name, dims(i.shape), i.dtype, "yes" if i.dynamic_axes or i.shape is None else "")
            for i in report.inputs])
    _table("outputs", ["name", "shape", "dtype"], [(o.name, dims(o.shape), o.dtype) for o in report.outputs])
    bad = report.unsupported_ops
    _table("operators", ["op", "count", "supported"],
           [(op, n, "no" if op in bad else "yes") for op, n in report.op_counts.items()])
    if report.subgraph_op_counts:
        click.echo("in subgraphs: " + ", ".join(f"{op} x{n}" for op, n in report.subgraph_op_counts.items()))
    click.echo(report.summary())


@main.command("bench")
@click.argument("package", type=click.Path(file_okay=False))
@click.option("--repeat", default=50, show_default=True, type=int, help="timed runs")
@click.option("--warmup", default=5, show_default=True, type=int)
@click.option("--inputs", default=None, type=click.Path(dir_okay=False), help=".npz of inputs (random if omitted)")
@click.option("--profile", is_flag=True, help="per-kernel times (when the executor supports profiling)")
def bench_cmd(package: str, repeat: int, warmup: int, inputs: "str | None", profile: bool) -> None:
    """Measure PACKAGE's latency (percentiles over --repeat runs)."""
    from ingot.workflow import model as M

    with _errors():
        pkg = M.load_package(package)
        feed = _load_inputs(inputs, pkg)
        arrays = M.check_inputs(feed, pkg.inputs)
        fn = pkg.executor()["main"]
        for _ in range(max(warmup, 0)):
            fn(*arrays)
        times = []
        with click.progressbar(range(max(repeat, 1)), label="benchmarking", file=sys.stderr) as bar:
            for _ in bar:
                t0 = time.perf_counter()
                fn(*arrays)
                times.append((time.perf_counter() - t0) * 1e3)
    t = np.array(times)
    click.echo(f"latency over {len(t)} runs (ms): mean {t.mean():.3f}  p50 {np.percentile(t, 50):.3f}  "
               f"p90 {np.percentile(t, 90):.3f}  p99 {np.percentile(t, 99):.3f}  min {t.min():.3f}  max {t.max():.3f}")
    if profile:
        # Per-kernel times from the step-by-step (interpreter) path; see ingot.workflow.model.profile.
        with _errors():
            prof = M.profile(pkg, feed, repeat=max(min(repeat, 20), 1))
        click.echo("per-kernel profile (median ms per run, interpreter path):")
        click.echo(str(prof))


main.add_command(_tune_cmd)
main.add_command(_cache_cmd)


if __name__ == "__main__":  # pragma: no cover
    main()
