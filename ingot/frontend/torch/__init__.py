"""`ingot.frontend.torch`: the PyTorch importer (TVM's ``relax.frontend.torch``).

* `from_exported_program(ep, keep_params_as_input=False)` → ``(IRModule, params)`` from
  ``torch.export.export(module.eval(), example_args, dynamic_shapes=...)``.
* `from_fx(graph_module, input_info)` → the same from a ``torch.fx`` trace (or any module), with
  ``input_info = [(shape, dtype), ...]`` (a ``str``/None dim is dynamic).
* `supported_ops()`, `find_unsupported(ep)`; errors: `UnsupportedTorchOpsError` (a subclass of
  `ingot.frontend.UnsupportedOpsError`), `ingot.frontend.ConversionError`.

Example:
    >>> import numpy as np, torch
    >>> from ingot.frontend.torch import from_exported_program
    >>> mlp = torch.nn.Sequential(torch.nn.Linear(8, 16), torch.nn.ReLU(), torch.nn.Linear(16, 4)).eval()
    >>> mod, _ = from_exported_program(torch.export.export(mlp, (torch.randn(2, 8),)))
    >>> print(mod["main"].ret_struct_info)
    R.Tensor((2, 4), dtype="float32")
"""
from ._common import UnsupportedTorchOpsError
from .fx import from_fx
from .importer import find_unsupported, from_exported_program, register, supported_ops

__all__ = ["from_exported_program", "from_fx", "supported_ops", "find_unsupported", "register",
           "UnsupportedTorchOpsError"]
