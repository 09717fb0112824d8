"""The per-thread workspace of generated C modules: intermediate buffers allocated once,
not on every call.

A body that needs intermediate buffers (the ``c_source`` kind's, and a ``c_fused``
body with anchors) asks ``byoc_workspace(bytes)`` (byoc's ``support/byoc_workspace.c``,
linked by the module, :mod:`~byoc.generator.c.support_files`) for one block and
places every buffer at a fixed, 64-byte aligned offset in it (:func:`layout`). The
block belongs to the calling thread (a ``pthread`` key created under
``pthread_once``) and is kept between calls, so a repeated call allocates nothing and
touches no fresh pages. It grows when a function of the module needs more than the
thread holds; it is freed when the thread exits (the key's destructor) and, for every
thread at once, when the library is unloaded (a destructor that deletes the key, so
no thread runs a destructor of an unloaded library afterwards, and frees every block
from the module's list). Calls from several threads each use their own block: no lock
on the call path; the list's mutex is taken only when a thread's block is created,
grown or freed. A process has about a thousand thread-specific keys, and a loaded
library keeps its key; a library that finds none left allocates a block per call
(``spare``, freed by the body), so it is slower, never wrong.

A failed allocation returns NULL and the body its existing failure status, which the
wrapper raises as ``MemoryError``.
"""

from __future__ import annotations

from collections.abc import Sequence

from byoc.ir import C_TYPES, TensorType

from .text import comment

ALIGN = 64
"""Every buffer starts at a multiple of this many bytes of the block (a cache line,
and the widest vector load)."""


def layout(buffers: Sequence[tuple[str, TensorType, str, int]], failure: str) -> list[str]:
    """A body's first lines: its workspace of one thread, and each buffer's pointer into it.

    ``buffers`` gives each buffer's C name, type, a note of what it holds, and its slot:
    buffers of one slot (values whose lifetimes do not overlap, by the memory plan,
    and so of one dtype and size) share their bytes. ``failure`` is the statement that
    ends the body when the workspace cannot be had. The body ends with :data:`RELEASE`.
    """
    offsets: dict[int, int] = {}
    end = 0
    for _, t, _, slot in buffers:
        if slot not in offsets:
            offsets[slot] = end
            end += -(-t.nbytes // ALIGN) * ALIGN
    note = f"{len(offsets)} buffer(s), {end} bytes of this thread's workspace, kept between calls"
    lines = [
        f"  void* spare = NULL; {comment('set only when this call had to allocate a workspace of its own')}",
        f"  char* const ws = byoc_workspace({end}, &spare); {comment(note)}",
        f"  if (ws == NULL) {failure}",
    ]
    for name, t, holds, slot in buffers:
        ctype = C_TYPES[t.dtype]
        lines.append(f"  {ctype}* const {name} = ({ctype}*)(ws + {offsets[slot]}); {comment(holds)}")
    return lines


RELEASE = "  free(spare);"
"""The last statement of a body that used :func:`layout`, on every path after it."""
