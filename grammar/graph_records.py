"""The statement records that the graph DSL's Lark callbacks return (:class:`Ref`,
:class:`Call`, :class:`Assign`, ...), for :mod:`.graph_emitter` to feed into builders."""

from __future__ import annotations

from dataclasses import dataclass

from byoc.errors import Location
from byoc.ir import AttrValue, TensorType


@dataclass(frozen=True, slots=True)
class Ref:
    name: str
    loc: Location


@dataclass(frozen=True, slots=True)
class Call:
    op: str
    args: tuple  # of Ref | Call
    attrs: tuple[tuple[str, AttrValue, Location], ...]
    loc: Location


@dataclass(frozen=True, slots=True)
class Const:
    type: TensorType
    values: tuple
    loc: Location
    entry: str | None = None  # an external constant: the weights file's entry
    entry_loc: Location | None = None


@dataclass(frozen=True, slots=True)
class WeightsRef:
    entry: str
    loc: Location


@dataclass(frozen=True, slots=True)
class WeightsDecl:
    file: str
    sha256: str
    file_loc: Location
    sha_loc: Location


@dataclass(frozen=True, slots=True)
class Region:
    backend: str
    symbol: str | None
    body: tuple
    loc: Location
    composite: str | None = None  # `@backend.pattern { ... }`: a composite inside a region
    params: tuple[tuple[str, Location], ...] | None = None  # `@backend(x, w) { ... }`


@dataclass(frozen=True, slots=True)
class RegionParams:
    names: tuple[tuple[str, Location], ...]


@dataclass(frozen=True, slots=True)
class Assign:
    targets: tuple[tuple[str, Location], ...]
    rhs: object  # Ref | Call | Const | Region
    loc: Location


@dataclass(frozen=True, slots=True)
class Return:
    values: tuple  # of Ref | Call
    loc: Location
