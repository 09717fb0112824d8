"""The profiling text of a compiled module built with profiling (``byoc.build(...,
profile=True)``, ``byoc run --profile``); a build without it has none of this text.

Each *kernel call* of the module is one numbered site, timed where the generated code
makes it (:func:`timed`): for ``c_source``, each kernel call of a body; for
``c_fused``, each loop nest (an anchor with its fused ops, or a group of elementwise
outputs of one shape); for ``engine``, each run of a layer graph, since the layers run
inside the spec's engine, which byoc does not write. A site's event is its number
and its start and end on ``CLOCK_MONOTONIC`` in nanoseconds (the clock of Python's
``time.monotonic_ns``, so the runtime nests kernels within its own region spans).

:func:`support` writes the per-module event buffer, its two exported readers and the
table that names every site; :mod:`byoc.runtime.profile` reads them through ctypes
(the library's handle is a ``ctypes.CDLL`` already). Slots are reserved with an atomic
add, so concurrent calls never share one; events past the buffer's capacity are
counted, not kept. The text is C99 (and C++17 for the engine), warning-free under
``-Wall -Wextra -Werror``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from byoc.ir import Node

from .ffi_entry import exported
from .text import c_string, comment, origin

NAMES = (
    "byoc_profile_event_t",
    "byoc_profile_events_",
    "byoc_profile_count_",
    "byoc_profile_sites_",
    "byoc_profile_now",
    "byoc_profile_record",
    "byoc_profile_read",
    "byoc_profile_site",
)
"""The names :func:`support` defines, which no generated name may take."""

CAPACITY = 1 << 16
"""Events the buffer keeps between two reads: a run of ResNet-50 makes a few hundred."""

POSIX = (
    "#if !defined(_POSIX_C_SOURCE)\n"
    "#define _POSIX_C_SOURCE 200112L /* clock_gettime(), for profiling */\n"
    "#endif\n"
)
"""Before the first include of a C module: strict C99 and C11 declare no clock_gettime."""

INCLUDE = "#include <time.h>\n"


@dataclass(frozen=True, slots=True)
class Site:
    """One timed kernel call of a module: its function (the region's symbol), the
    event's name, and where it came from (for the trace's ``args``)."""

    function: str
    name: str
    origin: str

    def entry(self) -> str:
        """The site's C string: ``function<TAB>name<TAB>origin``."""
        return c_string("\t".join((self.function, self.name, self.origin)))


ORIGINS = 3
"""A site names at most this many of its nodes' origins, then how many more it has."""


def origins(nodes: Sequence[Node]) -> str:
    """Where the nodes of a site came from: ``y = add(...) at g.graph:3:5; ...``."""
    shown = [origin(node) for node in nodes[:ORIGINS]]
    more = f"; and {len(nodes) - ORIGINS} more" if len(nodes) > ORIGINS else ""
    return "; ".join(shown) + more


def timed(statements: Sequence[str], site: int, note: str, *, block: bool = True) -> list[str]:
    """``statements`` (indented by two spaces, a function body's) timed as event
    ``site``; ``note`` says what they are, in a comment. With ``block`` they go into a
    block of their own, indented by two more spaces, so that a body may time several;
    without, the start is a local of the enclosing scope (one site per scope). A
    ``goto`` out of them (a kernel's failure) leaves the event unrecorded."""
    lines = [line for s in statements for line in s.split("\n")]
    note = comment(f"profiling: site {site}, {note}")
    start = "const int64_t byoc_started = byoc_profile_now();"
    record = f"byoc_profile_record({site}, byoc_started);"
    if not block:
        return [f"  {start}  {note}", *lines, f"  {record}"]
    return [
        f"  {{ {note}",
        f"    {start}",
        *(f"  {line}" if line else line for line in lines),
        f"    {record}",
        "  }",
    ]


def support(sites: Sequence[Site], *, cplusplus: bool = False) -> str:
    """The event buffer, the clock, the recorder, the sites' table and the readers."""
    null = "nullptr" if cplusplus else "NULL"
    entries = [f"  {site.entry()}," for site in sites] or [f"  {null},"]
    return "\n".join(
        [
            "/* ---- Profiling (byoc generator/c/profile.py): this module was built with profiling ----",
            "   Each timed kernel call (a site, numbered in byoc_profile_sites_) appends an event: its",
            "   site, start and end on CLOCK_MONOTONIC in nanoseconds. A call reserves its slot with an",
            "   atomic add, so calls from several threads never share one; past BYOC_PROFILE_CAPACITY",
            "   events are counted, not kept. byoc reads them with byoc_profile_read after its calls",
            "   have returned (byoc runtime/profile.py). */",
            f"#define BYOC_PROFILE_CAPACITY {CAPACITY}",
            f"#define BYOC_PROFILE_SITES {len(sites)}",
            "typedef struct {",
            "  int64_t site;",
            "  int64_t start;",
            "  int64_t end;",
            "} byoc_profile_event_t;",
            "static byoc_profile_event_t byoc_profile_events_[BYOC_PROFILE_CAPACITY];",
            "static int64_t byoc_profile_count_;",
            "",
            '/* Each site: "<function>\\t<event name>\\t<where it came from>". */',
            f"static const char* const byoc_profile_sites_[{max(1, len(sites))}] = {{",
            *entries,
            "};",
            "",
            "static int64_t byoc_profile_now(void) {",
            "  struct timespec now;",
            "  clock_gettime(CLOCK_MONOTONIC, &now);",
            "  return (int64_t)now.tv_sec * 1000000000 + (int64_t)now.tv_nsec;",
            "}",
            "",
            "/* Record site `site`, which started at `start`, as ending now. */",
            "static void byoc_profile_record(int64_t site, int64_t start) __attribute__((unused));",
            "static void byoc_profile_record(int64_t site, int64_t start) {",
            "  const int64_t end = byoc_profile_now();",
            "  const int64_t slot = __atomic_fetch_add(&byoc_profile_count_, 1, __ATOMIC_RELAXED);",
            "  if (slot < BYOC_PROFILE_CAPACITY) {",
            "    byoc_profile_events_[slot].site = site;",
            "    byoc_profile_events_[slot].start = start;",
            "    byoc_profile_events_[slot].end = end;",
            "  }",
            "}",
            "",
            "/* For byoc's runtime: the number of events recorded since the last read (kept or not).",
            "   With `events`, also copy up to `capacity` of them into it (site, start, end: three",
            "   int64 each) and start afresh. Not to be called while a call records. */",
            *exported(
                "TVM_FFI_DLL_EXPORT int64_t byoc_profile_read(int64_t* events, int64_t capacity) {", cplusplus
            ),
            "  const int64_t recorded = __atomic_load_n(&byoc_profile_count_, __ATOMIC_ACQUIRE);",
            "  int64_t k;",
            f"  if (events == {null}) {{",
            "    return recorded;",
            "  }",
            "  for (k = 0; k < recorded && k < capacity && k < BYOC_PROFILE_CAPACITY; ++k) {",
            "    events[3 * k] = byoc_profile_events_[k].site;",
            "    events[3 * k + 1] = byoc_profile_events_[k].start;",
            "    events[3 * k + 2] = byoc_profile_events_[k].end;",
            "  }",
            "  __atomic_store_n(&byoc_profile_count_, 0, __ATOMIC_RELEASE);",
            "  return recorded;",
            "}",
            "",
            f"/* For byoc's runtime: the entry of site `site` in byoc_profile_sites_, or {null} past the last. */",
            *exported("TVM_FFI_DLL_EXPORT const char* byoc_profile_site(int64_t site) {", cplusplus),
            f"  return site >= 0 && site < BYOC_PROFILE_SITES ? byoc_profile_sites_[site] : {null};",
            "}",
            "",
        ]
    )
