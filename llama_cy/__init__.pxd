# The Cython API of llama_cy: `from llama_cy cimport Device` (and, as the building
# blocks land, their extension types) for downstream Cython code.
from llama_cy._backend cimport Device
