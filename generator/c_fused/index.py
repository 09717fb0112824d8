"""What the index algebra of an anchor (:mod:`byoc.generator.c_fused.anchors`) works from
and gives (:class:`Site`, :class:`Anchor` and its :class:`Level` loops), and the C index
text every rule builds them with."""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from byoc.attr_values import AttrView
from byoc.ir import AttrValue, TensorType


@dataclass(frozen=True, slots=True)
class Level:
    """One reduction loop: ``for (r = 0; r < extent; ++r)``, with ``steps`` (index
    locals and ``if (...) continue;`` guards) at its top. A level of extent 1 has no loop:
    its counter is ``0`` and its steps stand alone."""

    var: str
    extent: int
    steps: tuple[str, ...] = ()
    bounds: tuple[Bound, ...] = ()
    """The affine guards among ``steps``, as data (blocked nests turn them into loop bounds)."""


@dataclass(frozen=True, slots=True)
class Bound:
    """A guard step ``guard`` that skips the point unless ``0 <= local < size``, where
    ``local`` is ``affine(terms, const)``; ``low`` and ``high`` say which of the two
    tests it makes (a test that can never fail is left out)."""

    local: str
    terms: tuple[tuple[str, int], ...]
    const: int
    size: int
    low: bool
    high: bool
    guard: str


@dataclass(frozen=True, slots=True)
class Anchor:
    """One anchor node's element, for the loops of its output (see
    :mod:`byoc.generator.c_fused.anchors`)."""

    levels: tuple[Level, ...] = ()
    reads: tuple[str, ...] = ()
    """Reduction rules: each input's element at the current point of the reduction."""
    window: int | str = 1
    """Reduction rules: the ``${window}`` of ``result``."""
    steps: tuple[str, ...] = ()
    """Movement rules: index locals and checks before the value."""
    value: str = ""
    """Movement rules: the output element."""
    can_fail: bool = False
    """True when a step jumps to ``fail`` (an index out of range)."""


@dataclass(frozen=True, slots=True)
class Site:
    """What the index algebra of one anchor works from."""

    out: TensorType
    ins: tuple[TensorType, ...]
    attrs: AttrView
    """The resolved attributes (:func:`byoc.attr_values.resolve`)."""
    var: tuple[str, ...]
    """The C counter of each output axis; ``"0"`` for an axis without a loop."""
    arrays: tuple[str, ...]
    """The C name of each input's array."""
    ctype: str
    prefix: str
    """Prefix of the index locals at the nest's level (the node's C name)."""
    fail: str
    """The C statement that reports an index out of range."""
    part: int = 0
    """Which output of the node ``out`` is (a rule of several outputs: split)."""
    parts: tuple[TensorType, ...] = ()
    """The types of all the node's outputs, ``out`` among them at ``part``."""


# ------------------------------------------------------------------- C index text

_WORD = re.compile(r"\w+")


def _wrap(expr: str) -> str:
    return expr if _WORD.fullmatch(expr) else f"({expr})"


def affine(terms: Sequence[tuple[str, int]], const: int = 0) -> str:
    """``sum(coef * expr) + const`` as C, leaving out zero terms and folding number
    terms into the constant: ``i2 * 2 + r1 - 1``."""
    parts: list[str] = []
    for expr, coef in terms:
        if expr.isdigit():
            const += int(expr) * coef
            continue
        if coef == 0:
            continue
        text = expr if abs(coef) == 1 else f"{_wrap(expr)} * {abs(coef)}"
        if coef < 0:
            parts.append(f"- {text}" if parts else f"-{text}")
        else:
            parts.append(f"+ {text}" if parts else text)
    if const:
        parts.append((f"{'-' if const < 0 else '+'} {abs(const)}") if parts else str(const))
    return " ".join(parts) or "0"


def row_major(shape: Sequence[int]) -> tuple[int, ...]:
    strides, step = [0] * len(shape), 1
    for a in reversed(range(len(shape))):
        strides[a] = step
        step *= shape[a]
    return tuple(strides)


def element(array: str, indices: Sequence[str], shape: Sequence[int]) -> str:
    """``array[flat index]`` of the element at ``indices`` (one C index per axis)."""
    terms = [(i, s) for i, s, extent in zip(indices, row_major(shape), shape) if extent != 1]
    return f"{array}[{affine(terms)}]"


def outside_test(index: str, low: int, high: int, size: int) -> str | None:
    """The C test that ``index``, which ranges over ``low..high``, falls outside ``0..size-1``;
    None when it never does."""
    tests = ([f"{index} < 0"] if low < 0 else []) + ([f"{index} >= {size}"] if high >= size else [])
    return " || ".join(tests) or None


def index_local(
    var: str,
    extent: int,
    local: str,
    terms: Sequence[tuple[str, int]],
    const: int,
    low: int,
    high: int,
    size: int,
) -> Level:
    """The reduction level ``var`` whose steps set ``local`` to ``affine(terms, const)``
    (which ranges over ``low..high``) and skip the point when it falls outside the
    input's ``size``; no steps when the input has extent 1 and nothing can fall outside
    (an element's index along it is then 0)."""
    test = outside_test(local, low, high, size)
    if size == 1 and test is None:
        return Level(var, extent)
    define = f"const int64_t {local} = {affine(terms, const)};"
    if test is None:
        return Level(var, extent, (define,))
    guard = f"if ({test}) continue;"
    bound = Bound(local, tuple(terms), const, size, low < 0, high >= size, guard)
    return Level(var, extent, (define, guard), (bound,))


class Counters:
    """Reduction counters ``r0``, ``r1``, ...; ``0`` for an extent of 1 (no loop)."""

    def __init__(self) -> None:
        self.count = 0

    def __call__(self, extent: int) -> str:
        if extent == 1:
            return "0"
        name = f"r{self.count}"
        self.count += 1
        return name


def float_literal(value: AttrValue) -> str:
    text = repr(float(value))  # type: ignore[arg-type]
    return text if "." in text or "e" in text else text + ".0"
