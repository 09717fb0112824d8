"""byoc.generator: IR plus backend specs in, artifacts out.

Each codegen kind has one module with the same entry point::

    generate(externals, spec, catalog, options) -> tuple[Artifact, ...]

``externals`` are one backend's external functions (lowered, with symbols), in
program order; ``options`` are the backend's option values for this build. The
host graph (graph-executor JSON plus the host functions) comes from
:mod:`byoc.generator.host_graph`.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence

from byoc.catalog import Catalog
from byoc.ir import Function
from byoc.spec.backend import BackendSpec, OptionValue

from .artifacts import Artifact

KIND_MODULES = {
    "c_source": "c_source",
    "c_fused": "c_fused",
    "engine": "engine",
    "examplejson": "examplejson",
    "json": "json_codegen",
}
"""Codegen kind -> the module of this package that implements it."""

Generate = Callable[
    [Sequence[Function], BackendSpec, Catalog, Mapping[str, OptionValue]], tuple[Artifact, ...]
]


def generator_for(kind: str) -> Generate:
    return importlib.import_module(f"{__name__}.{KIND_MODULES[kind]}").generate
