"""The PyTorch importer: a ``torch.export.ExportedProgram`` → an `IRModule` with a graph function
``main`` (TVM's ``relax.frontend.torch.from_exported_program``).

Note: the importer walks the fx graph of the exported program in order (fx graphs are
topologically sorted) and keeps, for each node, one *value*:

  * a graph expression (an input `Var` or a bound variable) for tensors computed from the inputs;
  * a numpy array for tensors known at import time (weights, buffers, lifted constants, and
    everything computed from them only);
  * an `ingot.ir.PrimExpr` (or an int) for symbolic sizes (``aten.sym_size``, ``s0 * 5``: any node
    whose ``meta["val"]`` is a ``torch.SymInt`` takes the value of that sympy expression);
  * a Python value (ints, lists, None) or a tuple of values for multi-output ops.

A node whose inputs are all known at import time is *evaluated with PyTorch itself* (exact
semantics for any op, no converter needed: ``full``, ``arange``, weight transposes); only nodes
that touch the model's inputs go through a converter — one small function per ATen overload,
registered with `register` in ``ops_math``/``ops_nn``/``ops_tensor``. Before converting anything,
every node that would need a missing converter is collected, so `UnsupportedTorchOpsError` lists
all of them with their counts at once.

Names from the model (fx node names, state-dict keys) are data: they become ``name_hint`` of the
input variables and appear quoted in error messages, never in code.

Example:
    >>> import torch
    >>> class M(torch.nn.Module):
    ...     def forward(self, x):
    ...         return torch.relu(x) * 2.0
    >>> ep = torch.export.export(M(), (torch.randn(2, 3),))
    >>> mod, params = from_exported_program(ep)
    >>> print(mod["main"].ret_struct_info)
    R.Tensor((2, 3), dtype="float32")
"""
from __future__ import annotations

from typing import Any, Callable

import numpy as np

from ingot import graph as G
from ingot.ir import IRModule, PrimExpr
from ingot.ir.error import IngotError

from ..errors import ConversionError
from ..folding import FoldingContext
from ._common import UnsupportedTorchOpsError, conversion_error, target_key, to_dim, torch_dtype_name

# ATen overload key ("aten.relu.default") → converter fn(ctx, node) -> value.
_CONVERTERS: dict[str, Callable] = {}

# Nodes that only check things at run time (their value is None; nothing is emitted).
_IGNORED = {
    "aten._assert_tensor_metadata.default", "aten._assert_scalar.default", "aten.sym_constrain_range.default",
    "aten.sym_constrain_range_for_size.default", "aten._functional_assert_scalar.default",
    "aten._assert_async.msg", "aten._assert_async.default",
}


def register(*keys: str) -> Callable[[Callable], Callable]:
    """Register ``fn(ctx, node) -> value`` as the converter of the ATen overloads ``keys``
    (``str(torch.ops.aten.relu.default)`` == ``"aten.relu.default"``).

    Example:
        >>> @register("aten.my_identity_demo.default")
        ... def _identity(ctx, node):
        ...     return node.arg("self")
    """

    def wrap(fn: Callable) -> Callable:
        for key in keys:
            _CONVERTERS[key] = fn
        return fn

    return wrap


def get_converter(key: str) -> "Callable | None":
    """The converter registered for ``key`` (an ATen overload name), or None.

    Example:
        >>> get_converter("aten.relu.default") is not None
        True
    """
    _load_converters()
    return _CONVERTERS.get(key)


def supported_ops() -> list[str]:
    """The ATen overloads (and Python builtins) the importer converts when they touch model inputs,
    sorted. Ops applied only to weights/constants are evaluated with PyTorch and need no entry.

    Example:
        >>> "aten.convolution.default" in supported_ops()
        True
    """
    _load_converters()
    return sorted(k for k in _CONVERTERS if "_demo" not in k)


def _load_converters() -> None:
    from . import ops_math, ops_nn, ops_tensor  # noqa: F401 - register on import


# -- the view of one node ----------------------------------------------------------------------


_NO_DEFAULT = object()


class Node:
    """What a converter sees of one fx node: its inputs as values, its schema, its output info.

    ``arg(name, default)`` reads an argument by its schema name whether it was passed positionally
    or as a keyword (``node.arg("stride")``); ``out_shape``/``out_dtype`` describe the result as
    PyTorch computed it (``meta["val"]``), with symbolic sizes as Ingot dims.
    """

    def __init__(self, fx_node: Any, args: tuple, kwargs: dict, ctx: "Context"):
        self.fx_node = fx_node
        self.name = fx_node.name
        self.target = fx_node.target
        self.key = target_key(fx_node.target)
        self.args = args
        self.kwargs = kwargs
        self.ctx = ctx
        schema = getattr(fx_node.target, "_schema", None)
        self._schema_args = list(schema.arguments) if schema is not None else []

    def arg(self, name: "str | int", default: Any = _NO_DEFAULT) -> Any:
        """Argument ``name`` (schema name, or a position for builtins), else its schema default,
        else ``default``."""
        if isinstance(name, int):
            return self.args[name] if name < len(self.args) else (None if default is _NO_DEFAULT else default)
        if name in self.kwargs:
            return self.kwargs[name]
        for index, a in enumerate(self._schema_args):
            if a.name == name:
                if index < len(self.args):
                    return self.args[index]
                if default is not _NO_DEFAULT:
                    return default
                if a.has_default_value():
                    return a.default_value
                return None
        if default is not _NO_DEFAULT:
            return default
        raise self.error(f"internal: the schema of {self.key} has no argument {name!r}")

    @property
    def meta_val(self) -> Any:
        """PyTorch's (fake) value of this node's result."""
        return self.fx_node.meta.get("val")

    @property
    def out_shape(self) -> tuple:
        """The result's shape (ints and symbolic dims)."""
        val = self.meta_val
        if val is None or not hasattr(val, "shape"):
            raise self.error("the exported graph records no output shape for this node (meta['val'] is missing); "
                             "export the module with torch.export.export")
        return tuple(to_dim(d, self.ctx.dims) for d in val.shape)

    @property
    def out_dtype(self) -> str:
        """The result's dtype name (``"float32"``)."""
        val = self.meta_val
        if val is None or not hasattr(val, "dtype"):
            raise self.error("the exported graph records no output dtype for this node (meta['val'] is missing)")
        return torch_dtype_name(val.dtype)

    def error(self, message: str) -> ConversionError:
        """A `ConversionError` naming this node and its overload."""
        return conversion_error(self, message)


class Context(FoldingContext):
    """State of one import: the builder, symbolic dims, and helpers converters use on values.

    `expr` gives a graph expression for a value (numpy arrays become constants), `emit` binds a
    call (folding it when all its arguments are constants), `shape`/`dtype` describe a value.
    """

    def __init__(self, bb: G.BlockBuilder, dims: dict):
        super().__init__(bb)
        self.dims = dims

    @staticmethod
    def is_static(value: Any) -> bool:
        """Whether a tensor value is known at import time (a numpy array or a `Constant`)."""
        return isinstance(value, (np.ndarray, G.Constant))

    @staticmethod
    def expr(value: Any, dtype: "str | None" = None) -> G.Expr:
        """A graph expression for a tensor value; Python scalars become 0-d constants of ``dtype``."""
        if isinstance(value, G.Expr):
            return value
        if isinstance(value, np.ndarray):
            return G.const(value if dtype is None else value.astype(dtype))
        if isinstance(value, np.generic):
            return G.const(np.array(value, dtype=dtype or value.dtype))
        if isinstance(value, (bool, int, float)):
            return G.const(np.array(value, dtype=dtype or ("bool" if isinstance(value, bool) else
                                                           "int64" if isinstance(value, int) else "float32")))
        if isinstance(value, PrimExpr):
            raise IngotError(f"the symbolic size `{value}` is used as tensor data, which is not supported; export "
                             f"with a static size for it")
        raise IngotError(f"expected a tensor, got {type(value).__name__}: {value!r}")

    @staticmethod
    def shape(value: Any) -> tuple:
        """The shape of a tensor value (ints and symbolic dims)."""
        if isinstance(value, np.ndarray):
            return tuple(value.shape)
        shape = value.struct_info.shape
        if shape is None:
            raise IngotError(f"internal: the value `{value}` has no known shape")
        return tuple(shape)

    @staticmethod
    def dtype(value: Any) -> str:
        """The dtype name of a tensor value."""
        if isinstance(value, np.ndarray):
            return str(value.dtype)
        return str(value.struct_info.dtype)


# -- static evaluation with PyTorch -----------------------------------------------------------


def _to_torch(value: Any) -> Any:
    import torch

    if isinstance(value, np.ndarray):
        return torch.from_numpy(np.array(value))  # a writable copy: torch refuses read-only arrays
    if isinstance(value, (list, tuple)):
        return type(value)(_to_torch(v) for v in value)
    return value


def _from_torch(value: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.detach().cpu().numpy()
    if isinstance(value, (list, tuple)):
        return tuple(_from_torch(v) for v in value)
    return value


def _evaluate_static(node: Any, args: tuple, kwargs: dict) -> Any:
    import torch

    try:
        with torch.no_grad():
            return _from_torch(node.target(*_to_torch(args), **_to_torch(kwargs)))
    except Exception as exc:  # any torch error: report it on the node
        raise conversion_error(node, f"evaluating it on constant inputs with PyTorch failed: "
                                     f"{type(exc).__name__}: {str(exc).strip().splitlines()[0][:200]}") from exc


# -- the import --------------------------------------------------------------------------------


def _is_sym_scalar(val: Any) -> bool:
    import torch

    return isinstance(val, torch.SymInt)


def _input_kinds(ep: Any, keep_params_as_input: bool) -> dict[str, str]:
    """Placeholder name → "input" | "param" | "const" from the graph signature."""
    from torch.export.graph_signature import InputKind

    kinds = {}
    for spec in ep.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            kinds[spec.arg.name] = "input"
        elif spec.kind in (InputKind.PARAMETER, InputKind.BUFFER):
            kinds[spec.arg.name] = "param"
        else:
            kinds[spec.arg.name] = "const"
    return kinds


def _state_value(ep: Any, spec: Any) -> np.ndarray:
    target = spec.target
    if target in ep.state_dict:
        tensor = ep.state_dict[target]
    elif target in getattr(ep, "constants", {}):
        tensor = ep.constants[target]
    else:
        raise conversion_error(None, f"the exported program has no value for {target!r} (input {spec.arg.name!r})")
    return tensor.detach().cpu().numpy()


def find_unsupported(ep: Any, keep_params_as_input: bool = False) -> dict[str, list[str]]:
    """ATen overload → names of the nodes that need a converter the importer lacks.

    A node needs a converter when one of its inputs depends on a model input (nodes on weights
    only are evaluated with PyTorch); symbolic-size arithmetic needs none.

    Example:
        >>> import torch
        >>> class M(torch.nn.Module):
        ...     def forward(self, x):
        ...         return torch.relu(x)
        >>> find_unsupported(torch.export.export(M(), (torch.randn(2),)))
        {}
    """
    _load_converters()
    kinds = _input_kinds(ep, keep_params_as_input)
    dynamic: set[str] = set()
    missing: dict[str, list[str]] = {}
    for node in ep.graph.nodes:
        if node.op == "placeholder":
            if kinds.get(node.name) == "input" or (kinds.get(node.name) == "param" and keep_params_as_input):
                dynamic.add(node.name)
        elif node.op == "call_function":
            key = target_key(node.target)
            if key in _IGNORED or not node.users:
                continue  # run-time checks, and dead nodes (e.g. the unused indices of max.dim)
            if not any(a.name in dynamic for a in node.all_input_nodes):
                continue  # evaluated with PyTorch at import time
            dynamic.add(node.name)
            if _is_sym_scalar(node.meta.get("val")) or key in _CONVERTERS:
                continue
            missing.setdefault(key, []).append(node.name)
        elif node.op in ("call_module", "call_method", "get_attr"):
            missing.setdefault(f"{node.op}:{node.target}", []).append(node.name)
    return missing


def from_exported_program(exported_program: Any, keep_params_as_input: bool = False,
                          run_decompositions: bool = False) -> tuple[IRModule, dict]:
    """Import a ``torch.export.ExportedProgram`` (TVM's ``from_exported_program``).

    Args:
        exported_program: ``torch.export.export(module.eval(), example_args, dynamic_shapes=...)``.
            Sizes made dynamic with ``torch.export.Dim`` become symbolic dims of the inputs'
            struct info (named after PyTorch's symbols, e.g. ``s0``), so one build serves every size.
        keep_params_as_input: parameters and buffers become parameters of ``main`` after the user
            inputs, named like the exported placeholders (``p_fc_weight``), and ``params`` maps those
            names to numpy arrays (bind them with ``ingot.graph.transform.BindParams("main", params)``);
            by default they are embedded as constants and ``params`` is empty.
        run_decompositions: lower the program to core ATen first (``ep.run_decompositions()``);
            the default keeps PyTorch's higher-level ops (``linear``, ``layer_norm``, ``sdpa``),
            which map onto Ingot's operators one to one.

    Returns:
        ``(mod, params)``: ``mod["main"]`` takes the user inputs in order and returns the output
        (a tuple when the module returns several).

    Example:
        >>> import torch
        >>> lin = torch.nn.Linear(4, 3)
        >>> mod, params = from_exported_program(torch.export.export(lin, (torch.randn(2, 4),)),
        ...                                     keep_params_as_input=True)
        >>> [p.name_hint for p in mod["main"].params], sorted(params)
        (['input', 'p_weight', 'p_bias'], ['p_bias', 'p_weight'])
    """
    import torch

    if not isinstance(exported_program, torch.export.ExportedProgram):
        raise conversion_error(None, f"expected a torch.export.ExportedProgram, got "
                                     f"{type(exported_program).__name__}; create one with "
                                     f"torch.export.export(module.eval(), example_args)")
    ep = exported_program.run_decompositions() if run_decompositions else exported_program

    # Step 1. find every node without a converter before converting anything.
    missing = find_unsupported(ep, keep_params_as_input)
    if missing:
        raise UnsupportedTorchOpsError(missing)

    # Step 2. the placeholders: user inputs (symbolic dims from their fake values), then weights.
    kinds = _input_kinds(ep, keep_params_as_input)
    specs = {spec.arg.name: spec for spec in ep.graph_signature.input_specs}
    dims: dict = _named_dims(ep)
    values: dict[str, Any] = {}
    inputs: list[G.Var] = []
    weights: list[G.Var] = []
    params: dict[str, np.ndarray] = {}
    for node in ep.graph.nodes:
        if node.op != "placeholder":
            continue
        kind = kinds.get(node.name)
        if kind == "input":
            val = node.meta.get("val")
            if not isinstance(val, torch.Tensor):
                raise conversion_error(None, f"input {node.name!r} is a {type(val).__name__}, not a tensor; only "
                                             f"tensor inputs are supported (make it a constant of the module)")
            shape = tuple(to_dim(d, dims) for d in val.shape)
            var = G.Var(node.name, G.TensorStructInfo(shape, torch_dtype_name(val.dtype)))
            inputs.append(var)
            values[node.name] = var
        elif kind in ("param", "const"):
            array = _state_value(ep, specs[node.name])
            if kind == "param" and keep_params_as_input and node.users:
                var = G.Var(node.name, G.TensorStructInfo(array.shape, str(array.dtype)))
                weights.append(var)
                params[node.name] = array
                values[node.name] = var
            else:
                values[node.name] = array
        else:
            raise conversion_error(None, f"placeholder {node.name!r} of kind {specs[node.name].kind} is not supported")

    # Step 3. convert the nodes in order, inside one dataflow block.
    bb = G.BlockBuilder()
    ctx = Context(bb, dims)
    with bb.function("main", inputs + weights):
        with bb.dataflow():
            output_node = None
            for node in ep.graph.nodes:
                if node.op == "call_function":
                    values[node.name] = _convert_node(ctx, node, values)
                elif node.op == "output":
                    output_node = node
            result = _outputs(ep, output_node, values, ctx)
            gv = bb.emit_output(result)
        bb.emit_func_output(gv)
    return bb.get(), params


def _named_dims(ep: Any) -> dict:
    """Symbol name → dim Var, named after the ``torch.export.Dim`` the user gave where PyTorch
    still knows it (its shape env maps each symbol's source to the Dim's name), else the symbol."""
    import torch

    from ingot.ir import Var as DimVar

    dims: dict = {}
    taken: set = set()
    for node in ep.graph.nodes:
        val = node.meta.get("val") if node.op == "placeholder" else None
        for size in getattr(val, "shape", ()):
            if not isinstance(size, torch.SymInt) or not getattr(size.node.expr, "is_Symbol", False):
                continue
            symbol = str(size.node.expr)
            if symbol in dims:
                continue
            name = symbol
            try:  # private PyTorch state: best effort, the symbol name is a fine fallback
                env = size.node.shape_env
                for source in env.var_to_sources.get(size.node.expr, ()):
                    src = source.name if isinstance(source.name, str) else source.name()
                    debug = env.source_name_to_debug_name.get(src)
                    if debug and debug.isidentifier() and debug not in taken:
                        name = debug
                        break
            except Exception:
                pass
            taken.add(name)
            dims[symbol] = DimVar(name, "int64")
    return dims


def _convert_node(ctx: Context, node: Any, values: dict) -> Any:
    import torch

    key = target_key(node.target)
    if key in _IGNORED or not node.users:
        return None
    args = torch.fx.node.map_arg(node.args, lambda n: values[n.name])
    kwargs = dict(torch.fx.node.map_arg(node.kwargs, lambda n: values[n.name]))
    val = node.meta.get("val")
    if _is_sym_scalar(val):
        # Size arithmetic (sym_size, s0 * 5, ...): its value is the sympy expression torch recorded.
        return to_dim(val, ctx.dims)
    if not any(_is_dynamic(values[n.name]) for n in node.all_input_nodes):
        return _evaluate_static(node, args, kwargs)
    view = Node(node, tuple(args), kwargs, ctx)
    fn = get_converter(key)
    try:
        return fn(ctx, view)
    except ConversionError:
        raise
    except (IngotError, ValueError, TypeError, IndexError, KeyError, NotImplementedError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise view.error(first) from exc


def _is_dynamic(value: Any) -> bool:
    if isinstance(value, (G.Expr, PrimExpr)):
        return not isinstance(value, G.Constant)
    if isinstance(value, (list, tuple)):
        return any(_is_dynamic(v) for v in value)
    return False


def _outputs(ep: Any, output_node: Any, values: dict, ctx: Context) -> G.Expr:
    import torch
    from torch.export.graph_signature import OutputKind

    nodes = list(output_node.args[0]) if output_node is not None else []
    user = [spec.kind == OutputKind.USER_OUTPUT for spec in ep.graph_signature.output_specs]
    outs = []
    for index, item in enumerate(nodes):
        if index < len(user) and not user[index]:
            continue
        value = values[item.name] if isinstance(item, torch.fx.Node) else item
        if value is None or isinstance(value, (PrimExpr, int, float)):
            raise conversion_error(None, f"output {index} is {value!r}, not a tensor; return tensors only")
        outs.append(ctx.expr(value))
    if not outs:
        raise conversion_error(None, "the exported program returns no tensor")
    return outs[0] if len(outs) == 1 else G.Tuple(outs)
