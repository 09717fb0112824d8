"""Names and limits the backend spec format fixes, shared by the loader and the kinds."""

from __future__ import annotations

import re

MAX_RANK = 32
"""The largest tensor rank any kind accepts (numpy's classic NPY_MAXDIMS)."""

COMMON_PLACEHOLDERS = ("backend", "symbol_prefix")
"""Placeholders every template may use, besides the backend's option names."""

X86_64_LEVEL = "x86_64_level"
FLAG_PLACEHOLDERS = (X86_64_LEVEL,)
"""Placeholders of compile flags alone, which the build fills from the machine that
builds: ``${x86_64_level}`` is its x86-64 level (``x86-64-v3``; :mod:`byoc.runtime.cpu`).
Generated text never depends on the machine; only the command line does."""

DIM_PLACEHOLDER = re.compile(r"dim(0|[1-9][0-9]*)\Z")
"""``${dim0}``, ``${dim1}``, ...: one extent of the output shape, in macro arguments."""

ELEMENT_PLACEHOLDER = re.compile(r"x(0|[1-9][0-9]*)\Z")
"""``${x0}``, ``${x1}``, ...: one scalar of each input, in C expression templates."""

RESERVED_C_NAME = re.compile(r"_[A-Z_]|.*__")
"""C reserves identifiers that start with _ and a capital or _, and C++ any with __."""
