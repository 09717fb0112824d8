"""Shared Lark plumbing for both languages: a parser per grammar whose callbacks
go to a fresh reader object per parse, turning Lark's exceptions into located
:class:`~byoc.errors.ParseError` s with readable "expected ..." lists, and deferring
full garbage collections while a large text is parsed (it otherwise re-scans the
growing IR and makes parsing super-linear).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Mapping
from functools import cache, partial
from pathlib import Path
from string import Template
from types import SimpleNamespace

from lark import Lark
from lark import __version__ as lark_version
from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedInput, UnexpectedToken, VisitError

from byoc.ast_lock import PYTHON_AST_LOCK
from byoc.disk_cache import cache_dir, entry_key
from byoc.errors import ByocError, Location, ParseError
from byoc.gc_pause import full_collections_deferred
from byoc.ir import MAX_NAME_LENGTH

GRAMMAR_DIR = Path(__file__).parent
LARK_OPTIONS = {
    "parser": "lalr",
    "lexer": "contextual",
    "propagate_positions": False,
    "maybe_placeholders": False,
}
"""How both grammars are parsed: a tree-less LALR parser with a contextual lexer."""


@cache
def grammar_text(name: str) -> str:
    return (GRAMMAR_DIR / name).read_text(encoding="utf-8")


class ReaderParser:
    """A grammar's tree-less LALR parser whose callbacks go to a reader made per parse.

    ``grammar`` names a ``.lark`` file of this folder; each ``$NAME`` in it is replaced
    by ``terminals[NAME]``. ``reader`` is a class whose public methods are named after the grammar's rules and
    terminals (helpers start with ``_``); Lark calls them as it reduces each rule or
    reads each terminal. :meth:`parse` takes a fresh reader object for each text, so
    nothing of one parse is seen by another.

    Lark binds a parser's callbacks once, when it builds the parser, and its lexers
    build their scanners, terminal callbacks included, lazily on first use and without
    a lock: one Lark parser is not safe to share between threads. Each thread builds
    its own on its first parse (tens of milliseconds), whose callbacks pass each value
    to that thread's current reader.
    """

    def __init__(self, grammar: str, reader: type, terminals: Mapping[str, str] | None = None) -> None:
        self.grammar = Template(grammar_text(grammar)).substitute(terminals or {})
        self.reader = reader
        self.callbacks = {
            name: f for name, f in vars(reader).items() if not name.startswith("_") and callable(f)
        }
        self._local = threading.local()

    def parse(self, text: str, reader: object) -> object:
        """Parse ``text`` with the callbacks of ``reader``, an instance of the reader class."""
        assert type(reader) is self.reader
        local = self._local
        if not hasattr(local, "lark"):
            local.current = SimpleNamespace(reader=None)
            routes = {name: partial(_route, local.current, f) for name, f in self.callbacks.items()}
            local.lark = self._lark(SimpleNamespace(**routes))
        current = local.current
        outer, current.reader = current.reader, reader
        try:
            return local.lark.parse(text)
        finally:
            current.reader = outer

    def _lark(self, transformer: SimpleNamespace) -> Lark:
        """A Lark parser of the grammar calling ``transformer``. Its LALR tables are
        kept in byoc's disk cache (:mod:`byoc.disk_cache`) by Lark's own ``cache``
        option, which checks the grammar's digest on load: an earlier process's tables
        load in a few milliseconds instead of tens. Lark rebuilds them, silently, when
        the file is missing, stale or unreadable."""
        key = entry_key("lark", lark_version, repr(sorted(LARK_OPTIONS.items())), self.grammar)
        folder = cache_dir() / "lark"
        try:
            folder.mkdir(parents=True, exist_ok=True)
            cache: str | bool = str(folder / f"{key}.lark")
        except OSError:  # no writable cache: build the tables every time
            cache = False
        with PYTHON_AST_LOCK:  # Lark reads the grammar's literals with ast.literal_eval
            return Lark(self.grammar, transformer=transformer, cache=cache, **LARK_OPTIONS)


def _route(current: SimpleNamespace, callback: Callable, value: object) -> object:
    return callback(current.reader, value)


def decode(data: bytes | str, file: str | None) -> str:
    """UTF-8 text of ``data``, or a ParseError at the first undecodable byte."""
    if isinstance(data, str):
        return data
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        before = data[: exc.start]
        line = before.count(b"\n") + 1
        # Columns count characters, as Lark's do: decode the (valid) start of the line.
        column = len(before[before.rfind(b"\n") + 1 :].decode("utf-8")) + 1
        raise ParseError(
            f"the file is not valid UTF-8 (byte 0x{data[exc.start]:02x})",
            Location(file, line, column),
            hint="save the file as UTF-8",
            source=data.decode("utf-8", errors="replace"),
        ) from None


class SourceLines:
    """A text's lines by number, counted as Lark counts them (on "\\n" only).

    Front ends read a statement's line again only when an error needs a column
    inside it; the line index is built on that first use, so text without errors
    never pays for it.
    """

    __slots__ = ("text", "_starts")

    def __init__(self, text: str) -> None:
        self.text = text
        self._starts: list[int] | None = None

    def line(self, number: int) -> str:
        if self._starts is None:
            self._starts = [0, *(m.end() for m in re.finditer("\n", self.text))]
        start = self._starts[number - 1]
        end = self.text.find("\n", start)
        return self.text[start : end if end >= 0 else len(self.text)]

    def after(self, loc: Location) -> str:
        """The rest of ``loc``'s line, from its column on."""
        return self.line(loc.line)[loc.column - 1 :]


_LONG_RUN = re.compile(rf"[A-Za-z0-9_]{{{MAX_NAME_LENGTH + 1}}}")


def check_name_lengths(text: str, file: str | None, words: re.Pattern[str], what: str = "name") -> None:
    """A located ParseError at the first word longer than :data:`~byoc.ir.MAX_NAME_LENGTH`.

    ``words`` finds the candidates; its group 1 is a too-long word, other matches
    (comments, strings) are skipped. Texts without any long run of word characters,
    nearly all of them, cost one fast regex search."""
    if len(text) <= MAX_NAME_LENGTH or _LONG_RUN.search(text) is None:
        return
    for m in words.finditer(text):
        word = m.group(1)
        if word is None:
            continue
        pos = m.start(1)
        line = text.count("\n", 0, pos) + 1
        column = pos - (text.rfind("\n", 0, pos) + 1) + 1
        raise ParseError(
            f"{what} {word[:20]}... has {len(word):,} characters; the limit is {MAX_NAME_LENGTH}",
            Location(file, line, column),
            hint="use a shorter name",
            source=text,
        )


def run_parser(
    parse: Callable[[str], object],
    text: str,
    file: str | None,
    describe: Mapping[str, str],
    context_hint: Callable[[UnexpectedInput], str | None] = lambda exc: None,
) -> object:
    """Run a Lark ``parse`` call and convert every failure into a ByocError."""
    try:
        with full_collections_deferred():
            return parse(text)
    except VisitError as exc:  # an error raised inside a transformer callback
        inner = exc.orig_exc
        if isinstance(inner, ByocError):
            raise inner.with_source(text) from None
        raise
    except UnexpectedInput as exc:
        raise _convert(exc, text, file, describe, context_hint) from None
    except RecursionError:
        raise ParseError("the text nests too deeply to parse", Location(file, 1, 1), source=text) from None


def _convert(
    exc: UnexpectedInput, text: str, file: str | None, describe: Mapping[str, str], context_hint
) -> ParseError:
    expected = _expected(exc, describe)
    hint = context_hint(exc)
    if isinstance(exc, UnexpectedCharacters):
        char = text[exc.pos_in_stream] if exc.pos_in_stream < len(text) else ""
        message = f"unexpected character {char!r}"
        line, column = exc.line, exc.column
    elif isinstance(exc, UnexpectedEOF) or (isinstance(exc, UnexpectedToken) and exc.token.type == "$END"):
        message = "unexpected end of input"
        line, column = _end_position(text)
    else:
        assert isinstance(exc, UnexpectedToken)
        tok = exc.token
        if tok.type in _LINE_ENDS:
            message = "unexpected end of line"
        else:
            first = tok.value.strip().split("\n", 1)[0].split()[0] if tok.value.strip() else tok.value
            shown = first if len(first) <= 40 else first[:37] + "..."
            message = f"unexpected {shown!r}"
        line, column = tok.line, tok.column
    if expected:
        message += f"; expected {expected}"
    return ParseError(message, Location(file, line, column), hint=hint, source=text)


_LINE_ENDS = frozenset({"_NL", "_BLANK"})


def _expected(exc: UnexpectedInput, describe: Mapping[str, str]) -> str:
    names = getattr(exc, "expected", None) or getattr(exc, "allowed", None) or ()
    interactive = getattr(exc, "interactive_parser", None)
    if interactive is not None:
        try:  # exact: simulates each terminal, where the LALR table may list fewer
            names = interactive.accepts() or names
        except Exception:  # a reduction callback objected; keep Lark's own list
            pass
    shown = sorted({describe.get(n, n) for n in names if describe.get(n, n)})
    if not shown:
        return ""
    if len(shown) == 1:
        return shown[0]
    return ", ".join(shown[:-1]) + " or " + shown[-1]


def _end_position(text: str) -> tuple[int, int]:
    stripped = text.rstrip("\r\n")
    line = stripped.count("\n") + 1
    column = len(stripped) - (stripped.rfind("\n") + 1) + 1
    return line, column
