# cython: language_level=3
"""ggml's RPC backend: devices on other machines, and the server that lends this one's.

The RPC backend is a plugin (``libggml-rpc``, built with ``-Drpc=true``); its entry
points are looked up through the backend registry, as llama.cpp's own tools do.
"""

import socket
import threading

from libc.stddef cimport size_t
from libc.stdlib cimport calloc, free

from llama_cy._backend cimport Device, _device
from llama_cy._c.ggml_backend cimport (
    ggml_backend_dev_t, ggml_backend_reg_t, ggml_backend_reg_by_name, ggml_backend_reg_dev_count,
    ggml_backend_reg_dev_get, ggml_backend_reg_get_proc_address, ggml_backend_register,
)

from llama_cy.errors import LlamaError

ctypedef ggml_backend_reg_t (*_add_server_t)(const char *endpoint) noexcept nogil
ctypedef void (*_start_server_t)(const char *endpoint, const char *cache_dir, size_t n_threads,
                                 size_t n_devices, ggml_backend_dev_t *devices) noexcept nogil

# One registration per endpoint for the life of the process (ggml keeps what it registers).
cdef dict _servers = {}
_lock = threading.Lock()


cdef void *_proc(const char *name) except NULL:
    cdef ggml_backend_reg_t reg = ggml_backend_reg_by_name(b"RPC")
    if reg == NULL:
        raise LlamaError("this build has no RPC backend: build llama_cy with -Csetup-args=-Drpc=true")
    cdef void *fn = ggml_backend_reg_get_proc_address(reg, name)
    if fn == NULL:
        raise LlamaError(f"the RPC backend lacks {name.decode()}")
    return fn


def _check_endpoint(str endpoint):
    host, sep, port = endpoint.rpartition(":")
    if not sep or not host or not port.isdigit():
        raise ValueError(f"an RPC endpoint is HOST:PORT, not {endpoint!r}")
    return host.strip("[]"), int(port)


def _reachable(str endpoint):
    # ggml aborts the process when it cannot connect: try the port first, so that the
    # usual mistakes (a wrong port, a server not started) are exceptions.
    host, port = _check_endpoint(endpoint)
    try:
        socket.create_connection((host, port), timeout=10).close()
    except OSError as exc:
        raise LlamaError(f"no RPC server answered at {endpoint}: {exc}") from None


def rpc_devices(servers):
    """The devices of the RPC servers at ``servers`` (``"host:port"`` strings), registered
    with ggml once per endpoint. Pass them as ``LlamaModel.load(..., devices=...)``, or
    use ``rpc_servers=`` there."""
    cdef _add_server_t add = <_add_server_t>_proc(b"ggml_backend_rpc_add_server")
    cdef ggml_backend_reg_t reg
    cdef size_t i
    cdef bytes bendpoint
    cdef const char *cendpoint
    out = []
    with _lock:
        for endpoint in servers:
            _check_endpoint(endpoint)
            found = _servers.get(endpoint)
            if found is None:
                _reachable(endpoint)
                bendpoint = endpoint.encode()
                cendpoint = bendpoint
                with nogil:
                    reg = add(cendpoint)
                if reg == NULL or ggml_backend_reg_dev_count(reg) == 0:
                    raise LlamaError(f"no RPC server answered at {endpoint}")
                ggml_backend_register(reg)
                found = [_device(ggml_backend_reg_dev_get(reg, i))
                         for i in range(ggml_backend_reg_dev_count(reg))]
                _servers[endpoint] = found
            out.extend(found)
    return out


def with_rpc_devices(devices, rpc_servers):
    """``devices`` plus the RPC servers' devices (all local GPUs too, if ``devices`` is
    None, as llama.cpp's tools do with --rpc)."""
    if not rpc_servers:
        return devices
    from llama_cy._backend import devices as all_devices

    if isinstance(rpc_servers, str):
        rpc_servers = [s.strip() for s in rpc_servers.split(",") if s.strip()]
    remote = rpc_devices(rpc_servers)
    if devices is None:
        devices = [d for d in all_devices() if d.type in ("gpu", "igpu")
                   and not d.backend.startswith("RPC")]
    return list(devices) + remote


def rpc_start_server(str endpoint, devices, size_t n_threads, cache_dir=None):
    """Serve ``devices`` to RPC clients at ``endpoint`` until the process ends (blocks,
    GIL released). Anyone who reaches the port can use the devices: there is no
    authentication."""
    _check_endpoint(endpoint)
    cdef _start_server_t start = <_start_server_t>_proc(b"ggml_backend_rpc_start_server")
    devices = list(devices)
    if not devices:
        raise ValueError("an RPC server needs at least one device")
    cdef size_t n = len(devices)
    cdef ggml_backend_dev_t *devs = <ggml_backend_dev_t *>calloc(n, sizeof(ggml_backend_dev_t))
    if devs == NULL:
        raise MemoryError()
    cdef size_t i
    for i in range(n):
        devs[i] = (<Device?>devices[i]).dev
    cdef bytes bendpoint = endpoint.encode()
    cdef bytes bcache = cache_dir.encode() if cache_dir is not None else None
    cdef const char *cep = bendpoint
    cdef const char *ccache = NULL if bcache is None else <const char *>bcache
    try:
        with nogil:
            start(cep, ccache, n_threads, n, devs)
    finally:
        free(devs)
