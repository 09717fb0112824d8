"""Whether a backend's libraries (its spec's ``requires:``) are installed here.

Tests of a library backend skip, with the install hint, when its library is missing,
so that the suite passes without the optional extras (tests/test_without_libraries.py
checks that in a subprocess with the libraries hidden)."""

from __future__ import annotations

from byoc.api import load_backend
from byoc.spec.requirements import NotFound


def missing_library(backend: str) -> str | None:
    """Why ``backend`` cannot build here (a library and its install hint), or None."""
    for requirement in load_backend(backend).requires.values():
        try:
            requirement.locate()
        except NotFound as exc:
            return f"backend {backend} needs {requirement.name} ({exc}); {requirement.install}"
    return None
