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
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from functools import partial

_NEVER = 1 << 30
"""A third threshold that is never reached: no automatic full collections."""

_lock = threading.Lock()
_depth = 0
"""How many bodies, in all threads, are inside a pause now."""


def _nothing() -> None:
    pass


_undo: Callable[[], None] = _nothing
"""What ends the pause under way: set by the first body to enter, run by the last to leave."""


@contextmanager
def full_collections_deferred() -> Iterator[None]:
    """Run the body with automatic full collections deferred (see the module doc).

    Re-entrant and thread-safe: the collector is one per process, so the first body
    to enter (in any thread) changes its settings and the last one to leave restores
    them; bodies that overlap share one pause."""
    global _depth, _undo
    with _lock:
        if _depth == 0:
            _undo = _defer()
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                _undo()
                _undo = _nothing


def _defer() -> Callable[[], None]:
    """Defer full collections now; return what restores the collector's settings."""
    thresholds = gc.get_threshold()
    gc.set_threshold(thresholds[0], thresholds[1], _NEVER)
    if gc.get_threshold()[2] == _NEVER:
        return partial(gc.set_threshold, *thresholds)
    gc.set_threshold(*thresholds)  # an incremental collector: no generations to hold back
    if not gc.isenabled():
        return _nothing
    gc.disable()
    return gc.enable
