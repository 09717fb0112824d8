"""byoc.generator: IR plus backend specs in, artifacts out.

Each codegen kind names one module of this package (``CodegenKind.generator``, e.g.
``c_source.generate`` or ``json_codegen``), with the same entry point::

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
from byoc.spec.codegen_kind import CodegenKind

from .artifacts import Artifact

Generate = Callable[
    [Sequence[Function], BackendSpec, Catalog, Mapping[str, OptionValue]], tuple[Artifact, ...]
]


def generator_for(kind: CodegenKind) -> Generate:
    """The ``generate`` function of the module that implements ``kind``."""
    return importlib.import_module(f"{__name__}.{kind.generator}").generate
