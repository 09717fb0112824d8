"""The placeholder syntax of backend spec templates: ``${name}``.

C and C++ text is full of ``{`` and ``}``, so spec templates mark placeholders with a
dollar sign, as shells do: ``${symbol}``, ``${dim0}``, ``${opt_level}``. ``$$`` is a
literal ``$``. Any other ``$`` is an error, so that a typo such as ``$symbol`` or
``${symbol`` never reaches a compiler.

This module knows only the syntax. Which names a template may use is decided by
its slot (see :mod:`byoc.spec.codegen_kind`) and checked by the loader.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass

from byoc.value_types import value_text

from .option_types import C_TEXT_TYPES

PLACEHOLDER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_PLACEHOLDER_TEXT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)?\Z")
"""A placeholder's name, or a namespaced one (``${conv.strides0}``: an attribute of one
node of a composite pattern)."""
_TOKEN = re.compile(r"\$(?:\$|\{([^{}$]*)\}|)")


@dataclass(frozen=True, slots=True)
class Placeholder:
    """One ``${name}`` in a template; ``offset`` is where its ``$`` is, 0-based."""

    name: str
    offset: int


class TemplateSyntaxError(Exception):
    """A malformed ``$`` in a template; ``offset`` is 0-based into the template."""

    def __init__(self, message: str, offset: int, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.offset = offset
        self.hint = hint


def placeholders(text: str) -> Iterator[Placeholder]:
    """Every placeholder of ``text``, in order; raises TemplateSyntaxError."""
    for m in _TOKEN.finditer(text):
        whole = m.group(0)
        if whole == "$$":
            continue
        name = m.group(1)
        if name is None:
            raise TemplateSyntaxError(
                "a '$' that starts no placeholder",
                m.start(),
                hint="write ${name} for a placeholder, or $$ for a literal $",
            )
        if not _PLACEHOLDER_TEXT.match(name):
            raise TemplateSyntaxError(
                f"invalid placeholder ${{{name}}}",
                m.start(),
                hint="a placeholder is ${name} (or ${node.name} in a pattern's macro): letters, digits and _, not starting with a digit",
            )
        yield Placeholder(name, m.start())


def placeholder_names(text: str) -> tuple[str, ...]:
    """The distinct placeholder names of ``text``, in order of first use."""
    return tuple(dict.fromkeys(p.name for p in placeholders(text)))


def render(text: str, values: Mapping[str, object]) -> str:
    """Substitute every ``${name}`` of ``text`` by its value as C text: an option's
    value as its type writes it (:data:`~byoc.spec.option_types.C_TEXT_TYPES`: an
    escaped string literal, a checked number), a bool as ``1`` or ``0``, anything else
    (names and C text the generator made) as :func:`~byoc.value_types.value_text`
    writes it.

    A missing name raises KeyError: the loader has already checked every template,
    so this is a programming error.
    """

    def one(m: re.Match[str]) -> str:
        if m.group(0) == "$$":
            return "$"
        name = m.group(1)
        if name is None or name not in values:
            raise KeyError(f"template placeholder {m.group(0)!r} has no value")
        return c_text(values[name])

    return _TOKEN.sub(one, text)


def c_text(value: object) -> str:
    """One placeholder value as :func:`render` writes it."""
    if isinstance(value, C_TEXT_TYPES):
        return value.c_text
    if isinstance(value, bool):
        return "1" if value else "0"
    return value_text(value)
