from llama_cy._c.ggml_backend cimport ggml_backend_dev_t
from llama_cy._c.llama cimport llama_model, llama_model_kv_override, llama_model_params
from llama_cy._placement cimport TensorOverrides
from llama_cy._vocab cimport LlamaVocab


cdef class LlamaModel(LlamaVocab):
    cdef llama_model *ptr
    cdef readonly object path
    cdef readonly bint vocab_only
    # Its MTP (NextN) layers were loaded: it can draft for itself (draft-mtp).
    cdef readonly bint mtp
    # kv_overrides given at load, as llama.cpp prints values: shown by metadata/meta_val.
    cdef dict _overrides

    cdef void _dispose(self) noexcept

    @staticmethod
    cdef LlamaModel _wrap(llama_model *ptr, path)


# The llama_model_params of a load's arguments, and the C arrays they point to (shared
# with llama_cy._fit, which fits them to free memory before a load).
cdef llama_model_params _model_params(
    int n_gpu_layers, str split_mode, int main_gpu, bint use_mmap, bint use_mlock,
    bint vocab_only, bint check_tensors, bint use_extra_bufts=*, str load_mode=*,
    str lazy_mode=*, bint no_host=*, bint load_mtp=*,
) except *


cdef class _LoadBuffers:
    cdef llama_model_kv_override *kv
    cdef float *tensor_split
    cdef ggml_backend_dev_t *devices
    cdef TensorOverrides overrides

    cdef int fill(self, llama_model_params *p, kv_overrides, tensor_split, devices,
                  tensor_overrides=*) except -1
