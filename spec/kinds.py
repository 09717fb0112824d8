"""The registry of codegen kinds: the one place that lists them.

The spec loader finds a spec's kind here by its ``kind:`` name, and the generator
dispatch (:func:`byoc.generator.generator_for`) runs the module that the kind names.
To add a kind, write a :class:`~byoc.spec.codegen_kind.CodegenKind` subclass (in a
``kind_<name>.py`` module, usually a small subclass of a family such as
:class:`~byoc.spec.kind_macros.MacroKind` or of a kind such as
:class:`~byoc.spec.kind_c_source.CSourceKind`), list it in :data:`KIND_CLASSES`, and
write the generator module it names.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from .codegen_kind import CodegenKind
from .kind_c_fused import CFusedKind
from .kind_c_source import CSourceKind
from .kind_engine import EngineKind
from .kind_named import ExampleJsonKind, JsonKind

KIND_CLASSES: tuple[type[CodegenKind], ...] = (CSourceKind, CFusedKind, EngineKind, ExampleJsonKind, JsonKind)
"""Every codegen kind, in the order messages list them."""

KINDS: Mapping[str, CodegenKind] = MappingProxyType({cls.name: cls() for cls in KIND_CLASSES})
"""Every codegen kind by name."""


def kind_named(name: str) -> CodegenKind:
    """The registered kind ``name`` (a pickled kind loads as this)."""
    return KINDS[name]
