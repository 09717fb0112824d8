"""Validate spec files of either shape: backend specs and op catalogs (``byoc check``)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

from byoc.catalog import Catalog
from byoc.errors import UsageError

from .backend_loader import is_backend_doc, load_backend_doc
from .ops_loader import SHIPPED_OPS, load_catalog_text
from .search import SpecPath, spec_dirs
from .yaml_doc import YamlDoc

SPEC_SUFFIXES = (".yaml", ".yml")


def check_spec_file(path: str | Path, catalog: Catalog | None = None) -> str:
    """Validate one spec file; return what it is (for the ``ok`` line) or raise SpecError.

    A file with a ``kind`` or ``name`` key is a backend spec, checked against
    ``catalog`` (default: the shipped one); any other file is an op catalog.
    """
    doc = YamlDoc(path)
    if is_backend_doc(doc):
        spec = load_backend_doc(doc, catalog)
        return f"backend {spec.name} ({spec.kind.name}, {len(spec.ops)} ops)"
    ops = load_catalog_text(doc)
    return f"op catalog ({len(ops)} ops)"


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
    return sorted(f for f in directory.iterdir() if f.suffix in SPEC_SUFFIXES and f.is_file())
