"""Fixed C text of ``c_fused`` modules: the overlap check of the wrappers, the fork
guard of parallel loops, the SIMD clones of option ``target_clones``, and the loop
hints of the options ``vectorize`` and ``openmp_threshold``. :mod:`byoc.generator.c_fused` includes each only when a
function uses it, so that no unused static function trips ``-Werror``.
"""

from __future__ import annotations

from collections.abc import Mapping

from byoc.spec.backend import OptionValue
from byoc.spec.kind_c_fused import CFusedKind
from byoc.value_types import value_text

OVERLAPS = """/* Whether an output shares memory with another argument: arguments first..n-1 are the
   outputs, each argument k spans bytes[k] bytes from data[k] (empty ones share nothing).
   The fused bodies read and write through restrict pointers, so the wrappers check. */
static int byoc_outputs_overlap(const void* const* data, const size_t* bytes, int first, int n) {
  int i;
  int j;
  for (i = first; i < n; ++i) {
    for (j = 0; j < i; ++j) {
      const uintptr_t a = (uintptr_t)data[i];
      const uintptr_t b = (uintptr_t)data[j];
      if (bytes[i] != 0 && bytes[j] != 0 && a < b + bytes[j] && b < a + bytes[i]) {
        return 1;
      }
    }
  }
  return 0;
}
"""
"""The helper the wrappers' overlap checks call; the module includes it when one does."""

CLONES = """/* Option target_clones: each fused body is compiled for AVX-512, x86-64-v3 (AVX2 with FMA)
   and baseline x86-64, and the dynamic loader runs the widest the CPU has (GCC's function
   multi-versioning, an ifunc). The same IEEE operations in the same order, so the results
   are the same; other compilers and targets compile one plain version.
   byoc_clones_have_fma: every clone but the baseline one has fused multiply-add
   instructions (gcc's avx512f target implies FMA), for the spec's prelude to test. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define byoc_simd_clones __attribute__((target_clones("avx512f", "arch=x86-64-v3", "default")))
#define byoc_clones_have_fma 1
#else
#define byoc_simd_clones
#endif
"""
"""Defines the ``byoc_simd_clones`` marker of the fused bodies (and ``byoc_clones_have_fma``);
the module places it before the spec's prelude, which may test the latter."""

POSIX = "#if !defined(_POSIX_C_SOURCE)\n#define _POSIX_C_SOURCE 200112L /* getpid(), for byoc_parallel_ok */\n#endif\n"
"""The first lines of a module with parallel loops (before any #include)."""

PARALLEL = """/* Parallel loops (option openmp_threshold): OpenMP's threads do not survive fork(), and a
   forked child that starts a parallel loop hangs in libgomp. So loops run on OpenMP threads
   only in the process that loaded this library, and serially in its forked children. */
#if defined(_OPENMP) && defined(__GNUC__) && defined(__unix__)
#include <unistd.h>
static pid_t byoc_loader_pid;
__attribute__((constructor)) static void byoc_record_loader_pid(void) {
  byoc_loader_pid = getpid();
}
#define byoc_parallel_ok() (getpid() == byoc_loader_pid)
#else
#define byoc_parallel_ok() 1
#endif
"""
"""The fork guard of parallel loops; the module includes it when a loop is parallel."""


def pragmas(parallel: bool, simd: bool) -> list[str]:
    """The loop hints before one ``for``; none without the options that ask for them.
    Each is guarded, so the text compiles (serially, unhinted) with any C99 compiler."""
    if not (parallel or simd):
        return []
    words = (
        ("parallel for", parallel),
        ("simd", simd),
        ("schedule(static) if(byoc_parallel_ok())", parallel),
    )
    omp = "omp " + " ".join(w for w, on in words if on)
    lines = ["#if defined(_OPENMP)", f"#pragma {omp}"]
    if simd:
        lines += ["#elif defined(__clang__)", "#pragma clang loop vectorize(enable)"]
        lines += ["#elif defined(__GNUC__)", "#pragma GCC ivdep"]
    return [*lines, "#endif"]


def option_summary(values: Mapping[str, OptionValue]) -> str:
    """``target_clones=true, vectorize=false, openmp_threshold=0``: the options the generator reads."""
    shown = []
    for name in CFusedKind.options:
        if name in values:
            shown.append(f"{name}={value_text(values[name])}")
    return ", ".join(shown) or "none"
