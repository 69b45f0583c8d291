"""``ingot tune``: tune a model's kernels and save the records (TVM's ``tvmc tune``).

Note: ``--trials`` and/or ``--time-budget`` bound the search (neither: 10 minutes); the records
go to ``--work-dir`` (an existing one is resumed), and ``ingot compile ... --tuning-records DIR``
applies them. Ctrl-C (or ``kill``) stops after saving: run the same command again to continue.
Kernels are timed with cold caches (``--disable-cpu-cache-flush``: warm repeated calls). The run
ends with in-model validation (tuned schedules slower inside the model revert to the default;
``--no-validate`` skips it, ``--validate-only`` validates an existing work dir without tuning).

Example:
    $ ingot tune model.onnx --target "llvm -num-cores=2" --time-budget 30m --work-dir tune_model
    $ ingot compile model.onnx -o model.ingot --target "llvm -num-cores=2" --tuning-records tune_model
"""
from __future__ import annotations

import click

from .common import errors, parse_shapes


@click.command("tune")
@click.argument("model", type=click.Path(dir_okay=False))
@click.option("--target", default="llvm", show_default=True, help='target string, e.g. "llvm -num-cores=2"')
@click.option("--trials", default=None, type=click.IntRange(min=1), help="total measured candidates")
@click.option("--time-budget", default=None, help="wall-clock budget: 30m, 1h30m, 90s or seconds (default 10m)")
@click.option("--work-dir", required=True, type=click.Path(file_okay=False), help="records directory (resumed)")
@click.option("--input-shapes", default=None, help="NAME:1x3x224x224[,NAME2:...] fixes input shapes")
@click.option("--trials-per-round", default=16, show_default=True, type=click.IntRange(min=1))
@click.option("--max-tasks", default=None, type=click.IntRange(min=1), help="tune only the N heaviest kernels")
@click.option("--skip-share", default=0.05, show_default=True, type=click.FloatRange(0.0, 1.0),
              help="do not search the smallest kernels that together take at most this share of the time")
@click.option("--seed", default=None, type=int)
@click.option("--enable-cpu-cache-flush/--disable-cpu-cache-flush", "cache_flush", default=None,
              help="time kernels with cold caches, as inside the model (default: enabled for a new work dir, "
                   "as before for a resumed one)")
@click.option("--validate/--no-validate", default=True, show_default=True,
              help="end with in-model validation: tuned schedules slower inside the model revert to the default")
@click.option("--validate-only", is_flag=True, help="only validate the records of --work-dir in the model (no tuning)")
def tune_cmd(model: str, target: str, trials: "int | None", time_budget: "str | None", work_dir: str,
             input_shapes: "str | None", trials_per_round: int, max_tasks: "int | None", skip_share: float,
             seed: "int | None", cache_flush: "bool | None", validate: bool, validate_only: bool) -> None:
    """Tune MODEL (.onnx) for TARGET; records go to --work-dir."""
    from ingot.tune.tasks.records import parse_duration


    if time_budget is not None:
        try:
            parse_duration(time_budget)
        except ValueError as err:
            raise click.BadParameter(str(err), param_hint="--time-budget") from None
    from ingot.workflow.tune import tune

    shapes = parse_shapes(input_shapes)
    if validate_only:
        from ingot.workflow.validate import validate_in_model

        with errors():
            validate_in_model(model, work_dir, target, shape_dict=shapes or None)
        return
    try:
        with errors():
            records = tune(model, target=target, trials=trials, time_budget=time_budget, work_dir=work_dir,
                           shape_dict=shapes or None, num_trials_per_iter=trials_per_round, max_tasks=max_tasks,
                           skip_share=skip_share, seed=seed, enable_cpu_cache_flush=cache_flush, validate=validate)
    except KeyboardInterrupt:
        click.echo(f"interrupted: measured records are in {work_dir}; run the same command to continue", err=True)
        raise SystemExit(130) from None
    click.echo(f"records in {records.work_dir}; apply them with: ingot compile {model} -o OUT.ingot "
               f"--target \"{target}\" --tuning-records {work_dir}")
