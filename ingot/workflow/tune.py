"""`ingot.workflow.tune(model, ...)`: the model workflow's tuning step (TVM's ``tvmc tune``).

Note: `ingot.tune.tune_model` tunes the kernels of a loaded model (Steps 1-4 of its note); this
step adds what needs the workflow: loading a model file (``shape_dict`` fixes input shapes)
and, at the end, in-model validation (`ingot.workflow.validate_in_model`), which compiles and
runs the model. The workflow:

```python
model = ingot.load("resnet50.onnx", shape_dict={"data": [1, 3, 224, 224]})
records = ingot.workflow.tune(model, target="llvm -num-cores=2", time_budget="30m", work_dir="tune_resnet50")
package = ingot.compile(model, target="llvm -num-cores=2", tuning_records=records)
```

Compatibility: until this package existed, ``ingot.tune`` was a callable module and
``ingot.tune(model, ...)`` ran this step; ``ingot.tune`` is now a plain package, and
``ingot.workflow.tune(model, ...)`` takes the same arguments.

Example:
    >>> # records = tune("mlp.onnx", target="llvm -num-cores=2", trials=64, work_dir="tune_mlp")
"""
from __future__ import annotations

import logging
import os
import time
from typing import Any

logger = logging.getLogger("ingot.tune")


def tune(model: Any, target: Any = "llvm", trials: "int | None" = None, time_budget: Any = None,
         work_dir: "str | os.PathLike | None" = None, *, shape_dict: "dict | None" = None, validate: bool = True,
         **kwargs: Any) -> Any:
    """Tune ``model`` (an ``ingot.Model``, a graph IRModule, or a model file path) for ``target``;
    returns `ingot.tune.TuningRecords` (pass them to ``ingot.compile(..., tuning_records=...)``).

    ``trials`` and/or ``time_budget`` (``"30m"``, seconds) bound the search (neither: 10 minutes);
    ``work_dir`` holds the records and is resumed when it exists. Other keyword arguments go to
    `ingot.tune.tune_model` (``num_trials_per_iter``, ``seed``, ``max_tasks``,
    ``runner_config``, ``verbose`` ...). ``enable_cpu_cache_flush`` (TVM's name): kernels are
    timed with cold caches, as inside the model, unless it is False (default: on for a new work
    dir, unchanged for a resumed one). The run ends with in-model validation (``validate=False``
    skips it; `ingot.workflow.validate_in_model` runs it on an existing work dir): a tuned
    schedule that is not faster inside the model than the default is reverted, durably in
    ``work_dir``. A bare IRModule is not validated (that needs the model's signature).

    Example:
        >>> # records = tune(ingot.load("mlp.onnx"), "llvm -num-cores=2", time_budget="2m", work_dir="w")
        >>> # print(records.summary())
        >>> # warm = tune("mlp.onnx", "llvm", trials=64, work_dir="w_warm", enable_cpu_cache_flush=False)
    """
    from ingot.target import as_target
    from ingot.tune.model import tune_model

    from .model import Model, load

    if isinstance(model, (str, os.PathLike, bytes)):
        model = load(model, shape_dict=shape_dict)
    elif shape_dict is not None:
        raise TypeError("tune: shape_dict applies only when model is a file path; pass it to ingot.load instead")
    target = as_target(target)
    records = tune_model(model, target, trials=trials, time_budget=time_budget, work_dir=work_dir, **kwargs)
    if not validate:
        return records
    if not isinstance(model, Model):
        logger.info("in-model validation skipped: it compiles the model, which needs an ingot.Model (ingot.load); "
                    "run ingot.workflow.validate_in_model(model, %r, target) to validate", records.work_dir)
        return records
    # Not reached when tuning was interrupted: the next run validates what changed.
    from ingot.tune.tasks.records import read_tasks_file

    from .validate import validate_in_model

    t0 = time.perf_counter()
    validate_in_model(model, records, target, verbose=kwargs.get("verbose", 1))
    logger.info("in-model validation took %.1f s (after the tuning budget)", time.perf_counter() - t0)
    records.info = read_tasks_file(records.work_dir)
    return records


__all__ = ["tune"]
