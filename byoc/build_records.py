"""A build of a source file, remembered for the next build of the same source.

A warm ``byoc run`` of BERT-base found its library in the cache, yet generated the
module again to compute the cache key: a second and a half of packing weights into
panels, writing C and hashing 437 MB of constants; the quick start's small graph
spent a third of its warm run (110 of 330 ms) the same way. When the program comes
from the import cache (:mod:`byoc.onnx.import_cache`, whose key names it) or from a
DSL or ExampleJSON file (:func:`text_source_key`), the build keeps a record of what
it made (kind ``record``), under a key of the source's key, the
backends and options, each backend's spec as this machine runs it (the probes'
answers included), the user op catalogs, profiling, byoc's code and the CPU:

* the manifest's module and graph entries;
* every generated member but the weights files of compiled modules, which their
  libraries hold (the modules' C, the host graphs and the weights they read): a few
  megabytes for BERT-base;
* for each compiled module, what its library's cache key is made of: the text
  sources, and the weights files by size and digest (:class:`KnownBytes`).

A build that finds its record computes each library's key again, with this process's
compiler, flags and environment, and takes the library only if the cache holds it
(``lookup_only``); otherwise it generates and compiles as any build does. The
weights files, which a run never reads, are members made again by generation if the
model is saved.
"""

from __future__ import annotations

import functools
import pickle
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from .disk_cache import entry_key, read_entry, write_entry
from .warm_keys import catalog_stamp, code_stamp, machine_stamp, value_digest

KIND = "build-records"
FORMAT = "1"


@dataclass(frozen=True)
class LibraryRecord:
    """What the cache key of one compiled module's library is made of."""

    main: str
    sources: Mapping[str, object]
    """Each source by name: the :class:`~byoc.runtime.build.KnownBytes` of bytes, or
    None for a text, which is the record's member of that name."""
    support: Mapping[str, str]
    options: Mapping[str, object]
    """The backend's option values (the compile flags' templates take them)."""


@dataclass(frozen=True)
class BuildRecord:
    manifest: str
    """The manifest's JSON (without members), as a bundle holds it: its module entries'
    requirements are read back by the spec loader, as a bundle's are."""
    members: Mapping[str, bytes]
    regenerated: tuple[str, ...]
    """The members made again by generation when read (the weights files)."""
    libraries: Mapping[str, LibraryRecord]


def record_key(
    source_key: str, backends: Sequence[str], options, specs, catalog, profile: bool
) -> str | None:
    """The record's key: see the module doc. ``specs`` are the backends' specs as this
    machine runs them (:func:`byoc.building.partition_over`'s). None for a catalog
    built in code (:func:`byoc.warm_keys.catalog_stamp`): no record."""
    stamp = catalog_stamp(catalog)
    spec_digests = [value_digest(spec) for spec in specs]
    if stamp is None or None in spec_digests:
        return None
    return entry_key(
        "build-record",
        FORMAT,
        source_key,
        code_stamp(),
        machine_stamp(),
        repr(tuple(backends)),
        value_digest(sorted((options or {}).items())) or repr(sorted((options or {}).items())),
        *[d or "" for d in spec_digests],
        stamp,
        "profile" if profile else "",
    )


def make_record(generated, libraries: Mapping[str, Path], manifest) -> BuildRecord | None:
    """The record of a generation (:class:`~byoc.generator.pipeline.Generated`) whose
    compiled modules' libraries are ``libraries``, packaged as ``manifest`` (a
    :class:`~byoc.runtime.manifest.Manifest`); None when something in it cannot be
    recorded."""
    from .building import module_sources
    from .generator.artifacts import Role
    from .runtime.build import KnownBytes

    # a compiled module's weights are in its library; the host's and an interpreted
    # module's are read when the model loads, so they are kept
    compiled = {a.name for a in generated.artifacts if a.role is Role.WEIGHTS and a.backend in libraries}
    members = {a.name: a.payload for a in generated.artifacts if a.name not in compiled}
    regenerated = tuple(sorted(compiled))
    out: dict[str, LibraryRecord] = {}
    for name in libraries:
        main, sources, support, digests = module_sources(name, generated.artifacts)
        described: dict[str, object] = {}
        for file, content in sources.items():  # bytes by size and digest, a text by its member
            if isinstance(content, bytes) and file not in digests:
                return None
            described[file] = KnownBytes(len(content), digests[file]) if isinstance(content, bytes) else None
        out[name] = LibraryRecord(main, described, support, dict(generated.options[name]))
    return BuildRecord(manifest.to_json(), members, regenerated, out)


def store(key: str, record: BuildRecord) -> None:
    """Keep ``record`` under ``key``."""
    try:
        data = pickle.dumps(record, protocol=pickle.HIGHEST_PROTOCOL)
    except Exception:  # something of a spec's option values that pickle refuses: no record
        return
    write_entry(KIND, key, data)


def recall(key: str) -> BuildRecord | None:
    """The record stored under ``key``, or None (none, or damaged)."""
    data = read_entry(KIND, key)
    if data is None:
        return None
    try:
        found = pickle.loads(data)
    except Exception:  # damaged: built again, and replaced
        return None
    return found if isinstance(found, BuildRecord) else None


def libraries_of(record: BuildRecord, load_backend: Callable) -> dict[str, Path] | None:
    """The library of each compiled module of ``record``, found in the cache under the
    key this process computes for it; None if any is missing (the build then runs)."""
    from .runtime.build import build_spec_module

    found: dict[str, Path] = {}
    for name, lib in record.libraries.items():
        spec = load_backend(name)
        values = spec.template_values(lib.options)
        sources = {n: record.members[n].decode("utf-8") if s is None else s for n, s in lib.sources.items()}
        path = build_spec_module(spec, sources, lib.main, values, support=lib.support, lookup_only=True)
        if path is None:
            return None
        found[name] = Path(path)
    return found


def regenerating(
    make: Callable[[], Mapping[str, bytes]], names: Sequence[str]
) -> dict[str, Callable[[], bytes]]:
    """The members ``names``, each a function that runs ``make`` (a generation: every
    artifact's payload by name) once, at the first read of any of them."""
    made = functools.cache(make)
    return {name: (lambda name=name: made()[name]) for name in names}


def text_source_key(data: bytes, language: str, file: str, tokens: Mapping[str, str] | None) -> str:
    """The key that names the program parsed from ``data``, the text of the DSL or
    ExampleJSON file ``file``: the text, the file's name (the locations that the
    generated code's comments cite) and the ExampleJSON tokens it was read with. A
    weights file is covered by the text, which names it with its SHA-256 digest (the
    parser checks it)."""
    import hashlib

    return entry_key(
        "text-source",
        FORMAT,
        language,
        file,
        hashlib.sha256(data).hexdigest(),
        value_digest(dict(sorted((tokens or {}).items()))) or "",
    )
