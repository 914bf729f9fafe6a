from llama_cy._c cimport mtmd as m
from llama_cy._c cimport mtmd_helper as mh
from llama_cy._view cimport ViewOwner


cdef class Bitmap(ViewOwner):
    cdef m.mtmd_bitmap *ptr
    # A video's frame reader (ffmpeg), read by the one tokenize the video goes through.
    cdef mh.mtmd_helper_video *video
    cdef bint _read

    @staticmethod
    cdef Bitmap _wrap(m.mtmd_bitmap *ptr, object id)
    cdef int _check_size(self) except -1
    cdef str _content_hash(self)
