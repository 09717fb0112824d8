"""The types of backend options, and the one path by which an option's value reaches C.

Option values come from the command line (``--option BACKEND.NAME=VALUE``) and the
Python API, so they are untrusted: whatever a value holds, it must never change the
structure of the generated code. Each type checks a value when it is set and says how
templates write it:

=============  ===========================================================  =====================
type           accepted when set                                            a template writes
=============  ===========================================================  =====================
``int``        an integer within a C ``long long`` (+-9223372036854775807)   ``3``; ``(-3)``
``float``      a finite number (not nan, inf, or an overflow such as 1e999)  ``0.5``; ``(-0.5)``
``bool``       true/yes/on/1 or false/no/off/0                               ``1`` or ``0``
``str``        any text of at most 4096 characters, without NUL              ``"escaped literal"``
``identifier`` a C identifier of at most 64 characters, or empty             the name, as code
=============  ===========================================================  =====================

A ``str`` value is always a complete C string literal (:func:`c_string_literal`):
only letters, digits, space and punctuation other than ``"``, ``\\``, ``?``, ``*``,
``/`` and backquote stay as they are; everything else, and every byte of a non-ASCII
character, is an octal escape, so the literal can neither end early nor hold a
newline, a trigraph, a comment opener or closer, or a line splice. The loader
(:mod:`byoc.spec.option_uses`) refuses a spec that writes a ``str`` placeholder where
such a literal would not stay one token. Only an ``identifier`` is pasted as code.
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from types import MappingProxyType

from byoc.errors import UsageError
from byoc.value_types import VALUE_TYPES

LONG_LONG_MAX = 2**63 - 1
"""The largest int option: a C ``long long`` (the smallest is its negation, whose
literal is valid C too)."""
MAX_STR_LENGTH = 4096
MAX_IDENTIFIER_LENGTH = 64
IDENTIFIER = re.compile(r"(?:[A-Za-z_][A-Za-z0-9_]*)?\Z")
_LITERAL_SAFE = frozenset(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 !#$%&'()+,-.:;<=>@[]^_{|}~"
)
"""Characters a C string literal of an option keeps as they are: no quote, backslash,
``?`` (trigraphs), ``*`` and ``/`` (comments), backquote or control character."""


def c_string_literal(text: str) -> str:
    """``text`` as one C (and C++) string literal that nothing in it can end early:
    ``\\"`` and ``\\\\`` for quote and backslash, a 3-digit octal escape for every
    other character outside :data:`_LITERAL_SAFE` (each UTF-8 byte of a non-ASCII
    one; an octal escape takes at most 3 digits, so a digit after it stays a digit)."""
    out = []
    for ch in text:
        if ch in _LITERAL_SAFE:
            out.append(ch)
        elif ch in '"\\':
            out.append("\\" + ch)
        else:
            out.extend(f"\\{b:03o}" for b in ch.encode("utf-8"))
    return '"' + "".join(out) + '"'


class CInt(int):
    """An int option's value in template values: an int to generators, ``(-3)`` to templates."""

    __slots__ = ()

    @property
    def c_text(self) -> str:
        return str(int(self)) if self >= 0 else f"({int(self)})"


class CFloat(float):
    """A float option's value in template values: a finite double literal to templates."""

    __slots__ = ()

    @property
    def c_text(self) -> str:
        text = repr(float(self))  # shortest round trip; always has a '.' or an exponent
        return f"({text})" if text.startswith("-") else text


class CString(str):
    """A str option's value in template values: the text to generators, an escaped C
    string literal to templates."""

    __slots__ = ()

    @property
    def c_text(self) -> str:
        return c_string_literal(str(self))


C_TEXT_TYPES = (CInt, CFloat, CString)
"""The template values that :func:`byoc.spec.template.render` writes by ``c_text``."""


class OptionType:
    """One option type: how a value is checked, parsed from ``--option`` text, shown in
    messages and handed to templates."""

    __slots__ = ()
    name = ""
    switch = False
    """Whether a value can turn the option's ``option_flags`` on (bool and int)."""
    rule = ""
    """What a value must be, for hints."""

    def __str__(self) -> str:
        return self.name

    def check(self, value: object) -> object:
        """``value`` (from YAML or the API) as a plain, valid value; raises ValueError."""
        return VALUE_TYPES[self.name].check(value)

    def parse(self, text: str) -> object:
        """The value ``--option k=text`` gives; raises ValueError."""
        return self.check(VALUE_TYPES[self.name].parse(text))

    def text(self, value) -> str:
        """``value`` as messages show it."""
        return VALUE_TYPES[self.name].text(value)

    def enabled(self, value) -> bool:
        return False

    def template_value(self, value) -> object:
        """What templates receive: a :data:`C_TEXT_TYPES` value, a bool, or code."""
        raise NotImplementedError


class IntOption(OptionType):
    __slots__ = ()
    name = "int"
    switch = True
    rule = f"an integer from -{LONG_LONG_MAX} to {LONG_LONG_MAX} (a C long long)"

    def check(self, value: object) -> int:
        number = int(super().check(value))  # type: ignore[call-overload]
        if abs(number) > LONG_LONG_MAX:
            raise ValueError(f"{number} is out of range: it must be {self.rule}")
        return number

    def enabled(self, value) -> bool:
        return value != 0

    def template_value(self, value) -> CInt:
        return CInt(value)


class FloatOption(OptionType):
    __slots__ = ()
    name = "float"
    rule = "a finite number (not nan or inf, and within a double's range)"

    def parse(self, text: str) -> float:
        value = VALUE_TYPES["float"].parse(text)
        if not math.isfinite(value):  # type: ignore[arg-type]
            word = text.strip()
            overflow = math.isinf(value) and "inf" not in word.lower()  # type: ignore[arg-type]
            what = "overflows a double" if overflow else "is not a finite number"
            raise ValueError(f"{word!r} {what}: it must be {self.rule}")
        return float(value)  # type: ignore[arg-type]

    def check(self, value: object) -> float:
        number = float(super().check(value))  # type: ignore[arg-type]
        if not math.isfinite(number):
            raise ValueError(f"{number!r} is not finite: it must be {self.rule}")
        return number

    def template_value(self, value) -> CFloat:
        return CFloat(value)


class BoolOption(OptionType):
    __slots__ = ()
    name = "bool"
    switch = True
    rule = "true or false (yes/no, on/off, 1/0)"

    def enabled(self, value) -> bool:
        return bool(value)

    def template_value(self, value) -> bool:
        return bool(value)  # render writes a bool as 1 or 0


class StrOption(OptionType):
    __slots__ = ()
    name = "str"
    rule = (
        f"text of at most {MAX_STR_LENGTH} characters without NUL; templates write it as a C string literal"
    )

    def check(self, value: object) -> str:
        text = str(super().check(value))
        if len(text) > MAX_STR_LENGTH:
            raise ValueError(f"a value of {len(text)} characters is too long: it must be {self.rule}")
        if "\0" in text:
            raise ValueError(f"{text!r} holds a NUL character, where a C string would end")
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError(f"{text!r} is not valid Unicode (a lone surrogate)") from None
        return text

    def template_value(self, value) -> CString:
        return CString(value)


class IdentifierOption(OptionType):
    __slots__ = ()
    name = "identifier"
    rule = (
        f"a C identifier (letters, digits and _, not starting with a digit) of at most "
        f"{MAX_IDENTIFIER_LENGTH} characters, or empty; templates paste it as code"
    )

    def check(self, value: object) -> str:
        if not isinstance(value, str):
            raise ValueError(f"must be identifier, got {value!r}")
        if len(value) > MAX_IDENTIFIER_LENGTH or not IDENTIFIER.match(value):
            raise ValueError(f"{value!r} is not an identifier: it must be {self.rule}")
        return str(value)

    def parse(self, text: str) -> str:
        return self.check(text)

    def text(self, value) -> str:
        return str(value)

    def template_value(self, value) -> str:
        return str(value)


OPTION_TYPES: Mapping[str, OptionType] = MappingProxyType(
    {t.name: t for t in (IntOption(), FloatOption(), BoolOption(), StrOption(), IdentifierOption())}
)
"""Every option type by name, in the order messages list them."""

OPTION_NAME = re.compile(r"[a-z][a-z0-9_]*\Z")
"""An option's name in a spec."""
_OPTION_KEY = re.compile(r"(?:([A-Za-z_][A-Za-z0-9_]*)\.)?([a-z][a-z0-9_]*)\Z")


def split_option_key(key: str) -> tuple[str, str]:
    """``(backend, name)`` of an ``--option`` key ``NAME`` or ``BACKEND.NAME`` (backend
    ``""`` for the first); raises UsageError for anything else (``.opt_level``,
    ``json.``, ``a.b.c``, spaces)."""
    m = _OPTION_KEY.match(key)
    if m is None:
        raise UsageError(
            f"--option {key!r} does not name an option: write NAME=VALUE or BACKEND.NAME=VALUE",
            hint="an option's name is lower-case letters, digits and _ (opt_level); before it, "
            "a backend's name and a dot set it on that backend only (ccompiler.opt_level)",
        )
    return m.group(1) or "", m.group(2)
