"""byoc: declarative, spec-driven code generation for ML compilers' bring-your-own-codegen flow.

The public API (``byoc.parse`` and friends) is loaded lazily so that importing a
core module such as ``byoc.ir`` never pulls in the front ends or the generators.
"""

from __future__ import annotations

__version__ = "0.1.0"

_API = ("parse", "parse_file", "print_program", "evaluate", "load_catalog", "load_backend", "list_backends")


def __getattr__(name: str):
    if name in _API:
        from . import api

        return getattr(api, name)
    if name == "build":
        from .building import build

        return build
    raise AttributeError(f"module 'byoc' has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted([*globals(), *_API, "build"])
