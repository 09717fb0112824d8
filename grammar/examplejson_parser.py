"""Parse ExampleJSON text into byoc IR.

Each subgraph becomes a :class:`~byoc.ir.Function` named by its header, with
float32 parameters ``v<id>`` for its inputs, one node ``v<id>`` per op line and the
last op line as its single output. Op tokens (``add``, ``sub``, ``mul``) resolve to
catalog ops through a token table, which the examplejson backend spec provides.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from functools import partial

from lark import Token

from byoc.builder import DECLARED, OP, FunctionBuilder, Naming
from byoc.catalog import Catalog
from byoc.errors import GraphError, Location, ParseError
from byoc.ir import MAX_ELEMENTS, MAX_NAME_LENGTH, Function, Program, TensorType, shape_problem

from .lark_support import ReaderParser, SourceLines, check_name_lengths, decode, run_parser

DTYPE = "float32"
"""ExampleJSON carries no dtype; every tensor is float32, as in the guide."""

NAME_PREFIX = "v"
"""IR names of ExampleJSON ids: id 4 becomes ``v4``, a valid DSL identifier."""

IDS = Naming("id", lambda name: name[len(NAME_PREFIX) :] if name.startswith(NAME_PREFIX) else name)
"""Messages speak of ExampleJSON's ids as the text writes them: ``id '7'``, not ``v7``."""

DESCRIBE = {
    "HEADER": "a subgraph name",
    "INPUT_LINE": "an `input` line",
    "OP_LINE": "an op line",
    "INPUT": "`input`",
    "NAME": "an op name",
    "INT": "an integer",
    "INPUTS": "`inputs:`",
    "SHAPE": "`shape:`",
    "_NL": "end of line",
    "_BLANK": "",
    "$END": "end of input",
}

_WORD = re.compile(r"\S+")
_LONG_WORDS = re.compile(rf"(?<![A-Za-z0-9_])([A-Za-z0-9_]{{{MAX_NAME_LENGTH + 1},}})")
"""A name or number longer than MAX_NAME_LENGTH (ExampleJSON has no comments or strings)."""


class _Reader:
    """Lark's callbacks for one parse (see :class:`~.lark_support.ReaderParser`):
    builds IR as rules reduce (no parse tree)."""

    def __init__(self, file: str | None, catalog: Catalog, tokens: Mapping[str, str], source: str) -> None:
        self.file = file
        self.catalog = catalog
        self.tokens = tokens
        self.source = source
        self.lines = SourceLines(source)
        self.shapes: dict[str, TensorType] = {}

    # ---- helpers
    def _loc(self, tok: Token, offset: int = 0) -> Location:
        return Location(self.file, tok.line, tok.column + offset)

    def _locate_in_line(self, loc: Location, i: int) -> Location:
        """Where part ``i`` of the op line at ``loc`` is, read again from the source."""
        return _line_location(loc, self.lines.after(loc), i)

    def _type(self, dims_text: str, locate: Callable[[int], Location]) -> TensorType:
        """The type of a line's dims, on a miss of ``self.shapes`` (callers look there
        first); ``locate(k)`` is where the k-th dim is, for errors."""
        shape = tuple(int(d) for d in dims_text.split())  # dims have <= MAX_NAME_LENGTH digits
        problem = shape_problem(shape)
        if problem is not None:
            big = next((k for k, d in enumerate(shape) if d > MAX_ELEMENTS), 0)
            raise GraphError(
                f"shape {dims_text} is too large: {problem}",
                locate(big),
                hint="byoc's tensors have at most 2**48 elements",
                source=self.source,
            )
        t = self.shapes[dims_text] = TensorType(shape, DTYPE)
        return t

    def _op_name(self, token: str, loc: Location) -> str:
        op = self.tokens.get(token)
        if op is None:
            raise GraphError(
                f"unknown op token {token!r}",
                loc,
                hint=f"this backend's op tokens: {', '.join(sorted(self.tokens))}",
                source=self.source,
            )
        return op

    # ---- rules
    def start(self, children):
        return children

    def subgraph(self, children):
        header: Token = children[0]
        fb = FunctionBuilder(
            self.catalog,
            str(header),
            self._loc(header),
            source=self.source,
            naming=IDS,
            locator=self._locate_in_line,
        )
        last = None
        for item in children[1:]:
            if type(item) is tuple:  # from a word-level fallback rule
                if item[0] == "input":
                    fb.add_param(*item[1])
                else:
                    fb.add_node(**item[1])
                    last = (item[1]["outputs"][0], item[1]["loc"])
            elif item.type == "OP_LINES":
                last = self._op_lines(fb, item)
            else:
                self._input_lines(fb, item)
        if last is None:
            raise GraphError(
                f"subgraph {header} has no op lines",
                self._loc(header),
                hint="a subgraph's result is its last op line; add at least one",
            )
        return fb.finish([last])

    def _lines(self, tok: Token):
        """(line, column, text) of each non-blank line of a multi-line token."""
        line, first = tok.line, True
        for piece in tok.value.split("\n"):
            stripped = piece.lstrip(" \t")
            if stripped.strip():
                column = len(piece) - len(stripped) + (tok.column if first else 1)
                yield line, column, stripped
            line += 1
            first = False

    def _input_lines(self, fb: FunctionBuilder, tok: Token) -> None:
        # input 0 10 10
        file = self.file
        for line, column, text in self._lines(tok):
            _, ident, *dims = text.split()
            loc = Location(file, line, column)
            key = " ".join(dims)
            t = self.shapes.get(key) or self._type(key, partial(_word_location, loc, text, 2))
            fb.add_param(_name(ident), t, loc)

    def _op_lines(self, fb: FunctionBuilder, tok: Token) -> tuple[str, Location]:
        # add 4 inputs: 0 1 shape: 10 10
        file, tokens = self.file, self.tokens
        for line, column, text in self._lines(tok):
            at = text.index("shape:")
            parts = text[:at].split()
            loc = Location(file, line, column)
            key = text[at + 6 :].strip()
            declared = self.shapes.get(key) or self._type(
                key, partial(_word_location, loc, text, len(parts) + 1)
            )
            name = _name(parts[1])
            fb.add_node(
                (name,),
                tokens.get(parts[0]) or self._op_name(parts[0], loc),
                tuple([_name(i) for i in parts[3:]]),
                loc,
                declared=declared,
            )
        return name, loc

    # Word-level fallbacks. They see the rare lines the line tokens do not match
    # (unusual spacing such as `inputs:0`) and build exactly what the fast path builds.
    def input_decl(self, children):
        keyword, ident, *dims = children
        key = " ".join(dims)
        shape = self.shapes.get(key) or self._type(key, lambda k: self._loc(dims[k]))
        return "input", (_name(ident), shape, self._loc(keyword))

    def op_decl(self, children):
        name, ident, _inputs, *rest = children
        k = next(i for i, t in enumerate(rest) if t.type == "SHAPE")
        inputs, shape, dims = rest[:k], rest[k], rest[k + 1 :]
        return "op", {
            "outputs": (_name(ident),),
            "op": self._op_name(str(name), self._loc(name)),
            "inputs": tuple(_name(t) for t in inputs),
            "loc": self._loc(name),
            "locate": partial(_token_location, self, name, inputs, shape),
            "declared": self.shapes.get(key := " ".join(dims))
            or self._type(key, lambda k: self._loc(dims[k])),
        }


def _shift(loc: Location, offset: int) -> Location:
    return Location(loc.file, loc.line, loc.column + offset)


def _line_location(loc: Location, text: str, i: int) -> Location:
    """Where input ``i`` (or the op, or the declared shape) is on an op line."""
    if i == OP:
        return loc
    if i == DECLARED:
        return _shift(loc, text.index("shape:"))
    return _word_location(loc, text, 3, i)  # `add 4 inputs:` are words 0-2


def _word_location(loc: Location, text: str, first: int, k: int) -> Location:
    """Where word ``first + k`` of a line is (``loc`` is the line's first word)."""
    return _shift(loc, list(_WORD.finditer(text))[first + k].start())


def _token_location(reader: _Reader, op: Token, inputs: list[Token], shape: Token, i: int) -> Location:
    """The same, for a line read by the word-level rules."""
    return reader._loc(op if i == OP else shape if i == DECLARED else inputs[i])


def _name(ident: str) -> str:
    """The IR name of an ExampleJSON id: ``4`` and ``004`` both become ``v4``."""
    return NAME_PREFIX + (ident if ident[0] != "0" or len(ident) == 1 else ident.lstrip("0") or "0")


_parser = ReaderParser("examplejson.lark", _Reader)


def parse_examplejson(
    data: str | bytes,
    catalog: Catalog,
    *,
    tokens: Mapping[str, str],
    file: str | None = None,
) -> Program:
    """Parse ExampleJSON text (or bytes) into a Program, one Function per subgraph.

    ``tokens`` maps op tokens to catalog ops; an examplejson backend spec provides
    them (:func:`byoc.api.examplejson_tokens`)."""
    text = decode(data, file)
    check_name_lengths(text, file, _LONG_WORDS, "name or number")
    body = text if text.endswith("\n") else text + "\n"
    reader = _Reader(file, catalog, tokens, text)
    functions = run_parser(partial(_parser.parse, reader=reader), body, file, DESCRIBE)
    if not functions:
        raise ParseError(
            "no subgraph found",
            Location(file, 1, 1),
            hint="start with a header line such as `subgraph_0`",
            source=text,
        )
    names: dict[str, Function] = {}
    for fn in functions:
        if fn.name in names:
            raise GraphError(
                f"duplicate subgraph name {fn.name!r}",
                fn.loc,
                hint=f"first defined at {names[fn.name].loc}",
                source=text,
            )
        names[fn.name] = fn
    return Program(tuple(functions))
