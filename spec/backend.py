"""The backend spec model: what a ``spec/backends/<name>.yaml`` file says, as frozen data.

:mod:`byoc.spec.backend_loader` builds these from YAML and validates them; the
generators read them. Every mapping field is read-only and keeps the YAML order.
``spec/README.md`` documents the YAML keys behind each field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from byoc.errors import Location, UsageError

from .kinds import C_TYPES, KINDS, Kind
from .template import render

OptionValue = int | float | bool | str

TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")


def frozen_map(items: Mapping | None = None) -> Mapping:
    """A read-only copy of ``items`` that keeps its order."""
    return MappingProxyType(dict(items or {}))


@dataclass(frozen=True, slots=True)
class OptionDef:
    """A typed, defaulted build option, set per build with ``--option name=value``."""

    name: str
    type: str
    """``int``, ``float``, ``bool`` or ``str``."""
    default: OptionValue
    doc: str = ""
    choices: tuple[OptionValue, ...] | None = None
    loc: Location | None = field(default=None, compare=False, repr=False)

    def parse(self, text: str) -> OptionValue:
        """The value of ``--option name=text``; raises ValueError naming what is wrong."""
        raw = text.strip()
        value: OptionValue
        if self.type == "bool":
            if raw.lower() in TRUE_WORDS:
                value = True
            elif raw.lower() in FALSE_WORDS:
                value = False
            else:
                raise ValueError(f"{raw!r} is not a boolean (use true or false)")
        elif self.type == "int":
            try:
                value = int(raw, 0)
            except ValueError:
                raise ValueError(f"{raw!r} is not an integer") from None
        elif self.type == "float":
            try:
                value = float(raw)
            except ValueError:
                raise ValueError(f"{raw!r} is not a number") from None
        else:
            value = text
        if self.choices is not None and value not in self.choices:
            raise ValueError(f"{value!r} is not one of {', '.join(map(str, self.choices))}")
        return value


@dataclass(frozen=True, slots=True)
class CompileSettings:
    """How the artifact is compiled; ``compiler`` is None for interpreted artifacts."""

    language: str
    compiler: str | None = None
    std: str | None = None
    flags: tuple[str, ...] = ()
    """Compiler flags, as templates over the options (``-O${opt_level}``)."""
    option_flags: Mapping[str, tuple[str, ...]] = field(default_factory=frozen_map)
    """Flags added when a boolean option is true, or an int option is not 0: option
    name -> flags."""

    @property
    def compiled(self) -> bool:
        return self.compiler is not None

    def render_flags(self, values: Mapping[str, object]) -> tuple[str, ...]:
        """The flags for one build: ``values`` holds the common placeholders and options."""
        out = [render(f, values) for f in self.flags]
        for option, extra in self.option_flags.items():
            if option_enabled(values.get(option)):
                out.extend(render(f, values) for f in extra)
        return tuple(out)


def option_enabled(value: object) -> bool:
    """Whether an option turns its ``option_flags`` on: a true bool or a non-zero int."""
    if isinstance(value, bool):
        return value
    return isinstance(value, int) and value != 0


@dataclass(frozen=True, slots=True)
class MacroDef:
    """A C preprocessor macro: ``#define NAME(params...) body``.

    ``params`` maps each parameter, in order, to the template of the argument a
    generator passes for it (``p_ID_: ${symbol}``).
    """

    name: str
    params: Mapping[str, str]
    body: str
    doc: str = ""
    inputs: int | None = None
    """c_source: how many input pointers the kernel the macro defines takes."""
    loc: Location | None = field(default=None, compare=False, repr=False)

    def arguments(self, values: Mapping[str, object]) -> tuple[str, ...]:
        """The arguments of one invocation, in parameter order."""
        return tuple(render(t, values) for t in self.params.values())


@dataclass(frozen=True, slots=True)
class LayerDef:
    """An engine layer: a kernel expanded from ``macro``, with ``inputs`` inputs of ``rank``."""

    name: str
    macro: str
    inputs: int
    rank: int
    vars: Mapping[str, str] = field(default_factory=frozen_map)
    doc: str = ""
    loc: Location | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class OpBinding:
    """How one catalog op maps to this backend's constructs.

    - c_source: ``by_rank`` maps a rank to a macro name, ``default`` names the macro
      for other declared ranks, ``vars`` fills the macro arguments' own placeholders.
    - engine: ``by_rank`` maps a rank to a layer name.
    - examplejson: ``token`` is the op's ExampleJSON token.
    - json: ``kernel`` is the op's kernel name in the JSON graph.
    - c_fused: ``expression`` is the op's C expression template over ``${x0}``,
      ``${x1}``, ...: the spec's ``c`` for the op, else the op catalog's.
    """

    op: str
    by_rank: Mapping[int, str] = field(default_factory=frozen_map)
    default: str | None = None
    vars: Mapping[str, str] = field(default_factory=frozen_map)
    token: str | None = None
    kernel: str | None = None
    expression: str | None = None
    loc: Location | None = field(default=None, compare=False, repr=False)

    def construct(self, rank: int) -> str | None:
        """The macro or layer that implements this op at ``rank``, if any."""
        return self.by_rank.get(rank, self.default)


@dataclass(frozen=True, slots=True)
class BackendSpec:
    """One validated backend spec."""

    name: str
    kind: str
    description: str
    symbol_prefix: str
    dtypes: tuple[str, ...]
    ranks: tuple[int, ...]
    compile: CompileSettings
    options: Mapping[str, OptionDef]
    ops: Mapping[str, OpBinding]
    macros: Mapping[str, MacroDef] = field(default_factory=frozen_map)
    layers: Mapping[str, LayerDef] = field(default_factory=frozen_map)
    templates: Mapping[str, str] = field(default_factory=frozen_map)
    """The kind's code templates by key (``prelude``, ``engine``, ``invoke``, ...)."""
    header: str | None = None
    """engine kind: the file name of the generated engine header."""
    broadcast: bool = False
    """Whether the backend's code broadcasts inputs to the output shape (numpy's rule)."""
    source: str | None = field(default=None, compare=False)
    """The spec file this was loaded from."""
    display_path: str | None = field(default=None, compare=False)
    """How generated files name the spec (set by the spec search): relative to the
    search directory it was found in, so the text is the same on every machine."""
    loc: Location | None = field(default=None, compare=False, repr=False)

    @property
    def kind_info(self) -> Kind:
        return KINDS[self.kind]

    def supports(self, op: str, dtype: str | None = None, rank: int | None = None) -> bool:
        """Whether this backend can run ``op`` (at ``dtype`` and ``rank``, when given)."""
        binding = self.ops.get(op)
        if binding is None or (dtype is not None and dtype not in self.dtypes):
            return False
        if rank is None:
            return True
        if rank not in self.ranks:
            return False
        return self.kind_info.construct is None or binding.construct(rank) is not None

    def tokens(self) -> dict[str, str]:
        """examplejson kind: op token -> catalog op, as the ExampleJSON parser takes it."""
        return {b.token: op for op, b in self.ops.items() if b.token is not None}

    def kernels(self) -> dict[str, str]:
        """json kind: kernel name -> catalog op, as the JSON runtime reads it back."""
        return {b.kernel: op for op, b in self.ops.items() if b.kernel is not None}

    def option_values(
        self, overrides: Mapping[str, str | OptionValue] | None = None
    ) -> dict[str, OptionValue]:
        """Every option's value for one build: the defaults, updated by ``overrides``.

        A string override is parsed by the option's type (as ``--option k=v`` gives
        it); raises UsageError for unknown options (located at the spec's options) and
        bad values (located at the option's definition in the spec).
        """
        values = {name: o.default for name, o in self.options.items()}
        for key, raw in (overrides or {}).items():
            option = self.options.get(key)
            if option is None:
                known = ", ".join(self.options) or "none"
                raise UsageError(
                    f"backend {self.name} has no option {key!r}",
                    self.options_loc,
                    hint=f"its options: {known}",
                )
            try:
                values[key] = option.parse(raw) if isinstance(raw, str) else _check_value(option, raw)
            except ValueError as exc:
                raise UsageError(
                    f"option {key} of backend {self.name}: {exc}",
                    option.loc,
                    hint=f"{key} is {option.type}" + (f": {option.doc}" if option.doc else ""),
                ) from None
        return values

    @property
    def options_loc(self) -> Location | None:
        """Where the spec defines its options (the first one), else the spec itself."""
        return next((o.loc for o in self.options.values() if o.loc is not None), self.loc)

    def template_values(self, options: Mapping[str, OptionValue] | None = None) -> dict[str, object]:
        """The placeholder values every template may use: common names and options."""
        values: dict[str, object] = {"backend": self.name, "symbol_prefix": self.symbol_prefix}
        values.update(self.option_values() if options is None else options)
        return values

    @staticmethod
    def ctype(dtype: str) -> str:
        """The C element type of ``dtype`` (``${ctype}``)."""
        return C_TYPES[dtype]


def _check_value(option: OptionDef, value: OptionValue) -> OptionValue:
    ok = {
        "int": isinstance(value, int) and not isinstance(value, bool),
        "float": isinstance(value, (int, float)) and not isinstance(value, bool),
        "bool": isinstance(value, bool),
        "str": isinstance(value, str),
    }[option.type]
    if not ok:
        raise ValueError(f"{value!r} is not {option.type}")
    if option.type == "float":
        value = float(value)
    if option.choices is not None and value not in option.choices:
        raise ValueError(f"{value!r} is not one of {', '.join(map(str, option.choices))}")
    return value
