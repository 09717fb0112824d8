"""The codegen kinds a backend spec can declare, as a table of data.

A *kind* is one code generator of byoc (``c_source``, ``c_fused``, ``engine``,
``examplejson``, ``json``). A backend spec picks a kind and fills in the kind's slots
with data: op mappings, C macros, C expressions, engine layers and code templates.
This table says, for each kind, what the spec may and must contain, and which
placeholders each template may use. It is the contract between the spec loader
(which checks it) and the generators (which supply exactly these placeholder
values), so neither needs a backend-specific string.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from byoc.ir import DTYPES

MAX_RANK = 32
"""The largest tensor rank any kind accepts (numpy's classic NPY_MAXDIMS)."""

C_TYPES: Mapping[str, str] = MappingProxyType(
    {"float32": "float", "float64": "double", "int32": "int32_t", "int64": "int64_t"}
)
"""The C (and C++) element type of each dtype; the value of ``${ctype}``."""

COMMON_PLACEHOLDERS = ("backend", "symbol_prefix")
"""Placeholders every template may use, besides the backend's option names."""

DIM_PLACEHOLDER = re.compile(r"dim(0|[1-9][0-9]*)\Z")
"""``${dim0}``, ``${dim1}``, ...: one extent of the output shape, in macro arguments."""

INPUT_PLACEHOLDER = re.compile(r"x(0|[1-9][0-9]*)\Z")
"""``${x0}``, ``${x1}``, ...: one scalar of each input, in C expression templates."""

OPTION_TYPES = ("int", "float", "bool", "str")

RESERVED_C_NAME = re.compile(r"_[A-Z_]|.*__")
"""C reserves identifiers that start with _ and a capital or _, and C++ any with __."""


@dataclass(frozen=True, slots=True)
class Language:
    """A compile language: how the artifact of a kind is turned into code that runs."""

    name: str
    compiled: bool
    """False for data artifacts that byoc.runtime interprets (nothing is compiled)."""
    default_compiler: str | None = None
    compiler_env: str | None = None
    """The environment variable that overrides ``compile.compiler`` (CC, CXX)."""
    default_std: str | None = None
    std_pattern: re.Pattern[str] | None = None


LANGUAGES: Mapping[str, Language] = MappingProxyType(
    {
        "c": Language("c", True, "cc", "CC", "c99", re.compile(r"(c|gnu)(89|90|99|11|17|18|2x|23)\Z")),
        "c++": Language(
            "c++", True, "c++", "CXX", "c++17", re.compile(r"(c|gnu)\+\+(11|14|17|20|2a|23|2b|26)\Z")
        ),
        "examplejson": Language("examplejson", False),
        "json": Language("json", False),
    }
)


@dataclass(frozen=True, slots=True)
class Slot:
    """A code template that a backend of some kind provides, at a top-level key."""

    key: str
    doc: str
    placeholders: tuple[str, ...]
    """Placeholders the generator supplies here, besides the common ones and options."""
    required: bool = False


@dataclass(frozen=True, slots=True)
class Kind:
    name: str
    doc: str
    language: str
    dtypes: tuple[str, ...]
    """The dtypes this kind can generate code for; a spec declares a subset."""
    single_dtype: bool = False
    """True when one backend of this kind handles exactly one dtype."""
    construct: str | None = None
    """What ops map to, by rank: ``macros`` (c_source), ``layers`` (engine) or None."""
    op_required: tuple[str, ...] = ()
    op_optional: tuple[str, ...] = ()
    macro_args: tuple[str, ...] = ()
    """Placeholders of macro arguments (besides ``${dim<k>}`` for c_source)."""
    macro_body: tuple[str, ...] = ()
    """Placeholders of macro bodies."""
    macro_inputs: bool = False
    """True when each macro declares how many inputs its kernel takes (ops use macros directly)."""
    templates: tuple[Slot, ...] = ()
    shape_rules: tuple[str, ...] | None = None
    """The catalog shape rules this kind can implement; None means any."""
    attrs: bool = True
    """Whether ops with attributes can be mapped."""
    options: Mapping[str, str] = field(default_factory=dict)
    """Options the kind's generator honours when a spec declares them: name -> type."""
    can_broadcast: bool = False
    """Whether the kind's code can broadcast inputs to the output shape (numpy's rule),
    so that a spec of the kind may declare ``broadcast: true``."""
    max_outputs: int | None = None
    """The most outputs one generated function can have; None means any."""
    constants: bool = True
    """Whether a generated function can embed constants."""
    expressions: tuple[str, ...] | None = None
    """When not None, ops map to C expression templates over ``${x0}``, ``${x1}``, ...:
    the op's ``c`` in the spec, else the catalog's. The names are the other
    placeholders such a template may use."""

    @property
    def compiled(self) -> bool:
        return LANGUAGES[self.language].compiled

    def top_keys(self) -> tuple[tuple[str, ...], tuple[str, ...]]:
        """The kind-specific top-level keys: (required, optional)."""
        required = [s.key for s in self.templates if s.required]
        optional = [s.key for s in self.templates if not s.required]
        if self.construct == "macros":
            required.insert(0, "macros")
        if self.construct == "layers":
            required[:0] = ["macros", "layers"]
            optional.insert(0, "header")
        return tuple(required), tuple(optional)


KINDS: Mapping[str, Kind] = MappingProxyType(
    {
        "c_source": Kind(
            name="c_source",
            doc="C99 source: one kernel per op, expanded from the spec's C macros (the BYOC guide's C codegen)",
            language="c",
            dtypes=DTYPES,
            construct="macros",
            op_required=("macros",),
            op_optional=("vars",),
            macro_args=("symbol", "ctype", "dtype", "rank", "size"),
            macro_inputs=True,
            templates=(Slot("prelude", "C text placed once, before the macros (includes, helpers)", ()),),
            shape_rules=("elementwise",),
        ),
        "c_fused": Kind(
            name="c_fused",
            doc="C99 source: each region fused into one loop per output shape, from the ops' C expressions",
            language="c",
            dtypes=DTYPES,
            op_optional=("c",),
            templates=(
                Slot("prelude", "C text placed once, after the includes (helpers for op expressions)", ()),
            ),
            shape_rules=("elementwise",),
            attrs=False,
            options={"target_clones": "bool", "vectorize": "bool", "openmp_threshold": "int"},
            can_broadcast=True,
            expressions=("ctype", "dtype"),
        ),
        "engine": Kind(
            name="engine",
            doc="C++ that runs a layer graph on a third-party-style engine whose layers come from the spec",
            language="c++",
            dtypes=DTYPES,
            single_dtype=True,
            construct="layers",
            op_required=("layers",),
            macro_args=("layer", "ctype", "dtype", "rank", "inputs"),
            macro_body=("ctype", "dtype"),
            templates=(
                Slot("prelude", "C++ text at the top of the engine header (includes)", ("ctype", "dtype")),
                Slot(
                    "engine",
                    "the engine's C++ code (its classes), placed after the layer kernels",
                    ("ctype", "dtype", "layer_table", "header"),
                    required=True,
                ),
                Slot(
                    "layer_entry",
                    "one entry of ${layer_table}, repeated for every layer",
                    ("layer", "inputs", "rank", "ctype", "dtype"),
                    required=True,
                ),
                Slot(
                    "graph_line",
                    "one line of the layer graph that the generated code passes to the engine",
                    ("layer", "output", "inputs", "dims", "rank"),
                    required=True,
                ),
                Slot(
                    "invoke",
                    "the body of a generated subgraph function: runs the engine on ${graph}",
                    ("graph", "args", "num_args", "symbol", "header", "ctype", "dtype"),
                    required=True,
                ),
            ),
            shape_rules=("elementwise",),
        ),
        "examplejson": Kind(
            name="examplejson",
            doc="ExampleJSON text (the BYOC guide's subgraph format), interpreted by byoc.runtime",
            language="examplejson",
            dtypes=("float32",),
            op_required=("token",),
            attrs=False,
            options={"indent": "int"},
            can_broadcast=True,
            max_outputs=1,
            constants=False,
        ),
        "json": Kind(
            name="json",
            doc="a JSON graph in TVM's JSON-runtime schema, interpreted by byoc.runtime",
            language="json",
            dtypes=DTYPES,
            op_required=("kernel",),
            options={"indent": "int"},
            can_broadcast=True,
        ),
    }
)


def reserved_placeholders(kind: Kind) -> set[str]:
    """Names the generator of ``kind`` supplies, so options and vars may not take them."""
    names = set(COMMON_PLACEHOLDERS) | set(kind.macro_args) | set(kind.macro_body)
    names |= set(kind.expressions or ())
    for slot in kind.templates:
        names |= set(slot.placeholders)
    return names
