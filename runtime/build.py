"""Compile generated C and C++ into shared libraries, with a content-addressed cache.

* The compiler and its flags are a :class:`~byoc.runtime.toolchain.Toolchain`: the
  language's compiler variable (``$CC``, ``$CXX``) over the spec's compiler, its flags
  variable (``$CFLAGS``, ``$CXXFLAGS``) after the spec's flags, so it wins.
* Include paths and ``libtvm_ffi`` come from ``tvm_ffi.libinfo``. A backend's
  libraries (its spec's ``requires:``, located by the caller) add their ``-I`` flags
  to the compile flags and their ``-L``, ``-Wl,-rpath`` and ``-l`` flags after the
  objects, before ``-ltvm_ffi``; both are part of the cache key. So do the objects of
  the support files a module links (:func:`support_objects`), each compiled once.
* Libraries are cached under ``$BYOC_CACHE_DIR``, else ``$XDG_CACHE_HOME/byoc``, else
  ``~/.cache/byoc``, keyed by a sha256 of the sources, the command line, the
  compiler's ``--version`` banner and the tvm_ffi version. An entry is the directory
  ``<root>/<xx>/<key>/`` holding ``lib<main>.so``, its ``.sha256`` and ``src/`` (the
  text sources it was built from: the module and its headers). The binary files of its
  large constants, which the assembler's ``.incbin`` reads (the compiler runs in
  ``src/``), are removed once the library holds their bytes, so that the cache keeps
  the weights once; every file's bytes are part of the key.
* A build happens in a private directory under ``<root>/tmp/`` that is renamed into
  place as a whole, so processes that build the same source at once never see a
  partial entry: the first rename wins and the others use its library. An entry
  whose library no longer matches its sha256, or is not a whole shared object for
  this machine (:mod:`byoc.runtime.elf_check`: cut short with its digest recomputed),
  is moved aside and rebuilt. A found entry is touched (its last use), and a new one
  may make the cache evict its least recently used entries
  (:mod:`byoc.runtime.cache_store`, ``$BYOC_CACHE_MAX``).
* Every compiler process reads nothing: its standard input is ``/dev/null`` (a flag
  such as ``-x c -`` or a wrapper script that reads it cannot hang a build).
* :func:`build_spec_module` compiles a spec's module with its ``requires:`` libraries
  and loads the result with every symbol bound, so a missing symbol is a BuildError.
* A compiler error is a :class:`BuildError` with the compiler's message and the
  generated lines around the first error; a missing compiler is one that says how
  to install one or set ``$CC`` / ``$CXX``. Neither leaves anything in the cache.

This module never imports ``byoc.generator`` (nor the spec loader: only the language
table, when a toolchain is made).
"""

from __future__ import annotations

import errno
import hashlib
import logging
import os
import shlex
import shutil
import subprocess
import tempfile
import time
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING

from byoc.disk_cache import cache_dir, cached, entry_key
from byoc.errors import BuildError
from byoc.spec_lines import SpecText

from .cache_store import checked_stamp, file_sha256, intact, prune_after_build, touch
from .compiler_errors import compiler_excerpt, failure_hint
from .toolchain import Toolchain, spec_toolchain

if TYPE_CHECKING:
    from byoc.spec.backend import BackendSpec, CompileSettings
    from byoc.spec.requirements import Linkage

log = logging.getLogger(__name__)

FORMAT = "byoc-build-3"
"""Part of every cache key; bump it when the command line or entry layout changes."""
TIMEOUT = 600
HEADER_SUFFIXES = (".h", ".hpp", ".hh")
"""A support file with one of these suffixes is a header; any other is compiled."""
INSTALL_HINT = "install a C/C++ compiler (Debian/Ubuntu: apt-get install build-essential; Fedora: dnf install gcc gcc-c++; macOS: xcode-select --install)"


@dataclass(frozen=True, slots=True)
class KnownBytes:
    """A bytes source known by its size and SHA-256 alone (a large constant of a build
    that the cache remembers, :mod:`byoc.build_records`): enough to find its library
    with ``lookup_only``, never to compile it."""

    size: int
    digest: str


def build_artifacts(
    sources: Mapping[str, str | bytes],
    main: str,
    settings: CompileSettings,
    values: Mapping[str, object],
    *,
    include_flags: Sequence[str] = (),
    link_flags: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    cache: Path | None = None,
    spec_text: SpecText | None = None,
    object_file: bool = False,
    shown_as: Mapping[str, str] | None = None,
    digests: Mapping[str, str] | None = None,
    lookup_only: bool = False,
) -> Path | None:
    """Compile a backend's module artifact ``sources[main]`` (the other sources are
    headers it includes, or bytes its ``.incbin`` directives read) as its spec's
    ``compile:`` settings say, and return the path of the cached library (with
    ``object_file``, of a cached position-independent object, unlinked). ``digests``
    gives the SHA-256 of bytes sources whose maker computed it (:func:`build_library`).

    ``values`` fills the flag templates: ``spec.template_values(options)``, i.e. the
    option values plus ``backend`` and ``symbol_prefix`` (option values alone do when
    the flags use only options). ``include_flags`` and ``link_flags`` are those of the
    backend's located libraries (``-I...``; ``-L...``, ``-Wl,-rpath,...``, ``-l...``).
    ``spec_text`` says where the spec's C copied into the module is in the spec file, so
    that a compiler error there names that line (:mod:`byoc.spec_lines`); ``shown_as``
    maps sources copied from files (a spec's support code, its probe) to their paths, so that an
    error in one names the file's line.
    """
    content = sources.get(main, "")
    size = len(content) if isinstance(content, bytes) else len(content.encode())
    chain = spec_toolchain(
        settings, values, include_flags=include_flags, link_flags=link_flags, env=env, source_bytes=size
    )
    return build_library(
        sources,
        main,
        chain,
        cache=cache,
        spec_text=spec_text,
        object_file=object_file,
        shown_as=shown_as,
        digests=digests,
        lookup_only=lookup_only,
    )


def tvm_ffi_includes() -> tuple[str, ...]:
    """The include directories of the TVM FFI and DLPack headers every module includes."""
    return _tvm_ffi_paths()[0]


def spec_text_of(spec: BackendSpec) -> SpecText:
    """Where ``spec``'s prelude and macro bodies are in their files (a body written as
    a literal block in the spec, or read from a C file beside it)."""
    first = spec.template_lines.get("prelude")
    prelude = None if first is None else (first, len(spec.templates.get("prelude", "").splitlines()))
    file = spec.source or f"the spec of backend {spec.name}"
    bodies = {
        m.name: (m.body_file or file, m.body_line) for m in spec.macros.values() if m.body_line is not None
    }
    return SpecText(file, prelude, bodies)


def build_spec_module(
    spec: BackendSpec,
    sources: Mapping[str, str | bytes],
    main: str,
    values: Mapping[str, object],
    *,
    linkages: Sequence[Linkage] | None = None,
    cache: Path | None = None,
    read_from: Mapping[str, str] | None = None,
    support: Mapping[str, str] | None = None,
    digests: Mapping[str, str] | None = None,
    lookup_only: bool = False,
) -> Path | None:
    """Compile ``sources[main]`` as ``spec``'s ``compile:`` settings say, with the
    flags of its ``requires:`` libraries (``linkages``, their located
    :class:`~byoc.spec.requirements.Linkage`: located here, a missing one a UsageError
    at the requirement, when not given), and check that the library loads with every
    symbol bound (:func:`~byoc.runtime.native_load.load_now`): a symbol that none of
    the required libraries defines is a BuildError at the requirement, here, and never
    the loader killing the process at the first call. The spec's support headers join
    ``sources`` (unless given), and the objects of its support sources join the link
    (:func:`support_objects`); so do the headers and objects of ``support``, more
    support files of the module (byoc's own: ``byoc_module.h``, ``byoc_entry.c``, ...). ``read_from`` names the file a source was read from (a
    probe's ``{file: NAME}``), so that a compiler error there is located in that file;
    ``digests`` the SHA-256 of bytes sources already hashed (:func:`build_library`);
    with ``lookup_only``, None when the library is not in the cache (nothing compiled)."""
    from byoc.spec.requirements import compile_flags, link_flags

    from .native_load import load_now

    requirements = tuple(spec.requires.values())
    if linkages is None:
        linkages = spec.linkages()
    include_flags = compile_flags(linkages)
    objects = support_objects(spec, values, include_flags, cache=cache)
    if support:
        objects += support_objects(spec, values, include_flags, cache=cache, files=support)
    library = build_artifacts(
        {**support_headers(spec, support), **sources},
        main,
        spec.compile,
        values,
        include_flags=include_flags,
        link_flags=[*objects, *link_flags(linkages)],
        cache=cache,
        spec_text=spec_text_of(spec),
        shown_as={**support_paths(spec), **(read_from or {})},
        digests=digests,
        lookup_only=lookup_only,
    )
    if library is None:  # lookup_only, and not in the cache
        return None
    load_now(
        library,
        what=f"the library built for backend {spec.name}",
        requirements=requirements,
        error=BuildError,
        located=True,
    )
    return library


def support_objects(
    spec: BackendSpec,
    values: Mapping[str, object],
    include_flags: Sequence[str] | None = None,
    *,
    cache: Path | None = None,
    files: Mapping[str, str] | None = None,
) -> list[str]:
    """The cached object of each C source among ``files`` (name -> text; by default the
    files of ``spec``'s ``support:`` list, :mod:`byoc.spec.support`), compiled with the
    headers among them beside it and the flags ``spec``'s modules get (``include_flags``:
    its libraries' ``-I``, located here when not given), for their libraries to link: one
    compilation per file version, compiler and flags, whatever the graphs. A generated
    module's support files are the spec's and byoc's own (``byoc_entry.c``, ...)."""
    if include_flags is None:
        from byoc.spec.requirements import compile_flags

        include_flags = compile_flags(spec.linkages())
    if files is None:
        files = {f.name: f.text for f in spec.support}
    headers = _headers(files)
    where = support_paths(spec)

    def build(name: str) -> str:
        sources = {**headers, name: files[name]}
        return str(
            build_artifacts(
                sources,
                name,
                spec.compile,
                values,
                include_flags=include_flags,
                cache=cache,
                object_file=True,
                shown_as=where,
            )
        )

    names = [name for name in files if name not in headers]
    if len(names) < 2:
        return [build(name) for name in names]
    # compiled side by side (a cold build waits for one compiler, not one per file)
    with ThreadPoolExecutor(max_workers=min(len(names), os.cpu_count() or 1)) as pool:
        return list(pool.map(build, names))


def support_headers(spec: BackendSpec, support: Mapping[str, str] | None = None) -> dict[str, str]:
    """The headers among ``spec``'s support files and ``support``, by name."""
    return _headers({**{f.name: f.text for f in spec.support}, **(support or {})})


def _headers(files: Mapping[str, str]) -> dict[str, str]:
    """The headers among support ``files`` (:data:`HEADER_SUFFIXES`), by name."""
    return {name: text for name, text in files.items() if name.endswith(HEADER_SUFFIXES)}


def support_paths(spec: BackendSpec) -> dict[str, str]:
    """Each support file of ``spec`` by name -> the path it was read from (for errors)."""
    return {f.name: f.path for f in spec.support}


@lru_cache(maxsize=16)
def compiler_version(compiler: tuple[str, ...], env_var: str = "CC") -> str:
    """The compiler's ``--version`` banner (part of the cache key); raises BuildError if missing.

    Running the compiler costs a process start in every byoc process, so the banner is
    kept in the disk cache, keyed by the command and the resolved executable's path,
    size and modification time: replacing or upgrading the compiler changes the key."""
    found = shutil.which(compiler[0])
    if found is None:
        raise BuildError(
            f"C/C++ compiler {compiler[0]!r} not found",
            hint=f"{INSTALL_HINT}, or set ${env_var} to the compiler to use",
        )
    real = os.path.realpath(found)
    try:
        stat = os.stat(real)
    except OSError as exc:
        raise BuildError(
            f"cannot run {compiler[0]}: {exc.strerror or exc}", hint=f"check ${env_var}"
        ) from None

    def banner() -> str:
        try:
            proc = subprocess.run(
                [*compiler, "--version"], stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=60
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise BuildError(f"cannot run {compiler[0]}: {exc}", hint=f"check ${env_var}") from None
        return proc.stdout.strip() or proc.stderr.strip()

    key = entry_key("compiler", *compiler, real, str(stat.st_size), str(stat.st_mtime_ns))
    return cached("compiler", key, banner, expect=str)


def _tvm_ffi_paths() -> tuple[tuple[str, ...], str, str]:
    """(include dirs, libtvm_ffi's directory, tvm_ffi version)."""
    import tvm_ffi
    import tvm_ffi.libinfo as info

    includes = tuple(dict.fromkeys((info.find_include_path(), info.find_dlpack_include_path())))
    return includes, os.path.dirname(info.find_libtvm_ffi()), str(tvm_ffi.__version__)


def build_library(
    sources: Mapping[str, str | bytes],
    main: str,
    chain: Toolchain,
    *,
    cache: Path | None = None,
    spec_text: SpecText | None = None,
    object_file: bool = False,
    shown_as: Mapping[str, str] | None = None,
    digests: Mapping[str, str] | None = None,
    lookup_only: bool = False,
) -> Path | None:
    """Compile ``sources[main]`` (other entries are headers it includes, or the bytes
    of files its ``.incbin`` directives read) into a cached
    shared library and return its path; with ``object_file``, into a cached
    position-independent object (``<main stem>.o``, not linked: for another program's
    link, such as TVM's ``export_library``). Raises BuildError with the compiler's
    message and the generated lines around the first error.

    The cache key holds the text sources and the SHA-256 of the bytes ones: from
    ``digests`` where their maker computed it already (a model's weights, hashed
    once for the comment that names them), else computed here. A :class:`KnownBytes`
    source gives both; it needs ``lookup_only``: then the path is None when the
    library is not in the cache, and nothing is compiled."""
    for name in sources:
        if not name or name in (".", "..") or "/" in name or "\\" in name or "\0" in name:
            raise BuildError(f"source name {name!r} is not a plain file name")
    if main not in sources:
        raise BuildError(f"no source {main!r} to compile", hint=f"sources: {', '.join(sources)}")
    includes, libdir, ffi_version = _tvm_ffi_paths()
    version = compiler_version(chain.compiler, chain.env_var)
    key = hashlib.sha256()
    parts = (
        FORMAT,
        chain.language,
        version,
        ffi_version,
        *chain.compiler,
        "--",
        *chain.flags,
        "--",
        *chain.link,
        "--",
        *(("object",) if object_file else ()),
    )
    for part in (*parts, *includes, libdir, main):
        key.update(part.encode() + b"\0")
    for name in sorted(sources):
        content = sources[name]
        if isinstance(content, KnownBytes):
            if not lookup_only:
                raise BuildError(f"source {name!r} is known by its digest alone, so it cannot be compiled")
            data, kind = content.digest.encode(), b"b" + str(content.size).encode()
        elif isinstance(content, bytes):
            digest = (digests or {}).get(name) or hashlib.sha256(content).hexdigest()
            data, kind = digest.encode(), b"b" + str(len(content)).encode()
        else:
            data = content.encode()
            kind = b"t" + str(len(data)).encode()
        key.update(name.encode() + b"\0" + kind + b"\0" + data + b"\0")
    digest = key.hexdigest()
    root = cache if cache is not None else cache_dir()
    entry = root / digest[:2] / digest
    library = entry / (f"{Path(main).stem}.o" if object_file else f"lib{Path(main).stem}.so")
    if intact(library):
        touch(entry)  # its last use, for least-recently-used eviction
        log.debug("%s: cache hit, %s", main, entry)
        return library
    if lookup_only:
        return None
    log.debug("%s: cache miss, compiling into %s", main, entry)
    staging: Path | None = None
    try:
        (root / "tmp").mkdir(parents=True, exist_ok=True)
        staging = Path(tempfile.mkdtemp(prefix="build.", dir=root / "tmp"))
        _compile(sources, main, chain, staging, library.name, includes, libdir, spec_text, shown_as)
        published = _publish(staging, entry, library, root)
        prune_after_build(root)
        return published
    except OSError as exc:
        raise BuildError(
            f"cannot write the build cache {root}: {exc.strerror or exc}",
            hint="set $BYOC_CACHE_DIR to a writable directory",
        ) from None
    finally:
        if staging is not None:
            shutil.rmtree(staging, ignore_errors=True)


def _compile(
    sources: Mapping[str, str | bytes],
    main: str,
    chain: Toolchain,
    staging: Path,
    lib_name: str,
    includes: Sequence[str],
    libdir: str,
    spec_text: SpecText | None = None,
    shown_as: Mapping[str, str] | None = None,
) -> None:
    """Compile into ``staging``: ``src/`` holds the sources; the library and its
    sha256 go next to it. The compiler runs in ``src/``, where the assembler finds the
    files that ``.incbin`` names (every other path on the command line is absolute)."""
    src = staging / "src"
    src.mkdir()
    for name, content in sources.items():
        if isinstance(content, bytes):
            (src / name).write_bytes(content)
        else:
            (src / name).write_text(content, encoding="utf-8")
    out = staging / lib_name
    first = chain.compiler[0]  # a relative path to the compiler names it from here, not from src/
    compiler = (os.path.abspath(first) if os.sep in first else first, *chain.compiler[1:])
    object_file = lib_name.endswith(".o")
    cmd = [
        *compiler,
        *chain.flags,
        "-c" if object_file else "-shared",
        "-fPIC",
        *(f"-I{d}" for d in includes),
        f"-I{src}",
        str(src / main),
        "-o",
        str(out),
    ]
    if not object_file:  # the libraries after the objects that need them (support objects are in link)
        cmd += [*chain.link, f"-L{libdir}", "-ltvm_ffi", f"-Wl,-rpath,{libdir}"]
    log.debug("compile command (in %s): %s", src, shlex.join(cmd))
    started = time.perf_counter()
    try:
        proc = subprocess.run(
            cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=TIMEOUT, cwd=src
        )
    except OSError as exc:
        raise BuildError(
            f"cannot run {chain.compiler[0]}: {exc.strerror or exc}", hint=f"check ${chain.env_var}"
        ) from None
    except subprocess.TimeoutExpired:
        raise BuildError(f"{chain.compiler[0]} took longer than {TIMEOUT} s on {main}") from None
    if proc.returncode != 0 or not out.is_file():
        stderr = (proc.stderr or proc.stdout).replace(f"{src}{os.sep}", "")
        excerpt, copied = compiler_excerpt(stderr, sources, main, spec_text, shown_as)
        raise BuildError(
            f"{chain.compiler[0]} failed on the generated {main}:\n{excerpt}",
            copied.location() if copied else None,
            hint=failure_hint(stderr, copied),
        )
    log.info("compiled %s in %.1f s", main, time.perf_counter() - started)
    for name, content in sources.items():  # a large constant's bytes are in the library now
        if isinstance(content, bytes):
            (src / name).unlink()
    digest = file_sha256(out)
    (staging / f"{lib_name}.sha256").write_text(digest + "\n")
    (staging / f"{lib_name}.checked").write_text(checked_stamp(out, digest))  # a rename keeps all three


def _publish(staging: Path, entry: Path, library: Path, root: Path) -> Path:
    """Rename ``staging`` to ``entry``. If another process got there first, use its
    entry when it is valid; move a corrupted one aside and try again. Raises OSError
    when the cache cannot be written."""
    entry.parent.mkdir(parents=True, exist_ok=True)
    for _ in range(5):
        try:
            os.rename(staging, entry)
            return library
        except OSError as exc:
            if exc.errno not in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR):
                raise  # ENOTDIR: a file where the entry directory belongs (corrupted)
        if intact(library):
            return library
        stale = Path(tempfile.mkdtemp(prefix="stale.", dir=root / "tmp"))
        try:
            os.rename(entry, stale / "entry")
        except FileNotFoundError:
            pass  # another process moved it first
        finally:
            shutil.rmtree(stale, ignore_errors=True)
    raise BuildError(f"the cache entry {entry} keeps changing under this build", hint="try again")
