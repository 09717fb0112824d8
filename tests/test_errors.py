"""Malformed input in both languages: the error class, exact location, message,
rendering, and the CLI's clean exit."""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass

import pytest
from conftest import GUIDE_SUBGRAPH, GUIDE_WHOLE_GRAPH

import byoc
from byoc.builder import USER_OPS
from byoc.cli import main
from byoc.errors import ByocError, GraphError, Location, ParseError, UsageError


@dataclass(frozen=True)
class Case:
    id: str
    language: str
    text: str | bytes
    error: type[ByocError]
    line: int
    column: int
    fragment: str


def G(body: str, params: str = "x: float32[4]") -> str:
    """A one-graph DSL text; ``body`` starts on line 2, indented by two spaces."""
    return f"graph main({params}) {{\n{body}\n}}\n"


EJ = "sg\n  input 0 4\n"
"""An ExampleJSON prefix: header on line 1, `input 0 4` on line 2."""

CASES = [
    # ------------------------------------------------------------- ExampleJSON
    Case("ej-unknown-op", "examplejson", EJ + "  foo 1 inputs: 0 0 shape: 4\n", GraphError, 3, 3,
         "unknown op token 'foo'"),
    Case("ej-undefined-id", "examplejson", EJ + "  add 1 inputs: 0 7 shape: 4\n", GraphError, 3, 19,
         "undefined id '7'"),
    Case("ej-undefined-id-odd-spacing", "examplejson", EJ + "  add 1 inputs:0  7 shape:4\n", GraphError,
         3, 19, "undefined id '7'"),
    Case("ej-duplicate-input-id", "examplejson", EJ + "  input 0 4\n  add 1 inputs: 0 0 shape: 4\n",
         GraphError, 3, 3, "duplicate id '0'"),
    Case("ej-duplicate-node-id", "examplejson",
         EJ + "  add 1 inputs: 0 0 shape: 4\n  mul 1 inputs: 0 0 shape: 4\n", GraphError, 4, 3,
         "duplicate id '1'"),
    Case("ej-declared-shape-wrong", "examplejson", EJ + "  add 1 inputs: 0 0 shape: 5\n", GraphError, 3,
         21, "shape mismatch: add gives float32[4] here, but the text declares float32[5]"),
    Case("ej-declared-shape-wrong-crlf", "examplejson",
         (EJ + "  add 1 inputs: 0 0 shape: 4\n  mul 2 inputs: 1 0 shape: 4 4\n").replace("\n", "\r\n"),
         GraphError, 4, 21, "declares float32[4, 4]"),
    Case("ej-shapes-do-not-broadcast", "examplejson", EJ + "  input 1 3\n  add 2 inputs: 0 1 shape: 4\n",
         GraphError, 4, 3, "shapes [4] and [3] do not broadcast"),
    Case("ej-cycle-forward-references", "examplejson",
         EJ + "  add 1 inputs: 0 2 shape: 4\n  add 2 inputs: 0 1 shape: 4\n", GraphError, 4, 19,
         "cycle: 1 -> 2 -> 1"),
    Case("ej-self-reference", "examplejson", EJ + "  add 1 inputs: 0 1 shape: 4\n", GraphError, 3, 19,
         "cycle: 1 -> 1"),
    Case("ej-missing-shape", "examplejson", EJ + "  add 1 inputs: 0 0 4\n", ParseError, 3, 22,
         "expected `shape:`"),
    Case("ej-missing-inputs-colon", "examplejson", EJ + "  add 1 inputs 0 0 shape: 4\n", ParseError, 3, 9,
         "expected `inputs:`"),
    Case("ej-stray-character", "examplejson", EJ + "  add 1 inputs: 0 $ shape: 4\n", ParseError, 3, 19,
         "unexpected character '$'"),
    Case("ej-negative-dim", "examplejson", "sg\n  input 0 -4\n", ParseError, 2, 11,
         "unexpected character '-'"),
    Case("ej-wrong-arity", "examplejson", EJ + "  add 1 inputs: 0 shape: 4\n", GraphError, 3, 3,
         "add takes 2 inputs, got 1"),
    Case("ej-empty-file", "examplejson", "", ParseError, 1, 1, "no subgraph found"),
    Case("ej-blank-file", "examplejson", "\n  \n\n", ParseError, 1, 1, "no subgraph found"),
    Case("ej-no-header", "examplejson", "add 1 inputs: 0 0 shape: 4\n", ParseError, 1, 1,
         "a subgraph name"),
    Case("ej-no-op-lines", "examplejson", EJ, GraphError, 1, 1, "subgraph sg has no op lines"),
    Case("ej-duplicate-subgraph", "examplejson",
         EJ + "  add 1 inputs: 0 0 shape: 4\n" + EJ + "  add 1 inputs: 0 0 shape: 4\n", GraphError, 4, 1,
         "duplicate subgraph name 'sg'"),
    Case("ej-non-utf8", "examplejson", b"sg\n  input 0 4\xff\n", ParseError, 2, 12, "not valid UTF-8"),
    Case("ej-non-utf8-after-non-ascii", "examplejson", "sgé".encode() + b"\xff\n", ParseError, 1, 4,
         "byte 0xff"),
    # --------------------------------------------------------------- graph DSL
    Case("dsl-unknown-op", "graph", G("  y = foo(x, x)\n  return y"), GraphError, 2, 7, "unknown op 'foo'"),
    Case("dsl-unknown-op-nested", "graph", G("  y = add(fooo(x), x)\n  return y"), GraphError, 2, 11,
         "unknown op 'fooo'"),
    Case("dsl-undefined-name", "graph", G("  y = add(x, z)\n  return y"), GraphError, 2, 14,
         "undefined name 'z'"),
    Case("dsl-undefined-in-return", "graph", G("  return add(x, q)"), GraphError, 2, 17,
         "undefined name 'q'"),
    Case("dsl-undefined-in-region", "graph", G("  s = @ccompiler {\n    return nope\n  }\n  return s"),
         GraphError, 3, 12, "undefined name 'nope'"),
    Case("dsl-duplicate-name", "graph", G("  y = add(x, x)\n  y = add(x, x)\n  return y"), GraphError, 3,
         3, "duplicate name 'y': already defined as a node (first defined at <string>:2:3)"),
    Case("dsl-duplicate-param", "graph", G("  return x", "x: float32[4], x: float32[4]"), GraphError, 1,
         27, "duplicate name 'x': already defined as a parameter"),
    Case("dsl-duplicate-graph", "graph", G("  return x") + G("  return x"), GraphError, 4, 7,
         "duplicate graph name 'main'"),
    Case("dsl-shapes-do-not-broadcast", "graph", G("  y = add(x, w)\n  return y", "x: float32[4], w: float32[3]"),
         GraphError, 2, 7, "shapes [4] and [3] do not broadcast"),
    Case("dsl-concatenate-shapes-differ", "graph",
         G("  return concatenate(x, w, axis=1)", "x: float32[2, 4], w: float32[3, 4]"), GraphError, 2, 10,
         "differ on axis 0"),
    Case("dsl-cycle", "graph", G("  a = add(b, x)\n  b = add(a, x)\n  return b"), GraphError, 3, 11,
         "cycle: a -> b -> a"),
    Case("dsl-cycle-self", "graph", G("  y = add(x, y)\n  return y"), GraphError, 2, 14, "cycle: y -> y"),
    Case("dsl-cycle-through-region", "graph", G("  s = @ccompiler {\n    return negative(s)\n  }\n  return s"),
         GraphError, 3, 21, "cycle: s -> s"),
    Case("dsl-bad-dtype", "graph", G("  return x", "x: complex64[4]"), ParseError, 1, 15,
         "unknown dtype 'complex64'"),
    Case("dsl-unterminated-region", "graph", "graph main(x: float32[4]) {\n  s = @ccompiler {\n    return add(x, x)\n",
         ParseError, 3, 21, "unexpected end of input"),
    Case("dsl-unterminated-graph", "graph", "graph main(x: float32[4]) {\n  return x\n\n\n", ParseError, 2, 11,
         "unexpected end of input"),
    Case("dsl-stray-character", "graph", G("  y = add(x, $x)\n  return y"), ParseError, 2, 14,
         "unexpected character '$'"),
    Case("dsl-missing-return", "graph", G("  y = add(x, x)"), ParseError, 3, 1, "unexpected '}'"),
    Case("dsl-unclosed-call", "graph", G("  y = add(x, x\n  return y"), ParseError, 3, 3,
         "unexpected 'return'"),
    Case("dsl-dtype-mismatch", "graph", G("  y = add(x, i)\n  return y", "x: float32[4], i: int32[4]"),
         GraphError, 2, 7, "dtype mismatch: float32 and int32"),
    Case("dsl-dtype-unsupported", "graph", G("  y = divide(x, x)\n  return y", "x: int32[4]"), GraphError, 2,
         7, "divide does not support dtype int32"),
    Case("dsl-wrong-arity-few", "graph", G("  y = add(x)\n  return y"), GraphError, 2, 7,
         "add takes 2 inputs, got 1"),
    Case("dsl-wrong-arity-many", "graph", G("  y = negative(x, x)\n  return y"), GraphError, 2, 7,
         "negative takes 1 input, got 2"),
    Case("dsl-unknown-attribute", "graph", G("  y = concatenate(x, x, axes=0)\n  return y"), GraphError, 2,
         25, "concatenate has no attribute 'axes'"),
    Case("dsl-attribute-on-op-without-attributes", "graph", G("  y = add(x, x, axis=1)\n  return y"),
         GraphError, 2, 17, "add has no attribute 'axis'"),
    Case("dsl-attribute-given-twice", "graph", G("  y = concatenate(x, axis=0, axis=0)\n  return y"),
         GraphError, 2, 30, "attribute 'axis' is given twice"),
    Case("dsl-attribute-wrong-type", "graph", G("  y = concatenate(x, axis=1.5)\n  return y"), GraphError, 2,
         22, "attribute axis must be int, got 1.5"),
    Case("dsl-attribute-bad-escape", "graph", G('  y = concatenate(x, axis="\\x")\n  return y'), ParseError,
         2, 27, "bad escape in string"),
    Case("dsl-attribute-name-value", "graph", G("  y = concatenate(x, axis=foo)\n  return y"), ParseError, 2,
         27, "unexpected name 'foo' as an attribute value"),
    Case("dsl-positional-after-keyword", "graph", G("  y = concatenate(axis=0, x)\n  return y"), ParseError,
         2, 27, "a positional argument follows a keyword attribute"),
    Case("dsl-axis-out-of-range", "graph", G("  y = concatenate(x, axis=3)\n  return y"), GraphError, 2, 22,
         "axis = 3 is out of range for rank 1"),
    Case("dsl-region-returns-too-few", "graph", G("  a, b = @ccompiler {\n    return add(x, x)\n  }\n  return a"),
         GraphError, 2, 3, "the region returns 1 value(s) but 2 name(s) are bound"),
    Case("dsl-region-returns-too-many", "graph", G("  a = @ccompiler {\n    return x, x\n  }\n  return a"),
         GraphError, 2, 3, "the region returns 2 value(s) but 1 name(s) are bound"),
    Case("dsl-several-names-for-one-output", "graph", G("  a, b = add(x, x)\n  return a"), GraphError, 2, 10,
         "add gives 1 output, but the node has 2"),
    Case("dsl-several-names-without-op", "graph", G("  a, b = x\n  return a"), GraphError, 2, 6,
         "only a region or an op of several outputs can bind several names"),
    Case("dsl-region-shadows-outer-name", "graph",
         G("  s = @ccompiler {\n    x = add(x, x)\n    return x\n  }\n  return s"), GraphError, 3, 5,
         "'x' in this region shadows 'x' of the enclosing graph"),
    Case("dsl-region-without-backend", "graph", G("  s = @ {\n    return x\n  }\n  return s"), ParseError, 2,
         9, "expected a name"),
    Case("dsl-rename-only", "graph", G("  y = x\n  return y"), GraphError, 2, 7,
         "`y = x` only renames a value"),
    Case("dsl-constant-too-large", "graph", G("  k = const float32[100000, 100000] 1\n  return k"), GraphError, 2, 7,
         "the limit for literal values is 16,777,216"),
    Case("dsl-constant-count", "graph", G("  k = const float32[3] [1, 2]\n  return k"), GraphError, 2, 7,
         "constant of type float32[3] needs 3 values, got 2"),
    Case("dsl-int-constant-float-value", "graph", G("  k = const int32[2] [1, 2.5]\n  return k"), GraphError, 2,
         7, "an int32 constant takes integers only"),
    Case("dsl-int-constant-out-of-range", "graph", G("  k = const int32[1] [2147483648]\n  return k"),
         GraphError, 2, 7, "constant value 2147483648 is out of range for int32"),
    Case("dsl-float-constant-overflow", "graph", G("  k = const float32[2] [1, 1e39]\n  return k"), GraphError,
         2, 7, "out of range for float32"),
    Case("dsl-type-missing-bracket", "graph", G("  return x", "x: float32[4"), ParseError, 1, 24,
         "expected `,` or `]`"),
    Case("dsl-param-without-type", "graph", G("  return x", "x"), ParseError, 1, 13, "expected `:`"),
    Case("dsl-extra-closing-brace", "graph", G("  return x") + "}", ParseError, 4, 1, "expected `graph`"),
    Case("dsl-empty-file", "graph", "", ParseError, 1, 1, "no graph found"),
    Case("dsl-comment-only-file", "graph", "# nothing here\n\n", ParseError, 1, 1, "no graph found"),
    Case("dsl-non-utf8", "graph", b"graph main(x: float32[4]) {\n  return \xff\n}\n", ParseError, 2, 10,
         "not valid UTF-8 (byte 0xff)"),
    Case("dsl-non-utf8-after-non-ascii", "graph", "# héllo ".encode() + b"\xfe\n", ParseError, 1, 9,
         "byte 0xfe"),
    Case("dsl-nests-too-deeply", "graph", G("  return " + "negative(" * 2000 + "x" + ")" * 2000), ParseError,
         1, 1, "nests too deeply"),
]  # fmt: skip


def test_there_are_enough_cases_in_both_languages():
    assert sum(c.language == "examplejson" for c in CASES) >= 12
    assert sum(c.language == "graph" for c in CASES) >= 25
    assert len({c.id for c in CASES}) == len(CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_malformed_input(case: Case):
    with pytest.raises(ByocError) as info:
        byoc.parse(case.text, case.language)
    exc = info.value
    assert type(exc) is case.error, f"{type(exc).__name__}: {exc}"
    assert isinstance(exc, ByocError)
    assert exc.location is not None
    assert (exc.location.line, exc.location.column) == (case.line, case.column), str(exc)
    assert case.fragment in exc.message
    assert str(exc) == f"<string>:{case.line}:{case.column}: {exc.message}"
    # Every error can show where it is.
    rendered = exc.render()
    assert f"--> <string>:{case.line}:{case.column}" in rendered
    assert rendered.splitlines()[0] == f"{exc.title}: {exc.message}"


@pytest.mark.parametrize("case", CASES, ids=[c.id for c in CASES])
def test_error_file_name_is_reported(case: Case):
    with pytest.raises(case.error) as info:
        byoc.parse(
            case.text, case.language, file=f"in.{'graph' if case.language == 'graph' else 'examplejson'}"
        )
    assert info.value.location.file.startswith("in.")


def test_error_classes_share_one_base():
    for cls in (ParseError, GraphError, UsageError):
        assert issubclass(cls, ByocError)
        assert issubclass(cls, Exception)
    assert not issubclass(ParseError, GraphError) and not issubclass(GraphError, ParseError)


# ------------------------------------------------------------------ rendering


def _caret_under(exc: ByocError) -> str:
    """The character of the source line that the caret points at."""
    lines = exc.render().splitlines()
    caret_row = next(i for i, line in enumerate(lines) if line.rstrip().endswith("^") and "|" in line)
    source_line, caret_line = lines[caret_row - 1], lines[caret_row]
    assert source_line.startswith(f"{exc.location.line} | ")
    bar = caret_line.index("|")
    assert source_line.index("|") == bar
    return source_line[caret_line.index("^")]


@pytest.mark.parametrize(
    ("language", "text", "char"),
    [
        ("graph", G("  y = add(x, zz)\n  return y"), "z"),
        ("graph", G("\ty = add(x,\tzz)\n\treturn y"), "z"),
        ("graph", G("  y = add(x, $)\n  return y"), "$"),
        ("examplejson", EJ + "  add 1 inputs: 0 7 shape: 4\n", "7"),
        ("examplejson", "sg\r\n\tinput 0 4\r\n\tadd 1 inputs: 0 0 shape: 5\r\n", "s"),
        ("examplejson", EJ + "  mul 1 inputs: 0 0 shape: 4\n  bogus 2 inputs: 1 1 shape: 4\n", "b"),
    ],
)
def test_render_puts_the_caret_under_the_column(language, text, char):
    with pytest.raises(ByocError) as info:
        byoc.parse(text, language)
    assert _caret_under(info.value) == char


def test_render_layout():
    with pytest.raises(GraphError) as info:
        byoc.parse(EJ + "  add 1 inputs: 0 7 shape: 4\n", "examplejson")
    assert info.value.render().splitlines() == [
        "graph error: undefined id '7'",
        "  --> <string>:3:19",
        "  |",
        "3 |   add 1 inputs: 0 7 shape: 4",
        "  |                   ^",
        "  = hint: define it as a parameter, constant or node first",
    ]


def test_render_clips_very_long_lines():
    long_names = "n1, " * 100  # names are at most 128 characters; the line is 400
    text = G(f"  y = add(x, {long_names}$)\n  return y")
    with pytest.raises(ParseError) as info:
        byoc.parse(text)
    assert max(len(line) for line in info.value.render().splitlines()) < 130
    assert _caret_under(info.value) == "$"


def test_render_at_end_of_input_points_past_the_last_character():
    with pytest.raises(ParseError) as info:
        byoc.parse("graph main(x: float32[4]) {\n  return x")
    exc = info.value
    assert (exc.location.line, exc.location.column) == (2, 11)
    assert exc.render().splitlines()[-1].index("^") == exc.render().splitlines()[-2].index("x") + 1


def test_render_reads_the_file_when_no_source_is_attached(tmp_path):
    path = tmp_path / "g.graph"
    path.write_text("line one\nline two\n", encoding="utf-8")
    rendered = ParseError("bad", Location(str(path), 2, 6)).render()
    assert "2 | line two" in rendered
    assert rendered.splitlines()[-1].index("^") == rendered.splitlines()[-2].index("two")


@pytest.mark.parametrize("separator", ["\x0c", "\x0b", "\x1c", "\x85", "\u2028"])
def test_render_counts_lines_as_the_parser_does(separator):
    """Lark counts lines at "\n" only, so a form feed (or another character that
    str.splitlines breaks at) inside a comment must not shift the line shown."""
    text = G(f"  # a comment {separator} with a separator in it\n  y = add(x, nope)\n  return y")
    with pytest.raises(GraphError) as info:
        byoc.parse(text)
    assert info.value.location.line == 3
    assert "3 |   y = add(x, nope)" in info.value.render()
    assert _caret_under(info.value) == "n"


def test_render_counts_yaml_lines_as_ruamel_does():
    """A spec's locations come from ruamel.yaml, which also breaks lines at a lone CR."""
    from byoc.errors import SpecError

    rendered = SpecError("bad", Location("s.yaml", 3, 4), source="a: 1\rb: 2\r\nc: 3\n").render()
    assert "3 | c: 3" in rendered


def test_render_without_location_or_source():
    assert UsageError("just a message", hint="try again").render() == (
        "usage error: just a message\n  = hint: try again"
    )


def test_hints_suggest_close_names():
    with pytest.raises(GraphError) as info:
        byoc.parse(G("  y = add(x, weight1)\n  return y", "x: float32[4], weight0: float32[4]"))
    assert info.value.hint == "did you mean 'weight0'?"
    with pytest.raises(GraphError) as info:
        byoc.parse(G("  y = ad(x, x)\n  return y"))
    assert info.value.hint == f"did you mean 'add'? {USER_OPS}"


def test_parse_file_errors(tmp_path):
    with pytest.raises(ParseError, match="cannot read") as info:
        byoc.parse_file(tmp_path / "missing.graph")
    assert info.value.location.line == 1
    with pytest.raises(UsageError, match="cannot tell the language"):
        byoc.parse_file(tmp_path / "g.txt")
    with pytest.raises(UsageError, match="unknown language"):
        byoc.parse("x", "yaml")


# ----------------------------------------------------------------------- CLI

BAD_GRAPH = G("  y = add(x, $x)\n  return y")


def test_cli_parse_error_exits_2_without_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.graph"
    bad.write_text(BAD_GRAPH, encoding="utf-8")
    assert main(["parse", str(bad)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert "Traceback" not in err
    assert f"{bad}:2:14" in err
    assert "unexpected character '$'" in err
    assert "2 |   y = add(x, $x)" in err
    assert "^" in err


def test_cli_debug_shows_the_traceback(tmp_path, capsys):
    bad = tmp_path / "bad.graph"
    bad.write_text(BAD_GRAPH, encoding="utf-8")
    assert main(["--debug", "parse", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "Traceback" in err
    assert f"{bad}:2:14" in err


@pytest.mark.parametrize(
    ("name", "content", "where"),
    [
        ("bad.examplejson", EJ + "  add 1 inputs: 0 0 shape: 5\n", ":3:21"),
        ("bad.graph", b"graph main(x: float32[4]) {\n  return \xff\n}\n", ":2:10"),
        ("empty.graph", "", ":1:1"),
        ("missing.graph", None, ":1:1"),
        ("bad.txt", "graph g(x: float32[1]) { return x }", "cannot tell the language"),
    ],
)
def test_cli_bad_inputs_exit_2(tmp_path, capsys, name, content, where):
    path = tmp_path / name
    if isinstance(content, str):
        path.write_text(content, encoding="utf-8")
    elif content is not None:
        path.write_bytes(content)
    assert main(["parse", str(path)]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    assert where in err
    assert "Traceback" not in err


def test_cli_parse_prints_normal_form(capsys):
    assert main(["parse", str(GUIDE_SUBGRAPH)]) == 0
    assert capsys.readouterr().out == GUIDE_SUBGRAPH.read_text(encoding="utf-8")
    assert main(["parse", str(GUIDE_SUBGRAPH), "--to", "graph"]) == 0
    graph_text = capsys.readouterr().out
    assert graph_text.startswith("graph subgraph_0(v0: float32[10, 10]")
    assert byoc.parse(graph_text) == byoc.parse_file(GUIDE_SUBGRAPH)


def test_cli_subprocess_error_and_success(tmp_path):
    bad = tmp_path / "bad.graph"
    bad.write_text(BAD_GRAPH, encoding="utf-8")
    run = subprocess.run(
        [sys.executable, "-m", "byoc", "parse", str(bad)], capture_output=True, text=True, timeout=60
    )
    assert run.returncode == 2
    assert "Traceback" not in run.stderr
    assert f"{bad}:2:14" in run.stderr
    assert run.stdout == ""
    good = subprocess.run(
        [sys.executable, "-m", "byoc", "parse", "-", "--from", "graph"],
        input=GUIDE_WHOLE_GRAPH.read_text(encoding="utf-8"),
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert good.returncode == 0, good.stderr
    assert byoc.parse(good.stdout) == byoc.parse_file(GUIDE_WHOLE_GRAPH)


@pytest.mark.parametrize("argv", [["--help"], ["parse", "--help"], ["ops", "--help"], ["--version"]])
def test_cli_help_exits_0(argv, capsys):
    with pytest.raises(SystemExit) as info:
        main(argv)
    assert info.value.code == 0
    out = capsys.readouterr().out
    assert "byoc" in out


def test_cli_help_subprocess():
    for argv in (["--help"], ["parse", "--help"]):
        run = subprocess.run(
            [sys.executable, "-m", "byoc", *argv], capture_output=True, text=True, timeout=60
        )
        assert run.returncode == 0
        assert "usage: byoc" in run.stdout
        assert run.stderr == ""


def test_cli_usage_error_exits_2(capsys):
    with pytest.raises(SystemExit) as info:
        main(["parse"])
    assert info.value.code == 2
    assert "FILE" in capsys.readouterr().err


def test_cli_ops_lists_the_catalog(capsys, catalog):
    assert main(["ops"]) == 0
    out = capsys.readouterr().out
    rows = out.splitlines()
    assert rows[0].split()[:2] == ["op", "inputs"]
    assert [row.split()[0] for row in rows[1:]] == list(catalog)
