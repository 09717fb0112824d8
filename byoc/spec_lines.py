"""Which line of a spec file a line of generated C came from.

The ``c_source`` generator copies a spec's C into the module line for line: each
macro's body as the continued lines of its ``#define NAME(...)``, and the prelude after
a heading comment (:func:`prelude_heading`). The spec remembers where each began in its
file when it was written as a literal block (``|``): ``MacroDef.body_line`` and
``BackendSpec.template_lines``. So the build (:mod:`byoc.runtime.build`) turns a
compiler error at a line of a copy into the spec file's line (:func:`spec_line`), with
no line number written into the generated text, whose lines therefore do not change
when an edit elsewhere in the spec moves them. Both sides use this module, which
belongs to neither.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from .errors import Location

_PRELUDE = "/* ---- The spec's prelude, from {} ---- */"
DEFINE = re.compile(r"[ \t]*#[ \t]*define[ \t]+([A-Za-z_]\w*)(\()?")
"""A ``#define`` line: the macro's name, and ``(`` when it is function-like (a kernel's
macro: a spec's body copied into the module, or read from a C file beside the spec)."""


def prelude_heading(source: str) -> str:
    """The comment line before a module's copy of the prelude of spec file ``source``
    (already safe in a one-line comment)."""
    return _PRELUDE.format(source)


@dataclass(frozen=True, slots=True)
class SpecLine:
    """A line of the spec file ``file``, and what the copy was (the prelude, or the body
    of a macro)."""

    file: str
    line: int
    what: str
    column: int = 1
    """The column in the spec file of the generated line's ``column``, when the copy's
    indentation there is known (else 1)."""

    def __str__(self) -> str:
        return f"line {self.line} of {self.file}, in the {self.what}"

    def location(self) -> Location:
        return Location(self.file, self.line, self.column)


@dataclass(frozen=True, slots=True)
class SpecText:
    """Where a spec's copied texts are: the prelude's first line in the spec ``file``
    and its number of lines (None when unknown), and by macro name the file and first
    line of each body (the spec's file, or the C file it was read from)."""

    file: str
    prelude: tuple[int, int] | None
    bodies: Mapping[str, tuple[str, int]]


def spec_line(lines: Sequence[str], n: int, spec: SpecText, column: int = 1) -> SpecLine | None:
    """The spec line that line ``n`` (from 1) of the generated ``lines`` copies, or None
    when it is byoc's own text (or the spec's line is unknown); its column is that of
    the generated line's ``column``, moved by the block's indentation in the spec."""
    found = _copied(lines, n, spec)
    if found is None:
        return None
    file, line, what = found
    return SpecLine(file, line, what, column + _indent(file, line) - _width(lines[n - 1]))


def _copied(lines: Sequence[str], n: int, spec: SpecText) -> tuple[str, int, str] | None:
    """The file and line (and what it is in) that generated line ``n`` copies."""
    if not 1 <= n <= len(lines):
        return None
    for k in range(n - 2, -1, -1):  # the #define whose continued lines reach line n
        if not lines[k].rstrip().endswith("\\"):
            break
        found = DEFINE.match(lines[k])
        if found is not None and found.group(2):
            where = spec.bodies.get(found.group(1))
            if where is None:
                return None
            return where[0], where[1] + n - k - 2, f"body of macro {found.group(1)}"
    if spec.prelude is not None:
        first, count = spec.prelude
        head = _PRELUDE.split("{}")[0]
        k = next((k for k, line in enumerate(lines[: n - 1]) if line.startswith(head)), None)
        if k is not None and n - k - 2 < count:  # the prelude is lines k + 2 ... of the module
            return spec.file, first + n - k - 2, "prelude"
    return None


def _width(line: str) -> int:
    """The indentation of ``line``."""
    return len(line) - len(line.lstrip(" "))


def _indent(file: str, line: int) -> int:
    """The indentation of line ``line`` of the spec file (0 when it cannot be read)."""
    try:
        with open(file, encoding="utf-8", errors="replace") as f:
            for k, text in enumerate(f, 1):
                if k == line:
                    return _width(text)
    except OSError:
        pass
    return 0
