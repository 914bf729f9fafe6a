# Declarations of ggml-cpu.h (llama.cpp b11434), in the header's order.
# Not linked: these live in the CPU backend plugin, loaded at run time (GGML_BACKEND_DL).
from libc.stdint cimport uint8_t, int32_t, int64_t
from libc.stddef cimport size_t
from libc.stdbool cimport bool
from llama_cy._c.ggml cimport (
    ggml_type, ggml_tensor, ggml_context, ggml_cgraph, ggml_status, ggml_threadpool, ggml_threadpool_t,
    ggml_threadpool_params, ggml_abort_callback, ggml_from_float_t, ggml_fp16_t, ggml_bf16_t,
)
from llama_cy._c.ggml_backend cimport ggml_backend_t, ggml_backend_reg_t

cdef extern from "ggml-cpu.h" nogil:
    # the compute plan that needs to be prepared for ggml_graph_compute()
    cdef struct ggml_cplan:
        size_t work_size
        uint8_t * work_data

        int n_threads
        ggml_threadpool * threadpool

        # abort ggml_graph_compute when true
        ggml_abort_callback abort_callback
        void * abort_callback_data

        # use only reference implementations
        bool use_ref

    # numa strategies
    cdef enum ggml_numa_strategy:
        GGML_NUMA_STRATEGY_DISABLED
        GGML_NUMA_STRATEGY_DISTRIBUTE
        GGML_NUMA_STRATEGY_ISOLATE
        GGML_NUMA_STRATEGY_NUMACTL
        GGML_NUMA_STRATEGY_MIRROR
        GGML_NUMA_STRATEGY_COUNT

    void ggml_numa_init(ggml_numa_strategy numa)
    bool ggml_is_numa()

    ggml_tensor * ggml_new_i32(ggml_context * ctx, int32_t value)
    ggml_tensor * ggml_new_f32(ggml_context * ctx, float value)

    ggml_tensor * ggml_set_i32(ggml_tensor * tensor, int32_t value)
    ggml_tensor * ggml_set_f32(ggml_tensor * tensor, float value)

    int32_t ggml_get_i32_1d(const ggml_tensor * tensor, int i)
    void ggml_set_i32_1d(const ggml_tensor * tensor, int i, int32_t value)

    int32_t ggml_get_i32_nd(const ggml_tensor * tensor, int i0, int i1, int i2, int i3)
    void ggml_set_i32_nd(const ggml_tensor * tensor, int i0, int i1, int i2, int i3, int32_t value)

    float ggml_get_f32_1d(const ggml_tensor * tensor, int i)
    void ggml_set_f32_1d(const ggml_tensor * tensor, int i, float value)

    float ggml_get_f32_nd(const ggml_tensor * tensor, int i0, int i1, int i2, int i3)
    void ggml_set_f32_nd(const ggml_tensor * tensor, int i0, int i1, int i2, int i3, float value)

    ggml_threadpool * ggml_threadpool_new(ggml_threadpool_params * params)
    void ggml_threadpool_free(ggml_threadpool * threadpool)
    int ggml_threadpool_get_n_threads(ggml_threadpool * threadpool)
    void ggml_threadpool_pause(ggml_threadpool * threadpool)
    void ggml_threadpool_resume(ggml_threadpool * threadpool)

    # ggml_graph_plan() has to be called before ggml_graph_compute()
    # when plan.work_size > 0, caller must allocate memory for plan.work_data
    ggml_cplan ggml_graph_plan(
            const ggml_cgraph * cgraph,
            int n_threads,  # = GGML_DEFAULT_N_THREADS
            ggml_threadpool * threadpool)  # = NULL
    ggml_status ggml_graph_compute(ggml_cgraph * cgraph, ggml_cplan * cplan)

    # same as ggml_graph_compute() but the work data is allocated as a part of the context
    ggml_status ggml_graph_compute_with_ctx(ggml_context * ctx, ggml_cgraph * cgraph, int n_threads)

    # ---- system info ----

    # x86
    int ggml_cpu_has_sse3()
    int ggml_cpu_has_ssse3()
    int ggml_cpu_has_avx()
    int ggml_cpu_has_avx_vnni()
    int ggml_cpu_has_avx2()
    int ggml_cpu_has_bmi2()
    int ggml_cpu_has_f16c()
    int ggml_cpu_has_fma()
    int ggml_cpu_has_avx512()
    int ggml_cpu_has_avx512_vbmi()
    int ggml_cpu_has_avx512_vnni()
    int ggml_cpu_has_avx512_bf16()
    int ggml_cpu_has_amx_int8()
    # ARM
    int ggml_cpu_has_neon()
    int ggml_cpu_has_arm_fma()
    int ggml_cpu_has_fp16_va()
    int ggml_cpu_has_dotprod()
    int ggml_cpu_has_matmul_int8()
    int ggml_cpu_has_sve()
    int ggml_cpu_get_sve_cnt()  # sve vector length in bytes
    int ggml_cpu_has_sme()
    int ggml_cpu_has_sme2()
    # other
    int ggml_cpu_has_riscv_v()
    int ggml_cpu_get_rvv_vlen()  # risc-v vector length in bytes
    int ggml_cpu_has_vsx()
    int ggml_cpu_has_vxe()
    int ggml_cpu_has_wasm_simd()
    int ggml_cpu_has_llamafile()

    # Internal types and functions exposed for tests and benchmarks

    ctypedef void (*ggml_vec_dot_t)(
            int n, float * s, size_t bs, const void * x, size_t bx, const void * y, size_t by, int nrc)

    cdef struct ggml_type_traits_cpu:
        ggml_from_float_t from_float
        ggml_vec_dot_t vec_dot
        ggml_type vec_dot_type
        int64_t nrows  # number of rows to process simultaneously

    const ggml_type_traits_cpu * ggml_get_type_traits_cpu(ggml_type type_)

    void ggml_cpu_init()

    # ---- CPU backend ----
    ggml_backend_t ggml_backend_cpu_init()

    bool ggml_backend_is_cpu(ggml_backend_t backend)
    void ggml_backend_cpu_set_n_threads(ggml_backend_t backend_cpu, int n_threads)
    void ggml_backend_cpu_set_threadpool(ggml_backend_t backend_cpu, ggml_threadpool_t threadpool)
    void ggml_backend_cpu_set_abort_callback(
            ggml_backend_t backend_cpu, ggml_abort_callback abort_callback, void * abort_callback_data)

    void ggml_backend_cpu_set_use_ref(ggml_backend_t backend_cpu, bool use_ref)

    ggml_backend_reg_t ggml_backend_cpu_reg()

    void ggml_cpu_fp32_to_fp32(const float *, float *, int64_t)
    void ggml_cpu_fp32_to_i32(const float *, int32_t *, int64_t)
    void ggml_cpu_fp32_to_fp16(const float *, ggml_fp16_t *, int64_t)
    void ggml_cpu_fp16_to_fp32(const ggml_fp16_t *, float *, int64_t)
    void ggml_cpu_fp32_to_bf16(const float *, ggml_bf16_t *, int64_t)
    void ggml_cpu_bf16_to_fp32(const ggml_bf16_t *, float *, int64_t)
