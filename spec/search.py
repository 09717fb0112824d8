"""Find backend specs: the user's spec directories first, then the shipped ones.

The search path is, in order:

1. the directories given with ``--spec-path DIR`` (or ``spec_path=`` in the API);
2. the directories of the ``BYOC_SPEC_PATH`` environment variable, separated by
   ``os.pathsep`` (``:`` on POSIX);
3. the shipped ``spec/backends/``.

Every ``*.yaml`` file of a directory is a backend spec named by its file name. The
first directory that has a name wins, so a user's ``ccompiler.yaml`` replaces the
shipped one.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from functools import lru_cache
from pathlib import Path

from byoc.catalog import Catalog
from byoc.errors import UsageError

from .backend import BackendSpec
from .backend_loader import load_backend_file

SHIPPED_BACKENDS = Path(__file__).with_name("backends")
ENV_VAR = "BYOC_SPEC_PATH"
SUFFIX = ".yaml"

SpecPath = str | os.PathLike[str] | Iterable[str | os.PathLike[str]] | None


def spec_dirs(spec_path: SpecPath = None, *, env: bool = True) -> list[Path]:
    """The directories searched for backend specs, in order (see the module doc)."""
    dirs: list[Path] = []
    given = [spec_path] if isinstance(spec_path, (str, os.PathLike)) else list(spec_path or ())
    for d in given:
        dirs.append(_directory(d, "--spec-path"))
    if env:
        for d in os.environ.get(ENV_VAR, "").split(os.pathsep):
            if d.strip():
                dirs.append(_directory(d, ENV_VAR))
    dirs.append(SHIPPED_BACKENDS)
    unique: list[Path] = []
    for d in dirs:
        if d not in unique:
            unique.append(d)
    return unique


def _directory(d: str | os.PathLike[str], source: str) -> Path:
    path = Path(d).expanduser()
    if not path.is_dir():
        raise UsageError(
            f"spec directory {str(d)!r} (from {source}) does not exist or is not a directory",
            hint="pass a directory that holds <backend>.yaml files",
        )
    return path.resolve()


def find_backends(spec_path: SpecPath = None) -> dict[str, Path]:
    """Every backend name on the search path and the file that defines it, sorted by name."""
    found: dict[str, Path] = {}
    for d in spec_dirs(spec_path):
        for f in sorted(d.glob(f"*{SUFFIX}")):
            if f.is_file():
                found.setdefault(f.stem, f)
    return dict(sorted(found.items()))


def find_backend(name: str, spec_path: SpecPath = None) -> Path:
    found = find_backends(spec_path)
    if name not in found:
        raise UsageError(
            f"unknown backend {name!r}",
            hint=f"known backends: {', '.join(found) or 'none'}; add <name>.yaml to a --spec-path directory",
        )
    return found[name]


def load_backend(name: str, spec_path: SpecPath = None, *, catalog: Catalog | None = None) -> BackendSpec:
    """The validated backend spec ``name``, from the first directory of the search path that has it.

    With the shipped catalog, results are cached per file and modification time.
    """
    return load_backend_path(find_backend(name, spec_path), catalog=catalog)


def load_backend_path(path: str | Path, *, catalog: Catalog | None = None) -> BackendSpec:
    """Load one spec file; cached per file and modification time unless ``catalog`` is given."""
    if catalog is not None:
        return load_backend_file(path, catalog)
    p = Path(path)
    try:
        mtime = p.stat().st_mtime_ns
    except OSError:
        raise UsageError(f"cannot read spec file {str(p)!r}") from None
    return _load_cached(str(p), mtime)


@lru_cache(maxsize=64)
def _load_cached(path: str, mtime_ns: int) -> BackendSpec:
    return load_backend_file(path)


def list_backends(spec_path: SpecPath = None, *, catalog: Catalog | None = None) -> list[BackendSpec]:
    """Every backend on the search path, validated, sorted by name; raises on the first bad one."""
    return [load_backend_path(p, catalog=catalog) for p in find_backends(spec_path).values()]


__all__: Sequence[str] = (
    "ENV_VAR",
    "SHIPPED_BACKENDS",
    "find_backend",
    "find_backends",
    "list_backends",
    "load_backend",
    "load_backend_path",
    "spec_dirs",
)
