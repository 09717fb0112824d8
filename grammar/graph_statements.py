"""The DSL's fast path: runs of plain statements, read without Lark's per-word work.

Most of a large graph is statements of one shape: ``t = op(a, b)``, whose arguments
are names or calls of names, ``t = op(f(a, b), c)``. ``graph.lark`` matches up to
256 of them in a row as ONE token (``SIMPLE_ASSIGNS``); this module splits that
token with the regexes below and feeds a :class:`~byoc.builder.FunctionBuilder`
exactly what the word-level rules would have fed it: the same nodes, in the same
order, with the same anonymous names for nested calls and the same locations.

The DSL's keywords and the terminals that must not match them are defined here
once (:data:`KEYWORDS`, :data:`TERMINALS`); the parser fills them into ``graph.lark``
when it loads the grammar.

Nothing is kept per statement for error messages: the builder's ``locator``
(:func:`locate_in_call`) reads the statement again from the source, on error only.
"""

from __future__ import annotations

import re
from itertools import islice

from lark import Token

from byoc.builder import OP, FunctionBuilder
from byoc.errors import Location

from .lark_support import SourceLines

KEYWORDS = ("graph", "return", "const", "as")
"""The DSL's keywords. No statement can bind one (SIMPLE_ASSIGNS and NAME_EQ, below,
exclude them), so no node, constant or region output is called by one."""

_NOT_KEYWORD = rf"(?!(?:{'|'.join(KEYWORDS)})\b)"
_IDENT = rf"{_NOT_KEYWORD}[A-Za-z_][A-Za-z0-9_]*"
_NAMES = rf"(?:{_IDENT}(?:[ \t]*,[ \t]*{_IDENT})*[ \t]*)?"
_ARG = rf"{_IDENT}(?:[ \t]*\([ \t]*{_NAMES}\))?"
_ARGS = rf"(?:{_ARG}(?:[ \t]*,[ \t]*{_ARG})*[ \t]*)?"


def _statement(target: str, op: str, args: str) -> str:
    """A plain statement and the blank space and comments after it, from patterns of its
    three parts: the grammar's terminal and the splitting regex differ only in groups."""
    return rf"{target}[ \t]*=[ \t]*{op}[ \t]*\([ \t]*{args}\)(?:\s|#[^\n]*)*"


STATEMENT = _statement(_IDENT, _IDENT, _ARGS)
"""One plain statement with the blank space and comments after it."""

TERMINALS = {
    "KEYWORDS": "\n".join(f'{word.upper()}: "{word}"' for word in KEYWORDS),
    "SIMPLE_ASSIGNS": rf"/(?:{STATEMENT}){{1,256}}/",
    "NAME_EQ": rf"/{_IDENT}\s*=/",
}
"""What graph.lark's placeholders stand for: a terminal per keyword (GRAPH for
``graph``), up to 256 plain statements in a row, and a name that is not a keyword
followed by "=" (a statement's target or a keyword argument's name)."""

_STATEMENT = re.compile(_statement(f"({_IDENT})", f"({_IDENT})", f"({_ARGS})"))
_WORD = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ARG_PARTS = re.compile(rf"({_IDENT})[ \t]*(?:(\()[ \t]*({_NAMES})\))?")
"""An argument: its name, and for a nested call its "(" and argument names."""
_ASSIGNED = re.compile(rf"{_IDENT}[ \t]*=[ \t]*")
_CALLED = re.compile(rf"({_IDENT})[ \t]*\(")


def add_statements(fb: FunctionBuilder, tok: Token, file: str | None) -> None:
    """Add every statement of a SIMPLE_ASSIGNS token to ``fb``.

    A nested call becomes an anonymous node just before the statement that holds
    it, as in the word-level path, so ``%k`` names come out the same.
    """
    text = tok.value
    line, line_start, first_column = tok.line, 0, tok.column
    add_node = fb.add_node
    for m in _STATEMENT.finditer(text):
        start, end = m.start(), m.end()
        column = start - line_start + (first_column if line_start == 0 else 1)
        loc = Location(file, line, column)
        target, op, args = m.groups()
        if "(" not in args:
            add_node((target,), op, tuple(_WORD.findall(args)), loc)
        else:
            inputs = []
            args_column = column + m.start(3) - start
            for arg in _ARG_PARTS.finditer(args):
                name, paren, inner = arg.groups()
                if paren:
                    anon = fb.anonymous()
                    at = Location(file, line, args_column + arg.start())
                    add_node((anon,), name, tuple(_WORD.findall(inner)), at)
                    inputs.append(anon)
                else:
                    inputs.append(name)
            add_node((target,), op, tuple(inputs), loc)
        newlines = text.count("\n", start, end)
        if newlines:
            line += newlines
            line_start = text.rfind("\n", start, end) + 1


def locate_in_call(lines: SourceLines, loc: Location, i: int) -> Location:
    """Where part ``i`` (an input number, or OP) is of the call that starts at
    ``loc``: a statement ``t = op(...)``, or a nested call ``op(...)`` inside one."""
    text = lines.after(loc)
    head = _ASSIGNED.match(text)
    call = _CALLED.match(text, head.end() if head else 0)
    if call is None:  # not a call at all: the statement itself is the best place
        return loc
    if i == OP:
        offset = call.start(1)
    else:
        arg = next(islice(_ARG_PARTS.finditer(text, call.end()), i, None), None)
        if arg is None:
            return loc
        offset = arg.start()
    return Location(loc.file, loc.line, loc.column + offset)
