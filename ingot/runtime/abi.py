"""Constants of the Ingot C ABI, shared by the runtime and the C prelude.

Note: every compiled Ingot module exports "packed" functions with one C signature::

    int32_t SYMBOL(IngotValue* args, int32_t* type_codes, int32_t num_args,
                   char* err, int32_t err_len);

``IngotValue`` is an 8-byte union (``int64_t`` / ``double`` / ``void*``); ``type_codes[i]``
says which member ``args[i]`` holds. Tensors are passed as ``DLTensor*`` (DLPack layout) in
``v_handle``. The return value is ``INGOT_OK`` (0) or a negative error code, with a
NUL-terminated message written into ``err``. The numbers below are the single source of
truth: :mod:`ingot.codegen.prelude` prints them into C, the runtime reads them here.

Example::

    >>> from ingot.runtime import abi
    >>> abi.ARG_TENSOR
    7
"""

#: Version of the calling convention and of the helper set in the C prelude
#: (2: + ``ingot_time_function_flushed``; 3: its ``flush`` mask argument, which arguments to flush.
#: Older libraries still load and run, they only cannot time with ``cache_flush``).
ABI_VERSION = 3
#: The first ABI version whose ``ingot_time_function_flushed`` takes the ``flush`` mask.
ABI_FLUSH_MASK = 3
#: Version of the JSON document stored in ``ingot_module_metadata``.
METADATA_VERSION = 1

# Type codes of IngotValue members (TVM-compatible numbering).
ARG_INT = 0  # v_int64
ARG_FLOAT = 2  # v_float64
ARG_HANDLE = 3  # v_handle, opaque pointer
ARG_NULL = 4  # v_handle == NULL
ARG_TENSOR = 7  # v_handle is a DLTensor*

ARG_KIND_NAMES = {
    ARG_INT: "int",
    ARG_FLOAT: "float",
    ARG_HANDLE: "handle",
    ARG_NULL: "null",
    ARG_TENSOR: "tensor",
}

# Return codes of packed functions.
OK = 0
ERR_RUNTIME = -1  # failure inside the kernel (e.g. workspace allocation failed)
ERR_ARGUMENT = -2  # an argument check failed (count, type, dtype, shape, layout)

# DLPack device types (DLDeviceType).
DL_CPU = 1
DL_CUDA = 2
DL_CUDA_HOST = 3

# Names of symbols every module built with the prelude exports.
SYM_METADATA = "ingot_module_metadata"
SYM_SOURCE = "ingot_module_source"
SYM_TIME_FUNCTION = "ingot_time_function"
SYM_TIME_FUNCTION_FLUSHED = "ingot_time_function_flushed"  # since ABI version 2, mask since 3
SYM_SET_NUM_THREADS = "ingot_set_num_threads"
SYM_GET_NUM_THREADS = "ingot_get_num_threads"
SYM_SET_ADAPTIVE_TEAM = "ingot_set_adaptive_team"  # libraries built before it lack it (always a full team)
SYM_POOL_COUNTERS = "ingot_pool_counters"
SYM_ABI_VERSION = "ingot_abi_version"

#: Size of the error buffer the runtime hands to every packed call.
ERR_BUFFER_SIZE = 1024
