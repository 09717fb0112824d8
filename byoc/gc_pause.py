"""Pause CPython's cyclic garbage collector around bulk work.

Parsing and code generation allocate hundreds of thousands of small, acyclic
objects; each allocation burst triggers collections that re-scan everything alive,
which makes large inputs super-linear. Reference counting still frees everything
as usual; only the cycle detector waits until the work is done.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager


@contextmanager
def paused_gc() -> Iterator[None]:
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
