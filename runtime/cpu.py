"""What the CPU that builds and runs can do: its feature flags and its x86-64 level.

A build for the building CPU (the ``fused`` spec's option ``host_isa``) passes
``-march=<level>`` with the level :func:`x86_64_level` finds, so that gcc compiles
each body once, for the instructions this CPU has, instead of three function-multi-
versioning clones. The levels are the x86-64 psABI's (``x86-64``, ``-v2``, ``-v3``,
``-v4``), not a CPU model, so a library built here is the same bits on every CPU of
its level, and the compiler's command line (part of the build cache's key) names it.
This module never imports ``byoc.generator``.
"""

from __future__ import annotations

import functools
import platform
from collections.abc import Iterable
from pathlib import Path

LEVELS = (
    ("x86-64-v4", frozenset({"avx512f", "avx512bw", "avx512cd", "avx512dq", "avx512vl"})),
    (
        "x86-64-v3",
        frozenset({"avx", "avx2", "bmi1", "bmi2", "f16c", "fma", "abm", "movbe", "xsave"}),
    ),
    ("x86-64-v2", frozenset({"cx16", "lahf_lm", "popcnt", "pni", "sse4_1", "sse4_2", "ssse3"})),
)
"""Each level above the baseline, highest first, with the ``/proc/cpuinfo`` flags it adds
to the one below (the psABI's list; ``abm`` is Linux's name for LZCNT, ``pni`` for SSE3)."""


def cpu_flags(cpuinfo: Path = Path("/proc/cpuinfo")) -> frozenset[str]:
    """The CPU's feature flags as Linux lists them (``/proc/cpuinfo``); none elsewhere."""
    try:
        text = cpuinfo.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return frozenset()
    line = next((ln for ln in text.splitlines() if ln.startswith("flags")), "")
    return frozenset(line.partition(":")[2].split())


def level_of(flags: Iterable[str]) -> str:
    """The highest x86-64 level whose flags, and those of every level below it, are all in
    ``flags``: ``x86-64-v4`` ... ``x86-64`` (the baseline, which every x86-64 CPU has)."""
    have = set(flags)
    for k, (name, _) in enumerate(LEVELS):
        if all(needed <= have for _, needed in LEVELS[k:]):
            return name
    return "x86-64"


@functools.cache
def x86_64_level() -> str | None:
    """This CPU's x86-64 level (:func:`level_of` its flags), or None when this is not an
    x86-64 Linux machine (no ``/proc/cpuinfo`` flags to read)."""
    if platform.machine().lower() not in ("x86_64", "amd64"):
        return None
    flags = cpu_flags()
    return level_of(flags) if flags else None
