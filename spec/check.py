"""Validate spec files of either shape: backend specs and op catalogs (``byoc check``)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from byoc.catalog import Catalog
from byoc.errors import UsageError

from .backend import BackendSpec
from .backend_loader import is_backend_doc, load_backend_doc
from .ops_loader import SHIPPED_OPS, USER_CATALOG, load_catalog_text, load_user_catalogs
from .search import SpecPath, catalog_files, is_spec_file, spec_dirs
from .yaml_doc import YamlDoc

SPEC_SUFFIXES = (".yaml", ".yml")


def check_spec_file(path: str | Path, catalog: Catalog | None = None, *, spec_path: SpecPath = None) -> str:
    """Validate one spec file; return what it is or raise SpecError (:func:`check_spec`)."""
    return check_spec(path, catalog, spec_path=spec_path)[0]


def check_spec(
    path: str | Path, catalog: Catalog | None = None, *, spec_path: SpecPath = None
) -> tuple[str, BackendSpec | None]:
    """Validate one spec file; return what it is (for the ``ok`` line) and, for a
    backend spec, the spec; or raise SpecError.

    - A file named ``ops.yaml``, other than the shipped one, is a spec directory's op
      catalog: checked as an extension of the shipped catalog, with the catalogs of
      the search path after it.
    - A file with a ``kind`` or ``name`` key is a backend spec, checked against
      ``catalog`` (default: the shipped one extended by the ``ops.yaml`` beside the
      file and those of the search path).
    - Any other file is a complete op catalog.
    """
    p = Path(path)
    if p.name == USER_CATALOG and not _same_file(p, SHIPPED_OPS):
        merged = load_user_catalogs(_first(p, catalog_files(spec_path)))
        added = sum(1 for op in merged.values() if op.loc is not None and op.loc.file == str(p))
        documented = sum(1 for loc in merged.doc_locations.values() if loc.file == str(p))
        return f"op catalog of a spec directory (adds {added} op(s), changes the doc of {documented})", None
    doc = YamlDoc(p)
    if doc.root is None:
        raise doc.error(
            "the file is empty: neither a backend spec nor an op catalog",
            hint="a backend spec has `version`, `name`, `kind` and `ops`; an op catalog `version` and `ops`",
        )
    if is_backend_doc(doc):
        if catalog is None:
            beside = p.parent / USER_CATALOG
            on_path = catalog_files(spec_path)
            catalog = load_user_catalogs(_first(beside, on_path) if is_spec_file(beside) else on_path)
        spec = load_backend_doc(doc, catalog)
        return f"backend {spec.name} ({spec.kind.name}, {len(spec.ops)} ops)", spec
    ops = load_catalog_text(doc)
    return f"op catalog ({len(ops)} ops)", None


def _same_file(a: Path, b: Path) -> bool:
    return a.resolve() == b.resolve()


def _first(path: Path, others: list[Path]) -> list[Path]:
    """``path``, then ``others`` without it."""
    return [path, *(f for f in others if not _same_file(f, path))]


def spec_files(paths: Iterable[str | Path], spec_path: SpecPath = None) -> list[Path]:
    """The files ``byoc check`` validates: each path, or each spec file of a directory.

    With no paths: the shipped op catalog and every spec on the search path.
    """
    given = list(paths)
    if not given:
        return [SHIPPED_OPS] + [f for d in spec_dirs(spec_path) for f in _specs_in(d)]
    out: list[Path] = []
    for p in map(Path, given):
        if p.is_dir():
            found = _specs_in(p)
            if not found:
                raise UsageError(f"no spec files (*.yaml) in directory {str(p)!r}")
            out.extend(found)
        else:
            out.append(p)
    return out


def _specs_in(directory: Path) -> list[Path]:
    """The spec files of ``directory``: each ``*.yaml``, and each ``<name>/<name>.yaml``
    (a backend in a folder of its own, beside its support C)."""
    files = [f for f in directory.iterdir() if f.suffix in SPEC_SUFFIXES and is_spec_file(f)]
    folders = [d / f"{d.name}{suffix}" for d in directory.iterdir() if d.is_dir() for suffix in SPEC_SUFFIXES]
    return sorted([*files, *(f for f in folders if is_spec_file(f))])
