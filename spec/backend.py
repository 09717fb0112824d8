"""The backend spec model: what a ``spec/backends/<name>.yaml`` file says, as frozen data.

:mod:`byoc.spec.backend_loader` builds these from YAML and validates them; the
generators read them. Every mapping field is read-only and keeps the YAML order.
``spec/README.md`` documents the YAML keys behind each field.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from byoc.errors import Location, UsageError, did_you_mean
from byoc.ir import C_TYPES
from byoc.value_types import type_of

from .bindings import NamedBinding, OpBinding, frozen_map
from .names import FLAG_PLACEHOLDERS
from .option_types import OPTION_TYPES, OptionType
from .template import render

if TYPE_CHECKING:
    from .codegen_kind import CodegenKind
    from .patterns import Pattern
    from .probe import Probe
    from .requirements import Linkage, Requirement
    from .support import SupportFile

OptionValue = int | float | bool | str


@dataclass(frozen=True, slots=True)
class OptionDef:
    """A typed, defaulted build option, set per build with ``--option name=value``."""

    name: str
    type: str
    """A name of :data:`~byoc.spec.option_types.OPTION_TYPES`: ``int``, ``float``,
    ``bool``, ``str`` or ``identifier``."""
    default: OptionValue
    doc: str = ""
    choices: tuple[OptionValue, ...] | None = None
    loc: Location | None = field(default=None, compare=False, repr=False)
    minimum: int | float | None = None
    """int and float options: the smallest value (``min:``), when the spec bounds it."""
    maximum: int | float | None = None
    """int and float options: the largest value (``max:``)."""

    @property
    def value_type(self) -> OptionType:
        return OPTION_TYPES[self.type]

    def value(self, given: str | OptionValue) -> OptionValue:
        """The option's value for ``given``: text (``--option name=text``) is parsed by
        the option's type, a Python value is checked against it (ranges, finiteness,
        the identifier pattern: :mod:`byoc.spec.option_types`). Raises ValueError
        naming what is wrong."""
        vtype = self.value_type
        value = vtype.parse(given) if isinstance(given, str) else vtype.check(given)
        if self.choices is not None and value not in self.choices:
            shown = ", ".join(map(vtype.text, self.choices))
            raise ValueError(f"{value!r} is not one of {shown}")
        low, high = self.minimum, self.maximum
        if (low is not None and value < low) or (high is not None and value > high):  # type: ignore[operator]
            raise ValueError(f"{value} is out of range: it must be {self.range_text()}")
        return value  # type: ignore[return-value]

    def range_text(self) -> str:
        """``from 0 to 16``, ``at least 0``, ``at most 8``, or "" when unbounded."""
        low, high = self.minimum, self.maximum
        if low is not None and high is not None:
            return f"from {low} to {high}"
        return f"at least {low}" if low is not None else f"at most {high}" if high is not None else ""


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
    large_flags: tuple[str, ...] = ()
    """Flags added for a module source of more than :attr:`large_above` bytes (gcc's
    ``-flto=auto``: one large translation unit compiled on every core)."""
    large_above: int = 0

    @property
    def compiled(self) -> bool:
        return self.compiler is not None

    def render_flags(self, values: Mapping[str, object], source_bytes: int = 0) -> tuple[str, ...]:
        """The flags for one build: ``values`` holds the common placeholders and options,
        and the build adds the machine's (:data:`~byoc.spec.names.FLAG_PLACEHOLDERS`);
        one it does not give stays as written (``-march=${x86_64_level}``). A main
        source of ``source_bytes`` above :attr:`large_above` gets :attr:`large_flags`."""
        values = {**{name: f"${{{name}}}" for name in FLAG_PLACEHOLDERS}, **values}
        out = [render(f, values) for f in self.flags]
        extras = [extra for option, extra in self.option_flags.items() if option_enabled(values.get(option))]
        if self.large_flags and source_bytes > self.large_above:
            extras.append(self.large_flags)
        for extra in extras:
            out.extend(f for f in (render(f, values) for f in extra) if f not in out)
        return tuple(out)


def option_enabled(value: object) -> bool:
    """Whether an option turns its ``option_flags`` on: a true bool or a non-zero int."""
    vtype = type_of(value)
    return vtype is not None and vtype.enabled(value)


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
    setup: Mapping[str, str] = field(default_factory=frozen_map)
    """c_source: the kernel's own ``state``, ``init`` and ``teardown`` templates (each
    present one), added to its function's for every kernel expanded from the macro."""
    layouts: Mapping[str, tuple[str, ...]] = field(default_factory=frozen_map)
    """c_source: each port (``in<k>``, ``out``) that takes a layout of the spec's
    ``layouts:`` besides plain -> those layouts, in the macro's order of preference."""
    mixed_layouts: bool = True
    """c_source: whether the ports of ``layouts`` may get different layouts in one use
    (``mixed_layouts: false``: all plain, or all the same layout)."""
    status: bool = False
    """c_source: the kernel returns an ``int``, 0 on success; the function's body stops at
    the first other value, and the call raises RuntimeError naming the kernel's nodes."""
    broadcast: bool = False
    """c_source: the kernel takes the inputs of an elementwise op (or of a pattern's
    elementwise node) broadcast to the output's shape (numpy's rule), each at its own
    shape, and reads how through ``${in<k>_stride<j>}`` (``broadcast: true``)."""
    overwrites: int | None = None
    """c_source: the input (``overwrites: in<k>``) whose buffer the kernel's result may
    take: the kernel reads each element of it before writing that element of the
    result, so the function's memory plan may pass it the same pointer for both."""
    body_line: int | None = field(default=None, compare=False, repr=False)
    """The line of the body's first line in its file (the spec, when the body is a
    literal block ``|``; else :attr:`body_file`), so that a compiler error in a copied
    line is located where the line was written."""
    body_file: str | None = field(default=None, compare=False, repr=False)
    """The C file the body was read from (``body: {file: NAME}``); None: the spec's file."""

    def arguments(self, values: Mapping[str, object]) -> tuple[str, ...]:
        """The arguments of one invocation, in parameter order."""
        return tuple(render(t, values) for t in self.params.values())


PLAIN_LAYOUT = "plain"
"""The layout every value has unless its function chooses another: row-major, as byoc's
buffers, parameters and outputs are (what ``${in<k>_layout}`` says by default)."""


@dataclass(frozen=True, slots=True)
class LayoutDef:
    """An alternative memory order of a value (a c_source spec's ``layouts:``): its axes
    stored in the order of ``permutation`` (``(0, 2, 3, 1)``: an nchw value stored as
    nhwc). Only the order changes, never the byte size."""

    name: str
    permutation: tuple[int, ...]
    doc: str = ""
    loc: Location | None = field(default=None, compare=False, repr=False)

    @property
    def rank(self) -> int:
        """The rank of the values the layout can hold."""
        return len(self.permutation)


@dataclass(frozen=True, slots=True)
class LayerDef:
    """An engine layer: a kernel expanded from ``macro``, with ``inputs`` inputs, that
    the engine runs on tensors of any of ``ranks`` (ascending; one rank, or several
    for a rank-generic kernel)."""

    name: str
    macro: str
    inputs: int
    ranks: tuple[int, ...]
    vars: Mapping[str, str] = field(default_factory=frozen_map)
    doc: str = ""
    loc: Location | None = field(default=None, compare=False, repr=False)


@dataclass(frozen=True, slots=True)
class BackendSpec:
    """One validated backend spec."""

    name: str
    kind: CodegenKind
    """The codegen kind; ``kind.name`` is what the spec's ``kind:`` says."""
    description: str
    symbol_prefix: str
    dtypes: tuple[str, ...]
    ranks: tuple[int, ...]
    compile: CompileSettings
    options: Mapping[str, OptionDef]
    ops: Mapping[str, OpBinding]
    requires: Mapping[str, Requirement] = field(default_factory=frozen_map)
    """The libraries the generated code includes and links (``requires:``), by name."""
    probe: Probe | None = None
    """The dtypes it computes only where the machine does (``probe:``, :mod:`byoc.spec.probe`)."""
    macros: Mapping[str, MacroDef] = field(default_factory=frozen_map)
    layers: Mapping[str, LayerDef] = field(default_factory=frozen_map)
    templates: Mapping[str, str] = field(default_factory=frozen_map)
    """The kind's code templates by key (``prelude``, ``engine``, ``invoke``, ...)."""
    template_lines: Mapping[str, int] = field(default_factory=frozen_map, compare=False)
    """The spec file's line of the first line of each template written as a literal block."""
    patterns: Mapping[str, Pattern] = field(default_factory=frozen_map)
    """Composite patterns by name, in spec order (:mod:`byoc.spec.patterns`)."""
    layouts: Mapping[str, LayoutDef] = field(default_factory=frozen_map)
    """c_source: the memory layouts a value may take between kernels besides plain
    (``layouts:``, :mod:`byoc.spec.layouts`), by name."""
    header: str | None = None
    """engine kind: the file name of the generated engine header."""
    support: tuple[SupportFile, ...] = ()
    """c_source: C files beside the spec (``support:``, :mod:`byoc.spec.support`):
    headers each module includes, sources compiled once and linked into each module."""
    broadcast: bool = False
    """Whether the backend's code broadcasts inputs to the output shape (numpy's rule)."""
    source: str | None = field(default=None, compare=False)
    """The spec file this was loaded from."""
    display_path: str | None = field(default=None, compare=False)
    """How generated files name the spec (set by the spec search): relative to the
    search directory it was found in, so the text is the same on every machine."""
    loc: Location | None = field(default=None, compare=False, repr=False)

    def missing_library(self) -> str | None:
        """Why this backend cannot build here (the first library it ``requires:`` that is
        not installed, and how to install it), or None when every one is found."""
        from .requirements import NotFound

        for requirement in self.requires.values():
            try:
                requirement.locate()
            except NotFound as exc:
                return f"backend {self.name} needs {requirement.name} ({exc}); {requirement.install}"
        return None

    def linkages(self) -> list[Linkage]:
        """Where the libraries this spec ``requires:`` are on this machine, in the spec's
        order: the flags that compile and link its modules (a UsageError at the
        requirement for a library that is missing)."""
        return [r.check(self.name) for r in self.requires.values()]

    def supports(self, op: str, dtype: str | None = None, rank: int | None = None) -> bool:
        """Whether this backend can run ``op`` (at ``dtype`` and ``rank``, when given)."""
        binding = self.ops.get(op)
        if binding is None or (dtype is not None and (dtype not in self.dtypes or not binding.takes(dtype))):
            return False
        if rank is None:
            return True
        if rank not in self.ranks:
            return False
        return binding.supports(rank)

    def op_names(self) -> dict[str, str]:
        """Kinds that name ops (:class:`~byoc.spec.bindings.NamedBinding`): each name ->
        its catalog op, as an interpreter reads the artifact back (ExampleJSON tokens,
        JSON kernel names)."""
        return {b.name: op for op, b in self.ops.items() if isinstance(b, NamedBinding)}

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
                    hint=f"{did_you_mean(key, self.options)}its options: {known}",
                )
            try:
                values[key] = option.value(raw)
            except ValueError as exc:
                raise UsageError(
                    f"option {key} of backend {self.name}: {exc}",
                    option.loc,
                    hint=f"{key} is {option.type}, {option.value_type.rule}"
                    + (f": {option.doc}" if option.doc else ""),
                ) from None
        return values

    @property
    def options_loc(self) -> Location | None:
        """Where the spec defines its options (the first one), else the spec itself."""
        return next((o.loc for o in self.options.values() if o.loc is not None), self.loc)

    def template_values(self, options: Mapping[str, OptionValue] | None = None) -> dict[str, object]:
        """The placeholder values every template may use: common names and options.

        Each option's value goes through its type's one path to C
        (:meth:`~byoc.spec.option_types.OptionType.template_value`): a str as an
        escaped string literal, an int or float as a checked literal, a bool as 1 or 0,
        an identifier as code. Generators read the same values as numbers and bools.
        ``options`` are checked again here (UsageError), whoever made them.
        """
        values: dict[str, object] = {"backend": self.name, "symbol_prefix": self.symbol_prefix}
        for name, value in self.option_values(options).items():
            values[name] = self.options[name].value_type.template_value(value)
        return values

    @staticmethod
    def ctype(dtype: str) -> str:
        """The C element type of ``dtype`` (``${ctype}``)."""
        return C_TYPES[dtype]
