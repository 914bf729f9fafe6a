# Declarations of ggml-backend.h (llama.cpp b11434), in the header's order.
from libc.stdint cimport uint8_t, uint32_t, int64_t
from libc.stddef cimport size_t
from libc.stdbool cimport bool
from llama_cy._c.ggml cimport (
    ggml_tensor, ggml_context, ggml_cgraph, ggml_status, ggml_guid_t, ggml_abort_callback,
)
# ggml-backend.h includes ggml-alloc.h and repeats its typedefs of these three handle types;
# they are declared once, in ggml_alloc.pxd, and re-exported from here.
from llama_cy._c.ggml_alloc cimport (
    ggml_backend_buffer_type, ggml_backend_buffer, ggml_backend,
    ggml_backend_buffer_type_t, ggml_backend_buffer_t, ggml_backend_t,
)

cdef extern from "ggml-backend.h" nogil:
    # (opaque; defined in ggml-backend-impl.h)
    cdef struct ggml_backend_event
    cdef struct ggml_backend_reg
    cdef struct ggml_backend_device

    ctypedef ggml_backend_event * ggml_backend_event_t
    ctypedef void * ggml_backend_graph_plan_t
    ctypedef ggml_backend_reg * ggml_backend_reg_t
    ctypedef ggml_backend_device * ggml_backend_dev_t

    # ---- Backend buffer type ----
    const char * ggml_backend_buft_name(ggml_backend_buffer_type_t buft)
    ggml_backend_buffer_t ggml_backend_buft_alloc_buffer(ggml_backend_buffer_type_t buft, size_t size)
    ggml_backend_buffer_t ggml_backend_buft_alloc_buffer_n(
            ggml_backend_buffer_type_t buft, ggml_tensor ** tensors, int n_tensors)
    size_t ggml_backend_buft_get_alignment(ggml_backend_buffer_type_t buft)
    size_t ggml_backend_buft_get_max_size(ggml_backend_buffer_type_t buft)
    size_t ggml_backend_buft_get_alloc_size(ggml_backend_buffer_type_t buft, const ggml_tensor * tensor)
    size_t ggml_backend_buft_get_alloc_size_n(
            ggml_backend_buffer_type_t buft, ggml_tensor ** tensors, int n_tensors)
    bool ggml_backend_buft_is_host(ggml_backend_buffer_type_t buft)
    ggml_backend_dev_t ggml_backend_buft_get_device(ggml_backend_buffer_type_t buft)

    # ---- Backend buffer ----
    cdef enum ggml_backend_buffer_usage:
        GGML_BACKEND_BUFFER_USAGE_ANY
        GGML_BACKEND_BUFFER_USAGE_WEIGHTS
        GGML_BACKEND_BUFFER_USAGE_COMPUTE

    const char * ggml_backend_buffer_name(ggml_backend_buffer_t buffer)
    void ggml_backend_buffer_free(ggml_backend_buffer_t buffer)
    void * ggml_backend_buffer_get_base(ggml_backend_buffer_t buffer)
    size_t ggml_backend_buffer_get_size(ggml_backend_buffer_t buffer)
    ggml_status ggml_backend_buffer_init_tensor(ggml_backend_buffer_t buffer, ggml_tensor * tensor)
    size_t ggml_backend_buffer_get_alignment(ggml_backend_buffer_t buffer)
    size_t ggml_backend_buffer_get_max_size(ggml_backend_buffer_t buffer)
    size_t ggml_backend_buffer_get_alloc_size(ggml_backend_buffer_t buffer, const ggml_tensor * tensor)
    void ggml_backend_buffer_clear(ggml_backend_buffer_t buffer, uint8_t value)
    bool ggml_backend_buffer_is_host(ggml_backend_buffer_t buffer)
    void ggml_backend_buffer_set_usage(ggml_backend_buffer_t buffer, ggml_backend_buffer_usage usage)
    ggml_backend_buffer_usage ggml_backend_buffer_get_usage(ggml_backend_buffer_t buffer)
    ggml_backend_buffer_type_t ggml_backend_buffer_get_type(ggml_backend_buffer_t buffer)
    void ggml_backend_buffer_reset(ggml_backend_buffer_t buffer)

    # tensor copy between different backends
    void ggml_backend_tensor_copy(const ggml_tensor * src, ggml_tensor * dst)

    # ---- Backend (stream) ----
    ggml_guid_t ggml_backend_guid(ggml_backend_t backend)
    const char * ggml_backend_name(ggml_backend_t backend)
    void ggml_backend_free(ggml_backend_t backend)

    ggml_backend_buffer_type_t ggml_backend_get_default_buffer_type(ggml_backend_t backend)
    ggml_backend_buffer_t ggml_backend_alloc_buffer(ggml_backend_t backend, size_t size)
    size_t ggml_backend_get_alignment(ggml_backend_t backend)
    size_t ggml_backend_get_max_size(ggml_backend_t backend)

    void ggml_backend_tensor_set_async(
            ggml_backend_t backend, ggml_tensor * tensor, const void * data, size_t offset, size_t size)
    void ggml_backend_tensor_get_async(
            ggml_backend_t backend, const ggml_tensor * tensor, void * data, size_t offset, size_t size)
    void ggml_backend_tensor_set_2d_async(
            ggml_backend_t backend, ggml_tensor * tensor, const void * data, size_t offset, size_t size,
            size_t n_copies, size_t stride_tensor, size_t stride_data)
    void ggml_backend_tensor_get_2d_async(
            ggml_backend_t backend, const ggml_tensor * tensor, void * data, size_t offset, size_t size,
            size_t n_copies, size_t stride_tensor, size_t stride_data)

    # "offset" refers to the offset in tensor->data for setting/getting data
    void ggml_backend_tensor_set(ggml_tensor * tensor, const void * data, size_t offset, size_t size)
    void ggml_backend_tensor_get(const ggml_tensor * tensor, void * data, size_t offset, size_t size)
    void ggml_backend_tensor_set_2d(
            ggml_tensor * tensor, const void * data, size_t offset, size_t size,
            size_t n_copies, size_t stride_tensor, size_t stride_data)
    void ggml_backend_tensor_get_2d(
            const ggml_tensor * tensor, void * data, size_t offset, size_t size,
            size_t n_copies, size_t stride_tensor, size_t stride_data)
    void ggml_backend_tensor_memset(ggml_tensor * tensor, uint8_t value, size_t offset, size_t size)

    void ggml_backend_synchronize(ggml_backend_t backend)

    ggml_backend_graph_plan_t ggml_backend_graph_plan_create(ggml_backend_t backend, ggml_cgraph * cgraph)
    void ggml_backend_graph_plan_free(ggml_backend_t backend, ggml_backend_graph_plan_t plan)

    ggml_status ggml_backend_graph_plan_compute(ggml_backend_t backend, ggml_backend_graph_plan_t plan)
    ggml_status ggml_backend_graph_compute(ggml_backend_t backend, ggml_cgraph * cgraph)
    ggml_status ggml_backend_graph_compute_async(ggml_backend_t backend, ggml_cgraph * cgraph)

    # NOTE: will be removed, use device version instead
    bool ggml_backend_supports_op(ggml_backend_t backend, const ggml_tensor * op)
    bool ggml_backend_supports_buft(ggml_backend_t backend, ggml_backend_buffer_type_t buft)
    bool ggml_backend_offload_op(ggml_backend_t backend, const ggml_tensor * op)

    # asynchronous copy
    void ggml_backend_tensor_copy_async(
            ggml_backend_t backend_src, ggml_backend_t backend_dst,
            const ggml_tensor * src, ggml_tensor * dst)

    ggml_backend_dev_t ggml_backend_get_device(ggml_backend_t backend)

    # ---- Events ----
    ggml_backend_event_t ggml_backend_event_new(ggml_backend_dev_t device)
    void ggml_backend_event_free(ggml_backend_event_t event)
    void ggml_backend_event_record(ggml_backend_event_t event, ggml_backend_t backend)
    void ggml_backend_event_synchronize(ggml_backend_event_t event)
    void ggml_backend_event_wait(ggml_backend_t backend, ggml_backend_event_t event)

    # ---- Backend device ----
    cdef enum ggml_backend_dev_type:
        GGML_BACKEND_DEVICE_TYPE_CPU
        GGML_BACKEND_DEVICE_TYPE_GPU
        GGML_BACKEND_DEVICE_TYPE_IGPU
        GGML_BACKEND_DEVICE_TYPE_ACCEL
        GGML_BACKEND_DEVICE_TYPE_META

    # functionality supported by the device
    cdef struct ggml_backend_dev_caps:
        bool async_ "async"  # `async` is a Python keyword
        bool host_buffer
        bool buffer_from_host_ptr
        bool events
        bool mmap_support

    # all the device properties
    cdef struct ggml_backend_dev_props:
        const char * name
        const char * description
        size_t memory_free
        size_t memory_total
        ggml_backend_dev_type type_ "type"
        const char * device_id
        ggml_backend_dev_caps caps

    const char * ggml_backend_dev_name(ggml_backend_dev_t device)
    const char * ggml_backend_dev_description(ggml_backend_dev_t device)
    void ggml_backend_dev_memory(ggml_backend_dev_t device, size_t * free, size_t * total)
    # the C function has the same name as the enum type above: trailing underscore in Cython
    ggml_backend_dev_type ggml_backend_dev_type_ "ggml_backend_dev_type"(ggml_backend_dev_t device)
    void ggml_backend_dev_get_props(ggml_backend_dev_t device, ggml_backend_dev_props * props)
    ggml_backend_reg_t ggml_backend_dev_backend_reg(ggml_backend_dev_t device)
    ggml_backend_t ggml_backend_dev_init(ggml_backend_dev_t device, const char * params)
    ggml_backend_buffer_type_t ggml_backend_dev_buffer_type(ggml_backend_dev_t device)
    ggml_backend_buffer_type_t ggml_backend_dev_host_buffer_type(ggml_backend_dev_t device)
    ggml_backend_buffer_t ggml_backend_dev_buffer_from_host_ptr(
            ggml_backend_dev_t device, void * ptr, size_t size, size_t max_tensor_size)

    bool ggml_backend_dev_supports_op(ggml_backend_dev_t device, const ggml_tensor * op)
    bool ggml_backend_dev_supports_buft(ggml_backend_dev_t device, ggml_backend_buffer_type_t buft)
    bool ggml_backend_dev_offload_op(ggml_backend_dev_t device, const ggml_tensor * op)

    # ---- Backend (reg) ----
    const char * ggml_backend_reg_name(ggml_backend_reg_t reg)
    size_t ggml_backend_reg_dev_count(ggml_backend_reg_t reg)
    ggml_backend_dev_t ggml_backend_reg_dev_get(ggml_backend_reg_t reg, size_t index)
    void * ggml_backend_reg_get_proc_address(ggml_backend_reg_t reg, const char * name)

    # Common functions that may be obtained using ggml_backend_reg_get_proc_address

    # Context management and operations for faster communication between backends (meta backend)
    ctypedef void * (*ggml_backend_comm_init_t)(ggml_backend_t * backends, size_t n_backends)
    ctypedef void (*ggml_backend_comm_free_t)(void * comm_ctx)
    ctypedef bool (*ggml_backend_comm_allreduce_tensor_t)(void * comm_ctx, ggml_tensor ** tensors)

    # Split buffer type for tensor parallelism (old)
    ctypedef ggml_backend_buffer_type_t (*ggml_backend_split_buffer_type_t)(
            int main_device, const float * tensor_split)
    # Set the number of threads for the backend
    ctypedef void (*ggml_backend_set_n_threads_t)(ggml_backend_t backend, int n_threads)
    # Get additional buffer types provided by the device (returns a NULL-terminated array)
    ctypedef ggml_backend_buffer_type_t * (*ggml_backend_dev_get_extra_bufts_t)(ggml_backend_dev_t device)
    # Set the abort callback for the backend
    ctypedef void (*ggml_backend_set_abort_callback_t)(
            ggml_backend_t backend, ggml_abort_callback abort_callback, void * abort_callback_data)
    # Get a list of feature flags supported by the backend (returns a NULL-terminated array)
    cdef struct ggml_backend_feature:
        const char * name
        const char * value
    ctypedef ggml_backend_feature * (*ggml_backend_get_features_t)(ggml_backend_reg_t reg)

    # ---- Backend registry ----
    void ggml_backend_register(ggml_backend_reg_t reg)

    void ggml_backend_device_register(ggml_backend_dev_t device)

    # Backend (reg) enumeration
    size_t ggml_backend_reg_count()
    ggml_backend_reg_t ggml_backend_reg_get(size_t index)
    ggml_backend_reg_t ggml_backend_reg_by_name(const char * name)

    # Device enumeration
    size_t ggml_backend_dev_count()
    ggml_backend_dev_t ggml_backend_dev_get(size_t index)
    ggml_backend_dev_t ggml_backend_dev_by_name(const char * name)
    ggml_backend_dev_t ggml_backend_dev_by_type(ggml_backend_dev_type type_)

    # Direct backend (stream) initialization
    ggml_backend_t ggml_backend_init_by_name(const char * name, const char * params)
    ggml_backend_t ggml_backend_init_by_type(ggml_backend_dev_type type_, const char * params)
    ggml_backend_t ggml_backend_init_best()

    # Load a backend from a dynamic library and register it
    ggml_backend_reg_t ggml_backend_load(const char * path)
    # Unload a backend if loaded dynamically and unregister it
    void ggml_backend_unload(ggml_backend_reg_t reg)
    # Load all known backends from dynamic libraries
    void ggml_backend_load_all()
    void ggml_backend_load_all_from_path(const char * dir_path)

    # ---- Backend scheduler ----
    cdef struct ggml_backend_sched
    ctypedef ggml_backend_sched * ggml_backend_sched_t

    # Evaluation callback for each node in the graph (set with ggml_backend_sched_set_eval_callback)
    ctypedef bool (*ggml_backend_sched_eval_callback)(ggml_tensor * t, bool ask, void * user_data)

    # Initialize a backend scheduler, backends with low index are given priority over backends with
    # high index
    ggml_backend_sched_t ggml_backend_sched_new(
            ggml_backend_t * backends, ggml_backend_buffer_type_t * bufts, int n_backends, size_t graph_size,
            bool parallel, bool op_offload)
    void ggml_backend_sched_free(ggml_backend_sched_t sched)

    # Initialize backend buffers from a measure graph
    void ggml_backend_sched_reserve_size(
            ggml_backend_sched_t sched, ggml_cgraph * measure_graph, size_t * sizes)
    bool ggml_backend_sched_reserve(ggml_backend_sched_t sched, ggml_cgraph * measure_graph)

    int ggml_backend_sched_get_n_backends(ggml_backend_sched_t sched)
    ggml_backend_t ggml_backend_sched_get_backend(ggml_backend_sched_t sched, int i)

    # Get the number of splits of the last graph
    int ggml_backend_sched_get_n_splits(ggml_backend_sched_t sched)
    int ggml_backend_sched_get_n_copies(ggml_backend_sched_t sched)

    ggml_backend_buffer_type_t ggml_backend_sched_get_buffer_type(
            ggml_backend_sched_t sched, ggml_backend_t backend)
    size_t ggml_backend_sched_get_buffer_size(ggml_backend_sched_t sched, ggml_backend_t backend)

    void ggml_backend_sched_set_tensor_backend(
            ggml_backend_sched_t sched, ggml_tensor * node, ggml_backend_t backend)
    ggml_backend_t ggml_backend_sched_get_tensor_backend(ggml_backend_sched_t sched, ggml_tensor * node)

    # Split graph without allocating it
    void ggml_backend_sched_split_graph(ggml_backend_sched_t sched, ggml_cgraph * graph)

    # Allocate and compute graph on the backend scheduler
    bool ggml_backend_sched_alloc_graph(ggml_backend_sched_t sched, ggml_cgraph * graph)
    ggml_status ggml_backend_sched_graph_compute(ggml_backend_sched_t sched, ggml_cgraph * graph)
    ggml_status ggml_backend_sched_graph_compute_async(ggml_backend_sched_t sched, ggml_cgraph * graph)
    void ggml_backend_sched_synchronize(ggml_backend_sched_t sched)

    # Reset all assignments and allocators - must be called before changing the node backends or
    # allocating a new graph
    void ggml_backend_sched_reset(ggml_backend_sched_t sched)

    # Set a callback to be called for each resulting node during graph compute
    void ggml_backend_sched_set_eval_callback(
            ggml_backend_sched_t sched, ggml_backend_sched_eval_callback callback, void * user_data)

    # ---- Meta backend ----
    int GGML_BACKEND_META_MAX_DEVICES

    cdef enum ggml_backend_meta_split_axis:
        GGML_BACKEND_SPLIT_AXIS_0
        GGML_BACKEND_SPLIT_AXIS_1
        GGML_BACKEND_SPLIT_AXIS_2
        GGML_BACKEND_SPLIT_AXIS_3
        GGML_BACKEND_SPLIT_AXIS_MIRRORED
        GGML_BACKEND_SPLIT_AXIS_PARTIAL
        GGML_BACKEND_SPLIT_AXIS_NONE
        GGML_BACKEND_SPLIT_AXIS_UNKNOWN
    const char * ggml_backend_meta_split_axis_name(ggml_backend_meta_split_axis split_axis)

    cdef struct ggml_backend_meta_split_state:
        ggml_backend_meta_split_axis axis
        int64_t ne[256]  # 16*GGML_BACKEND_META_MAX_DEVICES (a Cython array size must be a literal)
        uint32_t nr[16]
        uint32_t n_segments

    # function to assign split states for statically allocated tensors
    ctypedef ggml_backend_meta_split_state (*ggml_backend_meta_get_split_state_t)(
            const ggml_tensor * tensor, void * userdata)

    # create a new meta device from "simple" devices, meta buffer type/buffer/backend is then derived
    # from this
    ggml_backend_dev_t ggml_backend_meta_device(
            ggml_backend_dev_t * devs, size_t n_devs, ggml_backend_meta_get_split_state_t get_split_state,
            void * get_split_state_ud)

    # ---- Utils ----
    cdef struct ggml_backend_graph_copy:
        ggml_backend_buffer_t buffer
        ggml_context * ctx_allocated
        ggml_context * ctx_unallocated
        ggml_cgraph * graph

    # Copy a graph to a different backend
    # (the C function has the same name as the struct above: trailing underscore in Cython)
    ggml_backend_graph_copy ggml_backend_graph_copy_ "ggml_backend_graph_copy"(
            ggml_backend_t backend, ggml_cgraph * graph)
    void ggml_backend_graph_copy_free(ggml_backend_graph_copy copy)

    ctypedef bool (*ggml_backend_eval_callback)(
            int node_index, ggml_tensor * t1, ggml_tensor * t2, void * user_data)

    # Compare the output of two backends
    bool ggml_backend_compare_graph_backend(
            ggml_backend_t backend1, ggml_backend_t backend2, ggml_cgraph * graph,
            ggml_backend_eval_callback callback, void * user_data,
            const ggml_tensor * const * test_nodes, size_t num_test_nodes)

    # Tensor initialization
    ggml_status ggml_backend_tensor_alloc(ggml_backend_buffer_t buffer, ggml_tensor * tensor, void * addr)
    ggml_status ggml_backend_view_init(ggml_tensor * tensor)

    # CPU buffer types are always available
    ggml_backend_buffer_t ggml_backend_cpu_buffer_from_ptr(void * ptr, size_t size)
    ggml_backend_buffer_type_t ggml_backend_cpu_buffer_type()
