# Declarations of ggml-opt.h (llama.cpp b11434), in the header's order.

from libc.stdint cimport int32_t, int64_t
from libc.stddef cimport size_t
from libc.stdbool cimport bool

from llama_cy._c.ggml cimport ggml_type, ggml_tensor, ggml_context, ggml_cgraph
from llama_cy._c.ggml_backend cimport ggml_backend_sched_t

cdef extern from "ggml-opt.h" nogil:

    cdef struct ggml_opt_dataset
    cdef struct ggml_opt_context
    cdef struct ggml_opt_result

    ctypedef ggml_opt_dataset * ggml_opt_dataset_t
    ctypedef ggml_opt_context * ggml_opt_context_t
    ctypedef ggml_opt_result  * ggml_opt_result_t

    # ---- Loss ----

    cdef enum ggml_opt_loss_type:
        GGML_OPT_LOSS_TYPE_MEAN
        GGML_OPT_LOSS_TYPE_SUM
        GGML_OPT_LOSS_TYPE_CROSS_ENTROPY
        GGML_OPT_LOSS_TYPE_MEAN_SQUARED_ERROR

    # ---- Dataset ----

    ggml_opt_dataset_t ggml_opt_dataset_init(
            ggml_type type_data,
            ggml_type type_label,
            int64_t   ne_datapoint,
            int64_t   ne_label,
            int64_t   ndata,
            int64_t   ndata_shard)
    void ggml_opt_dataset_free(ggml_opt_dataset_t dataset)

    # get underlying tensors that store the data
    int64_t       ggml_opt_dataset_ndata (ggml_opt_dataset_t dataset)
    ggml_tensor * ggml_opt_dataset_data  (ggml_opt_dataset_t dataset)
    ggml_tensor * ggml_opt_dataset_labels(ggml_opt_dataset_t dataset)

    void ggml_opt_dataset_shuffle(ggml_opt_context_t opt_ctx, ggml_opt_dataset_t dataset, int64_t idata)

    void ggml_opt_dataset_get_batch(
            ggml_opt_dataset_t dataset,
            ggml_tensor *      data_batch,
            ggml_tensor *      labels_batch,
            int64_t            ibatch)
    void ggml_opt_dataset_get_batch_host(
            ggml_opt_dataset_t dataset,
            void *             data_batch,
            size_t             nb_data_batch,
            void *             labels_batch,
            int64_t            ibatch)

    # ---- Model / Context ----

    cdef enum ggml_opt_build_type:
        GGML_OPT_BUILD_TYPE_FORWARD
        GGML_OPT_BUILD_TYPE_GRAD
        GGML_OPT_BUILD_TYPE_OPT

    cdef enum ggml_opt_optimizer_type:
        GGML_OPT_OPTIMIZER_TYPE_ADAMW
        GGML_OPT_OPTIMIZER_TYPE_SGD

        GGML_OPT_OPTIMIZER_TYPE_COUNT

    # The members `adamw` / `sgd` of ggml_opt_optimizer_params have anonymous struct types in C, which
    # Cython cannot express. These two helper names stand for them; their C spelling is the member's type
    # via __typeof__ (GCC/Clang/MSVC >= 17.9), so locals of these types also compile.
    ctypedef struct ggml_opt_adamw_params "__typeof__(((struct ggml_opt_optimizer_params *)0)->adamw)":
        float alpha
        float beta1
        float beta2
        float eps
        float wd

    ctypedef struct ggml_opt_sgd_params "__typeof__(((struct ggml_opt_optimizer_params *)0)->sgd)":
        float alpha
        float wd

    # parameters that control which optimizer is used and how said optimizer tries to find the minimal loss
    cdef struct ggml_opt_optimizer_params:
        ggml_opt_adamw_params adamw
        ggml_opt_sgd_params   sgd

    # callback to calculate optimizer parameters prior to a backward pass
    ctypedef ggml_opt_optimizer_params (*ggml_opt_get_optimizer_params)(void * userdata)

    ggml_opt_optimizer_params ggml_opt_get_default_optimizer_params(void * userdata)

    ggml_opt_optimizer_params ggml_opt_get_constant_optimizer_params(void * userdata)

    # parameters for initializing a new optimization context
    cdef struct ggml_opt_params:
        ggml_backend_sched_t backend_sched

        ggml_context * ctx_compute
        ggml_tensor *  inputs
        ggml_tensor *  outputs

        ggml_opt_loss_type  loss_type
        ggml_opt_build_type build_type

        int32_t opt_period

        ggml_opt_get_optimizer_params get_opt_pars
        void *                        get_opt_pars_ud

        ggml_opt_optimizer_type optimizer

    ggml_opt_params ggml_opt_default_params(
            ggml_backend_sched_t backend_sched,
            ggml_opt_loss_type   loss_type)

    ggml_opt_context_t ggml_opt_init(ggml_opt_params params)
    void ggml_opt_free(ggml_opt_context_t opt_ctx)

    void ggml_opt_reset(ggml_opt_context_t opt_ctx, bool optimizer)

    bool ggml_opt_static_graphs(ggml_opt_context_t opt_ctx)

    # get underlying tensors that store data
    ggml_tensor * ggml_opt_inputs(  ggml_opt_context_t opt_ctx)
    ggml_tensor * ggml_opt_outputs( ggml_opt_context_t opt_ctx)
    ggml_tensor * ggml_opt_labels(  ggml_opt_context_t opt_ctx)
    ggml_tensor * ggml_opt_loss(    ggml_opt_context_t opt_ctx)
    ggml_tensor * ggml_opt_pred(    ggml_opt_context_t opt_ctx)
    ggml_tensor * ggml_opt_ncorrect(ggml_opt_context_t opt_ctx)

    ggml_tensor * ggml_opt_grad_acc(ggml_opt_context_t opt_ctx, ggml_tensor * node)

    ggml_opt_optimizer_type ggml_opt_context_optimizer_type(ggml_opt_context_t opt_ctx)

    const char * ggml_opt_optimizer_name(ggml_opt_optimizer_type optimizer_type)

    # ---- Optimization Result ----

    ggml_opt_result_t ggml_opt_result_init()
    void ggml_opt_result_free(ggml_opt_result_t result)
    void ggml_opt_result_reset(ggml_opt_result_t result)

    void ggml_opt_result_ndata(   ggml_opt_result_t result, int64_t * ndata)
    void ggml_opt_result_loss(    ggml_opt_result_t result, double  * loss,     double * unc)
    void ggml_opt_result_pred(    ggml_opt_result_t result, int32_t * pred)
    void ggml_opt_result_accuracy(ggml_opt_result_t result, double  * accuracy, double * unc)

    # ---- Computation ----

    void ggml_opt_prepare_alloc(
            ggml_opt_context_t opt_ctx,
            ggml_context *     ctx_compute,
            ggml_cgraph *      gf,
            ggml_tensor *      inputs,
            ggml_tensor *      outputs)

    void ggml_opt_alloc(ggml_opt_context_t opt_ctx, bool backward)

    void ggml_opt_eval(ggml_opt_context_t opt_ctx, ggml_opt_result_t result)

    # ---- High-level functions ----

    # signature for a callback while evaluating opt_ctx on dataset, called after an evaluation
    ctypedef void (*ggml_opt_epoch_callback)(
            bool               train,
            ggml_opt_context_t opt_ctx,
            ggml_opt_dataset_t dataset,
            ggml_opt_result_t  result,
            int64_t            ibatch,
            int64_t            ibatch_max,
            int64_t            t_start_us)

    void ggml_opt_epoch(
            ggml_opt_context_t      opt_ctx,
            ggml_opt_dataset_t      dataset,
            ggml_opt_result_t       result_train,
            ggml_opt_result_t       result_eval,
            int64_t                 idata_split,
            ggml_opt_epoch_callback callback_train,
            ggml_opt_epoch_callback callback_eval)

    void ggml_opt_epoch_callback_progress_bar(
            bool               train,
            ggml_opt_context_t opt_ctx,
            ggml_opt_dataset_t dataset,
            ggml_opt_result_t  result,
            int64_t            ibatch,
            int64_t            ibatch_max,
            int64_t            t_start_us)

    void ggml_opt_fit(
            ggml_backend_sched_t          backend_sched,
            ggml_context *                ctx_compute,
            ggml_tensor *                 inputs,
            ggml_tensor *                 outputs,
            ggml_opt_dataset_t            dataset,
            ggml_opt_loss_type            loss_type,
            ggml_opt_optimizer_type       optimizer,
            ggml_opt_get_optimizer_params get_opt_pars,
            int64_t                       nepoch,
            int64_t                       nbatch_logical,
            float                         val_split,
            bool                          silent)
