"""How a backend spec maps one catalog op to its kind's constructs: one binding class
per shape of mapping. A kind (:mod:`byoc.spec.codegen_kind`) loads the bindings of its
specs; its generator reads them.

- :class:`MacroBinding` (c_source): a C macro per rank, with a default and vars.
- :class:`LayerBinding` (engine): an engine layer per rank, with a default.
- :class:`ExpressionBinding` (c_fused): a C expression over ``${x0}``, ``${x1}``, ...
- :class:`TokenBinding` (examplejson) and :class:`KernelBinding` (json): a name.

Every binding may carry conditions (``when:``, :mod:`byoc.spec.conditions`): a node
they refuse is one the backend does not implement.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TYPE_CHECKING

from byoc.errors import Location

if TYPE_CHECKING:
    from .conditions import Condition, Facts


def frozen_map(items: Mapping | None = None) -> Mapping:
    """A read-only copy of ``items`` that keeps its order."""
    return MappingProxyType(dict(items or {}))


@dataclass(frozen=True, slots=True)
class OpBinding:
    """The mapping of catalog op ``op`` in one backend spec."""

    op: str
    loc: Location | None = field(default=None, compare=False, repr=False, kw_only=True)
    when: tuple[Condition, ...] = field(default=(), kw_only=True)
    """The mapping's conditions (``when:``); the nodes they refuse go elsewhere."""

    def supports(self, rank: int) -> bool:
        """Whether the mapping covers ``rank`` (one of the backend's ranks)."""
        return True

    def takes(self, dtype: str) -> bool:
        """Whether the mapping covers ``dtype`` (one of the backend's dtypes)."""
        return True

    def refusal(self, facts: Facts) -> str | None:
        """Why the mapping's conditions refuse the node of ``facts``, or None."""
        from .conditions import refusal

        return refusal(self.when, facts)

    def describe(self) -> str:
        """The mapping in one line, as ``byoc backends NAME`` shows it."""
        return "; ".join([self.mapping_text(), *(f"when {c.text}" for c in self.when)])

    def mapping_text(self) -> str:
        """What implements the op, in one line (:meth:`describe` adds the conditions)."""
        raise NotImplementedError


@dataclass(frozen=True, slots=True)
class RankedBinding(OpBinding):
    """``by_rank`` maps a rank to a construct (a macro or a layer); ``default``, when
    set, names the construct for every other rank of the backend."""

    by_rank: Mapping[int, str] = field(default_factory=frozen_map)
    default: str | None = None

    def construct(self, rank: int) -> str | None:
        """The macro or layer that implements this op at ``rank``, if any."""
        return self.by_rank.get(rank, self.default)

    def supports(self, rank: int) -> bool:
        return self.construct(rank) is not None

    def mapping_text(self) -> str:
        parts = [f"rank {r}: {name}" for r, name in self.by_rank.items()]
        if self.default is not None:
            parts.append(f"{'other ranks' if parts else 'any rank'}: {self.default}")
        return "; ".join(parts)


@dataclass(frozen=True, slots=True)
class MacroBinding(RankedBinding):
    """c_source: C macros by rank; ``vars`` fill the macro arguments' own placeholders;
    ``dtypes``, when set, the backend's dtypes the macros take (the others' nodes go
    elsewhere)."""

    vars: Mapping[str, str] = field(default_factory=frozen_map)
    dtypes: tuple[str, ...] | None = None

    def takes(self, dtype: str) -> bool:
        return self.dtypes is None or dtype in self.dtypes

    def mapping_text(self) -> str:
        text = RankedBinding.mapping_text(self)
        if self.vars:
            text += "; vars " + ", ".join(f"{k}={v}" for k, v in self.vars.items())
        return text


@dataclass(frozen=True, slots=True)
class LayerBinding(RankedBinding):
    """engine: engine layers by rank; ``default`` names the layer for the other ranks
    (a layer that serves several ranks)."""


@dataclass(frozen=True, slots=True)
class ExpressionBinding(OpBinding):
    """c_fused: the op's C expression template over ``${x0}``, ``${x1}``, ...: the
    spec's ``c`` for the op, else the op catalog's."""

    expression: str

    def mapping_text(self) -> str:
        return f"C {self.expression}"


@dataclass(frozen=True, slots=True)
class NamedBinding(OpBinding):
    """The op's name in an interpreted artifact, unique within the backend."""

    name: str
    label = "name"
    """What the name is called, in ``byoc backends NAME``."""

    def mapping_text(self) -> str:
        return f"{self.label} {self.name}"


@dataclass(frozen=True, slots=True)
class TokenBinding(NamedBinding):
    """examplejson: the op's ExampleJSON token."""

    label = "token"


@dataclass(frozen=True, slots=True)
class KernelBinding(NamedBinding):
    """json: the op's kernel name in the JSON graph."""

    label = "kernel"
