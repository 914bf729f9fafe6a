from llama_cy._c.llama cimport llama_model_tensor_buft_override


cdef class TensorOverrides:
    cdef llama_model_tensor_buft_override *array
    cdef list _patterns  # (bytes pattern, buffer type address): the array points into them
