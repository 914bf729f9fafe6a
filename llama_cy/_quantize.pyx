# cython: language_level=3
"""``llama_model_quantize``: write a GGUF model again with its weights in another type."""

import os

from libc.stdint cimport uint32_t

cimport llama_cy._c.llama as c

from llama_cy._backend import default_n_threads
from llama_cy.errors import ModelLoadError, quantize_error

# llama-quantize's names for the file types (the C enum names without their prefix).
cdef dict _FTYPES = {
    "F32": c.LLAMA_FTYPE_ALL_F32, "F16": c.LLAMA_FTYPE_MOSTLY_F16,
    "BF16": c.LLAMA_FTYPE_MOSTLY_BF16, "Q8_0": c.LLAMA_FTYPE_MOSTLY_Q8_0,
    "Q4_0": c.LLAMA_FTYPE_MOSTLY_Q4_0, "Q4_1": c.LLAMA_FTYPE_MOSTLY_Q4_1,
    "Q5_0": c.LLAMA_FTYPE_MOSTLY_Q5_0, "Q5_1": c.LLAMA_FTYPE_MOSTLY_Q5_1,
    "Q2_K": c.LLAMA_FTYPE_MOSTLY_Q2_K, "Q2_K_S": c.LLAMA_FTYPE_MOSTLY_Q2_K_S,
    "Q3_K_S": c.LLAMA_FTYPE_MOSTLY_Q3_K_S, "Q3_K_M": c.LLAMA_FTYPE_MOSTLY_Q3_K_M,
    "Q3_K_L": c.LLAMA_FTYPE_MOSTLY_Q3_K_L, "Q4_K_S": c.LLAMA_FTYPE_MOSTLY_Q4_K_S,
    "Q4_K_M": c.LLAMA_FTYPE_MOSTLY_Q4_K_M, "Q5_K_S": c.LLAMA_FTYPE_MOSTLY_Q5_K_S,
    "Q5_K_M": c.LLAMA_FTYPE_MOSTLY_Q5_K_M, "Q6_K": c.LLAMA_FTYPE_MOSTLY_Q6_K,
    "IQ4_NL": c.LLAMA_FTYPE_MOSTLY_IQ4_NL, "IQ4_XS": c.LLAMA_FTYPE_MOSTLY_IQ4_XS,
    "TQ1_0": c.LLAMA_FTYPE_MOSTLY_TQ1_0, "TQ2_0": c.LLAMA_FTYPE_MOSTLY_TQ2_0,
    "MXFP4_MOE": c.LLAMA_FTYPE_MOSTLY_MXFP4_MOE,
}
# The i-quants below 4 bits need an importance matrix, which this call does not take.
QUANT_TYPES = tuple(_FTYPES)


def quantize(path_in, path_out, str ftype="Q4_K_M", n_threads=None, *,
             bint allow_requantize=False, bint quantize_output_tensor=True, bint pure=False):
    """Quantize the GGUF model at ``path_in`` to ``ftype`` (a name in ``QUANT_TYPES``),
    writing ``path_out``. The GIL is released while llama.cpp works; it logs one INFO
    line per tensor (``[ i/ n] name ...``) to the ``llama_cy`` logger."""
    key = ftype.upper()
    if key not in _FTYPES:
        raise ValueError(f"unknown quantization type {ftype!r}; one of {', '.join(QUANT_TYPES)}")
    src = os.fsencode(path_in)
    dst = os.fsencode(path_out)
    if not os.path.isfile(src):
        raise ModelLoadError(f"no model file at {os.fsdecode(src)!r}")
    if os.path.abspath(src) == os.path.abspath(dst):
        raise ValueError("the output path must differ from the input path")
    cdef c.llama_model_quantize_params p = c.llama_model_quantize_default_params()
    p.ftype = <c.llama_ftype>_FTYPES[key]
    p.nthread = default_n_threads() if n_threads is None else n_threads
    p.allow_requantize = allow_requantize
    p.quantize_output_tensor = quantize_output_tensor
    p.pure = pure
    cdef const char *cin = src
    cdef const char *cout = dst
    cdef uint32_t rc
    with nogil:
        rc = c.llama_model_quantize(cin, cout, &p)
    if rc != 0:
        raise quantize_error(rc, os.fsdecode(src))
