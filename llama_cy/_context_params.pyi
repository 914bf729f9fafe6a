#: the KV cache types llama.cpp's tools accept (``-ctk``, ``-ctv``, ``type_k``, ``type_v``)
KV_CACHE_TYPES: tuple[str, ...]
