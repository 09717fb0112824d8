"""byoc's own C beside every generated C and C++ module (the files of ``support/``).

Code that does not change with the graph is not pasted into each module: it is written
once, as C files shipped with byoc, and every module includes their header::

    byoc_module.h      included by every module: declares what the files below define
    byoc_entry.c       the argument checks of the exported entries (every module)
    byoc_errors.c      what a failing kernel or init says (a c_source module whose
                       kernels may fail, or with state whose init may)
    byoc_workspace.c   the per-thread workspace of the bodies' intermediate buffers
                       (a module with a body that has some)
    byoc_pool.c        the thread pool of parallel loops (a c_fused module with one)

A generator returns the header as a :attr:`Role.HEADER` artifact and each C file its
module uses as a :attr:`Role.SUPPORT` one, like a spec's own ``support:`` files: a build
compiles each once per backend, compiler and flags into a cached object that the
module's library links (:func:`byoc.building.build_backend_module`), so that a graph of
many small modules compiles only its own code; ``byoc gen`` writes them beside the
module. Their functions are hidden (each library has its own copy and its own state, and
exports none of them) and weak (TVM's ``export_library`` links the objects of several
modules into one library, which keeps one copy). A C++ module (the engine kind's) gets
the C files named ``.cc``: their text is C99 and C++17 alike, and the header gives C
linkage.
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import cache
from pathlib import Path

from byoc.c_names import BYOC_SUPPORT_STEMS

from ..artifacts import Artifact, Role

FOLDER = Path(__file__).with_name("support")
HEADER = "byoc_module.h"

ENTRY = "byoc_entry"
ERRORS = "byoc_errors"
WORKSPACE = "byoc_workspace"
POOL = "byoc_pool"
STEMS = (ENTRY, ERRORS, WORKSPACE, POOL)
"""The C files, by stem: every module links :data:`ENTRY`, the others when it uses them."""
assert (Path(HEADER).stem, *STEMS) == BYOC_SUPPORT_STEMS  # the names a spec's files may not take
FILE_NAMES = frozenset({HEADER, *(stem + suffix for stem in STEMS for suffix in (".c", ".cc"))})
"""Every name a support file of byoc's has beside a module."""

NAMES = (
    "BYOC_MODULE_H_",
    "BYOC_HIDDEN",
    "BYOC_WEAK",
    "byoc_raise",
    "byoc_check_arg",
    "byoc_outputs_overlap",
    "byoc_error_message_",
    "byoc_error",
    "byoc_raise_failure",
    "byoc_workspace",
    "byoc_body_t",
    "byoc_parallel_for",
)
"""The names :data:`HEADER` declares, which no generated name may take (the C files'
static helpers are their own: no module sees them)."""


@cache
def text(name: str) -> str:
    """The text of support file ``name`` (``byoc_entry.c``)."""
    return (FOLDER / name).read_text(encoding="utf-8")


def linked(used: Iterable[str] = ()) -> list[str]:
    """The stems of the C files a module links: :data:`ENTRY` and the ``used`` ones, in
    the order of :data:`STEMS`."""
    wanted = {ENTRY, *used}
    assert wanted <= set(STEMS), wanted
    return [stem for stem in STEMS if stem in wanted]


def artifacts(backend: str, used: Iterable[str] = (), *, cplusplus: bool = False) -> tuple[Artifact, ...]:
    """The header and the C files a module of ``backend`` links (:func:`linked`), named
    ``.cc`` for a C++ module."""
    suffix = ".cc" if cplusplus else ".c"
    return (
        Artifact(HEADER, text(HEADER), Role.HEADER, backend),
        *(Artifact(stem + suffix, text(stem + ".c"), Role.SUPPORT, backend) for stem in linked(used)),
    )


def include(used: Iterable[str] = (), *, cplusplus: bool = False) -> str:
    """The line of every module that includes :data:`HEADER` (after the standard
    headers), with a comment naming the files the module links."""
    suffix = ".cc" if cplusplus else ".c"
    names = ", ".join(stem + suffix for stem in linked(used))
    return f'#include "{HEADER}" /* byoc\'s support: {names} beside this file, linked */\n'
