"""Compile time: full-size models (import → graph passes → lowering → C codegen → gcc) and the cost of
building one tuning candidate (schedule replay → lowering → codegen → gcc).

Models (``ingot/testing/architectures.py``, real sizes, batch 1, random weights): ResNet-50, MobileNetV2,
a BERT-base-style encoder, VGG-19, GPT-2. Each is exported to ONNX once (torch, cached under
``--work-dir``), then compiled with ``ingot.load`` + ``ingot.compile`` against an empty kernel cache
(a fresh ``INGOT_CACHE_DIR`` per model), so every kernel is lowered and compiled. The split is measured
by timing wrappers around the driver's entry points (seconds; wall clock, or with ``--clock cpu`` this
process's CPU time for the Python stages and the compiler processes' CPU time for gcc, steadier on a
busy machine):

* import — ``ingot.load`` (ONNX → graph IR, shape inference);
* graph — the graph pipeline (``default_build_pipeline``: constant folding, layout, fusion, legalize, FuseTIR);
* lower — ``ingot.driver.build.lower`` (the TensorIR lowering passes, Python; skipped for kernels whose
  C is in the kernel source cache, ``ingot.driver.kernel_cache``);
* codegen — ``ingot.codegen.c.generate_c`` / ``ingot.codegen.build.emit_kernel_source`` (printing C, Python);
* gcc — ``ingot.codegen.build.link_kernel_sources`` (a model's translation units compiled in parallel, one
  per compile job, and linked) and ``ingot.codegen.toolchain.compile_shared_library`` (one unit);
* other — the rest of ``compile``: default schedules, memory/AOT planning, weights.

Recurrent layer (``--rnn GRU``, ``--rnn-steps 160``): a bidirectional GRU/LSTM of 256 hidden units over T
steps, imported and built twice against an empty kernel cache — the time-loop kernel (the default) and
``from_onnx(unroll_rnn=True)`` (a kernel sequence per step) — import and build seconds each.

Tuning candidates: 1024³ fp32 GEMM and a ResNet-50 NHWC 3×3 conv (56×56×64→64): candidates are the
design space's traces (``PostOrderApply``) replayed with fresh samples (seeded), post-processed like the
tuner does, then built like ``LocalBuilder`` does (fresh kernel cache); the rule-based default schedule is
reported as its own row. Min over candidates and mean are printed.

Usage:
    python benchmarks/compile_time.py                       # all models + candidates
    python benchmarks/compile_time.py --models resnet50 --candidates 8
    python benchmarks/compile_time.py --models none         # candidates only
    python benchmarks/compile_time.py --models resnet50,bert --workloads none --warm   # cold + warm
    python benchmarks/compile_time.py --models resnet50 --workloads none --gcc-split 5
        # the gcc phase alone: one translation unit vs one per job, interleaved, min of 5 rounds
    python benchmarks/compile_time.py --models none --workloads none --rnn GRU --rnn-steps 160
        # a bidirectional 256-hidden GRU at T=160: the time-loop kernel vs from_onnx(unroll_rnn=True)
    python benchmarks/compile_time.py --smoke               # small models, 2 candidates: checks the script

Prints Markdown tables and the load average before and after (the machine is shared; quote figures
only with a low load).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import resource
import shutil
import sys
import tempfile
import time
from collections import defaultdict
from typing import Any

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from benchmarks.common import gemm_func, load_average, markdown_table  # noqa: E402

MODELS = ("resnet50", "mobilenet_v2", "bert", "vgg19", "gpt2")
TARGET = "llvm -num-cores=2"


class StageTimer:
    """Accumulates wall time per stage by wrapping module attributes for the duration of a ``with``.

    Nested wrapped calls are charged to the innermost stage only (exclusive times), so the stages add
    up to at most the total.

    Example:
        >>> t = StageTimer()
        >>> with t.wrap(time, "sleep", "sleeping"):     # doctest: +SKIP
        ...     time.sleep(0.01)
        >>> round(t.seconds["sleeping"], 2)              # doctest: +SKIP
        0.01
    """

    def __init__(self, clock=time.perf_counter):
        self.clock = clock
        self.seconds: dict[str, float] = defaultdict(float)
        self.calls: dict[str, int] = defaultdict(int)
        self._stack: list[list] = []  # [stage, start, child seconds]

    def timed(self, fn, stage: str):
        def wrapper(*args, **kwargs):
            clock = self._clock_of(stage)
            self._stack.append([stage, clock(), 0.0])
            try:
                return fn(*args, **kwargs)
            finally:
                name, start, child = self._stack.pop()
                total = clock() - start
                self.seconds[name] += total - child
                self.calls[name] += 1
                if self._stack and self._clock_of(self._stack[-1][0]) is clock:
                    self._stack[-1][2] += total  # only a time on the parent's own clock is subtracted

        wrapper.__wrapped__ = fn
        return wrapper

    def _clock_of(self, stage: str):
        # gcc runs in child processes: on the CPU clock it is charged the children's CPU time.
        if stage == "gcc" and self.clock is not time.perf_counter:
            return children_cpu_time
        return self.clock

    @contextlib.contextmanager
    def wrap(self, owner, attr: str, stage: str):
        original = getattr(owner, attr)
        setattr(owner, attr, self.timed(original, stage))
        try:
            yield
        finally:
            setattr(owner, attr, original)


def children_cpu_time() -> float:
    """CPU seconds (user + system) used by this process's finished child processes (the compiler)."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


@contextlib.contextmanager
def fresh_cache():
    """A new, empty kernel cache directory (``INGOT_CACHE_DIR``) for the duration of the block."""
    path = tempfile.mkdtemp(prefix="ingot-ct-cache-")
    old = os.environ.get("INGOT_CACHE_DIR")
    os.environ["INGOT_CACHE_DIR"] = path
    try:
        yield path
    finally:
        if old is None:
            os.environ.pop("INGOT_CACHE_DIR", None)
        else:
            os.environ["INGOT_CACHE_DIR"] = old
        shutil.rmtree(path, ignore_errors=True)


def _pipeline_stages(timer: StageTimer):
    """The wrappers that split a model compile into stages (see the module docstring)."""
    import ingot.codegen.c as codegen_c
    import ingot.codegen.toolchain as toolchain
    import ingot.driver.build as driver_build
    import ingot.graph.transform as graph_transform

    import ingot.codegen.build as codegen_build

    stack = contextlib.ExitStack()
    stack.enter_context(timer.wrap(driver_build, "lower", "lower"))
    stack.enter_context(timer.wrap(codegen_c, "generate_c", "codegen"))
    # Graph modules print C kernel by kernel (codegen.build.emit_kernel_source, one "lower" call
    # each on a kernel-source-cache miss) and compile through link_kernel_sources (one or more
    # translation units, compiled in parallel, linked).
    stack.enter_context(timer.wrap(codegen_build, "emit_kernel_source", "codegen"))
    stack.enter_context(timer.wrap(codegen_build, "assemble_source", "codegen"))
    stack.enter_context(timer.wrap(codegen_build, "link_kernel_sources", "gcc"))
    stack.enter_context(timer.wrap(toolchain, "compile_shared_library", "gcc"))
    original = graph_transform.default_build_pipeline

    def timed_pipeline(*args, **kwargs):
        return timer.timed(original(*args, **kwargs), "graph")

    stack.callback(setattr, graph_transform, "default_build_pipeline", original)
    graph_transform.default_build_pipeline = timed_pipeline
    return stack


def export_onnx(name: str, size: str, work_dir: str) -> str:
    """ONNX file of architecture ``name`` (exported once per work dir)."""
    from ingot.testing.zoo import onnx_file

    return onnx_file(name, work_dir, size, suffix=f"_{size}")


def _timed_compile(path: str, clock) -> dict:
    import ingot

    timer = StageTimer(clock)
    with _pipeline_stages(timer):
        t0 = clock()
        model = ingot.load(path)
        t1 = clock()
        ingot.compile(model, target=TARGET)
        t2 = clock()
    if clock is not time.perf_counter:
        t2 += timer.seconds["gcc"]  # the compiler's CPU time is its own processes', not this one's
    s = timer.seconds
    staged = s["graph"] + s["lower"] + s["codegen"] + s["gcc"]
    return {"import": t1 - t0, "graph": s["graph"], "lower": s["lower"], "codegen": s["codegen"],
            "gcc": s["gcc"], "other": (t2 - t1) - staged, "total": t2 - t0, "kernels": timer.calls["lower"]}


def model_compile_time(name: str, size: str, work_dir: str, clock=time.perf_counter, warm: bool = False) -> dict:
    """Stage seconds of one cold compile of model ``name`` (an empty kernel cache); with ``warm``,
    ``(cold, warm)``: the warm compile follows in the same cache (every kernel's C and the library
    are cached: lowering and gcc are skipped) in a fresh process, as a user's next run would (the
    same process would also reuse in-memory memos of the default schedules)."""
    import json
    import subprocess

    path = export_onnx(name, size, work_dir)
    with fresh_cache():
        cold = _timed_compile(path, clock)
        if not warm:
            return cold
        clock_name = "wall" if clock is time.perf_counter else "cpu"
        out = subprocess.run([sys.executable, os.path.abspath(__file__), "--warm-child", path, "--clock", clock_name],
                             capture_output=True, text=True, check=True)
        return cold, json.loads(out.stdout.strip().splitlines()[-1])


def rnn_model(kind: str, steps: int, hidden: int, inputs: int, batch: int = 1) -> Any:
    """A bidirectional ONNX ``kind`` (GRU or LSTM) layer over ``steps`` steps (``X`` of shape
    ``(steps, batch, inputs)``, random weights): the model docs/frontend.md times at T=160, hidden 256."""
    import numpy as np
    from onnx import TensorProto, helper, numpy_helper

    gates = {"GRU": 3, "LSTM": 4}[kind]
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((2, gates * hidden, inputs)) / np.sqrt(inputs)).astype("float32")
    r = (rng.standard_normal((2, gates * hidden, hidden)) / np.sqrt(hidden)).astype("float32")
    b = (rng.standard_normal((2, 2 * gates * hidden)) * 0.1).astype("float32")
    node = helper.make_node(kind, ["X", "W", "R", "B"], ["Y", "Y_h"], hidden_size=hidden, direction="bidirectional")
    graph = helper.make_graph(
        [node], "rnn", [helper.make_tensor_value_info("X", TensorProto.FLOAT, [steps, batch, inputs])],
        [helper.make_tensor_value_info("Y", TensorProto.FLOAT, [steps, 2, batch, hidden]),
         helper.make_tensor_value_info("Y_h", TensorProto.FLOAT, [2, batch, hidden])],
        initializer=[numpy_helper.from_array(a, n) for a, n in ((w, "W"), (r, "R"), (b, "B"))])
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 14)], ir_version=8)


def rnn_compile_times(kind: str, steps: int, hidden: int, inputs: int, clock=time.perf_counter) -> "list[list]":
    """Import + build seconds of `rnn_model` both ways, each against an empty kernel cache: the time-loop
    kernel (``from_onnx`` default) and ``from_onnx(unroll_rnn=True)`` (one kernel sequence per step).
    Rows: (model, lowering, kernels, import s, build s, total s); with the CPU clock the build includes the
    compiler processes' CPU time."""
    from ingot import graph as G
    from ingot.frontend.onnx import from_onnx

    model = rnn_model(kind, steps, hidden, inputs)
    rows = []
    for label, unroll in (("time-loop kernel", False), ("unroll_rnn=True", True)):
        with fresh_cache():
            children = children_cpu_time()
            t0 = clock()
            mod, _ = from_onnx(model, unroll_rnn=unroll)
            t1 = clock()
            ex = G.build(mod, TARGET)
            t2 = clock()
            if clock is not time.perf_counter:
                t2 += children_cpu_time() - children
        rows.append([f"{kind} T={steps} H={hidden} bidirectional", label, len(getattr(ex, "kernels", ()) or ()),
                     f"{t1 - t0:.2f}", f"{t2 - t1:.2f}", f"{t2 - t0:.2f}"])
        print(f"  {kind} T={steps} ({label}): {t2 - t0:.1f} s", flush=True)
    return rows


def gcc_split_times(name: str, size: str, work_dir: str, rounds: int) -> "list[list]":
    """The gcc phase of model ``name`` alone: its translation units compiled with 1 job (one unit,
    as before the split) and with `compile_jobs` jobs, interleaved (1, N, 1, N, ...) in fresh cache
    directories; rows (jobs, units, min wall s, min compiler CPU s)."""
    import ingot
    import ingot.codegen.build as codegen_build
    from ingot.codegen.toolchain import compile_jobs

    captured = {}
    original = codegen_build.link_kernel_sources

    def capture(pieces, tail, options, **kwargs):
        captured.update(pieces=pieces, tail=tail, options=options, tail_weight=kwargs.get("tail_weight"))
        return original(pieces, tail, options, **kwargs)

    path = export_onnx(name, size, work_dir)
    with fresh_cache():
        codegen_build.link_kernel_sources = capture
        try:
            ingot.compile(ingot.load(path), target=TARGET)
        finally:
            codegen_build.link_kernel_sources = original
    settings = sorted({1, compile_jobs()})
    wall: dict = defaultdict(list)
    cpu: dict = defaultdict(list)
    for _ in range(rounds):
        for jobs in settings:
            with fresh_cache() as cache:
                c0, t0 = children_cpu_time(), time.perf_counter()
                original(captured["pieces"], captured["tail"], captured["options"], cache_dir=cache, jobs=jobs,
                         tail_weight=captured["tail_weight"])
                wall[jobs].append(time.perf_counter() - t0)
                cpu[jobs].append(children_cpu_time() - c0)
    size_chars = sum(len(p.text) for p in captured["pieces"])
    units = {j: 1 if j == 1 or size_chars < codegen_build.SPLIT_MIN_CHARS else min(j, len(captured["pieces"]))
             for j in settings}
    return [[name, j, units[j], f"{min(wall[j]):.2f}", f"{min(cpu[j]):.2f}"] for j in settings]


# -- tuning candidates ---------------------------------------------------------------------------



def conv_func():
    """ResNet-50 res2 3×3 conv in NHWC: x (1, 56, 56, 64), w (3, 3, 64, 64), pad 1."""
    from ingot import ops, te

    x = te.placeholder((1, 56, 56, 64), "float32", name="x")
    w = te.placeholder((3, 3, 64, 64), "float32", name="w")
    return te.create_prim_func([x, w, ops.nn.conv2d_nhwc(x, w, strides=1, padding=1)])


def _build_stages(mod, target, timer: StageTimer) -> None:
    """What `ingot.tune.builder.build_candidate` does, one timed stage at a time."""
    from ingot.codegen.build import compile_options_for
    from ingot.codegen.c import generate_c
    from ingot.codegen.toolchain import compile_shared_library
    from ingot.driver.build import lower

    with target:
        lowered = timer.timed(lower, "lower")(mod)
    source = timer.timed(generate_c, "codegen")(lowered, target)
    timer.timed(compile_shared_library, "gcc")(source.code, compile_options_for(target))


def candidate_times(workload: str, count: int, seed: int = 0, clock=time.perf_counter) -> "list[list]":
    """Rows (candidate kind, n, replay, lower, codegen, gcc, total; min / mean ms) for ``workload``."""
    import numpy as np

    from ingot.target import Target
    from ingot.tir.schedule import Schedule
    from ingot.tune.space_generator import default_schedule_space
    from ingot.tune.tune_context import TuneContext

    func = gemm_func() if workload == "gemm" else conv_func()
    target = Target(TARGET)
    ctx = TuneContext(func, target, seed=seed)
    spaces = ctx.generate_design_space()
    postprocs = ctx.space_generator.postprocs
    rows = []

    def measure(make_schedule, label: str, n: int):
        per: dict[str, list] = defaultdict(list)
        done = 0
        for k in range(n * 4):
            if done == n:
                break
            timer = StageTimer(clock)
            t0 = clock()
            try:
                sch = make_schedule(k)
                if sch is None:
                    continue
            except Exception:  # an invalid sample: the tuner drops it too
                continue
            replay = clock() - t0
            with fresh_cache():
                _build_stages(sch.mod, target, timer)
            stages = {"replay": replay, **timer.seconds}
            for key in ("replay", "lower", "codegen", "gcc"):
                per[key].append(stages.get(key, 0.0))
            per["total"].append(sum(stages.get(key, 0.0) for key in ("replay", "lower", "codegen", "gcc")))
            done += 1
        if done:
            cells = [f"{min(per[key]) * 1e3:.0f} / {np.mean(per[key]) * 1e3:.0f}"
                     for key in ("replay", "lower", "codegen", "gcc", "total")]
            rows.append([workload, label, done, *cells])

    def sampled(k: int):
        space = spaces[k % len(spaces)]
        sch = Schedule(ctx.mod, seed=seed + k)
        space.trace.apply_to_schedule(sch, remove_postproc=True,
                                      decision_provider=lambda inst, inputs, attrs, decision: None)
        sch.enter_postproc()
        for p in postprocs:
            if not p.apply(sch):
                return None
        return sch

    measure(lambda k: default_schedule_space(ctx.mod, target), "default schedule", max(1, min(count, 3)))
    measure(sampled, "sampled from the space", count)
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--models", default=",".join(MODELS),
                    help=f"comma-separated subset of {','.join(MODELS)}, or 'none'")
    ap.add_argument("--candidates", type=int, default=16, help="tuning candidates built per workload")
    ap.add_argument("--workloads", default="gemm,conv", help="tuning workloads (gemm,conv) or 'none'")
    ap.add_argument("--work-dir", default=os.path.join(tempfile.gettempdir(), "ingot-compile-time"),
                    help="where the exported ONNX files are cached")
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="wall clock, or CPU time (this process's for the Python stages, the compiler "
                         "processes' for gcc): steadier on a busy machine")
    ap.add_argument("--gcc-split", type=int, default=0, metavar="ROUNDS",
                    help="instead of the stage table: time the gcc phase of each model with one translation "
                         "unit and with one per compile job, interleaved, min over ROUNDS")
    ap.add_argument("--warm", action="store_true",
                    help="compile each model a second time, in a fresh process, on the same cache (kernel sources "
                         "and library cached)")
    ap.add_argument("--rnn", default="GRU", help="recurrent layer timed both ways (GRU, LSTM) or 'none': "
                                                 "the time-loop kernel against unroll_rnn=True")
    ap.add_argument("--rnn-steps", type=int, default=160, help="sequence length T of the --rnn model")
    ap.add_argument("--smoke", action="store_true",
                    help="small model sizes, 2 candidates, a short small RNN (checks the script)")
    ap.add_argument("--warm-child", metavar="ONNX", help=argparse.SUPPRESS)  # the --warm compile's process
    args = ap.parse_args(argv)
    if args.warm_child:
        import json

        print(json.dumps(_timed_compile(args.warm_child, time.process_time if args.clock == "cpu" else time.perf_counter)))
        return
    os.makedirs(args.work_dir, exist_ok=True)
    size = "small" if args.smoke else "full"
    models = [] if args.models == "none" else [m for m in args.models.split(",") if m]
    workloads = [] if args.workloads == "none" else [w for w in args.workloads.split(",") if w]
    count = 2 if args.smoke else args.candidates
    clock = time.process_time if args.clock == "cpu" else time.perf_counter

    print(f"load average before: {load_average()}", flush=True)
    if models and args.gcc_split:
        rows = []
        for name in models:
            rows += gcc_split_times(name, size, args.work_dir, args.gcc_split)
        print(f"\ngcc phase of a model compile ({size} size, {TARGET!r}; min over {args.gcc_split} interleaved "
              "rounds, fresh cache each):\n")
        print(markdown_table(["model", "compile jobs", "translation units", "wall s", "compiler CPU s"], rows))
        models = []
    if models:
        from ingot.codegen.toolchain import compile_jobs

        rows = []
        for name in models:
            export_onnx(name, size, args.work_dir)  # not part of the timing
            runs = model_compile_time(name, size, args.work_dir, clock, warm=args.warm)
            for label, r in zip(("cold", "warm"), runs if args.warm else (runs,)):
                rows.append([name, label, r["kernels"], *(f"{r[k]:.2f}" for k in
                                                           ("import", "graph", "lower", "codegen", "gcc", "other",
                                                            "total"))])
                print(f"  {name} ({label}): {r['total']:.1f} s", flush=True)
        print(f"\nModel compile time ({size} size, {TARGET!r}, {args.clock} seconds, {compile_jobs()} compile "
              "jobs; cold: empty kernel cache; warm: the same compile again in a fresh process; kernels: lowered):\n")
        print(markdown_table(["model", "cache", "kernels", "import", "graph passes", "lowering (Python)",
                              "C codegen", "gcc", "other", "total"], rows))
    if args.rnn != "none":
        steps, hidden, inputs = (8, 32, 16) if args.smoke else (args.rnn_steps, 256, 64)
        rows = rnn_compile_times(args.rnn.upper(), steps, hidden, inputs, clock)
        print(f"\nRecurrent layer import + build ({TARGET!r}, {args.clock} seconds, empty kernel cache each; "
              "docs/frontend.md's claim):\n")
        print(markdown_table(["model", "lowering", "kernels", "import", "build", "total"], rows))
    if workloads:
        rows = []
        for w in workloads:
            rows += candidate_times(w, count, clock=clock)
        print(f"\nTuning candidate build (fresh kernel cache, {TARGET!r}; {args.clock} ms, min / mean over "
              "candidates):\n")
        print(markdown_table(["workload", "candidate", "n", "schedule replay", "lowering", "C codegen", "gcc",
                              "total"], rows))
    print(f"\nload average after: {load_average()}")


if __name__ == "__main__":
    main()
