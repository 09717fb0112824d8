"""The ``c_source`` codegen (the ``ccompiler`` backend): the BYOC guide's C, from a spec.

One C99 file per backend, holding every external function of that backend::

    header comment          what generated the file, from which spec
    _POSIX_C_SOURCE         in a build with profiling only (generator/c/profile.py), as
                            are <time.h>, the event buffer after the argument checks,
                            and a timed block around each kernel call of a body
    #include ...            the TVM FFI entry's headers and byoc's byoc_module.h
                            (ffi_entry.includes()): the argument checks of the exported
                            entries, byoc_error for a kernel or init that reports
                            failures, the per-thread workspace of the intermediate
                            buffers; their C files are artifacts beside the module,
                            compiled once (generator/c/support_files.py)
    prelude                 the spec's `prelude` template
    #include "<header>"      the spec's support headers (`support:`); its support sources
                            are artifacts beside the module, compiled once per spec
    #define NAME(...) \\     the spec's macros the functions call, bodies from the spec
    module state            the spec's module_state, module_init and module_teardown,
                            once per library, when it has them (c_source/state.py)
    per function <sym>:     its state and init when the spec has them
                            (generator/c_source/state.py), constants, kernels <sym>_<k>,
                            body <sym>_, <sym>_wrapper_, exported entry __tvm_ffi_<sym>
                            (generator/c_source/function.py, kernels.py,
                            body.py)

Everything backend-specific (macros, which macro serves an op at a rank, the op's
operator, the prelude) comes from the spec; the structure is the kind's. The text
compiles under ``-std=c99 -Wall -Wextra -Werror`` and is byte-identical for the same
input: no time stamps, no absolute paths of shipped files, and source locations
exactly as the parser recorded them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from byoc.catalog import Catalog
from byoc.ir import Function
from byoc.spec.backend import BackendSpec, MacroDef, OptionValue
from byoc.spec.template import render
from byoc.spec_lines import prelude_heading

from ..artifacts import Artifact
from ..c import dtypes as c_dtypes
from ..c import ffi_entry, support_files
from ..c import profile as c_profile
from ..c.profile import Site
from ..c.text import (
    C_WORD,
    PTHREAD_INCLUDE,
    c_module,
    check_reserved_names,
    comment,
    comment_text,
    function_origin,
    one_line,
    spec_source,
    support_includes,
)
from .function import FunctionText, function_text
from .state import MODULE_NAMES, MODULE_POINTER, module_state_text, module_stateful, stateful


def generate(
    externals: Sequence[Function],
    spec: BackendSpec,
    catalog: Catalog,
    options: Mapping[str, OptionValue],
    *,
    profile: bool = False,
) -> tuple[Artifact, ...]:
    """One ``<backend>.c`` module holding every function of ``externals``; none if empty.
    With ``profile``, every kernel call is timed (:mod:`byoc.generator.c.profile`)."""
    if not externals:
        return ()
    return c_module(spec, *module_text(externals, spec, catalog, options, profile=profile))


def module_text(
    externals: Sequence[Function],
    spec: BackendSpec,
    catalog: Catalog,
    options: Mapping[str, OptionValue],
    *,
    profile: bool = False,
) -> tuple[str, list[Artifact], list[str]]:
    """The module's C text, the binary artifacts its large constants are included from,
    and the stems of byoc's support files it links beside byoc_entry.c (support_files)."""
    values = spec.template_values({**spec.option_values(), **options})
    module = module_stateful(spec)
    if module:
        values = {**values, "module_state": MODULE_POINTER}
    functions: list[FunctionText] = []
    sites: list[Site] = []
    for fn in externals:
        functions.append(function_text(fn, spec, catalog, values, len(sites) if profile else None))
        sites += functions[-1].sites
    taken = {n: f"a macro of backend {spec.name}" for n in spec.macros}
    taken.update((n, "a helper of byoc_module.h") for n in support_files.NAMES)
    workspace = any(f.workspace for f in functions)
    messages = module or any(f.fails or f.stateful for f in functions)  # an init may say why it fails
    used = [support_files.ERRORS] * messages + [support_files.WORKSPACE] * workspace
    if module:
        taken.update((n, "the module's state") for n in MODULE_NAMES)
    if profile:
        taken.update((n, "the module's profiling") for n in c_profile.NAMES)
    check_reserved_names(externals, taken)
    parts = [
        _header(externals, spec),
        *([c_profile.POSIX] if profile else []),
        ffi_entry.includes(used)
        + (c_profile.INCLUDE if profile else "")
        + ("#include <math.h>\n" if any(f.non_finite for f in functions) else "")
        + (PTHREAD_INCLUDE if stateful(spec) or module else ""),
    ]
    types = c_dtypes.support_text(c_dtypes.function_dtypes(externals), "\n".join(f.text for f in functions))
    if types:
        parts.append(types)
    prelude = render(spec.templates.get("prelude", ""), values)
    if prelude.strip():
        parts.append(prelude_heading(one_line(spec_source(spec))) + "\n" + prelude.rstrip("\n") + "\n")
    if spec.support:
        parts.append(support_includes(spec))
    state = module_state_text(spec, values) if module else ""
    parts += [macro_definition(m) for m in used_macros(spec, [state, *(f.text for f in functions)])]
    if profile:
        parts.append(c_profile.support(sites))
    if module:
        parts.append(state)
    parts += [f.text for f in functions]
    return "\n".join(parts), [blob for f in functions for blob in f.blobs], used


def used_macros(spec: BackendSpec, texts: Sequence[str]) -> list[MacroDef]:
    """The spec's macros that ``texts`` (the module's functions) call, directly or
    through another macro's body, in the spec's order: a module defines no macro it
    does not use."""
    words = set(C_WORD.findall("\n".join(texts)))
    used: set[str] = set()
    pending = [name for name in spec.macros if name in words]
    while pending:
        name = pending.pop()
        if name not in used:
            used.add(name)
            body = set(C_WORD.findall(spec.macros[name].body))
            pending += [other for other in spec.macros if other in body and other not in used]
    return [m for name, m in spec.macros.items() if name in used]


def macro_definition(macro: MacroDef) -> str:
    """``#define NAME(params) \\`` and the spec's body, one continued line per body line.

    Each line gets a single `` \\`` rather than aligned backslashes, so that editing one
    line of a macro's body changes exactly that line of the generated file (and a
    compiler error in it is traced back to the spec's line by the macro's name,
    :mod:`byoc.spec_lines`).
    """
    lines = [line.rstrip() for line in macro.body.rstrip().splitlines()]
    head = f"#define {macro.name}({', '.join(macro.params)})"
    note = f"{comment(macro.doc)}\n" if macro.doc else ""
    return note + " \\\n".join([head, *lines]) + "\n"


def _header(externals: Sequence[Function], spec: BackendSpec) -> str:
    lines = [
        f"Generated by byoc (generator/c_source/generate.py, codegen kind {spec.kind}) for backend {spec.name},",
        f"from the backend spec {spec_source(spec)}.",
        "Do not edit: change the spec or the graph, and generate again.",
        "",
        "Functions, each exported as __tvm_ffi_<name> (TVM FFI safe-call ABI; inputs, then outputs):",
    ]
    lines += [f"  {fn.name}: {function_origin(fn)}" for fn in externals]
    return "/* " + comment_text("\n   ".join(lines)).replace("\n   \n", "\n\n") + "\n*/\n"
