# Declarations of ggml.h (llama.cpp b11434), in the header's order.
from libc.stdint cimport int32_t, int64_t, uint8_t, uint16_t, uint32_t
from libc.stdio cimport FILE
from libc.stdbool cimport bool

cdef extern from "ggml.h" nogil:
    # ---- constants (#define) ----
    int GGML_FILE_MAGIC
    int GGML_FILE_VERSION
    int GGML_QNT_VERSION
    int GGML_QNT_VERSION_FACTOR
    int GGML_MAX_DIMS
    int GGML_MAX_PARAMS
    int GGML_MAX_SRC
    int GGML_MAX_N_THREADS
    int GGML_MAX_OP_PARAMS
    int GGML_MAX_NAME
    int GGML_DEFAULT_N_THREADS
    int GGML_DEFAULT_GRAPH_SIZE
    int GGML_MEM_ALIGN
    int GGML_EXIT_SUCCESS
    int GGML_EXIT_ABORTED
    int GGML_ROPE_TYPE_NORMAL
    int GGML_ROPE_TYPE_NEOX
    int GGML_ROPE_TYPE_MROPE
    int GGML_ROPE_TYPE_VISION
    int GGML_ROPE_TYPE_IMROPE
    int GGML_MROPE_SECTIONS

    # ---- fatal error callback ----
    ctypedef void (*ggml_abort_callback_t)(const char * error_message)
    ggml_abort_callback_t ggml_set_abort_callback(ggml_abort_callback_t callback)
    void ggml_abort(const char * file, int line, const char * fmt, ...)

    # ---- status ----
    cdef enum ggml_status:
        GGML_STATUS_ALLOC_FAILED
        GGML_STATUS_FAILED
        GGML_STATUS_SUCCESS
        GGML_STATUS_ABORTED

    const char * ggml_status_to_string(ggml_status status)

    # ---- ieee 754-2008 half-precision float16 ----
    ctypedef uint16_t ggml_fp16_t
    float ggml_fp16_to_fp32(ggml_fp16_t)
    ggml_fp16_t ggml_fp32_to_fp16(float)
    void ggml_fp16_to_fp32_row(const ggml_fp16_t *, float *, int64_t)
    void ggml_fp32_to_fp16_row(const float *, ggml_fp16_t *, int64_t)

    # ---- google brain half-precision bfloat16 ----
    ctypedef struct ggml_bf16_t:
        uint16_t bits

    ggml_bf16_t ggml_fp32_to_bf16(float)
    float ggml_bf16_to_fp32(ggml_bf16_t)
    void ggml_bf16_to_fp32_row(const ggml_bf16_t *, float *, int64_t)
    void ggml_fp32_to_bf16_row_ref(const float *, ggml_bf16_t *, int64_t)
    void ggml_fp32_to_bf16_row(const float *, ggml_bf16_t *, int64_t)

    # ---- opaque types and enums ----
    cdef struct ggml_object
    cdef struct ggml_context
    cdef struct ggml_cgraph

    cdef enum ggml_type:
        GGML_TYPE_F32
        GGML_TYPE_F16
        GGML_TYPE_Q4_0
        GGML_TYPE_Q4_1
        GGML_TYPE_Q5_0
        GGML_TYPE_Q5_1
        GGML_TYPE_Q8_0
        GGML_TYPE_Q8_1
        GGML_TYPE_Q2_K
        GGML_TYPE_Q3_K
        GGML_TYPE_Q4_K
        GGML_TYPE_Q5_K
        GGML_TYPE_Q6_K
        GGML_TYPE_Q8_K
        GGML_TYPE_IQ2_XXS
        GGML_TYPE_IQ2_XS
        GGML_TYPE_IQ3_XXS
        GGML_TYPE_IQ1_S
        GGML_TYPE_IQ4_NL
        GGML_TYPE_IQ3_S
        GGML_TYPE_IQ2_S
        GGML_TYPE_IQ4_XS
        GGML_TYPE_I8
        GGML_TYPE_I16
        GGML_TYPE_I32
        GGML_TYPE_I64
        GGML_TYPE_F64
        GGML_TYPE_IQ1_M
        GGML_TYPE_BF16
        GGML_TYPE_TQ1_0
        GGML_TYPE_TQ2_0
        GGML_TYPE_MXFP4
        GGML_TYPE_NVFP4
        GGML_TYPE_Q1_0
        GGML_TYPE_Q2_0
        GGML_TYPE_COUNT

    cdef enum ggml_prec:
        GGML_PREC_UNDEFINED
        # GGML_PREC_DEFAULT: deprecated alias of GGML_PREC_UNDEFINED, not declared
        GGML_PREC_F32
        GGML_PREC_BF16
        GGML_PREC_F16
        GGML_PREC_Q8
        GGML_PREC_Q4

    cdef enum ggml_op_hint:
        GGML_HINT_NONE
        GGML_HINT_SRC0_IS_HADAMARD

    cdef enum ggml_ftype:
        GGML_FTYPE_UNKNOWN
        GGML_FTYPE_ALL_F32
        GGML_FTYPE_MOSTLY_F16
        GGML_FTYPE_MOSTLY_Q4_0
        GGML_FTYPE_MOSTLY_Q4_1
        GGML_FTYPE_MOSTLY_Q4_1_SOME_F16
        GGML_FTYPE_MOSTLY_Q8_0
        GGML_FTYPE_MOSTLY_Q5_0
        GGML_FTYPE_MOSTLY_Q5_1
        GGML_FTYPE_MOSTLY_Q2_K
        GGML_FTYPE_MOSTLY_Q3_K
        GGML_FTYPE_MOSTLY_Q4_K
        GGML_FTYPE_MOSTLY_Q5_K
        GGML_FTYPE_MOSTLY_Q6_K
        GGML_FTYPE_MOSTLY_IQ2_XXS
        GGML_FTYPE_MOSTLY_IQ2_XS
        GGML_FTYPE_MOSTLY_IQ3_XXS
        GGML_FTYPE_MOSTLY_IQ1_S
        GGML_FTYPE_MOSTLY_IQ4_NL
        GGML_FTYPE_MOSTLY_IQ3_S
        GGML_FTYPE_MOSTLY_IQ2_S
        GGML_FTYPE_MOSTLY_IQ4_XS
        GGML_FTYPE_MOSTLY_IQ1_M
        GGML_FTYPE_MOSTLY_BF16
        GGML_FTYPE_MOSTLY_MXFP4
        GGML_FTYPE_MOSTLY_NVFP4
        GGML_FTYPE_MOSTLY_Q1_0
        GGML_FTYPE_MOSTLY_Q2_0

    cdef enum ggml_op:
        GGML_OP_NONE
        GGML_OP_DUP
        GGML_OP_ADD
        GGML_OP_ADD_ID
        GGML_OP_ADD1
        GGML_OP_ACC
        GGML_OP_SUB
        GGML_OP_MUL
        GGML_OP_DIV
        GGML_OP_SQR
        GGML_OP_SQRT
        GGML_OP_LOG
        GGML_OP_SIN
        GGML_OP_COS
        GGML_OP_SUM
        GGML_OP_SUM_ROWS
        GGML_OP_CUMSUM
        GGML_OP_MEAN
        GGML_OP_ARGMAX
        GGML_OP_COUNT_EQUAL
        GGML_OP_REPEAT
        GGML_OP_REPEAT_BACK
        GGML_OP_CONCAT
        GGML_OP_SILU_BACK
        GGML_OP_NORM
        GGML_OP_RMS_NORM
        GGML_OP_RMS_NORM_BACK
        GGML_OP_GROUP_NORM
        GGML_OP_L2_NORM
        GGML_OP_MUL_MAT
        GGML_OP_MUL_MAT_ID
        GGML_OP_OUT_PROD
        GGML_OP_SCALE
        GGML_OP_SET
        GGML_OP_CPY
        GGML_OP_CONT
        GGML_OP_RESHAPE
        GGML_OP_VIEW
        GGML_OP_PERMUTE
        GGML_OP_TRANSPOSE
        GGML_OP_GET_ROWS
        GGML_OP_GET_ROWS_BACK
        GGML_OP_SET_ROWS
        GGML_OP_DIAG
        GGML_OP_DIAG_MASK_INF
        GGML_OP_DIAG_MASK_ZERO
        GGML_OP_SOFT_MAX
        GGML_OP_SOFT_MAX_BACK
        GGML_OP_ROPE
        GGML_OP_ROPE_BACK
        GGML_OP_CLAMP
        GGML_OP_CONV_TRANSPOSE_1D
        GGML_OP_IM2COL
        GGML_OP_IM2COL_BACK
        GGML_OP_IM2COL_3D
        GGML_OP_COL2IM_1D
        GGML_OP_CONV_2D
        GGML_OP_CONV_3D
        GGML_OP_CONV_2D_DW
        GGML_OP_CONV_TRANSPOSE_2D
        GGML_OP_POOL_1D
        GGML_OP_POOL_2D
        GGML_OP_POOL_2D_BACK
        GGML_OP_UPSCALE
        GGML_OP_PAD
        GGML_OP_PAD_REFLECT_1D
        GGML_OP_ROLL
        GGML_OP_ARANGE
        GGML_OP_TIMESTEP_EMBEDDING
        GGML_OP_ARGSORT
        GGML_OP_TOP_K
        GGML_OP_LEAKY_RELU
        GGML_OP_TRI
        GGML_OP_FILL
        GGML_OP_FLASH_ATTN_EXT
        GGML_OP_FLASH_ATTN_BACK
        GGML_OP_SSM_CONV
        GGML_OP_SSM_SCAN
        GGML_OP_WIN_PART
        GGML_OP_WIN_UNPART
        GGML_OP_GET_REL_POS
        GGML_OP_ADD_REL_POS
        GGML_OP_RWKV_WKV6
        GGML_OP_GATED_LINEAR_ATTN
        GGML_OP_RWKV_WKV7
        GGML_OP_SOLVE_TRI
        GGML_OP_GATED_DELTA_NET
        GGML_OP_LIGHTNING_INDEXER
        GGML_OP_DSV4_HC_COMB
        GGML_OP_DSV4_HC_PRE
        GGML_OP_DSV4_HC_POST
        GGML_OP_UNARY
        GGML_OP_MAP_CUSTOM1
        GGML_OP_MAP_CUSTOM2
        GGML_OP_MAP_CUSTOM3
        GGML_OP_CUSTOM
        GGML_OP_CROSS_ENTROPY_LOSS
        GGML_OP_CROSS_ENTROPY_LOSS_BACK
        GGML_OP_OPT_STEP_ADAMW
        GGML_OP_OPT_STEP_SGD
        GGML_OP_GLU
        GGML_OP_COUNT

    cdef enum ggml_unary_op:
        GGML_UNARY_OP_ABS
        GGML_UNARY_OP_SGN
        GGML_UNARY_OP_NEG
        GGML_UNARY_OP_STEP
        GGML_UNARY_OP_TANH
        GGML_UNARY_OP_ELU
        GGML_UNARY_OP_RELU
        GGML_UNARY_OP_SIGMOID
        GGML_UNARY_OP_GELU
        GGML_UNARY_OP_GELU_QUICK
        GGML_UNARY_OP_SILU
        GGML_UNARY_OP_HARDSWISH
        GGML_UNARY_OP_HARDSIGMOID
        GGML_UNARY_OP_EXP
        GGML_UNARY_OP_EXPM1
        GGML_UNARY_OP_SOFTPLUS
        GGML_UNARY_OP_GELU_ERF
        GGML_UNARY_OP_XIELU
        GGML_UNARY_OP_FLOOR
        GGML_UNARY_OP_CEIL
        GGML_UNARY_OP_ROUND
        GGML_UNARY_OP_TRUNC
        GGML_UNARY_OP_COUNT

    cdef enum ggml_glu_op:
        GGML_GLU_OP_REGLU
        GGML_GLU_OP_GEGLU
        GGML_GLU_OP_SWIGLU
        GGML_GLU_OP_SWIGLU_OAI
        GGML_GLU_OP_GEGLU_ERF
        GGML_GLU_OP_GEGLU_QUICK
        GGML_GLU_OP_SWIGLU_CLAMP
        GGML_GLU_OP_COUNT

    cdef enum ggml_object_type:
        GGML_OBJECT_TYPE_TENSOR
        GGML_OBJECT_TYPE_GRAPH
        GGML_OBJECT_TYPE_WORK_BUFFER

    cdef enum ggml_log_level:
        GGML_LOG_LEVEL_NONE
        GGML_LOG_LEVEL_DEBUG
        GGML_LOG_LEVEL_INFO
        GGML_LOG_LEVEL_WARN
        GGML_LOG_LEVEL_ERROR
        GGML_LOG_LEVEL_CONT

    cdef enum ggml_tensor_flag:
        GGML_TENSOR_FLAG_INPUT
        GGML_TENSOR_FLAG_OUTPUT
        GGML_TENSOR_FLAG_PARAM
        GGML_TENSOR_FLAG_LOSS
        GGML_TENSOR_FLAG_COMPUTE

    cdef enum ggml_tri_type:
        GGML_TRI_TYPE_UPPER_DIAG
        GGML_TRI_TYPE_UPPER
        GGML_TRI_TYPE_LOWER_DIAG
        GGML_TRI_TYPE_LOWER

    # ---- context params and n-dimensional tensor ----
    cdef struct ggml_init_params:
        size_t mem_size
        void * mem_buffer
        bool no_alloc

    # defined in ggml-backend.h; ggml.h uses it only as an incomplete type in ggml_tensor
    cdef struct ggml_backend_buffer

    cdef struct ggml_tensor:
        ggml_type type
        ggml_backend_buffer * buffer
        int64_t ne[4]  # [GGML_MAX_DIMS]
        size_t nb[4]  # [GGML_MAX_DIMS]
        ggml_op op
        int32_t op_params[16]  # [GGML_MAX_OP_PARAMS / sizeof(int32_t)]
        int32_t flags
        ggml_tensor * src[10]  # [GGML_MAX_SRC]
        ggml_tensor * view_src
        size_t view_offs
        void * data
        char name[64]  # [GGML_MAX_NAME]
        void * extra
        char padding[8]

    # ---- tensor size ----
    const size_t GGML_TENSOR_SIZE

    # ---- Abort callback ----
    ctypedef bool (*ggml_abort_callback)(void * data)

    # ---- GUID ----
    ctypedef uint8_t ggml_guid[16]
    ctypedef ggml_guid * ggml_guid_t
    bool ggml_guid_matches(ggml_guid_t guid_a, ggml_guid_t guid_b)

    # ---- misc ----
    const char * ggml_version()
    const char * ggml_commit()
    void ggml_time_init()
    int64_t ggml_time_ms()
    int64_t ggml_time_us()
    int64_t ggml_cycles()
    int64_t ggml_cycles_per_ms()
    FILE * ggml_fopen(const char * fname, const char * mode)
    void ggml_print_object(const ggml_object * obj)
    void ggml_print_objects(const ggml_context * ctx)
    int64_t ggml_nelements(const ggml_tensor * tensor)
    int64_t ggml_nrows(const ggml_tensor * tensor)
    size_t ggml_nbytes(const ggml_tensor * tensor)
    size_t ggml_nbytes_pad(const ggml_tensor * tensor)
    int64_t ggml_blck_size(ggml_type type)
    size_t ggml_type_size(ggml_type type)
    size_t ggml_row_size(ggml_type type, int64_t ne)
    # ggml_type_sizef: deprecated in ggml.h, not declared
    const char * ggml_type_name(ggml_type type)
    const char * ggml_op_name(ggml_op op)
    const char * ggml_op_symbol(ggml_op op)
    const char * ggml_unary_op_name(ggml_unary_op op)
    const char * ggml_glu_op_name(ggml_glu_op op)
    const char * ggml_op_desc(const ggml_tensor * t)
    size_t ggml_element_size(const ggml_tensor * tensor)
    bool ggml_is_quantized(ggml_type type)
    ggml_type ggml_ftype_to_ggml_type(ggml_ftype ftype)
    bool ggml_is_transposed(const ggml_tensor * tensor)
    bool ggml_is_permuted(const ggml_tensor * tensor)
    bool ggml_is_empty(const ggml_tensor * tensor)
    bool ggml_is_view(const ggml_tensor * tensor)
    bool ggml_is_scalar(const ggml_tensor * tensor)
    bool ggml_is_vector(const ggml_tensor * tensor)
    bool ggml_is_matrix(const ggml_tensor * tensor)
    bool ggml_is_3d(const ggml_tensor * tensor)
    int ggml_n_dims(const ggml_tensor * tensor)
    bool ggml_is_contiguous(const ggml_tensor * tensor)
    bool ggml_is_contiguous_0(const ggml_tensor * tensor)
    bool ggml_is_contiguous_1(const ggml_tensor * tensor)
    bool ggml_is_contiguous_2(const ggml_tensor * tensor)
    bool ggml_is_contiguous_to_1(const ggml_tensor * tensor)
    bool ggml_is_contiguous_to_2(const ggml_tensor * tensor)
    bool ggml_is_contiguous_to_3(const ggml_tensor * tensor)
    bool ggml_is_contiguously_allocated(const ggml_tensor * tensor)
    bool ggml_is_contiguous_channels(const ggml_tensor * tensor)
    bool ggml_is_contiguous_rows(const ggml_tensor * tensor)
    bool ggml_are_same_shape(const ggml_tensor * t0, const ggml_tensor * t1)
    bool ggml_are_same_stride(const ggml_tensor * t0, const ggml_tensor * t1)
    bool ggml_can_repeat(const ggml_tensor * t0, const ggml_tensor * t1)
    size_t ggml_tensor_overhead()
    bool ggml_validate_row_data(ggml_type type, const void * data, size_t nbytes)

    # ---- main ----
    ggml_context * ggml_init(ggml_init_params params)
    void ggml_reset(ggml_context * ctx)
    void ggml_free(ggml_context * ctx)
    size_t ggml_used_mem(const ggml_context * ctx)
    bool ggml_get_no_alloc(ggml_context * ctx)
    void ggml_set_no_alloc(ggml_context * ctx, bool no_alloc)
    void * ggml_get_mem_buffer(const ggml_context * ctx)
    size_t ggml_get_mem_size(const ggml_context * ctx)
    size_t ggml_get_max_tensor_size(const ggml_context * ctx)
    ggml_tensor * ggml_new_tensor(ggml_context * ctx, ggml_type type, int n_dims, const int64_t * ne)
    ggml_tensor * ggml_new_tensor_1d(ggml_context * ctx, ggml_type type, int64_t ne0)
    ggml_tensor * ggml_new_tensor_2d(ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1)
    ggml_tensor * ggml_new_tensor_3d(
            ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2)
    ggml_tensor * ggml_new_tensor_4d(
            ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
    void * ggml_new_buffer(ggml_context * ctx, size_t nbytes)
    ggml_tensor * ggml_dup_tensor(ggml_context * ctx, const ggml_tensor * src)
    ggml_tensor * ggml_view_tensor(ggml_context * ctx, ggml_tensor * src)
    ggml_tensor * ggml_get_first_tensor(const ggml_context * ctx)
    ggml_tensor * ggml_get_next_tensor(const ggml_context * ctx, ggml_tensor * tensor)
    ggml_tensor * ggml_get_tensor(ggml_context * ctx, const char * name)
    void ggml_unravel_index(
            const ggml_tensor * tensor, int64_t i, int64_t * i0, int64_t * i1, int64_t * i2, int64_t * i3)
    ggml_unary_op ggml_get_unary_op(const ggml_tensor * tensor)
    ggml_glu_op ggml_get_glu_op(const ggml_tensor * tensor)
    void * ggml_get_data(const ggml_tensor * tensor)
    float * ggml_get_data_f32(const ggml_tensor * tensor)
    const char * ggml_get_name(const ggml_tensor * tensor)
    ggml_tensor * ggml_set_name(ggml_tensor * tensor, const char * name)
    ggml_tensor * ggml_format_name(ggml_tensor * tensor, const char * fmt, ...)

    # ---- Tensor flags ----
    void ggml_set_input(ggml_tensor * tensor)
    void ggml_set_output(ggml_tensor * tensor)
    void ggml_set_param(ggml_tensor * tensor)
    void ggml_set_loss(ggml_tensor * tensor)

    # ---- operations on tensors with backpropagation ----
    ggml_tensor * ggml_dup(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_dup_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_add(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_add_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_add_cast(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_type type)
    ggml_tensor * ggml_add_id(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * ids)
    # ggml_add1: deprecated in ggml.h, not declared
    # ggml_add1_inplace: deprecated in ggml.h, not declared
    ggml_tensor * ggml_acc(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3,
            size_t offset)
    ggml_tensor * ggml_acc_inplace(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3,
            size_t offset)
    ggml_tensor * ggml_sub(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_sub_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_mul(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_mul_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_div(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_div_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_sqr(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_sqr_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_sqrt(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_sqrt_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_log(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_log_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_expm1(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_expm1_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_softplus(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_softplus_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_sin(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_sin_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_cos(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_cos_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_sum(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_sum_rows(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_cumsum(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_mean(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_argmax(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_count_equal(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_repeat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_repeat_4d(
            ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
    ggml_tensor * ggml_repeat_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_concat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int dim)
    ggml_tensor * ggml_abs(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_abs_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_sgn(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_sgn_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_neg(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_neg_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_step(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_step_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_tanh(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_tanh_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_elu(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_elu_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_relu(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_leaky_relu(ggml_context * ctx, ggml_tensor * a, float negative_slope, bool inplace)
    ggml_tensor * ggml_relu_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_sigmoid(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_sigmoid_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_gelu(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_gelu_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_gelu_erf(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_gelu_erf_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_gelu_quick(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_gelu_quick_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_silu(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_silu_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_silu_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_hardswish(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_hardsigmoid(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_exp(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_exp_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_floor(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_floor_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_ceil(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_ceil_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_round(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_round_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_trunc(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_trunc_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_xielu(
            ggml_context * ctx, ggml_tensor * a, float alpha_n, float alpha_p, float beta, float eps)
    ggml_tensor * ggml_glu(ggml_context * ctx, ggml_tensor * a, ggml_glu_op op, bool swapped)
    ggml_tensor * ggml_reglu(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_reglu_swapped(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_geglu(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_geglu_swapped(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_swiglu(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_swiglu_swapped(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_geglu_erf(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_geglu_erf_swapped(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_geglu_quick(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_geglu_quick_swapped(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_glu_split(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_glu_op op)
    ggml_tensor * ggml_reglu_split(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_geglu_split(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_swiglu_split(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_geglu_erf_split(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_geglu_quick_split(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_swiglu_oai(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float alpha, float limit)
    ggml_tensor * ggml_swiglu_clamp(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float limit)
    ggml_tensor * ggml_norm(ggml_context * ctx, ggml_tensor * a, float eps)
    ggml_tensor * ggml_norm_inplace(ggml_context * ctx, ggml_tensor * a, float eps)
    ggml_tensor * ggml_rms_norm(ggml_context * ctx, ggml_tensor * a, float eps)
    ggml_tensor * ggml_rms_norm_inplace(ggml_context * ctx, ggml_tensor * a, float eps)
    ggml_tensor * ggml_group_norm(ggml_context * ctx, ggml_tensor * a, int n_groups, float eps)
    ggml_tensor * ggml_group_norm_inplace(ggml_context * ctx, ggml_tensor * a, int n_groups, float eps)
    ggml_tensor * ggml_l2_norm(ggml_context * ctx, ggml_tensor * a, float eps)
    ggml_tensor * ggml_l2_norm_inplace(ggml_context * ctx, ggml_tensor * a, float eps)
    ggml_tensor * ggml_rms_norm_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float eps)
    bool ggml_prec_set_acc(ggml_tensor * a, ggml_prec prec)
    bool ggml_prec_set_src(ggml_tensor * a, ggml_prec prec, int idx)
    ggml_tensor * ggml_mul_mat(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    # ggml_mul_mat_set_prec: deprecated in ggml.h, not declared
    void ggml_mul_mat_set_hint(ggml_tensor * a, ggml_op_hint hint)
    ggml_tensor * ggml_mul_mat_id(ggml_context * ctx, ggml_tensor * as_, ggml_tensor * b, ggml_tensor * ids)
    ggml_tensor * ggml_out_prod(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)

    # ---- operations on tensors without backpropagation ----
    ggml_tensor * ggml_scale(ggml_context * ctx, ggml_tensor * a, float s)
    ggml_tensor * ggml_scale_inplace(ggml_context * ctx, ggml_tensor * a, float s)
    ggml_tensor * ggml_scale_bias(ggml_context * ctx, ggml_tensor * a, float s, float b)
    ggml_tensor * ggml_scale_bias_inplace(ggml_context * ctx, ggml_tensor * a, float s, float b)
    ggml_tensor * ggml_set(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3,
            size_t offset)
    ggml_tensor * ggml_set_inplace(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t nb2, size_t nb3,
            size_t offset)
    ggml_tensor * ggml_set_1d(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t offset)
    ggml_tensor * ggml_set_1d_inplace(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t offset)
    ggml_tensor * ggml_set_2d(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t offset)
    ggml_tensor * ggml_set_2d_inplace(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, size_t nb1, size_t offset)
    ggml_tensor * ggml_cpy(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_cast(ggml_context * ctx, ggml_tensor * a, ggml_type type)
    ggml_tensor * ggml_cont(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_cont_1d(ggml_context * ctx, ggml_tensor * a, int64_t ne0)
    ggml_tensor * ggml_cont_2d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1)
    ggml_tensor * ggml_cont_3d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2)
    ggml_tensor * ggml_cont_4d(
            ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
    ggml_tensor * ggml_reshape(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_reshape_1d(ggml_context * ctx, ggml_tensor * a, int64_t ne0)
    ggml_tensor * ggml_reshape_2d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1)
    ggml_tensor * ggml_reshape_3d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2)
    ggml_tensor * ggml_reshape_4d(
            ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3)
    ggml_tensor * ggml_view_1d(ggml_context * ctx, ggml_tensor * a, int64_t ne0, size_t offset)
    ggml_tensor * ggml_view_2d(
            ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, size_t nb1, size_t offset)
    ggml_tensor * ggml_view_3d(
            ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, size_t nb1,
            size_t nb2, size_t offset)
    ggml_tensor * ggml_view_4d(
            ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
            size_t nb1, size_t nb2, size_t nb3, size_t offset)
    ggml_tensor * ggml_permute(
            ggml_context * ctx, ggml_tensor * a, int axis0, int axis1, int axis2, int axis3)
    ggml_tensor * ggml_transpose(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_get_rows(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_get_rows_back(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c)
    ggml_tensor * ggml_set_rows(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c)
    ggml_tensor * ggml_diag(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_diag_mask_inf(ggml_context * ctx, ggml_tensor * a, int n_past)
    ggml_tensor * ggml_diag_mask_inf_inplace(ggml_context * ctx, ggml_tensor * a, int n_past)
    ggml_tensor * ggml_diag_mask_zero(ggml_context * ctx, ggml_tensor * a, int n_past)
    ggml_tensor * ggml_diag_mask_zero_inplace(ggml_context * ctx, ggml_tensor * a, int n_past)
    ggml_tensor * ggml_clamp(ggml_context * ctx, ggml_tensor * a, float min, float max)
    ggml_tensor * ggml_clamp_inplace(ggml_context * ctx, ggml_tensor * a, float min, float max)
    ggml_tensor * ggml_soft_max(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_soft_max_inplace(ggml_context * ctx, ggml_tensor * a)
    ggml_tensor * ggml_soft_max_ext(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * mask, float scale, float max_bias)
    ggml_tensor * ggml_soft_max_ext_inplace(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * mask, float scale, float max_bias)
    void ggml_soft_max_add_sinks(ggml_tensor * a, ggml_tensor * sinks)
    ggml_tensor * ggml_soft_max_ext_back(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float scale, float max_bias)
    ggml_tensor * ggml_soft_max_ext_back_inplace(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, float scale, float max_bias)
    ggml_tensor * ggml_rope(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int n_dims, int mode)
    ggml_tensor * ggml_rope_inplace(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int n_dims, int mode)
    ggml_tensor * ggml_rope_ext(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims, int mode,
            int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
            float beta_fast, float beta_slow)
    ggml_tensor * ggml_rope_multi(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims,
            int sections[4], int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
            float attn_factor, float beta_fast, float beta_slow)
    ggml_tensor * ggml_rope_ext_inplace(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims, int mode,
            int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
            float beta_fast, float beta_slow)
    ggml_tensor * ggml_rope_multi_inplace(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims,
            int sections[4], int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
            float attn_factor, float beta_fast, float beta_slow)
    # ggml_rope_custom: deprecated in ggml.h, not declared
    # ggml_rope_custom_inplace: deprecated in ggml.h, not declared
    void ggml_rope_yarn_corr_dims(
            int n_dims, int n_ctx_orig, float freq_base, float beta_fast, float beta_slow, float dims[2])
    ggml_tensor * ggml_rope_ext_back(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims, int mode,
            int n_ctx_orig, float freq_base, float freq_scale, float ext_factor, float attn_factor,
            float beta_fast, float beta_slow)
    ggml_tensor * ggml_rope_multi_back(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, int n_dims,
            int sections[4], int mode, int n_ctx_orig, float freq_base, float freq_scale, float ext_factor,
            float attn_factor, float beta_fast, float beta_slow)
    ggml_tensor * ggml_rope_set_offset(ggml_tensor * a, int n_offs)
    ggml_tensor * ggml_im2col(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int s1, int p0, int p1, int d0,
            int d1, bool is_2D, ggml_type dst_type)
    ggml_tensor * ggml_im2col_back(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int64_t * ne, int s0, int s1, int p0,
            int p1, int d0, int d1, bool is_2D)
    ggml_tensor * ggml_col2im_1d(ggml_context * ctx, ggml_tensor * a, int s0, int oc, int p0)
    ggml_tensor * ggml_conv_1d(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int p0, int d0)
    ggml_tensor * ggml_conv_1d_ph(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s, int d)
    ggml_tensor * ggml_conv_1d_dw(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int p0, int d0)
    ggml_tensor * ggml_conv_1d_dw_ph(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int d0)
    ggml_tensor * ggml_conv_transpose_1d(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int p0, int d0)
    ggml_tensor * ggml_conv_2d(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int s1, int p0, int p1, int d0,
            int d1)
    ggml_tensor * ggml_im2col_3d(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int64_t IC, int s0, int s1, int s2, int p0,
            int p1, int p2, int d0, int d1, int d2, ggml_type dst_type)
    ggml_tensor * ggml_conv_3d(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int64_t IC, int s0, int s1, int s2, int p0,
            int p1, int p2, int d0, int d1, int d2)
    ggml_tensor * ggml_conv_2d_sk_p0(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_conv_2d_s1_ph(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_conv_2d_dw(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int s1, int p0, int p1, int d0,
            int d1)
    ggml_tensor * ggml_conv_2d_dw_direct(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int stride0, int stride1, int pad0,
            int pad1, int dilation0, int dilation1)
    ggml_tensor * ggml_conv_transpose_2d_p0(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int stride)
    ggml_tensor * ggml_conv_2d_direct(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int s1, int p0, int p1, int d0,
            int d1)
    ggml_tensor * ggml_conv_3d_direct(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, int s0, int s1, int s2, int p0, int p1,
            int p2, int d0, int d1, int d2, int n_channels, int n_batch, int n_channels_out)

    cdef enum ggml_op_pool:
        GGML_OP_POOL_MAX
        GGML_OP_POOL_AVG
        GGML_OP_POOL_COUNT

    ggml_tensor * ggml_pool_1d(ggml_context * ctx, ggml_tensor * a, ggml_op_pool op, int k0, int s0, int p0)
    ggml_tensor * ggml_pool_2d(
            ggml_context * ctx, ggml_tensor * a, ggml_op_pool op, int k0, int k1, int s0, int s1, float p0,
            float p1)
    ggml_tensor * ggml_pool_2d_back(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * af, ggml_op_pool op, int k0, int k1, int s0,
            int s1, float p0, float p1)

    cdef enum ggml_scale_mode:
        GGML_SCALE_MODE_NEAREST
        GGML_SCALE_MODE_BILINEAR
        GGML_SCALE_MODE_BICUBIC
        GGML_SCALE_MODE_COUNT

    cdef enum ggml_scale_flag:
        GGML_SCALE_FLAG_ALIGN_CORNERS
        GGML_SCALE_FLAG_ANTIALIAS

    ggml_tensor * ggml_upscale(ggml_context * ctx, ggml_tensor * a, int scale_factor, ggml_scale_mode mode)
    # ggml_upscale_ext: deprecated in ggml.h, not declared
    ggml_tensor * ggml_interpolate(
            ggml_context * ctx, ggml_tensor * a, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
            uint32_t mode)
    ggml_tensor * ggml_pad(ggml_context * ctx, ggml_tensor * a, int p0, int p1, int p2, int p3)
    ggml_tensor * ggml_pad_circular(ggml_context * ctx, ggml_tensor * a, int p0, int p1, int p2, int p3)
    ggml_tensor * ggml_pad_ext(
            ggml_context * ctx, ggml_tensor * a, int lp0, int rp0, int lp1, int rp1, int lp2, int rp2,
            int lp3, int rp3)
    ggml_tensor * ggml_pad_ext_circular(
            ggml_context * ctx, ggml_tensor * a, int lp0, int rp0, int lp1, int rp1, int lp2, int rp2,
            int lp3, int rp3)
    ggml_tensor * ggml_pad_reflect_1d(ggml_context * ctx, ggml_tensor * a, int p0, int p1)
    ggml_tensor * ggml_roll(
            ggml_context * ctx, ggml_tensor * a, int shift0, int shift1, int shift2, int shift3)
    ggml_tensor * ggml_tri(ggml_context * ctx, ggml_tensor * a, ggml_tri_type type)
    ggml_tensor * ggml_fill(ggml_context * ctx, ggml_tensor * a, float c)
    ggml_tensor * ggml_fill_inplace(ggml_context * ctx, ggml_tensor * a, float c)
    ggml_tensor * ggml_timestep_embedding(
            ggml_context * ctx, ggml_tensor * timesteps, int dim, int max_period)

    cdef enum ggml_sort_order:
        GGML_SORT_ORDER_ASC
        GGML_SORT_ORDER_DESC

    ggml_tensor * ggml_argsort(ggml_context * ctx, ggml_tensor * a, ggml_sort_order order)
    ggml_tensor * ggml_argsort_top_k(ggml_context * ctx, ggml_tensor * a, int k)
    ggml_tensor * ggml_top_k(ggml_context * ctx, ggml_tensor * a, int k)
    ggml_tensor * ggml_arange(ggml_context * ctx, float start, float stop, float step)
    ggml_tensor * ggml_flash_attn_ext(
            ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, ggml_tensor * mask,
            float scale, float max_bias, float logit_softcap)
    # ggml_flash_attn_ext_set_prec: deprecated in ggml.h, not declared
    ggml_prec ggml_flash_attn_ext_get_prec(const ggml_tensor * a)
    void ggml_flash_attn_ext_set_n_kv_max(ggml_tensor * a, int32_t n_kv_max)
    void ggml_flash_attn_ext_add_sinks(ggml_tensor * a, ggml_tensor * sinks)
    ggml_tensor * ggml_flash_attn_back(
            ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, ggml_tensor * d,
            bool masked)
    ggml_tensor * ggml_ssm_conv(ggml_context * ctx, ggml_tensor * sx, ggml_tensor * c)
    ggml_tensor * ggml_ssm_scan(
            ggml_context * ctx, ggml_tensor * s, ggml_tensor * x, ggml_tensor * dt, ggml_tensor * A,
            ggml_tensor * B, ggml_tensor * C, ggml_tensor * ids, int64_t K)
    ggml_tensor * ggml_win_part(ggml_context * ctx, ggml_tensor * a, int w)
    ggml_tensor * ggml_win_unpart(ggml_context * ctx, ggml_tensor * a, int w0, int h0, int w)
    ggml_tensor * ggml_unary(ggml_context * ctx, ggml_tensor * a, ggml_unary_op op)
    ggml_tensor * ggml_unary_inplace(ggml_context * ctx, ggml_tensor * a, ggml_unary_op op)
    ggml_tensor * ggml_get_rel_pos(ggml_context * ctx, ggml_tensor * a, int qh, int kh)
    ggml_tensor * ggml_add_rel_pos(ggml_context * ctx, ggml_tensor * a, ggml_tensor * pw, ggml_tensor * ph)
    ggml_tensor * ggml_add_rel_pos_inplace(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * pw, ggml_tensor * ph)
    ggml_tensor * ggml_rwkv_wkv6(
            ggml_context * ctx, ggml_tensor * k, ggml_tensor * v, ggml_tensor * r, ggml_tensor * tf,
            ggml_tensor * td, ggml_tensor * state)
    ggml_tensor * ggml_gated_linear_attn(
            ggml_context * ctx, ggml_tensor * k, ggml_tensor * v, ggml_tensor * q, ggml_tensor * g,
            ggml_tensor * state, float scale)
    ggml_tensor * ggml_rwkv_wkv7(
            ggml_context * ctx, ggml_tensor * r, ggml_tensor * w, ggml_tensor * k, ggml_tensor * v,
            ggml_tensor * a, ggml_tensor * b, ggml_tensor * state)
    ggml_tensor * ggml_solve_tri(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, bool left, bool lower, bool uni)
    ggml_tensor * ggml_gated_delta_net(
            ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * v, ggml_tensor * g,
            ggml_tensor * beta, ggml_tensor * state, int64_t K)
    ggml_tensor * ggml_lightning_indexer(
            ggml_context * ctx, ggml_tensor * q, ggml_tensor * k, ggml_tensor * weights, ggml_tensor * mask)
    ggml_tensor * ggml_dsv4_hc_comb(
            ggml_context * ctx, ggml_tensor * mixes, ggml_tensor * scale, ggml_tensor * base, float eps,
            int32_t n_iter)
    ggml_tensor * ggml_dsv4_hc_pre(ggml_context * ctx, ggml_tensor * x, ggml_tensor * weights)
    ggml_tensor * ggml_dsv4_hc_pre_gated(ggml_context * ctx, ggml_tensor * x, ggml_tensor * gate, float scale)
    ggml_tensor * ggml_dsv4_hc_post(
            ggml_context * ctx, ggml_tensor * x, ggml_tensor * residual, ggml_tensor * post,
            ggml_tensor * comb)

    # ---- custom operators ----
    ctypedef void (*ggml_custom1_op_t)(
            ggml_tensor * dst, const ggml_tensor * a, int ith, int nth, void * userdata)
    ctypedef void (*ggml_custom2_op_t)(
            ggml_tensor * dst, const ggml_tensor * a, const ggml_tensor * b, int ith, int nth,
            void * userdata)
    ctypedef void (*ggml_custom3_op_t)(
            ggml_tensor * dst, const ggml_tensor * a, const ggml_tensor * b, const ggml_tensor * c, int ith,
            int nth, void * userdata)
    int GGML_N_TASKS_MAX
    ggml_tensor * ggml_map_custom1(
            ggml_context * ctx, ggml_tensor * a, ggml_custom1_op_t fun, int n_tasks, void * userdata)
    ggml_tensor * ggml_map_custom1_inplace(
            ggml_context * ctx, ggml_tensor * a, ggml_custom1_op_t fun, int n_tasks, void * userdata)
    ggml_tensor * ggml_map_custom2(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_custom2_op_t fun, int n_tasks,
            void * userdata)
    ggml_tensor * ggml_map_custom2_inplace(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_custom2_op_t fun, int n_tasks,
            void * userdata)
    ggml_tensor * ggml_map_custom3(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, ggml_custom3_op_t fun,
            int n_tasks, void * userdata)
    ggml_tensor * ggml_map_custom3_inplace(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c, ggml_custom3_op_t fun,
            int n_tasks, void * userdata)
    ctypedef void (*ggml_custom_op_t)(ggml_tensor * dst, int ith, int nth, void * userdata)
    ggml_tensor * ggml_custom_4d(
            ggml_context * ctx, ggml_type type, int64_t ne0, int64_t ne1, int64_t ne2, int64_t ne3,
            ggml_tensor ** args, int n_args, ggml_custom_op_t fun, int n_tasks, void * userdata)
    ggml_tensor * ggml_custom_inplace(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor ** args, int n_args, ggml_custom_op_t fun,
            int n_tasks, void * userdata)

    # ---- loss function ----
    ggml_tensor * ggml_cross_entropy_loss(ggml_context * ctx, ggml_tensor * a, ggml_tensor * b)
    ggml_tensor * ggml_cross_entropy_loss_back(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * b, ggml_tensor * c)
    ggml_tensor * ggml_opt_step_adamw(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * grad, ggml_tensor * m, ggml_tensor * v,
            ggml_tensor * adamw_params)
    ggml_tensor * ggml_opt_step_sgd(
            ggml_context * ctx, ggml_tensor * a, ggml_tensor * grad, ggml_tensor * sgd_params)

    # ---- graph building ----
    ggml_tensor * ggml_build_forward_select(
            ggml_cgraph * cgraph, ggml_tensor ** tensors, int n_tensors, int idx)
    void ggml_build_forward_expand(ggml_cgraph * cgraph, ggml_tensor * tensor)
    void ggml_build_forward_order(ggml_cgraph * cgraph, ggml_tensor * tensor)
    void ggml_build_backward_expand(ggml_context * ctx, ggml_cgraph * cgraph, ggml_tensor ** grad_accs)

    # ---- graph allocation in a context ----
    ggml_cgraph * ggml_new_graph(ggml_context * ctx)
    ggml_cgraph * ggml_new_graph_custom(ggml_context * ctx, size_t size, bool grads)
    ggml_cgraph * ggml_graph_dup(ggml_context * ctx, ggml_cgraph * cgraph, bool force_grads)
    void ggml_graph_cpy(ggml_cgraph * src, ggml_cgraph * dst)
    void ggml_graph_reset(ggml_cgraph * cgraph)
    void ggml_graph_clear(ggml_cgraph * cgraph)
    int ggml_graph_size(ggml_cgraph * cgraph)
    ggml_tensor * ggml_graph_node(ggml_cgraph * cgraph, int i)
    ggml_tensor ** ggml_graph_nodes(ggml_cgraph * cgraph)
    int ggml_graph_n_nodes(ggml_cgraph * cgraph)
    void ggml_graph_add_node(ggml_cgraph * cgraph, ggml_tensor * tensor)
    size_t ggml_graph_overhead()
    size_t ggml_graph_overhead_custom(size_t size, bool grads)
    ggml_tensor * ggml_graph_get_tensor(const ggml_cgraph * cgraph, const char * name)
    ggml_tensor * ggml_graph_get_grad(const ggml_cgraph * cgraph, const ggml_tensor * node)
    ggml_tensor * ggml_graph_get_grad_acc(const ggml_cgraph * cgraph, const ggml_tensor * node)
    void ggml_graph_print(const ggml_cgraph * cgraph)
    void ggml_graph_dump_dot(const ggml_cgraph * gb, const ggml_cgraph * cgraph, const char * filename)

    # ---- logging ----
    ctypedef void (*ggml_log_callback)(ggml_log_level level, const char * text, void * user_data)
    void ggml_log_get(ggml_log_callback * log_callback, void ** user_data)
    void ggml_log_set(ggml_log_callback log_callback, void * user_data)
    ggml_tensor * ggml_set_zero(ggml_tensor * tensor)

    # ---- quantization ----
    void ggml_quantize_init(ggml_type type)
    void ggml_quantize_free()
    bool ggml_quantize_requires_imatrix(ggml_type type)
    size_t ggml_quantize_chunk(
            ggml_type type, const float * src, void * dst, int64_t start, int64_t nrows, int64_t n_per_row,
            const float * imatrix)

    # ---- type traits ----
    ctypedef void (*ggml_to_float_t)(const void * x, float * y, int64_t k)
    ctypedef void (*ggml_from_float_t)(const float * x, void * y, int64_t k)

    cdef struct ggml_type_traits:
        const char * type_name
        int64_t blck_size
        int64_t blck_size_interleave
        size_t type_size
        bool is_quantized
        ggml_to_float_t to_float
        ggml_from_float_t from_float_ref

    const ggml_type_traits * ggml_get_type_traits(ggml_type type)

    # ---- ggml threadpool ----
    cdef enum ggml_sched_priority:
        GGML_SCHED_PRIO_LOW
        GGML_SCHED_PRIO_NORMAL
        GGML_SCHED_PRIO_MEDIUM
        GGML_SCHED_PRIO_HIGH
        GGML_SCHED_PRIO_REALTIME

    cdef struct ggml_threadpool_params:
        bool cpumask[512]  # [GGML_MAX_N_THREADS]
        int n_threads
        ggml_sched_priority prio
        uint32_t poll
        bool strict_cpu
        bool paused

    cdef struct ggml_threadpool
    ctypedef ggml_threadpool * ggml_threadpool_t
    ggml_threadpool_params ggml_threadpool_params_default(int n_threads)
    void ggml_threadpool_params_init(ggml_threadpool_params * p, int n_threads)
    bool ggml_threadpool_params_match(const ggml_threadpool_params * p0, const ggml_threadpool_params * p1)
