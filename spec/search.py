"""Find backend specs: the user's spec directories first, then the shipped ones.

The search path is, in order:

1. the directories given with ``--spec-path DIR`` (or ``spec_path=`` in the API);
2. the directories of the ``BYOC_SPEC_PATH`` environment variable, separated by
   ``os.pathsep`` (``:`` on POSIX);
3. the shipped ``spec/backends/``.

Every ``*.yaml`` file of a directory is a backend spec named by its file name, except
``ops.yaml``, the directory's op catalog; so is ``<name>/<name>.yaml``, a backend in a
folder of its own beside the C files it lists (``support:``, :mod:`byoc.spec.support`). The first directory that has a name wins,
so a user's ``ccompiler.yaml`` replaces the shipped one. The op catalog of a search
path (:func:`load_catalog_on_path`) is the shipped ``spec/ops.yaml`` extended by the
``ops.yaml`` of every directory, in the same order; backend specs found on a path are
checked against it.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field, replace
from functools import lru_cache
from pathlib import Path

from byoc.catalog import Catalog
from byoc.errors import Location, SpecError, UsageError
from byoc.input_files import file_kind, not_regular

from .backend import BackendSpec
from .ops_loader import USER_CATALOG, load_catalog, load_user_catalogs
from .support import sibling_statuses
from .validated_cache import validated

SHIPPED_BACKENDS = Path(__file__).with_name("backends")
ENV_VAR = "BYOC_SPEC_PATH"
SUFFIX = ".yaml"

SpecPath = str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None


def spec_dirs(spec_path: SpecPath = None, *, env: bool = True) -> list[Path]:
    """The directories searched for backend specs, in order (see the module doc)."""
    return [d for d, _ in _search_dirs(spec_path, env)]


def _search_dirs(spec_path: SpecPath, env: bool) -> list[tuple[Path, str | None]]:
    """The search directories, each with where it came from (None: shipped)."""
    dirs: list[tuple[Path, str | None]] = []
    given = [spec_path] if isinstance(spec_path, (str, os.PathLike)) else list(spec_path or ())
    for d in given:
        dirs.append((_directory(d, "--spec-path"), "--spec-path"))
    if env:
        for d in os.environ.get(ENV_VAR, "").split(os.pathsep):
            if d.strip():
                dirs.append((_directory(d, ENV_VAR), f"${ENV_VAR}"))
    dirs.append((SHIPPED_BACKENDS, None))
    unique: dict[Path, str | None] = {}
    for d, origin in dirs:
        unique.setdefault(d, origin)
    return list(unique.items())


def _directory(d: str | os.PathLike[str], source: str) -> Path:
    path = Path(d).expanduser()
    if not path.is_dir():
        raise UsageError(
            f"spec directory {str(d)!r} (from {source}) does not exist or is not a directory",
            hint="pass a directory that holds <backend>.yaml files",
        )
    return path.resolve()


def display_path(path: str | os.PathLike[str], origin: str | None = None) -> str:
    """How generated files name the spec file ``path``, the same on every machine:
    ``spec/backends/<name>.yaml (shipped with byoc)``, else relative to the directory
    it was found in, e.g. ``my_specs/<name>.yaml (from --spec-path)``."""
    p = Path(path)
    try:
        return f"spec/backends/{p.resolve().relative_to(SHIPPED_BACKENDS.resolve())} (shipped with byoc)"
    except ValueError:
        pass
    shown = f"{p.parent.name}/{p.name}" if p.parent.name else p.name
    return f"{shown} (from {origin})" if origin else shown


def _search(spec_path: SpecPath) -> dict[str, tuple[Path, str]]:
    """Every backend name on the search path: its file and display path, sorted by name."""
    found: dict[str, tuple[Path, str]] = {}
    for d, origin in _search_dirs(spec_path, True):
        for name, f in backend_files(d).items():
            if name not in found:
                found[name] = (f, display_path(f, origin))
    return dict(sorted(found.items()))


def backend_files(d: Path) -> dict[str, Path]:
    """The backend specs of directory ``d`` by name: each ``<name>.yaml``, and each
    ``<name>/<name>.yaml`` (a backend in a folder of its own, beside its C files:
    :mod:`byoc.spec.support`). A name defined both ways is a SpecError."""
    files = {f.stem: f for f in sorted(d.glob(f"*{SUFFIX}")) if f.name != USER_CATALOG and is_spec_file(f)}
    try:
        folders = sorted(p for p in d.iterdir() if p.is_dir())
    except OSError:
        folders = []
    for folder in folders:
        f = folder / f"{folder.name}{SUFFIX}"
        if folder.name == Path(USER_CATALOG).stem or not is_spec_file(f):
            continue
        if folder.name in files:
            raise SpecError(
                f"backend {folder.name} is defined twice: here and in {files[folder.name]}",
                Location(str(f), 1, 1),
                hint=f"keep one: {folder.name}{SUFFIX}, or the folder {folder.name}/ with its C files",
            )
        files[folder.name] = f
    return files


def find_backends(spec_path: SpecPath = None) -> dict[str, Path]:
    """Every backend name on the search path and the file that defines it, sorted by name."""
    return {name: f for name, (f, _) in _search(spec_path).items()}


def _find(name: str, spec_path: SpecPath) -> tuple[Path, str]:
    found = _search(spec_path)
    if name not in found:
        raise UsageError(
            f"unknown backend {name!r}",
            hint=f"known backends: {', '.join(found) or 'none'}; add <name>.yaml to a --spec-path directory",
        )
    return found[name]


def catalog_files(spec_path: SpecPath = None) -> list[Path]:
    """The user op catalogs (``ops.yaml``) of the search path's directories, in search order."""
    return [d / USER_CATALOG for d, _ in _search_dirs(spec_path, True) if is_spec_file(d / USER_CATALOG)]


def is_spec_file(path: Path) -> bool:
    """Whether the spec directory entry ``path`` is there: a regular file (links followed);
    False if it is absent (or a dangling link). Anything else, a directory, a FIFO or a
    device named like a spec, is a located SpecError rather than silently skipped."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        return False
    except (OSError, ValueError) as exc:
        raise SpecError(
            f"cannot read spec file: {getattr(exc, 'strerror', None) or exc}", Location(str(path), 1, 1)
        ) from None
    kind = file_kind(st.st_mode)
    if kind is not None:
        raise not_regular(
            "spec file",
            kind,
            lambda message, hint=None: SpecError(message, Location(str(path), 1, 1), hint=hint),
        )
    return True


def load_catalog_on_path(spec_path: SpecPath = None) -> Catalog:
    """The op catalog of the search path: the shipped one extended by :func:`catalog_files`."""
    return load_user_catalogs(catalog_files(spec_path))


def load_backend(name: str, spec_path: SpecPath = None, *, catalog: Catalog | None = None) -> BackendSpec:
    """The validated backend spec ``name``, from the first directory of the search path that has it,
    checked against ``catalog`` (default: :func:`load_catalog_on_path` of the same path)."""
    path, shown = _find(name, spec_path)
    if catalog is None:
        catalog = load_catalog_on_path(spec_path)
    return load_backend_path(path, catalog=catalog, shown_as=shown)


def load_backend_path(
    path: str | Path, *, catalog: Catalog | None = None, shown_as: str | None = None
) -> BackendSpec:
    """Load one spec file, checked against ``catalog`` (default: the shipped one).

    Cached per file, modification time and catalog content (:attr:`Catalog.key`), and
    kept in the disk cache (:mod:`.validated_cache`); a catalog built in code (no key)
    is not cached. ``shown_as`` is the spec's
    ``display_path`` (default: :func:`display_path` of ``path``).
    """
    shown = shown_as or display_path(path)
    catalog = load_catalog() if catalog is None else catalog
    if not catalog.key:
        return replace(_validate(path, catalog), display_path=shown)
    p = Path(path)
    try:
        mtime = p.stat().st_mtime_ns
    except OSError:
        raise UsageError(f"cannot read spec file {str(p)!r}") from None
    return _load_cached(str(p), (mtime, *sibling_statuses(p)), shown, _Keyed(catalog.key, catalog))


@dataclass(frozen=True)
class _Keyed:
    """A catalog as a cache key: by its content digest alone."""

    key: str
    catalog: Catalog = field(compare=False, hash=False)


def _validate(path: str | Path, catalog: Catalog) -> BackendSpec:
    """The spec file ``path`` validated (the validators are imported only when a spec
    is not found validated in the disk cache)."""
    from .backend_loader import load_backend_file

    return load_backend_file(path, catalog)


@lru_cache(maxsize=64)
def _load_cached(path: str, mtimes: tuple, shown: str, catalog: _Keyed) -> BackendSpec:
    spec = validated("backend", path, catalog.key, lambda: _validate(path, catalog.catalog), BackendSpec)
    return replace(spec, display_path=shown)


def list_backends(spec_path: SpecPath = None, *, catalog: Catalog | None = None) -> list[BackendSpec]:
    """Every backend on the search path, validated (against ``catalog``, default the path's),
    sorted by name; raises on the first bad one."""
    if catalog is None:
        catalog = load_catalog_on_path(spec_path)
    return [load_backend_path(p, catalog=catalog) for p in find_backends(spec_path).values()]


__all__: Sequence[str] = (
    "ENV_VAR",
    "SHIPPED_BACKENDS",
    "backend_files",
    "catalog_files",
    "display_path",
    "find_backends",
    "list_backends",
    "load_backend",
    "load_catalog_on_path",
    "load_backend_path",
    "spec_dirs",
)
