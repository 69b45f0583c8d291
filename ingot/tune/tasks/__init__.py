"""Model-level tuning pieces: task extraction, the model task scheduler, tuning records.

Example:
    >>> from ingot.tune.tasks import extract_tasks, merge_records, TuningRecords
"""
from .extract import ExtractedTask, count_calls, extract_tasks, fused_kernels, normalize_kernel, workload_key, workload_module
from .records import TuningRecords, merge_records, open_database, parse_duration
from .scheduler import ModelTaskScheduler

__all__ = ["ExtractedTask", "extract_tasks", "fused_kernels", "count_calls", "normalize_kernel", "workload_key",
           "workload_module", "TuningRecords", "merge_records", "open_database", "parse_duration",
           "ModelTaskScheduler"]
