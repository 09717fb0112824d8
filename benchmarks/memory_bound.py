"""The best attainable memory speed, measured in the same run as the kernels.

A kernel that streams its inputs once and writes its output once cannot beat the
machine's memory system. What that system attains depends on the access pattern and
the thread count, so the bound is the fastest of four measurements over exactly the
bytes the kernel moves: a copy (``d[i] = s[i]``: half of the bytes read, half
written) and a streaming triad (``a[i] = b[i] + s * c[i]``: two thirds read, one
third written), each on 1 thread and on 2. They run as a tiny C library compiled by
byoc's own toolchain (``runtime.build``, -O3 -march=native) and called through
ctypes, which releases the GIL: the 2-thread probes give each of two Python threads
half of the arrays. (An OpenMP ``parallel for`` was tried first: on this shared
2-core machine its sleeping workers woke a scheduler tick late, and the 2-thread
probes took 10-12 ms for 21 MB.)

Where those bytes live decides what "memory speed" means: a working set that fits in
the last-level cache streams from cache, not from DRAM. :func:`residency` compares
the bytes moved with the cache sizes the kernel reports.
"""

from __future__ import annotations

import ctypes
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

from .kernel_workloads import System, Workload, megabytes
from .timing import Bench

HARNESS = r"""
/* benchmarks/memory_bound.py: the memory-speed probes (copy and streaming triad). */
#include <stddef.h>

void bench_copy(float *restrict d, const float *restrict s, long n) {
  for (long i = 0; i < n; ++i) d[i] = s[i];
}

void bench_triad(float *restrict a, const float *restrict b, const float *restrict c, float s, long n) {
  for (long i = 0; i < n; ++i) a[i] = b[i] + s * c[i];
}
"""
FLAGS = ("-O3", "-march=native", "-Wall", "-Wextra", "-Werror")
THREADS = (1, 2)
CACHE_ROOT = Path("/sys/devices/system/cpu/cpu0/cache")


def harness() -> ctypes.CDLL:
    """The compiled probes (cached by content in byoc's build cache)."""
    from runtime.build import build_library
    from runtime.toolchain import toolchain

    chain = toolchain("c", "cc", "c99", FLAGS)
    lib = ctypes.CDLL(str(build_library({"memory_bound.c": HARNESS}, "memory_bound.c", chain)))
    lib.bench_copy.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long]
    lib.bench_triad.argtypes = [ctypes.c_void_p] * 3 + [ctypes.c_float, ctypes.c_long]
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


def _split_call(
    fn: Any, arrays: list[np.ndarray], scalars: tuple, threads: int, pool: ThreadPoolExecutor
) -> Any:
    """A zero-argument call of ``fn(*pointers, *scalars, n)`` over ``arrays``, split
    into ``threads`` equal parts run at once (one on the calling thread)."""
    parts = []
    for chunk in zip(*(np.array_split(a, threads) for a in arrays)):
        parts.append((*(c.ctypes.data for c in chunk), *scalars, chunk[0].size))
    if threads == 1:
        return lambda: fn(*parts[0])

    def run() -> None:
        futures = [pool.submit(fn, *args) for args in parts[1:]]
        fn(*parts[0])
        for future in futures:
            future.result()

    return run


def bound_systems(w: Workload, lib: ctypes.CDLL) -> list[System]:
    """The four probes over ``w.bytes_moved`` bytes; the fastest is the bound."""
    total = w.bytes_moved
    n_copy = max(total // 8, 1)  # two arrays of float32
    n_triad = max(total // 12, 1)  # three arrays of float32
    copy_arrays = [np.empty(n_copy, np.float32), np.ones(n_copy, np.float32)]
    triad_arrays = [
        np.empty(n_triad, np.float32),
        np.ones(n_triad, np.float32),
        np.full(n_triad, 0.5, np.float32),
    ]
    pool = ThreadPoolExecutor(max(THREADS) - 1, thread_name_prefix="bench-memory")
    systems = []
    for threads in THREADS:
        for probe, fn, arrays, scalars, moved in (
            ("copy", lib.bench_copy, copy_arrays, (), 8 * n_copy),
            ("triad", lib.bench_triad, triad_arrays, (3.0,), 12 * n_triad),
        ):
            call = _split_call(fn, arrays, scalars, threads, pool)
            systems.append(
                System(
                    f"memory bound: {probe} of {megabytes(moved)}, {threads} thread{'s' * (threads > 1)}",
                    "bound",
                    Bench("f()", {"f": call, "keep": arrays}),  # the arrays live as long as the bench
                    path=f"bound_{probe}_{threads}",
                    info={"probe": probe, "threads": threads, "probe_bytes_moved": moved},
                )
            )
    return systems
