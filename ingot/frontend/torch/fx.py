"""`from_fx`: import a ``torch.fx.GraphModule`` (TVM's ``relax.frontend.torch.from_fx``) by exporting
it with ``torch.export`` and reusing the ATen converter table of `from_exported_program`.

Note: an fx symbolic trace holds module calls and Python functions (``call_module`` nodes,
``torch.relu``, ``x.view``); converting those would need a second table that duplicates the ATen
one. ``torch.export`` lowers a GraphModule (or any ``nn.Module``) to the same ATen graph as a direct
export, so one table serves both entries. ``input_info`` gives each input's shape and dtype as in
TVM; a dim given as a string (or None) is dynamic, and dims with the same string share one
``torch.export.Dim``. Example inputs use distinct sizes for distinct dynamic dims (PyTorch would
otherwise merge dims whose example sizes coincide).

Example:
    >>> import torch
    >>> gm = torch.fx.symbolic_trace(torch.nn.Sequential(torch.nn.Linear(4, 2), torch.nn.Tanh()))
    >>> mod, _ = from_fx(gm, [(("batch", 4), "float32")])
    >>> print(mod["main"].ret_struct_info)
    R.Tensor((batch, 2), dtype="float32")
"""
from __future__ import annotations

from typing import Any, Sequence

from ingot.ir import IRModule

from ._common import conversion_error
from .importer import from_exported_program

# Example sizes of dynamic dims: distinct, and not 0/1 (which torch.export specializes).
_EXAMPLE_SIZES = (5, 7, 11, 13, 17, 19, 23, 29)


def from_fx(graph_module: Any, input_info: Sequence[tuple],
            keep_params_as_input: bool = False) -> tuple[IRModule, dict]:
    """Import a ``torch.fx.GraphModule`` (or any ``nn.Module``) given its inputs' ``(shape, dtype)``.

    Args:
        graph_module: ``torch.fx.symbolic_trace(module)`` or the module itself, in eval mode.
        input_info: ``[(shape, dtype), ...]`` in argument order; a dim that is a string or None is
            dynamic (equal strings → one symbolic dim).
        keep_params_as_input: as in `from_exported_program`.

    Returns:
        ``(mod, params)`` as `from_exported_program`.

    Example:
        >>> import torch
        >>> gm = torch.fx.symbolic_trace(torch.nn.ReLU())
        >>> mod, _ = from_fx(gm, [((2, 3), "float32")])
        >>> print(mod["main"].ret_struct_info)
        R.Tensor((2, 3), dtype="float32")
    """
    import torch

    if not isinstance(graph_module, torch.nn.Module):
        raise conversion_error(None, f"from_fx expects a torch.fx.GraphModule or nn.Module, got "
                                     f"{type(graph_module).__name__}")
    dims: dict[str, Any] = {}
    examples: dict[str, int] = {}
    args, dynamic = [], []
    for index, entry in enumerate(input_info):
        try:
            shape, dtype = entry
        except (TypeError, ValueError):
            raise conversion_error(None, f"input_info[{index}] must be (shape, dtype), got {entry!r}") from None
        torch_dtype = getattr(torch, str(dtype), None)
        if not isinstance(torch_dtype, torch.dtype):
            raise conversion_error(None, f"input_info[{index}]: unknown dtype {dtype!r} (use e.g. 'float32', 'int64')")
        sizes, spec = [], {}
        for axis, d in enumerate(shape):
            if d is None or isinstance(d, str) or (isinstance(d, int) and d < 0):
                name = d if isinstance(d, str) else f"input{index}_dim{axis}"
                if name not in dims:
                    dims[name] = torch.export.Dim(_identifier(name))
                    examples[name] = _EXAMPLE_SIZES[len(examples) % len(_EXAMPLE_SIZES)]
                spec[axis] = dims[name]
                sizes.append(examples[name])
            else:
                sizes.append(int(d))
        if torch_dtype.is_floating_point:
            args.append(torch.randn(sizes, dtype=torch_dtype))
        else:
            args.append(torch.zeros(sizes, dtype=torch_dtype))  # zeros are valid indices for embeddings
        dynamic.append(spec or None)
    try:
        ep = torch.export.export(graph_module, tuple(args),
                                 dynamic_shapes=tuple(dynamic) if any(dynamic) else None)
    except Exception as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise conversion_error(None, f"torch.export could not trace the module with input_info {list(input_info)}: "
                                     f"{type(exc).__name__}: {first[:300]}") from exc
    return from_exported_program(ep, keep_params_as_input=keep_params_as_input)


def _identifier(name: str) -> str:
    # torch.export.Dim needs a Python identifier; the name itself is only a label.
    s = "".join(c if c.isalnum() or c == "_" else "_" for c in name)
    return s if s and not s[0].isdigit() else f"d_{s}"
