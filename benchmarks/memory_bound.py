"""The best attainable memory speed, measured in the same run as the kernels.

A kernel that streams its inputs once and writes its output once cannot beat the
machine's memory system. What that system attains depends on the access pattern and
the thread count, so the bound is the fastest of four measurements over exactly the
bytes the kernel moves: a copy (``d[i] = s[i]``: half of the bytes read, half
written) and a streaming triad (``a[i] = b[i] + s * c[i]``: two thirds read, one
third written), each on 1 thread and on 2 (OpenMP). They run as a tiny C library
compiled by byoc's own toolchain (``runtime.build``, -O3 -march=native) and called
through ctypes, which releases the GIL.

Where those bytes live decides what "memory speed" means: a working set that fits in
the last-level cache streams from cache, not from DRAM. :func:`residency` compares
the bytes moved with the cache sizes the kernel reports.
"""

from __future__ import annotations

import ctypes
from pathlib import Path

import numpy as np

from .kernel_workloads import System, Workload, megabytes
from .timing import Bench

HARNESS = r"""
/* benchmarks/memory_bound.py: the memory-speed probes (copy and streaming triad). */
#include <stddef.h>

void bench_copy(float *restrict d, const float *restrict s, long n, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long i = 0; i < n; ++i) d[i] = s[i];
}

void bench_triad(float *restrict a, const float *restrict b, const float *restrict c, float s, long n,
                 int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (long i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}
"""
FLAGS = ("-O3", "-march=native", "-fopenmp", "-Wall", "-Wextra", "-Werror")
THREADS = (1, 2)
CACHE_ROOT = Path("/sys/devices/system/cpu/cpu0/cache")


def harness() -> ctypes.CDLL:
    """The compiled probes (cached by content in byoc's build cache)."""
    from runtime.build import build_library, toolchain

    chain = toolchain("c", "cc", "c99", FLAGS)
    lib = ctypes.CDLL(str(build_library({"memory_bound.c": HARNESS}, "memory_bound.c", chain)))
    lib.bench_copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_int]
    lib.bench_triad.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_float, ctypes.c_long, ctypes.c_int]
    lib.bench_copy.restype = lib.bench_triad.restype = None
    return lib


def cache_sizes(root: Path = CACHE_ROOT) -> dict[str, int]:
    """{"L1d": bytes, "L2": bytes, "L3": bytes} of cpu0, from sysfs (empty if unreadable)."""
    sizes: dict[str, int] = {}
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
    for index in sorted(root.glob("index*")):
        try:
            level = (index / "level").read_text().strip()
            kind = (index / "type").read_text().strip()
            text = (index / "size").read_text().strip()
        except OSError:
            continue
        if kind == "Instruction":
            continue
        value = int(text[:-1]) * units[text[-1]] if text[-1] in units else int(text)
        sizes[f"L{level}d" if kind == "Data" else f"L{level}"] = value
    return sizes


def residency(nbytes: int, caches: dict[str, int]) -> str:
    """Where a working set of ``nbytes`` streams from: the smallest cache level that
    holds it (L2 is per core, the last level shared), else DRAM."""
    for level in ("L2", "L3"):
        if level in caches and nbytes <= caches[level]:
            return level
    return "DRAM" if caches else "unknown"


def bound_systems(w: Workload, lib: ctypes.CDLL) -> list[System]:
    """The four probes over ``w.bytes_moved`` bytes; the fastest is the bound."""
    total = w.bytes_moved
    n_copy = max(total // 8, 1)  # two arrays of float32
    n_triad = max(total // 12, 1)  # three arrays of float32
    src, dst = np.ones(n_copy, np.float32), np.empty(n_copy, np.float32)
    b, c, a = np.ones(n_triad, np.float32), np.full(n_triad, 0.5, np.float32), np.empty(n_triad, np.float32)
    ns = {
        "copy": lib.bench_copy,
        "triad": lib.bench_triad,
        "d": dst.ctypes.data,
        "s": src.ctypes.data,
        "a": a.ctypes.data,
        "b": b.ctypes.data,
        "c": c.ctypes.data,
        "n_copy": n_copy,
        "n_triad": n_triad,
        "keep": (src, dst, a, b, c),  # the arrays live as long as the benches
    }
    systems = []
    for threads in THREADS:
        for probe, stmt, moved in (
            ("copy", f"copy(d, s, n_copy, {threads})", 8 * n_copy),
            ("triad", f"triad(a, b, c, 3.0, n_triad, {threads})", 12 * n_triad),
        ):
            systems.append(
                System(
                    f"memory bound: {probe} of {megabytes(moved)}, {threads} thread{'s' * (threads > 1)}",
                    "bound",
                    Bench(stmt, ns),
                    path=f"bound_{probe}_{threads}",
                    info={"probe": probe, "threads": threads, "probe_bytes_moved": moved},
                )
            )
    return systems
