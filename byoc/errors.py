"""One error hierarchy for every input surface.

Every error byoc raises on bad input derives from :class:`ByocError`. It carries a
:class:`Location` (file, 1-based line and column) and an optional hint, and renders
the offending source line with a caret under the column, so the CLI can print it
without a traceback.
"""

from __future__ import annotations

import difflib
import os
import re
import stat
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

YAML_LINE_BREAK = re.compile(r"\r\n|\r|\n")
"""Where ruamel.yaml, which locates spec errors, breaks lines (also at a lone CR)."""
MAX_SHOWN_FILE = 256 << 20
"""A located error shows a line of its file only if the file is regular and at most this large."""


@dataclass(frozen=True, slots=True)
class Location:
    """A position in a text file. ``line`` and ``column`` are 1-based."""

    file: str | None
    line: int
    column: int

    def __str__(self) -> str:
        return f"{self.file or '<string>'}:{self.line}:{self.column}"


class ByocError(Exception):
    """Base class of every user-facing error.

    ``source`` is the full text the location points into; when it is absent the
    renderer reads ``location.file`` from disk, if it exists.
    """

    title = "error"
    """The heading of the rendered error, before the message: ``parse error: ...``."""
    line_break = re.compile(r"\r?\n")
    """Where the text that ``location`` points into breaks lines: at "\n" only, as Lark
    counts them (so not at a form feed in a comment, where ``str.splitlines`` would)."""

    def __init__(
        self,
        message: str,
        location: Location | None = None,
        hint: str | None = None,
        source: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.location = location
        self.hint = hint
        self.source = source

    def __str__(self) -> str:
        where = f"{self.location}: " if self.location else ""
        return f"{where}{self.message}"

    def with_source(self, source: str) -> ByocError:
        if self.source is None:
            self.source = source
        return self

    def render(self) -> str:
        """The multi-line, human-facing form: message, location, caret excerpt, hint."""
        lines = [f"{self.title}: {self.message}"]
        loc = self.location
        if loc is not None:
            lines.append(f"  --> {loc}")
            text = _source_line(loc, self.source, self.line_break)
            if text is not None:
                gutter = " " * len(str(loc.line))
                shown = text.expandtabs(1)
                caret_col = min(max(loc.column, 1), len(shown) + 1)
                lines.append(f"{gutter} |")
                lines.append(f"{loc.line} | {_clip(shown, caret_col)[0]}")
                lines.append(f"{gutter} | {' ' * (_clip(shown, caret_col)[1] - 1)}^")
        if self.hint:
            lines.append(f"  = hint: {self.hint}")
        return "\n".join(lines)


def _clip(text: str, column: int, width: int = 100) -> tuple[str, int]:
    """Cut a very long line to a window around ``column``; return it and the new column."""
    if len(text) <= width:
        return text, column
    start = max(0, min(column - width // 2, len(text) - width))
    piece = text[start : start + width]
    prefix = "..." if start > 0 else ""
    suffix = "..." if start + width < len(text) else ""
    return prefix + piece + suffix, column - start + len(prefix)


def _source_line(loc: Location, source: str | None, line_break: re.Pattern[str]) -> str | None:
    if source is None and loc.file:
        try:  # only a regular file of a sane size: never a FIFO, a device or a huge file
            st = os.stat(loc.file)
            if not stat.S_ISREG(st.st_mode) or st.st_size > MAX_SHOWN_FILE:
                return None
            source = Path(loc.file).read_text(encoding="utf-8", errors="replace")
        except (OSError, ValueError):
            return None
    if source is None:
        return None
    lines = line_break.split(source)  # a text ending in a line break ends with ""
    if 1 <= loc.line <= len(lines):
        return lines[loc.line - 1]
    # A parser that adds a missing final line break reports the end one line further.
    return "" if loc.line == len(lines) + 1 else None


class ParseError(ByocError):
    """Malformed text in a .graph or .examplejson file."""

    title = "parse error"


class GraphError(ByocError):
    """Well-formed text that describes an invalid graph: names, cycles, shapes, dtypes."""

    title = "graph error"


class SpecError(ByocError):
    """An invalid op catalog or backend spec."""

    title = "spec error"
    line_break = YAML_LINE_BREAK


class UsageError(ByocError):
    """Bad command-line flags or API arguments."""

    title = "usage error"


class BuildError(ByocError):
    """The C or C++ compiler failed, or none is installed."""

    title = "build error"


class RuntimeFailure(ByocError):
    """Loading or running generated code failed: bad arguments, corrupt bundles."""

    title = "runtime error"


def close_names(name: str, candidates: Iterable[str], n: int = 3) -> list[str]:
    """Up to ``n`` of ``candidates`` close to ``name``, for a "did you mean" hint: the
    closest first, and among those, the ones with ``name``'s first letter (a typo
    mostly keeps it: ``ad`` is ``add`` rather than ``pad``)."""
    close = difflib.get_close_matches(name, list(candidates), n)
    return sorted(close, key=lambda c: c[:1] != name[:1])


def did_you_mean(name: str, candidates: Iterable[str]) -> str:
    """``did you mean 'x'? `` for the candidate closest to ``name`` (see
    :func:`close_names`), or "" when none is close: the start of a hint."""
    close = close_names(name, candidates)
    return f"did you mean {close[0]!r}? " if close else ""
