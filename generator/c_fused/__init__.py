"""The ``c_fused`` codegen kind (fused): each region fused into loop nests, one C99
file per backend; the entry is :mod:`.generate`."""
