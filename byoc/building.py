"""``byoc.build``: from a graph to a runnable :class:`~byoc.runtime.Model`.

parse -> offload (explicit regions, or every ExampleJSON subgraph) -> generate ->
compile (C/C++, cached) -> package as a manifest plus members -> Model. The same
manifest and members are what ``Model.save`` writes into a ``.byoc`` bundle.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from time import perf_counter
from typing import TYPE_CHECKING

from . import __version__
from .catalog import Catalog
from .errors import UsageError
from .ir import Program

if TYPE_CHECKING:
    from .runtime.manifest import ModuleEntry

log = logging.getLogger(__name__)

SOURCE_MEMBER = "source.graph"
"""The program as parsed, in DSL form: what ``byoc run`` checks a bundle against."""
SOURCE_WEIGHTS_MEMBER = "source.npz"
"""The weights file of the source member: its external and large constants' values."""
QUIET_SECONDS = 1.0
"""A compilation that ends sooner (a cache hit, a small module) reports no progress."""
USER_CATALOG_MEMBER = "user_ops"
"""The user op catalogs of a build are saved as members ``user_ops_1.yaml``, ... in search order."""


@dataclass
class Timings:
    """Seconds spent in each stage, in order; each measured span is logged (INFO)."""

    stages: dict[str, float] = field(default_factory=dict)

    def measure(self, stage: str):
        timings = self

        class _Timer:
            def __enter__(self):
                self.start = perf_counter()

            def __exit__(self, *exc):
                seconds = perf_counter() - self.start
                timings.stages[stage] = timings.stages.get(stage, 0.0) + seconds
                log.info("%s: %.3f s", stage, seconds)

        return _Timer()


def offload(
    program: Program, language: str, backends: Sequence[str], load_backend, catalog: Catalog | None = None
) -> Program:
    """The program with everything to offload made explicit.

    ExampleJSON: each subgraph goes whole to one backend (default examplejson), and
    keeps its name as the exported symbol. DSL: explicit ``@backend`` regions stay as
    written, and with ``--backend`` every other node is partitioned automatically
    (annotate, merge, partition) over the given backends, in order of preference.
    """
    from .generator.lowering import offload_whole

    if language == "examplejson":
        if len(backends) > 1:
            raise UsageError("an ExampleJSON subgraph goes whole to one backend; pass one --backend")
        return offload_whole(program, backends[0] if backends else "examplejson")
    if backends:
        program = partition_over(program, backends, load_backend, catalog)
    if not any(n.callee is not None for fn in program.functions for n in fn.nodes):
        raise UsageError(
            "nothing is offloaded",
            hint="pass --backend NAME to offload what a backend supports, or mark a region "
            "with `name = @ccompiler { ... return ... }`",
        )
    return program


def partition_over(
    program: Program, backends: Sequence[str], load_backend, catalog: Catalog | None = None
) -> Program:
    """``program`` with every node that one of ``backends`` (in order of preference)
    supports in a region of that backend; the other nodes stay on the host. A backend
    takes a dtype its spec probes (``probe:``) only where this machine computes it."""
    from .generator.partition import partition

    return partition(program, _machine_specs(program, backends, load_backend), catalog)


def explain_over(
    program: Program, backends: Sequence[str], load_backend, catalog: Catalog | None = None
) -> str:
    """Why :func:`partition_over` puts each op where it does (the text of ``--explain``,
    :mod:`byoc.generator.explain`)."""
    from .api import load_catalog
    from .generator.explain import explain

    return explain(program, _machine_specs(program, backends, load_backend), catalog or load_catalog())


def _machine_specs(program: Program, backends: Sequence[str], load_backend) -> list:
    """The specs of ``backends``, each without the dtypes its probe finds this machine lacks."""
    from .runtime.probe import for_machine

    used = {t.dtype for fn in program.functions for t in fn.types().values()}
    return [for_machine(load_backend(name), used) for name in dict.fromkeys(backends)]


def build(
    source: str | Path | Program,
    *,
    backends: Sequence[str] = (),
    options: Mapping[str, str] | None = None,
    spec_path: Sequence[str] | None = None,
    language: str | None = None,
    catalog: Catalog | None = None,
    timings: Timings | None = None,
    shapes: Mapping[str, tuple[int, ...]] | None = None,
    progress: Callable[[str], None] | None = None,
    profile: bool = False,
    source_key: str | None = None,
):
    """Build a runnable Model from a file path (``.graph``, ``.examplejson`` or
    ``.onnx``, whose dynamic input dimensions ``shapes`` fixes) or a parsed Program
    (see module doc). The backends' modules compile in parallel; ``progress``, when
    given, gets a line per event of a compilation longer than a second. With
    ``profile``, the compiled modules time their kernel calls, and ``Model.profile``
    runs a graph with profiling (docs/performance.md, "Profiling a run").
    ``source_key`` names the Program: an import of the ONNX import cache
    (:func:`byoc.onnx.import_cache.import_path`) or a parsed text file
    (:func:`byoc.api.parse_source`; a path to a file gets one here). Its build is
    remembered, and a build of the same source with the same backends, options and
    specs takes the libraries from the cache without generating them again
    (:mod:`byoc.build_records`)."""
    from .api import backend_loader, load_catalog, parse_source
    from .generator.placement import placement, placement_summary

    timings = timings or Timings()
    catalog = catalog or load_catalog(spec_path=spec_path)
    loader = backend_loader(spec_path, catalog)

    if isinstance(source, Program):
        program, lang = source, language or "graph"
    else:
        from .api import language_of

        lang = language_of(source, language)
        with timings.measure("parse"):
            program, source_key = parse_source(
                source, lang, catalog=catalog, spec_path=spec_path, shapes=shapes
            )
    with timings.measure("partition"):
        offloaded = offload(program, lang, backends, loader, catalog)
    counts = placement(offloaded)
    log.info("%s", placement_summary(counts))
    key = None
    if source_key is not None:
        from .build_records import record_key

        # the backends asked for, and those the regions written in the source name
        named = (r.backend for fn in offloaded.functions for r in fn.regions() if r.backend)
        specs = _machine_specs(program, [*backends, *named], loader)
        key = record_key(source_key, backends, options, specs, catalog, profile)
    job = _Job(program, offloaded, catalog, loader, options, profile, timings)
    model = _recalled(job, key) if key is not None else None
    if model is None:
        model = _built(job, progress, key)
    model.placement = counts
    return model


@dataclass(frozen=True)
class _Job:
    """What a build generates from: the program as parsed and with its regions made
    explicit (``offloaded``), the catalog, the specs' loader and the options."""

    program: Program
    offloaded: Program
    catalog: Catalog
    loader: Callable
    options: Mapping[str, str] | None
    profile: bool
    timings: Timings

    def generate(self):
        """Every artifact of the build, with its specs and option values (:class:`~byoc.generator.pipeline.Generated`)."""
        from .generator.pipeline import generate

        return generate(self.offloaded, self.catalog, self.loader, self.options, profile=self.profile)


def _built(job: _Job, progress, key: str | None):
    """The Model of ``job``, generated and compiled; its record kept under ``key``
    (None: not kept)."""
    from .runtime.manifest import GraphEntry
    from .runtime.probe import check_regions

    timings = job.timings
    with timings.measure("generate"):
        generated = job.generate()
        lowered, artifacts = generated.lowered, generated.artifacts
    log.debug("generated %s", ", ".join(a.name for a in artifacts))
    members: dict[str, bytes | Callable[[], bytes]] = {a.name: a.payload for a in artifacts}
    with timings.measure("compile"):
        for name, spec in generated.specs.items():
            check_regions(spec, lowered.externals_for(name))
        libraries = compile_modules(generated.specs, artifacts, generated.options, progress)
        built: dict[str, Path] = {}  # library members -> their cache entries, loaded there
        modules = tuple(
            _package_module(name, spec, artifacts, lowered, libraries.get(name), members, built)
            for name, spec in generated.specs.items()
        )
    graphs = tuple(
        GraphEntry(
            fn.name,
            host_graph=f"{fn.name}.graph.json",
            host_functions=f"{fn.name}.host.graph" if f"{fn.name}.host.graph" in members else None,
        )
        for fn in lowered.hosts
    )
    if key is not None:
        from .build_records import make_record, store
        from .runtime.manifest import Manifest

        manifest = Manifest(byoc=__version__, source=SOURCE_MEMBER, graphs=graphs, modules=modules)
        record = make_record(generated, libraries, manifest)
        if record is not None:
            store(key, record)
    with timings.measure("load"):
        return _model(job, modules, graphs, members, built)


def _recalled(job: _Job, key: str):
    """The Model of the build that :mod:`byoc.build_records` remembers under ``key``,
    its libraries found in the cache; None when there is no record or a library is
    missing."""
    from .build_records import libraries_of, recall, regenerating
    from .errors import RuntimeFailure
    from .runtime.manifest import Manifest

    timings = job.timings
    with timings.measure("generate"):
        record = recall(key)
        try:
            manifest = None if record is None else Manifest.from_json(record.manifest, "the build's record")
        except RuntimeFailure:  # damaged: built again, and replaced
            manifest = None
    if record is None or manifest is None:
        return None
    with timings.measure("compile"):
        libraries = libraries_of(record, job.loader)
    if libraries is None:
        return None
    log.info("generated and compiled before: the build's record and its libraries are in the cache")

    def payloads() -> dict[str, bytes]:
        return {a.name: a.payload for a in job.generate().artifacts}

    members: dict[str, bytes | Callable[[], bytes]] = dict(record.members)
    members.update(regenerating(payloads, record.regenerated))
    built: dict[str, Path] = {}
    for entry in manifest.modules:
        if entry.backend in libraries:
            members[entry.file] = _library_bytes(libraries[entry.backend])
            built[entry.file] = libraries[entry.backend]
    with timings.measure("load"):
        return _model(job, manifest.modules, manifest.graphs, members, built)


def _model(job: _Job, modules, graphs, members, built):
    """The Model of a build: its manifest, members (the source's and the user
    catalogs' added) and libraries (``built``)."""
    from .runtime import Model
    from .runtime.manifest import Manifest

    catalog = job.catalog
    members.update(source_members(job.program))
    catalogs = tuple(f"{USER_CATALOG_MEMBER}_{k}.yaml" for k in range(1, len(catalog.user_files) + 1))
    members.update((name, f.text.encode("utf-8")) for name, f in zip(catalogs, catalog.user_files))
    manifest = Manifest(
        byoc=__version__, source=SOURCE_MEMBER, graphs=graphs, modules=modules, catalogs=catalogs
    )
    model = Model(manifest, members, catalog, built)
    model.profiling = job.profile
    return model


def source_members(program: Program) -> dict[str, Callable[[], bytes]]:
    """The bundle's copy of the source, which stands alone: its external and large
    constants are read from a weights file that is a member too, so the text stays
    the size of the graph, whatever its weights. Each member is the function that
    makes it (both at once, on the first call of either): a model that is run and not
    saved never prints its source nor archives its weights."""
    from functools import cache

    from .generator.artifacts import LARGE_CONSTANT_ELEMENTS
    from .grammar.weights_file import has_external

    @cache
    def made() -> dict[str, bytes]:
        from .api import print_program
        from .grammar.weights_file import externalize

        printed, weights = externalize(program, SOURCE_WEIGHTS_MEMBER, LARGE_CONSTANT_ELEMENTS, sourced=True)
        out = {SOURCE_MEMBER: print_program(printed, "graph").encode("utf-8")}
        if weights is not None:
            out[SOURCE_WEIGHTS_MEMBER] = weights
        return out

    names = [SOURCE_MEMBER]
    if has_external(program, LARGE_CONSTANT_ELEMENTS, sourced=True):
        names.append(SOURCE_WEIGHTS_MEMBER)
    return {name: (lambda name=name: made()[name]) for name in names}


def compile_object(spec, values: Mapping[str, object], sources: Mapping[str, str | bytes], main: str) -> Path:
    """``sources[main]`` compiled as a build compiles ``spec``'s module (the spec's
    ``compile:``, ``$CC``/``$CFLAGS``, its libraries' ``-I`` and the TVM FFI headers)
    into a cached position-independent object, unlinked: for a caller that links the
    module into another program (byoc.tvm, into TVM's exported library)."""
    from .runtime.build import build_artifacts, spec_text_of, support_paths
    from .spec.requirements import compile_flags

    include_flags = compile_flags(spec.linkages())
    return build_artifacts(
        sources,
        main,
        spec.compile,
        values,
        include_flags=include_flags,
        spec_text=spec_text_of(spec),
        object_file=True,
        shown_as=support_paths(spec),
    )


def _own_artifacts(name: str, artifacts) -> tuple[list, object]:
    """Backend ``name``'s module, headers, support sources and weights, and its module."""
    from .generator.artifacts import Role

    roles = (Role.MODULE, Role.HEADER, Role.SUPPORT, Role.WEIGHTS)
    own = [a for a in artifacts if a.backend == name and a.role in roles]
    return own, next(a for a in own if a.role is Role.MODULE)


def module_sources(name: str, artifacts) -> tuple[str, dict, dict[str, str], dict[str, str]]:
    """``(main, sources, support, digests)`` of the module of backend ``name`` among
    ``artifacts`` (a generation's): its module's file name; its module, headers and
    weights by name (text, or bytes); byoc's support files it links (byoc_entry.c, ...
    with byoc_module.h); and the SHA-256 of each weights file, which the generator
    computed already."""
    from .generator.artifacts import Role
    from .generator.c.support_files import FILE_NAMES

    own, module = _own_artifacts(name, artifacts)
    sources = {a.name: a.content for a in own if a.role is not Role.SUPPORT}
    support = {a.name: a.text for a in own if a.name in FILE_NAMES}
    digests = {a.name: a.digest for a in own if a.digest is not None}
    return module.name, sources, support, digests


def build_backend_module(spec, artifacts, values: Mapping[str, object], *, cache: Path | None = None) -> Path:
    """The library of the module of backend ``spec`` among ``artifacts`` (a generation's,
    whose own ones are its module, headers, support files and weights), its flags
    filled by ``values`` (``spec.template_values(options)``). The support sources
    (the spec's, and byoc's byoc_entry.c, ... with byoc_module.h) are compiled once each
    into cached objects that the library links (:func:`byoc.runtime.build.support_objects`)."""
    from .runtime.build import build_spec_module

    main, sources, support, digests = module_sources(spec.name, artifacts)
    return build_spec_module(spec, sources, main, values, support=support, cache=cache, digests=digests)


def compile_modules(
    specs, artifacts, options, progress: Callable[[str], None] | None = None
) -> dict[str, Path]:
    """Compile the module of every compiled backend, all at once (one compiler per core):
    the library of each. ``progress`` (a terminal's, say) hears of a compilation that
    takes longer than :data:`QUIET_SECONDS`: which modules, and each one's end."""
    from concurrent.futures import FIRST_COMPLETED, ThreadPoolExecutor, wait

    jobs = {}
    start = perf_counter()
    compiled = {name: spec for name, spec in specs.items() if spec.kind.compiled}
    with ThreadPoolExecutor(max_workers=max(1, min(len(compiled), os.cpu_count() or 1))) as pool:
        for name, spec in compiled.items():
            values = spec.template_values(options[name])
            jobs[pool.submit(build_backend_module, spec, artifacts, values)] = name
        pending = set(jobs)
        done, pending = wait(pending, timeout=QUIET_SECONDS)
        if pending and progress is not None:
            names = ", ".join(sorted(jobs[f] for f in pending))
            progress(f"compiling {names} ({len(pending)} of {len(jobs)} modules)")
            while pending:
                done, pending = wait(pending, return_when=FIRST_COMPLETED)
                for f in done:
                    if f.exception() is None:
                        seconds = perf_counter() - start
                        progress(f"{jobs[f]} compiled after {seconds:.1f} s; {len(pending)} left")
        return {name: Path(f.result()) for f, name in jobs.items()}


def _library_bytes(path: Path) -> Callable[[], bytes]:
    """The function that reads the built library at ``path`` (a cache entry) for a
    bundle; a RuntimeFailure if the cache lost it since the build."""
    from .errors import RuntimeFailure

    def read() -> bytes:
        try:
            return path.read_bytes()
        except OSError as exc:
            raise RuntimeFailure(
                f"cannot read the built library {path}: {exc.strerror or exc}",
                hint="the cache entry was removed after the build (byoc cache clear or prune?); build again",
            ) from None

    return read


def _package_module(
    name,
    spec,
    artifacts,
    lowered,
    library: Path | None,
    members: dict[str, bytes | Callable[[], bytes]],
    built: dict[str, Path],
) -> ModuleEntry:
    from .runtime.interface import Signature
    from .runtime.manifest import ENTRY_TYPES, LibraryEntry

    own, module = _own_artifacts(name, artifacts)
    kind = spec.kind
    if kind.compiled:
        lib_name = f"lib{name}.so"
        members[lib_name] = _library_bytes(Path(library))  # read only if the model is saved
        built[lib_name] = Path(library)
        functions = {
            fn.name: Signature(tuple(p.type for p in fn.params), fn.output_types)
            for fn in lowered.externals_for(name)
        }
        sources = tuple(a.name for a in own)
        return LibraryEntry(name, lib_name, functions, sources, tuple(spec.requires.values()))
    entry_type = ENTRY_TYPES.get(kind.name) if kind.name_table is not None else None
    if entry_type is None:
        raise UsageError(f"backend {name}: codegen kind {kind.name!r} cannot be built")
    # An interpreted kind's module format has the kind's name (json, examplejson); its
    # entry carries the op-name table the runtime reads back (kernels, tokens).
    return entry_type(name, module.name, spec.op_names())
