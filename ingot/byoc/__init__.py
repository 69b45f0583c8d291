"""`ingot.byoc`: bring your own codegen — external backends for parts of a graph (TVM's BYOC).

Note: a backend is a Python class (`Backend`) with three parts, registered by
`register_backend`: its pattern table (which operator calls it accepts, each with a check on
dtypes, shapes and layouts), its codegen (a region function → a `RuntimeModule`) and that
runtime module (runs the region, saves itself to bytes, loads from bytes, so an exported model
carries it). The graph passes (`ingot.graph.transform.AnnotateTarget`, `MergeCompilerRegions`,
`PartitionGraph`) cut the graph into regions; `ingot.graph.build` calls each region's codegen and
the executor calls the runtime modules from the execution plan. docs/byoc.md shows how to write one.

Built-in backends: ``cblas`` (dense / matmul / batch matmul with bias and relu epilogues on
OpenBLAS's ``sgemm``, `ingot.byoc.cblas`) and ``onnxruntime`` (regions as ONNX models in an ONNX Runtime
session, also the ``fallback="onnxruntime"`` for ONNX ops Ingot cannot compile, `ingot.byoc.onnxruntime`).

Example:
    >>> from ingot import byoc
    >>> "cblas" in byoc.list_backends()
    True
"""
from __future__ import annotations

from ingot.graph.external import Pattern, get_patterns, register_patterns

from .base import Backend, RuntimeModule, get_backend, list_backends, partition, register_backend
from . import cblas  # noqa: F401 - registers the cblas backend
from . import onnxruntime  # noqa: F401 - registers the onnxruntime backend (needs onnx/onnxruntime only when used)
from .policy import keep_faster

__all__ = ["Backend", "Pattern", "RuntimeModule", "get_backend", "get_patterns", "keep_faster", "list_backends",
           "partition", "register_backend", "register_patterns"]
