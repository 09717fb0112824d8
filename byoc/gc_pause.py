"""Defer CPython's full garbage collections around bulk work.

Parsing and code generation allocate hundreds of thousands of small, acyclic
objects. Left alone, the collector runs a full collection every time the
long-lived heap grows by a quarter, re-scanning everything alive: at 100k lines
most of it no longer sits in the CPU's caches, so parsing grows faster than the
text. Reference counting frees everything as usual either way.

Only the full collections wait. Young collections keep running, and they scan
each new object once while it is still in cache. Switching the collector off
entirely (as byoc first did) is worse: every object made during the pause is then
scanned in one go on the first allocation afterwards, cold, which on its own made
a 100k-line parse 6-8% slower per line than a 10k-line one.

An incremental collector (CPython 3.14 has one) ignores the third threshold; there
the collector is switched off for the duration instead.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_NEVER = 1 << 30
"""A third threshold that is never reached: no automatic full collection."""


@contextmanager
def full_collections_deferred() -> Iterator[None]:
    """Run the body with automatic full collections deferred (see the module doc)."""
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], _NEVER)
    if gc.get_threshold()[2] == _NEVER:
        try:
            yield
        finally:
            gc.set_threshold(*thresholds)
        return
    gc.set_threshold(*thresholds)  # an incremental collector: no generations to hold back
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
