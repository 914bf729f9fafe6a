# The Cython API of llama_cy: `from llama_cy cimport Device` (and, as the building
# blocks land, their extension types) for downstream Cython code.
from llama_cy._backend cimport Device
from llama_cy._batch cimport LlamaBatch
from llama_cy._context cimport LlamaContext
from llama_cy._model cimport LlamaModel
from llama_cy._sampler cimport LlamaSampler
from llama_cy._adapter cimport LoraAdapter
