"""``ingot.tune(model, ...)``: the model workflow's tuning step (TVM's ``tvmc tune``).

Note: a thin layer over `ingot.tune.model.tune_model` that also accepts a model file (loaded with
`ingot.driver.model.load`, ``shape_dict`` fixing input shapes). The workflow:

```python
model = ingot.load("resnet50.onnx", shape_dict={"data": [1, 3, 224, 224]})
records = ingot.tune(model, target="llvm -num-cores=2", time_budget="30m", work_dir="tune_resnet50")
package = ingot.compile(model, target="llvm -num-cores=2", tuning_records=records)
```

Example:
    >>> # records = tune("mlp.onnx", target="llvm -num-cores=2", trials=64, work_dir="tune_mlp")
"""
from __future__ import annotations

import os
from typing import Any


def tune(model: Any, target: Any = "llvm", trials: "int | None" = None, time_budget: Any = None,
         work_dir: "str | os.PathLike | None" = None, *, shape_dict: "dict | None" = None, **kwargs: Any) -> Any:
    """Tune ``model`` (an ``ingot.Model``, a graph IRModule, or a model file path) for ``target``;
    returns `ingot.tune.TuningRecords` (pass them to ``ingot.compile(..., tuning_records=...)``).

    ``trials`` and/or ``time_budget`` (``"30m"``, seconds) bound the search (neither: 10 minutes);
    ``work_dir`` holds the records and is resumed when it exists. Other keyword arguments go to
    `ingot.tune.model.tune_model` (``num_trials_per_iter``, ``seed``, ``max_tasks``,
    ``runner_config``, ``verbose`` ...). ``enable_cpu_cache_flush`` (TVM's name): kernels are
    timed with cold caches, as inside the model, unless it is False (default: on for a new work
    dir, unchanged for a resumed one). The run ends with in-model validation (``validate=False``
    skips it; `ingot.tune.validate_in_model` runs it on an existing work dir): a tuned schedule
    that is not faster inside the model than the default is reverted, durably in ``work_dir``.

    Example:
        >>> # records = tune(ingot.load("mlp.onnx"), "llvm -num-cores=2", time_budget="2m", work_dir="w")
        >>> # print(records.summary())
        >>> # warm = tune("mlp.onnx", "llvm", trials=64, work_dir="w_warm", enable_cpu_cache_flush=False)
    """
    from ingot.tune.model import tune_model

    if isinstance(model, (str, os.PathLike, bytes)):
        from .model import load

        model = load(model, shape_dict=shape_dict)
    elif shape_dict is not None:
        raise TypeError("tune: shape_dict applies only when model is a file path; pass it to ingot.load instead")
    return tune_model(model, target, trials=trials, time_budget=time_budget, work_dir=work_dir, **kwargs)


__all__ = ["tune"]
