"""The ``c_fused`` codegen (the ``fused`` backend): each region fused into single loops.

One C99 file per backend, holding every external function of that backend::

    header comment          what generated the file, from which spec, with which options
    _POSIX_C_SOURCE         in a build with profiling, which also adds <time.h>, the event
                            buffer after the argument checks, and a timed block around each
                            loop nest (generator/c/profile.py)
    #include ...            the TVM FFI entry's headers and byoc's byoc_module.h
                            (ffi_entry.includes()): the argument checks of the exported
                            entries and the outputs' overlap check, the per-thread workspace
                            of intermediate buffers, the thread pool of parallel loops; their
                            C files are artifacts beside the module, compiled once
                            (generator/c/support_files.py); <math.h> when an op expression
                            calls a function or a constant is not finite
    dtype support           where the module uses them: <stdbool.h>, the half types'
                            storage and conversions, the cast functions (generator/c/dtypes.py)
    byoc_simd_clones        option target_clones: the clones' attribute, and
                            byoc_clones_have_fma for the prelude to test
    prelude                 the spec's `prelude` template
    per function <sym>:     constants, the chunk functions <sym>_loop<k>_ of its parallel
                            nests, the fused body <sym>_, <sym>_wrapper_, the exported
                            entry __tvm_ffi_<sym> (generator/c_fused/function.py)

The body of an elementwise region is one loop nest per distinct output shape (one flat
loop when nothing broadcasts; :mod:`byoc.generator.c_fused.loops`), in which every op is
a scalar local built from the op's C expression: the spec's ``c`` for it, else the op
catalog's. Pointers are ``restrict``; intermediate values never leave registers, so
there is no buffer and no allocation. Any other region is one loop nest per anchor op
with its elementwise consumers fused in (:mod:`byoc.generator.c_fused.nests`).

Options (the spec declares them; see spec/backends/fused/fused.yaml, which also records what
each measured and why its default is what it is):

- ``host_isa`` (bool): the build compiles the module for the building CPU's x86-64
  level (the spec's compile flags), so no body is cloned: ``target_clones`` is then off.
- ``target_clones`` (bool): mark each body ``byoc_simd_clones``, GCC's function
  multi-versioning for AVX-512, x86-64-v3 (AVX2 and FMA) and baseline x86-64 (a plain
  function elsewhere); ``byoc_clones_have_fma`` tells the spec's prelude that every
  clone but the baseline one has fused multiply-add instructions.
- ``vectorize`` (bool): ``#pragma omp simd`` (with OpenMP), else ``GCC ivdep`` or
  ``clang loop vectorize(enable)``, on each innermost loop.
- ``openmp_threshold`` (int, 0 = off): run the outermost loop of every nest over at
  least this many elements in chunks on the module's thread pool
  (:mod:`byoc.generator.c_fused.pool`; the nest is outlined into a function of one
  chunk, :mod:`byoc.generator.c_fused.outline`); ``openmp_reduction_threshold`` does the
  same for reduction nests by their points. The names are historical: no OpenMP is
  involved. Loops run serially in a process forked from the one that loaded the module.

Every pragma and attribute sits under ``#if``, so the text compiles (serially, with
one version of each body) with any C99 compiler.

The text compiles under ``-std=c99 -Wall -Wextra -Werror`` and is byte-identical for
the same input.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from byoc.catalog import Catalog
from byoc.ir import Function
from byoc.spec.backend import BackendSpec, OptionValue
from byoc.spec.bindings import ExpressionBinding, OpBinding
from byoc.spec.kind_c_fused import ReductionBinding
from byoc.spec.template import render

from ..artifacts import Artifact
from ..c import dtypes as c_dtypes
from ..c import ffi_entry, support_files
from ..c import profile as c_profile
from ..c.profile import Site
from ..c.text import (
    block_comment,
    c_module,
    check_reserved_names,
    function_origin,
    spec_source,
    support_includes,
)
from .dots import float_accumulators
from .function import FusedText, function_text
from .nests import needs_nests
from .support import CLONES, option_summary, wants_clones

HELPERS = (*support_files.NAMES, "byoc_simd_clones", "byoc_clones_have_fma", *c_dtypes.NAMES)
"""The static helpers of the module, which no generated name may take."""


def generate(
    externals: Sequence[Function],
    spec: BackendSpec,
    catalog: Catalog,
    options: Mapping[str, OptionValue],
    *,
    profile: bool = False,
) -> tuple[Artifact, ...]:
    """One ``<backend>.c`` module holding every function of ``externals``; none if empty.
    With ``profile``, every loop nest is timed (:mod:`byoc.generator.c.profile`)."""
    if not externals:
        return ()
    return c_module(spec, *module_text(externals, spec, options, catalog, profile=profile))


def module_text(
    externals: Sequence[Function],
    spec: BackendSpec,
    options: Mapping[str, OptionValue],
    catalog: Catalog,
    *,
    profile: bool = False,
) -> tuple[str, list[Artifact], list[str]]:
    """The module's C text, the binary artifacts its large constants are included from,
    and the stems of byoc's support files it links beside byoc_entry.c (support_files)."""
    values = spec.template_values({**spec.option_values(), **options})
    functions: list[FusedText] = []
    sites: list[Site] = []
    for fn in externals:
        functions.append(function_text(fn, spec, values, catalog, len(sites) if profile else None))
        sites += functions[-1].sites
    workspace = any(f.workspace for f in functions)
    helpers = HELPERS + (c_profile.NAMES if profile else ())
    check_reserved_names(externals, {h: f"the helper {h}" for h in helpers})
    parallel = any(f.parallel for f in functions)
    used = [support_files.WORKSPACE] * workspace + [support_files.POOL] * parallel
    parts = [
        _header(externals, spec, values, catalog),
        *([c_profile.POSIX] if profile else []),
        ffi_entry.includes(used)
        + ("#include <math.h>\n" if _needs_math(externals, spec, functions, values) else "")
        + (c_profile.INCLUDE if profile else ""),
    ]
    types = c_dtypes.support_text(c_dtypes.function_dtypes(externals), "\n".join(f.text for f in functions))
    if types:
        parts.append(types)
    if wants_clones(values):
        parts.append(CLONES)
    if spec.support:
        parts.append(support_includes(spec))
    prelude = render(spec.templates.get("prelude", ""), values)
    if prelude.strip():
        parts.append(prelude.rstrip("\n") + "\n")
    if profile:
        parts.append(c_profile.support(sites))
    parts += [f.text for f in functions]
    return "\n".join(parts), [blob for f in functions for blob in f.blobs], used


CALL = re.compile(r"\b[A-Za-z_]\w*\s*\(|\b(INFINITY|NAN|HUGE_VAL)\b")
"""A function call in an op's C template (``exp(${x0})``), or a <math.h> constant."""


def _needs_math(
    externals: Sequence[Function],
    spec: BackendSpec,
    functions: Sequence[FusedText],
    values: Mapping[str, object],
) -> bool:
    """Whether the module needs <math.h>: a constant is an infinity or NaN, or an op
    expression that the functions use calls a function (C99's exp, tanh, erf, ...)."""
    if any(f.non_finite for f in functions):
        return True
    used = {node.op for fn in externals for node in fn.nodes}
    floats = {  # ops whose float updates the module uses (option float32_dots)
        node.op
        for fn in externals
        for node in fn.nodes
        if isinstance(binding := spec.ops[node.op], ReductionBinding)
        and float_accumulators(values, binding, node.type.dtype)
    }
    return any(
        CALL.search(text)
        for op, binding in spec.ops.items()
        if op in used
        for text in _templates(binding, op in floats)
    )


def _templates(binding: OpBinding, floats: bool) -> tuple[str, ...]:
    """The C templates of an op's binding (with ``floats``, the float updates too)."""
    if isinstance(binding, ExpressionBinding):
        return (binding.expression,)
    if isinstance(binding, ReductionBinding):
        texts = (
            t for a in binding.accumulators for t in (a.init, a.update, a.float_update if floats else None)
        )
        return (binding.result, *(t for t in texts if t is not None))
    return ()


def _layout(externals: Sequence[Function], catalog: Catalog) -> list[str]:
    """How the functions are laid out, for the header."""
    if not any(needs_nests(fn, catalog) for fn in externals):
        return [
            "Each region is fused into one loop per output shape over restrict pointers; ops are",
            "the C expressions of the spec (by default the op catalog's, spec/ops.yaml).",
        ]
    return [
        "An elementwise region is fused into one loop per output shape over restrict pointers;",
        "any other into one loop nest per anchor op (conv, dense, pool, ...) with the elementwise",
        "ops after it fused in. The C is the spec's: expressions, accumulators and results.",
    ]


def _header(
    externals: Sequence[Function], spec: BackendSpec, values: Mapping[str, object], catalog: Catalog
) -> str:
    lines = [
        f"Generated by byoc (generator/c_fused/generate.py, codegen kind {spec.kind}) for backend {spec.name},",
        f"from the backend spec {spec_source(spec)}; options: {option_summary(values)}.",
        "Do not edit: change the spec or the graph, and generate again.",
        "",
        *_layout(externals, catalog),
        "",
        "Functions, each exported as __tvm_ffi_<name> (TVM FFI safe-call ABI; inputs, then outputs):",
    ]
    lines += [f"  {fn.name}: {function_origin(fn)}" for fn in externals]
    return block_comment(lines).replace("\n   \n", "\n\n") + "\n"
