"""``relax.ext.byoc_<backend>``: the relax external codegen of a byoc backend.

``RunCodegen`` calls it with the partitioned functions of one codegen. Each becomes a
byoc region in memory (:mod:`byoc.tvm.translate`), all of them one byoc Program built
by ``byoc.build`` (generated, checked, compiled through byoc's cache), whose generated
sources are compiled once more into a static object, cached the same way
(``byoc.building.compile_object``): TVM's ``export_library`` links a static library
into the exported module, while a loaded shared library cannot be saved ("does not
support SaveToBytes"). The exported module then runs where byoc is
not installed.

Relax names a region after all its ops (225 characters in ResNet-50); byoc takes C
names of at most 128. Each region gets a short, deterministic symbol (``tvm_`` + the
start of relax's name + a hash of all of it), and a one-line C function under
relax's name forwards to it, so that TVM finds ``__tvm_ffi_<relax name>``.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence

import tvm
import tvm_ffi
from tvm import relax

from byoc.building import compile_object
from byoc.errors import BuildError, ByocError, UsageError
from byoc.ir import Program

from .patterns import backend_list, codegen_name, oracle, spec_path_key
from .translate import Translator, Unsupported, as_one_region, outputs_of, region

SYMBOL_PREFIX = "tvm_"
KEPT_CHARACTERS = 40
"""How much of relax's name a short symbol keeps, for the reader of generated code."""
HASH_CHARACTERS = 12
EXT_PREFIX = "relax.ext."
_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_SOURCE_SUFFIXES = (".c", ".cc", ".cpp")
TVM_ENTRIES = {"c": "tvm_entries.c", "c++": "tvm_entries.cc"}
"""The translation unit of the object: the generated module and TVM's entries."""
_registered: dict[str, tuple[str, ...] | None] = {}


def short_symbol(relax_name: str) -> str:
    """The symbol of the byoc region of the relax function ``relax_name``: short, a
    valid C name, the same for the same name, different for different ones."""
    digest = hashlib.sha256(relax_name.encode("utf-8")).hexdigest()[:HASH_CHARACTERS]
    kept = re.sub(r"[^A-Za-z0-9_]", "_", relax_name[:KEPT_CHARACTERS]).strip("_")
    return f"{SYMBOL_PREFIX}{kept}_{digest}" if kept else f"{SYMBOL_PREFIX}{digest}"


def register(backend: str, spec_path: str | Sequence[str] | None = None) -> str:
    """Register ``relax.ext.byoc_<backend>`` (again only when ``spec_path`` changed) and
    return its name. ``RunCodegen({"byoc_<backend>": {"opt_level": 3}})`` passes the
    backend's options (``byoc --option``'s names and values)."""
    key = spec_path_key(spec_path)
    name = EXT_PREFIX + codegen_name(backend)
    if _registered.get(backend, ()) != key:
        oracle(backend, key)  # an unknown backend is an error here, not inside RunCodegen

        def codegen(functions, options, constant_names):
            return [build_regions(backend, key, list(functions), options)]

        tvm_ffi.register_global_func(name, codegen, override=True)
        _registered[backend] = key
    return name


def link_flags(backends: str | Sequence[str], spec_path: str | Sequence[str] | None = None) -> list[str]:
    """The flags that link the libraries the specs of ``backends`` (one, or several as
    :func:`offload` takes them) ``requires:`` (a vendor library's, a BLAS): a static
    object cannot carry them, so ``export_library(path,
    options=byoc.tvm.link_flags("ccompiler,fused"))`` passes them to the final link."""
    flags: list[str] = []
    for backend in backend_list(backends):
        spec = oracle(backend, spec_path_key(spec_path)).spec
        for linkage in spec.linkages():
            flags += [f for f in linkage.link_flags if f not in flags]
    # TVM's link puts these options before the objects, where a linker that drops
    # libraries "as needed" (the default of many distributions' gcc) would drop them
    libraries = [f for f in flags if f.startswith("-l")]
    if not libraries:
        return flags
    return [
        *(f for f in flags if not f.startswith("-l")),
        "-Wl,--push-state,--no-as-needed",
        *libraries,
        "-Wl,--pop-state",
    ]


def build_regions(
    backend: str, spec_path: tuple[str, ...] | None, functions: Sequence[relax.Function], options: Mapping
) -> tvm.runtime.Module:
    """The static library of the byoc build of ``functions``; a byoc error's message,
    location and hint become the text of the RuntimeError TVM raises."""
    try:
        return _build(backend, spec_path, functions, options)
    except ByocError as exc:
        raise RuntimeError(f"byoc ({codegen_name(backend)}): {exc.render()}") from exc
    except Unsupported as exc:
        raise RuntimeError(f"byoc ({codegen_name(backend)}): cannot translate a region: {exc}") from exc


def _build(backend, spec_path, functions, options) -> tvm.runtime.Module:
    import byoc

    found = oracle(backend, spec_path)
    names = [str(f.attrs["global_symbol"]) for f in functions]
    for name in names:
        if not _IDENTIFIER.match(name):
            raise UsageError(f"relax function {name!r} is not named as a C function can be")
    hosts = [_host_function(found, f, f"g{k}") for k, f in enumerate(functions)]
    try:
        parted = found.partition(Program(tuple(hosts))).functions
    except ByocError:  # lowering the explicit regions below says what is wrong
        parted = hosts
    program = Program(
        tuple(
            as_one_region(h, p, short_symbol(n), backend)
            if p is not h
            else region(h, short_symbol(n), backend)
            for h, p, n in zip(hosts, parted, names)
        )
    )
    model = byoc.build(
        program, options=_option_text(options), spec_path=found.spec_path, catalog=found.catalog
    )
    entry = next(m for m in model.manifest.modules if m.backend == backend)
    sources = {name: model.members[name] for name in entry.sources}
    main = _main_source(sources, backend)
    support = [n for n in sources if n.endswith(_SOURCE_SUFFIXES) and n != main]
    shim = _forwarders(found.spec.compile.language, {n: short_symbol(n) for n in names}, main, support)
    obj = compile_object(
        found.spec,
        _option_values(found.spec, options),
        {**sources, TVM_ENTRIES[found.spec.compile.language]: shim},
        TVM_ENTRIES[found.spec.compile.language],
    )
    return tvm.runtime.load_static_library(str(obj), names)


def _host_function(found, fn: relax.Function, name: str):
    """A relax region function as a byoc host function of ops, its parameters in
    relax's order."""
    t = Translator(found, {})
    for p in fn.params:
        t.param(p)
    outputs = [t.value(e) for e in outputs_of(t.bind(fn.body))]
    if set(outputs) & {p.name for p in t.params}:
        raise Unsupported("a region that returns one of its parameters")
    return t.function(outputs, name)


def _option_text(options: Mapping) -> dict[str, str]:
    """RunCodegen's options as ``--option`` text (typed by the spec when parsed)."""
    return {str(k): ("true" if v is True else "false" if v is False else str(v)) for k, v in options.items()}


def _option_values(spec, options: Mapping) -> dict[str, object]:
    return spec.template_values(spec.option_values(_option_text(options)))


def _main_source(sources: Mapping[str, bytes], backend: str) -> str:
    """The generated module among ``sources`` (``<backend>.c``, ``<backend>.cc``); the
    other C and C++ sources are support code (byoc's, the spec's)."""
    found = [n for n in sources if n.endswith(_SOURCE_SUFFIXES) and n.rsplit(".", 1)[0] == backend]
    if len(found) != 1:
        raise BuildError(f"expected one generated module of {backend} among {', '.join(sources)}")
    return found[0]


def _forwarders(language: str, symbols: Mapping[str, str], main: str, support: Sequence[str] = ()) -> str:
    """A translation unit of the generated module, the spec's support sources (one
    object holds all: TVM links it as it is) and, per region, TVM's entry under relax's
    name calling byoc's under the short one."""
    link = 'extern "C" ' if language == "c++" else ""
    # byoc_pool.c needs POSIX declarations, which must be asked for before the first header
    posix = ["#if !defined(_POSIX_C_SOURCE)", "#define _POSIX_C_SOURCE 200112L", "#endif"]
    lines = [*posix, f'#include "{main}"', *(f'#include "{name}"' for name in support), ""]
    for long, short in symbols.items():
        lines.append(
            f"{link}TVM_FFI_DLL_EXPORT int __tvm_ffi_{long}(void* self, const TVMFFIAny* args, int32_t n, "
            f"TVMFFIAny* result) {{ return __tvm_ffi_{short}(self, args, n, result); }}"
        )
    return "\n".join(lines) + "\n"
