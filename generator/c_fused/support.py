"""Fixed C text of ``c_fused`` modules: the SIMD clones of option ``target_clones``
(unless option ``host_isa``) and the loop hint of option ``vectorize`` (the overlap
check of the wrappers and the thread pool of parallel loops are byoc's support files,
:mod:`byoc.generator.c.support_files`).
:mod:`byoc.generator.c_fused.generate` includes each only when a function uses it, so that no
unused static function trips ``-Werror``.
"""

from __future__ import annotations

from collections.abc import Mapping

from byoc.spec.backend import OptionValue
from byoc.spec.kind_c_fused import CFusedKind
from byoc.value_types import value_text

CLONES = """/* Option target_clones: each fused body is compiled for x86-64-v4 (AVX-512 F, VL, BW, DQ
   and CD), x86-64-v3 (AVX2 with FMA) and baseline x86-64, and the dynamic loader runs
   the widest the CPU has (GCC's function
   multi-versioning, an ifunc). The same IEEE operations in the same order, so the results
   are the same; other compilers and targets compile one plain version.
   byoc_clones_have_fma: every clone but the baseline one has fused multiply-add
   instructions, for the spec's prelude to test. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define byoc_simd_clones __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define byoc_clones_have_fma 1
#else
#define byoc_simd_clones
#endif
"""
"""Defines the ``byoc_simd_clones`` marker of the fused bodies (and ``byoc_clones_have_fma``);
the module places it before the spec's prelude, which may test the latter."""


def wants_clones(values: Mapping[str, object]) -> bool:
    """Whether the bodies are compiled as clones: option ``target_clones``, unless
    option ``host_isa`` builds the module for the building CPU's level alone (a spec
    without ``host_isa`` keeps the clones)."""
    return values.get("target_clones") is True and values.get("host_isa") is not True


def pragmas(simd: bool) -> list[str]:
    """The loop hint before an innermost ``for`` with option ``vectorize``; none without it.
    Guarded, so the text compiles (unhinted) with any C99 compiler."""
    if not simd:
        return []
    return [
        "#if defined(_OPENMP)",
        "#pragma omp simd",
        "#elif defined(__clang__)",
        "#pragma clang loop vectorize(enable)",
        "#elif defined(__GNUC__)",
        "#pragma GCC ivdep",
        "#endif",
    ]


def option_summary(values: Mapping[str, OptionValue]) -> str:
    """``target_clones=true, vectorize=false, openmp_threshold=0``: the options the generator reads."""
    shown = []
    for name in CFusedKind.options:
        if name in values:
            shown.append(f"{name}={value_text(values[name])}")
    return ", ".join(shown) or "none"
