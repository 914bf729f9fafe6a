# Declarations of gguf.h (llama.cpp b11434), in the header's order.
from libc.stdint cimport uint8_t, int8_t, uint16_t, int16_t, uint32_t, int32_t, uint64_t, int64_t
from libc.stddef cimport size_t
from libc.stdio cimport FILE
from libc.stdbool cimport bool
from llama_cy._c.ggml cimport ggml_type, ggml_tensor, ggml_context

cdef extern from "gguf.h" nogil:
    const char * GGUF_MAGIC
    int GGUF_VERSION

    const char * GGUF_KEY_GENERAL_ALIGNMENT

    int GGUF_DEFAULT_ALIGNMENT

    # types that can be stored as GGUF KV data
    cdef enum gguf_type:
        GGUF_TYPE_UINT8
        GGUF_TYPE_INT8
        GGUF_TYPE_UINT16
        GGUF_TYPE_INT16
        GGUF_TYPE_UINT32
        GGUF_TYPE_INT32
        GGUF_TYPE_FLOAT32
        GGUF_TYPE_BOOL
        GGUF_TYPE_STRING
        GGUF_TYPE_ARRAY
        GGUF_TYPE_UINT64
        GGUF_TYPE_INT64
        GGUF_TYPE_FLOAT64
        GGUF_TYPE_COUNT  # marks the end of the enum

    cdef struct gguf_context

    cdef struct gguf_init_params:
        bool no_alloc

        # if not NULL, create a ggml_context and allocate the tensor data in it
        ggml_context ** ctx

    # callback to simulate or wrap a FILE pointer - read up to `len` bytes at `offset` into `output`
    # and return the number of bytes read
    ctypedef size_t (*gguf_reader_callback_t)(void * userdata, void * output, uint64_t offset, size_t len)

    gguf_context * gguf_init_empty()
    gguf_context * gguf_init_from_file_ptr(FILE * file, gguf_init_params params)
    gguf_context * gguf_init_from_file(const char * fname, gguf_init_params params)
    gguf_context * gguf_init_from_buffer(const void * data, size_t size, gguf_init_params params)

    # max_chunk_read is the maximum number of bytes that the GGUF code will read at once from the callback,
    # a value of 0 means no limit
    gguf_context * gguf_init_from_callback(
            gguf_reader_callback_t callback, void * userdata, size_t max_chunk_read,
            uint64_t max_expected_size, gguf_init_params params)

    void gguf_free(gguf_context * ctx)

    const char * gguf_type_name(gguf_type type_)

    uint32_t gguf_get_version(const gguf_context * ctx)
    size_t gguf_get_alignment(const gguf_context * ctx)
    size_t gguf_get_data_offset(const gguf_context * ctx)

    int64_t gguf_get_n_kv(const gguf_context * ctx)
    int64_t gguf_find_key(const gguf_context * ctx, const char * key)  # returns -1 if key is not found
    const char * gguf_get_key(const gguf_context * ctx, int64_t key_id)

    gguf_type gguf_get_kv_type(const gguf_context * ctx, int64_t key_id)
    gguf_type gguf_get_arr_type(const gguf_context * ctx, int64_t key_id)

    # will abort if the wrong type is used for the key
    uint8_t gguf_get_val_u8(const gguf_context * ctx, int64_t key_id)
    int8_t gguf_get_val_i8(const gguf_context * ctx, int64_t key_id)
    uint16_t gguf_get_val_u16(const gguf_context * ctx, int64_t key_id)
    int16_t gguf_get_val_i16(const gguf_context * ctx, int64_t key_id)
    uint32_t gguf_get_val_u32(const gguf_context * ctx, int64_t key_id)
    int32_t gguf_get_val_i32(const gguf_context * ctx, int64_t key_id)
    float gguf_get_val_f32(const gguf_context * ctx, int64_t key_id)
    uint64_t gguf_get_val_u64(const gguf_context * ctx, int64_t key_id)
    int64_t gguf_get_val_i64(const gguf_context * ctx, int64_t key_id)
    double gguf_get_val_f64(const gguf_context * ctx, int64_t key_id)
    bool gguf_get_val_bool(const gguf_context * ctx, int64_t key_id)
    const char * gguf_get_val_str(const gguf_context * ctx, int64_t key_id)
    const void * gguf_get_val_data(const gguf_context * ctx, int64_t key_id)
    size_t gguf_get_arr_n(const gguf_context * ctx, int64_t key_id)

    # get raw pointer to the first element of the array with the given key_id
    const void * gguf_get_arr_data(const gguf_context * ctx, int64_t key_id)

    # get ith C string from array with given key_id
    const char * gguf_get_arr_str(const gguf_context * ctx, int64_t key_id, size_t i)

    int64_t gguf_get_n_tensors(const gguf_context * ctx)
    int64_t gguf_find_tensor(const gguf_context * ctx, const char * name)  # returns -1 if not found
    size_t gguf_get_tensor_offset(const gguf_context * ctx, int64_t tensor_id)
    const char * gguf_get_tensor_name(const gguf_context * ctx, int64_t tensor_id)
    const int64_t * gguf_get_tensor_ne(const gguf_context * ctx, int64_t tensor_id)  # GGML_MAX_DIMS elements
    ggml_type gguf_get_tensor_type(const gguf_context * ctx, int64_t tensor_id)
    size_t gguf_get_tensor_size(const gguf_context * ctx, int64_t tensor_id)

    # removes key if it exists, returns id that the key had prior to removal (-1 if it didn't exist)
    int64_t gguf_remove_key(gguf_context * ctx, const char * key)

    # overrides an existing KV pair or adds a new one, the new KV pair is always at the back
    void gguf_set_val_u8(gguf_context * ctx, const char * key, uint8_t val)
    void gguf_set_val_i8(gguf_context * ctx, const char * key, int8_t val)
    void gguf_set_val_u16(gguf_context * ctx, const char * key, uint16_t val)
    void gguf_set_val_i16(gguf_context * ctx, const char * key, int16_t val)
    void gguf_set_val_u32(gguf_context * ctx, const char * key, uint32_t val)
    void gguf_set_val_i32(gguf_context * ctx, const char * key, int32_t val)
    void gguf_set_val_f32(gguf_context * ctx, const char * key, float val)
    void gguf_set_val_u64(gguf_context * ctx, const char * key, uint64_t val)
    void gguf_set_val_i64(gguf_context * ctx, const char * key, int64_t val)
    void gguf_set_val_f64(gguf_context * ctx, const char * key, double val)
    void gguf_set_val_bool(gguf_context * ctx, const char * key, bool val)
    void gguf_set_val_str(gguf_context * ctx, const char * key, const char * val)

    # creates a new array with n elements of the given type and copies the corresponding number of bytes
    # from data
    void gguf_set_arr_data(gguf_context * ctx, const char * key, gguf_type type_, const void * data, size_t n)

    # creates a new array with n strings and copies the corresponding strings from data
    void gguf_set_arr_str(gguf_context * ctx, const char * key, const char ** data, size_t n)

    # set or add KV pairs from another context
    void gguf_set_kv(gguf_context * ctx, const gguf_context * src)

    # add tensor to GGUF context, tensor name must be unique
    void gguf_add_tensor(gguf_context * ctx, const ggml_tensor * tensor)

    # after changing a tensor's type, the offsets of all tensors with higher indices are immediately
    # recalculated
    void gguf_set_tensor_type(gguf_context * ctx, const char * name, ggml_type type_)

    # assumes that at least gguf_get_tensor_size bytes can be read from data
    void gguf_set_tensor_data(gguf_context * ctx, const char * name, const void * data)

    # write the entire context to a binary file
    bool gguf_write_to_file_ptr(const gguf_context * ctx, FILE * file, bool only_meta)
    bool gguf_write_to_file(const gguf_context * ctx, const char * fname, bool only_meta)

    # get the size in bytes of the meta data (header, kv pairs, tensor info) including padding
    size_t gguf_get_meta_size(const gguf_context * ctx)

    # writes the meta data to pointer "data"
    void gguf_get_meta_data(const gguf_context * ctx, void * data)
