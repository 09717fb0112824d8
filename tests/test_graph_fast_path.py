"""The DSL's fast path (grammar/graph_statements.py) against the word-level rules.

Runs of plain statements (``t = op(a, f(b, c))``) are read from one Lark token by
regexes. They must give exactly the IR the word-level rules give (same nodes, same
order, same anonymous names) and report errors at the same exact columns.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pytest
from conftest import parse_graph_text
from hypothesis import given, settings
from hypothesis import strategies as st

from byoc.errors import GraphError, ParseError
from byoc.grammar.graph_parser import _parser
from byoc.grammar.graph_statements import KEYWORDS, STATEMENT
from byoc.grammar.lark_support import GRAMMAR_DIR

UNARY = ("negative", "relu", "copy")
BINARY = ("add", "subtract", "multiply", "maximum", "minimum")
PARAMS = ("x", "y", "z")
HEADER = "graph main(x: float32[2, 3], y: float32[2, 3], z: float32[2, 3]) {"


def test_the_grammar_takes_its_keywords_and_statement_terminal_from_python():
    """graph.lark spells out neither the keywords nor the statement regex; the
    parser's grammar has them from graph_statements."""
    lines = (GRAMMAR_DIR / "graph.lark").read_text(encoding="utf-8").splitlines()
    rules = "\n".join(ln for ln in lines if not ln.lstrip().startswith("//"))
    assert not [word for word in KEYWORDS if f'"{word}"' in rules or f"{word}|" in rules]
    loaded = _parser.grammar.splitlines()
    assert "SIMPLE_ASSIGNS.3: /(?:" + STATEMENT + "){1,256}/" in loaded
    assert [f'{word.upper()}: "{word}"' for word in KEYWORDS] == [
        ln for ln in loaded if ln.split(":")[0] in {w.upper() for w in KEYWORDS}
    ]


# ------------------------------------------------------------ a text generator


@dataclass
class Text:
    """Generated DSL text, with where each word of interest starts (line, column)."""

    newline: str
    lines: list[str] = field(default_factory=list)
    words: list[tuple[str, int, int]] = field(default_factory=list)  # (kind, line, column)
    """kind is "input" or "op"; positions are 1-based, as in error messages."""

    def text(self) -> str:
        return self.newline.join([HEADER, *self.lines]) + self.newline

    def line_number(self) -> int:
        return len(self.lines) + 2  # the header is line 1


class _Line:
    def __init__(self, text: Text) -> None:
        self.owner, self.parts, self.width = text, [], 0

    def add(self, piece: str, kind: str | None = None) -> None:
        if kind:
            self.owner.words.append((kind, self.owner.line_number(), self.width + 1))
        self.parts.append(piece)
        self.width += len(piece)

    def close(self) -> None:
        self.owner.lines.append("".join(self.parts))


spaces = st.sampled_from(["", " ", "\t", "  "])


@st.composite
def call_text(draw, line: _Line, names: list[str], nested: bool) -> None:
    """``op(args)`` where each argument is a defined name or (once) a nested call."""
    unary = draw(st.booleans())
    line.add(draw(st.sampled_from(UNARY if unary else BINARY)), "op")
    line.add(draw(spaces) + "(" + draw(spaces))
    for k in range(1 if unary else 2):
        if k:
            line.add(draw(spaces) + "," + draw(spaces))
        if nested and draw(st.integers(0, 3)) == 0:
            draw(call_text(line, names, nested=False))
        else:
            line.add(draw(st.sampled_from(names)), "input")
    line.add(draw(spaces) + ")")


@st.composite
def graph_texts(draw) -> Text:
    text = Text(newline=draw(st.sampled_from(["\n", "\r\n"])))
    names = list(PARAMS)
    for k in range(draw(st.integers(1, 12))):
        if draw(st.integers(0, 5)) == 0:
            text.lines.append(draw(st.sampled_from(["", "  # a comment = add(x, y)", "\t"])))
        line = _Line(text)
        line.add(draw(st.sampled_from(["", "  ", "\t"])) + f"t{k}" + draw(spaces) + "=" + draw(spaces))
        draw(call_text(line, names, nested=True))
        line.add(draw(st.sampled_from(["", "  ", "  # t = f(x)"])))
        line.close()
        names.append(f"t{k}")
    text.lines.append(f"  return {names[-1]}")
    text.lines.append("}")
    return text


def _word_level(text: str) -> str:
    """The same graph, written so that the fast path matches none of it: a trailing
    comma in every argument list is valid DSL that only the word-level rules take."""
    return re.sub(r"[ \t]*\)", ",)", text)


def _replace_word(text: Text, index: int, new: str) -> str:
    """``text`` with word ``index`` (as recorded in text.words) replaced by ``new``."""
    _, line, column = text.words[index]
    lines = text.text().split(text.newline)
    old = re.match(r"[A-Za-z_][A-Za-z0-9_]*", lines[line - 1][column - 1 :]).group()
    lines[line - 1] = lines[line - 1][: column - 1] + new + lines[line - 1][column - 1 + len(old) :]
    return text.newline.join(lines)


# ----------------------------------------------------------------- the checks


@settings(max_examples=150, deadline=None)
@given(graph_texts())
def test_fast_path_builds_what_the_word_rules_build(text):
    fast = parse_graph_text(text.text())
    slow = parse_graph_text(_word_level(text.text()))
    assert fast == slow
    fast_nodes, slow_nodes = fast.functions[0].nodes, slow.functions[0].nodes
    # Statement nodes start at their target on both paths (trailing commas only move
    # words to their right), so their locations must agree too.
    for a, b in zip(fast_nodes, slow_nodes):
        if not a.name.startswith("%"):
            assert (a.loc.line, a.loc.column) == (b.loc.line, b.loc.column)


@settings(max_examples=150, deadline=None)
@given(graph_texts(), st.data())
def test_fast_path_errors_point_at_the_word(text, data):
    index = data.draw(st.integers(0, len(text.words) - 1))
    kind, line, column = text.words[index]
    if kind == "input":
        bad, message = "undefined_q", "undefined name 'undefined_q'"
    else:
        bad, message = "nosuchop", "unknown op 'nosuchop'"
    with pytest.raises(GraphError) as info:
        parse_graph_text(_replace_word(text, index, bad))
    assert message in info.value.message
    assert (info.value.location.line, info.value.location.column) == (line, column)


def test_a_run_longer_than_one_token_reads_every_statement():
    body = "\n".join(f"  t{k} = add(x, negative(x))" for k in range(600))
    program = parse_graph_text(f"{HEADER}\n{body}\n  return t599\n}}\n")
    nodes = program.functions[0].nodes
    assert len(nodes) == 1200
    assert [n.name for n in nodes[:4]] == ["%1", "t0", "%2", "t1"]
    assert nodes[-1].loc.line == 601 and nodes[-1].loc.column == 3


def test_a_malformed_statement_inside_a_run_is_located():
    lines = [f"  t{k} = add(x, y)" for k in range(5)] + ["  t5 = add(x, y"] + ["  t6 = add(x, y)"]
    with pytest.raises(ParseError) as info:
        parse_graph_text(HEADER + "\n" + "\n".join(lines) + "\n  return t6\n}\n")
    # Line 7 lacks its ")", so the word-level rules meet t6 (line 8) where ")" belongs.
    assert info.value.message == "unexpected 't6'; expected `)` or `,`"
    assert (info.value.location.line, info.value.location.column) == (8, 3)
