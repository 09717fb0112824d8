"""Whether a backend's libraries (its spec's ``requires:``) are installed here.

Tests of a library backend skip, with the install hint, when its library is missing,
so that the suite passes without the optional extras (tests/test_without_libraries.py
checks that in a subprocess with the libraries hidden)."""

from __future__ import annotations

from byoc.api import load_backend


def missing_library(backend: str) -> str | None:
    """Why ``backend`` cannot build here (a library and its install hint), or None."""
    return load_backend(backend).missing_library()
