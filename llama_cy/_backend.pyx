# cython: freethreading_compatible=False
"""Process-wide llama.cpp state: backend plugins, devices, capabilities, logging, NUMA.

Importing this module (which ``import llama_cy`` does) routes llama.cpp's log to the
``llama_cy`` logger, loads the ggml backend plugins installed next to it once per
process, and initialises llama.cpp.
"""

import atexit
import logging
import os

from libc.stddef cimport size_t

from llama_cy._c.ggml cimport (
    ggml_log_level, GGML_LOG_LEVEL_DEBUG, GGML_LOG_LEVEL_INFO, GGML_LOG_LEVEL_WARN,
    GGML_LOG_LEVEL_ERROR, GGML_LOG_LEVEL_CONT,
)
from llama_cy._c.ggml_backend cimport (
    ggml_backend_dev_t, ggml_backend_dev_count, ggml_backend_dev_get, ggml_backend_dev_name,
    ggml_backend_dev_description, ggml_backend_dev_type_, ggml_backend_dev_memory,
    ggml_backend_dev_backend_reg, ggml_backend_reg_name, ggml_backend_load,
    ggml_backend_load_all_from_path,
    GGML_BACKEND_DEVICE_TYPE_CPU, GGML_BACKEND_DEVICE_TYPE_GPU, GGML_BACKEND_DEVICE_TYPE_IGPU,
    GGML_BACKEND_DEVICE_TYPE_ACCEL, GGML_BACKEND_DEVICE_TYPE_META,
)
from llama_cy._c.ggml_cpu cimport ggml_numa_strategy
from llama_cy._c cimport llama as c

from llama_cy import _build_config, _cuda_packs

#: The llama.cpp build this package was built from (tools/fetch_llama_cpp.py states it).
LLAMA_CPP_BUILD = _build_config.LLAMA_CPP_BUILD

logger = logging.getLogger("llama_cy")
if logger.level == logging.NOTSET:
    # llama.cpp is chatty at INFO (every tensor at load); users opt in to it.
    logger.setLevel(logging.WARNING)

cdef dict _LEVELS = {
    GGML_LOG_LEVEL_DEBUG: logging.DEBUG,
    GGML_LOG_LEVEL_INFO: logging.INFO,
    GGML_LOG_LEVEL_WARN: logging.WARNING,
    GGML_LOG_LEVEL_ERROR: logging.ERROR,
}
# llama.cpp writes one line in several calls; CONT pieces continue the previous level.
cdef list _pending = []
cdef int _pending_level = logging.INFO


cdef void _log_callback(ggml_log_level level, const char *text, void *user_data) noexcept with gil:
    global _pending_level
    if level != GGML_LOG_LEVEL_CONT:
        _pending_level = _LEVELS.get(level, logging.INFO)
    if not logger.isEnabledFor(_pending_level):
        return
    _pending.append(text.decode("utf-8", "replace"))
    if _pending[-1].endswith("\n"):
        line = "".join(_pending).rstrip("\n")
        _pending.clear()
        if line:
            logger.log(_pending_level, "%s", line)


cdef void _log_silent(ggml_log_level level, const char *text, void *user_data) noexcept nogil:
    pass


def _shutdown():
    # Threads still running C code after the interpreter is gone must not call into it.
    c.llama_log_set(_log_silent, NULL)
    c.llama_backend_free()


c.llama_log_set(_log_callback, NULL)
ggml_backend_load_all_from_path(os.fsencode(os.path.dirname(os.path.abspath(__file__))))
if _cuda_packs.selected is not None:  # a CUDA wheel's plugin, from the pack chosen at import
    if ggml_backend_load(os.fsencode(_cuda_packs.selected)) == NULL:
        logger.warning("CUDA: %s did not load: the CPU serves", _cuda_packs.selected)
c.llama_backend_init()
atexit.register(_shutdown)


cdef dict _DEVICE_TYPES = {
    GGML_BACKEND_DEVICE_TYPE_CPU: "cpu",
    GGML_BACKEND_DEVICE_TYPE_GPU: "gpu",
    GGML_BACKEND_DEVICE_TYPE_IGPU: "igpu",
    GGML_BACKEND_DEVICE_TYPE_ACCEL: "accel",
    GGML_BACKEND_DEVICE_TYPE_META: "meta",
}

cdef dict _NUMA = {
    "disabled": ggml_numa_strategy.GGML_NUMA_STRATEGY_DISABLED,
    "distribute": ggml_numa_strategy.GGML_NUMA_STRATEGY_DISTRIBUTE,
    "isolate": ggml_numa_strategy.GGML_NUMA_STRATEGY_ISOLATE,
    "numactl": ggml_numa_strategy.GGML_NUMA_STRATEGY_NUMACTL,
    "mirror": ggml_numa_strategy.GGML_NUMA_STRATEGY_MIRROR,
}


cdef class Device:
    """A ggml compute device (CPU, GPU, accelerator) as the backend registry sees it.

    Memory figures are read when ``devices()`` is called.
    """

    def __repr__(self):
        return (f"Device(name={self.name!r}, description={self.description!r}, "
                f"type={self.type!r}, backend={self.backend!r}, "
                f"memory_free={self.memory_free}, memory_total={self.memory_total})")


cdef Device _device(ggml_backend_dev_t dev):
    cdef Device d = Device.__new__(Device)
    cdef size_t free = 0, total = 0
    ggml_backend_dev_memory(dev, &free, &total)
    d.dev = dev
    d.name = ggml_backend_dev_name(dev).decode()
    d.description = ggml_backend_dev_description(dev).decode()
    d.type = _DEVICE_TYPES.get(ggml_backend_dev_type_(dev), "unknown")
    d.backend = ggml_backend_reg_name(ggml_backend_dev_backend_reg(dev)).decode()
    d.memory_free = free
    d.memory_total = total
    return d


def devices():
    """Every device of every loaded backend, in registry order."""
    return [_device(ggml_backend_dev_get(i)) for i in range(ggml_backend_dev_count())]


def system_info():
    """llama.cpp's system line: the CPU features and backends compiled in and loaded."""
    return c.llama_print_system_info().decode()


def supports_mmap():
    """Whether model files can be memory-mapped on this system."""
    return c.llama_supports_mmap()


def supports_mlock():
    """Whether model memory can be locked in RAM (``use_mlock``)."""
    return c.llama_supports_mlock()


def supports_gpu_offload():
    """Whether a loaded backend can hold model layers (``n_gpu_layers > 0`` has an effect)."""
    return c.llama_supports_gpu_offload()


def supports_rpc():
    """Whether the RPC backend plugin is loaded."""
    return c.llama_supports_rpc()


def numa_init(strategy="distribute"):
    """Initialise NUMA placement once per process (before loading a model).

    ``strategy`` is one of ``disabled``, ``distribute``, ``isolate``, ``numactl``, ``mirror``.
    """
    try:
        numa = _NUMA[strategy]
    except KeyError:
        raise ValueError(f"unknown NUMA strategy {strategy!r}; expected one of {sorted(_NUMA)}") from None
    c.llama_numa_init(numa)


def available_cpus():
    """How many CPUs this process may keep busy at once: its affinity mask, lowered by a
    cgroup CPU quota (a container's ``--cpus``) when one is set."""
    import math
    import os
    try:
        n = len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)
    try:
        with open("/sys/fs/cgroup/cpu.max") as f:
            quota, period = f.read().split()[:2]
        if quota != "max":
            n = min(n, math.ceil(int(quota) / int(period)))
    except (OSError, ValueError):
        pass
    return max(1, n)


def default_n_threads():
    """The thread count a context uses when none is given: one per physical core.

    Counted over the CPUs this process may run on, with hyper-threads of one core
    counted once (as llama.cpp's own tools count them). llama.cpp's built-in default
    is a fixed 4, which on a smaller machine makes its spinning thread pool fight
    itself: measured 230 ms instead of 0.4 ms per token on 2 vCPUs.
    """
    import os
    try:
        cpus = sorted(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return max(1, os.cpu_count() or 1)
    cores = set()
    for cpu in cpus:
        try:
            with open(f"/sys/devices/system/cpu/cpu{cpu}/topology/thread_siblings_list") as f:
                cores.add(f.read().strip())
        except OSError:
            cores.add(str(cpu))
    return max(1, len(cores))
