"""The value types of op attributes and backend options: ``int``, ``float``, ``bool``,
``str`` and ``ints`` (a list of ints).

Each :class:`ValueType` checks a Python value (a bool is never an int or a float),
parses the text of ``--option name=value``, and writes a value as generated C text
and messages spell it (``true``, ``3``, ``0.5``). The op catalog declares attribute
types with these names, backend specs declare option types with them (options take
the scalar ones), and kinds declare the types of the options their generators read.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

Value = int | float | bool | str | tuple[int, ...]

TRUE_WORDS = ("true", "yes", "on", "1")
FALSE_WORDS = ("false", "no", "off", "0")


class ValueType:
    """One value type; subclasses say what it accepts and how it reads and writes."""

    __slots__ = ()
    name: str = ""
    scalar: bool = True
    """Whether options may have this type (every type but ``ints``)."""
    switch: bool = False
    """Whether a value of this type can turn an option's ``option_flags`` on."""

    def __str__(self) -> str:
        return self.name

    def __repr__(self) -> str:
        return f"<value type {self.name}>"

    def accepts(self, value: object) -> bool:
        raise NotImplementedError

    def plain(self, value) -> Value:
        """An accepted value as a plain Python value of the type (not a subclass of it)."""
        return value

    def check(self, value: object) -> Value:
        """``value`` as a plain value of this type; raises ValueError ``must be T, got V``."""
        if not self.accepts(value):
            raise ValueError(f"must be {self.name}, got {value!r}")
        return self.plain(value)

    def parse(self, text: str) -> Value:
        """The value that ``text`` spells (``--option k=text``); raises ValueError."""
        raise NotImplementedError

    def text(self, value) -> str:
        """``value`` as templates substitute it into C text, and messages show it."""
        return str(value)

    def enabled(self, value) -> bool:
        """Whether ``value`` turns an option's ``option_flags`` on (see :attr:`switch`)."""
        return False


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


class IntType(ValueType):
    __slots__ = ()
    name = "int"
    switch = True

    def accepts(self, value: object) -> bool:
        return _is_int(value)

    def plain(self, value) -> int:
        return int(value)

    def parse(self, text: str) -> int:
        try:
            return int(text.strip(), 0)
        except ValueError:
            raise ValueError(f"{text.strip()!r} is not an integer") from None

    def enabled(self, value) -> bool:
        return value != 0


class FloatType(ValueType):
    __slots__ = ()
    name = "float"

    def accepts(self, value: object) -> bool:
        return _is_int(value) or isinstance(value, float)

    def plain(self, value) -> float:
        return float(value)

    def parse(self, text: str) -> float:
        try:
            return float(text.strip())
        except ValueError:
            raise ValueError(f"{text.strip()!r} is not a number") from None


class BoolType(ValueType):
    __slots__ = ()
    name = "bool"
    switch = True

    def accepts(self, value: object) -> bool:
        return isinstance(value, bool)

    def plain(self, value) -> bool:
        return bool(value)

    def parse(self, text: str) -> bool:
        word = text.strip().lower()
        if word in TRUE_WORDS:
            return True
        if word in FALSE_WORDS:
            return False
        raise ValueError(f"{text.strip()!r} is not a boolean (use true or false)")

    def text(self, value) -> str:
        return "true" if value else "false"

    def enabled(self, value) -> bool:
        return bool(value)


class StrType(ValueType):
    __slots__ = ()
    name = "str"

    def accepts(self, value: object) -> bool:
        return isinstance(value, str)

    def plain(self, value) -> str:
        return str(value)

    def parse(self, text: str) -> str:
        return text


class IntsType(ValueType):
    __slots__ = ()
    name = "ints"
    scalar = False

    def accepts(self, value: object) -> bool:
        return isinstance(value, (tuple, list)) and all(_is_int(v) for v in value)

    def plain(self, value) -> tuple[int, ...]:
        return tuple(int(v) for v in value)

    def parse(self, text: str) -> tuple[int, ...]:
        body = text.strip().removeprefix("[").removesuffix("]")
        try:
            return tuple(int(item.strip(), 0) for item in body.split(",")) if body.strip() else ()
        except ValueError:
            raise ValueError(f"{text.strip()!r} is not a list of integers (such as 1, 2, 3)") from None

    def text(self, value) -> str:
        return "[" + ", ".join(map(str, value)) + "]"


VALUE_TYPES: Mapping[str, ValueType] = MappingProxyType(
    {t.name: t for t in (IntType(), FloatType(), BoolType(), StrType(), IntsType())}
)
"""Every value type by name, in the order messages list them."""

OPTION_TYPES: tuple[str, ...] = tuple(name for name, t in VALUE_TYPES.items() if t.scalar)
"""The types a backend option may have."""


_OF_PYTHON_TYPE = {bool: "bool", int: "int", float: "float", str: "str"}


def type_of(value: object) -> ValueType | None:
    """The value type of a Python value, or None when it has none."""
    name = _OF_PYTHON_TYPE.get(type(value))  # the common case, quickly
    if name is not None:
        return VALUE_TYPES[name]
    return next((t for t in VALUE_TYPES.values() if t.accepts(value)), None)


def value_text(value: object) -> str:
    """``value`` as templates and messages write it: ``true``/``false`` for booleans."""
    vtype = type_of(value)
    return vtype.text(value) if vtype is not None else str(value)
