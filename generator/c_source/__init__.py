"""The ``c_source`` codegen kind (``ccompiler`` and the library backends): one C99 file
per backend, kernels from the spec's macros; the entry is :mod:`.generate`."""
