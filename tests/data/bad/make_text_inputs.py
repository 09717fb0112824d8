"""Fixtures of make_fixtures.py: text inputs too large to commit, or not UTF-8: graph DSL
files (10k-deep nesting, 1 MB names, 5000-digit numbers, 10k-long cycles), ExampleJSON
files, and backend specs."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

FIXTURES: dict[str, Callable[[Path], None]] = {}


def fixture(fn: Callable[[Path], None]) -> Callable[[Path], None]:
    FIXTURES[fn.__name__] = fn
    return fn


def _graph(body: str, params: str = "x: float32[4]") -> str:
    return f"graph main({params}) {{\n{body}\n}}\n"


# ------------------------------------------------------------------ graph DSL

DEPTH = 10_000
MEGABYTE = 1 << 20


@fixture
def graph_deep_calls(d: Path) -> None:
    """10k nested calls: negative(negative(...(x)...))."""
    expr = "negative(" * DEPTH + "x" + ")" * DEPTH
    (d / "deep.graph").write_text(_graph(f"  return {expr}"))


@fixture
def graph_deep_regions(d: Path) -> None:
    """10k regions nested in each other (regions do not nest: the first inner one is the error)."""
    (d / "deep.graph").write_text("graph main(x: float32[4]) {\n" + "  a = @ccompiler {\n" * DEPTH + "}\n")


@fixture
def graph_deep_brackets(d: Path) -> None:
    """10k nested brackets in an attribute value."""
    (d / "deep.graph").write_text(
        _graph("  y = concatenate(x, axis=" + "[" * DEPTH + "0" + "]" * DEPTH + ")")
    )


@fixture
def graph_long_identifier(d: Path) -> None:
    """A 1 MB value name."""
    name = "v" * MEGABYTE
    (d / "long.graph").write_text(_graph(f"  {name} = add(x, x)\n  return {name}"))


@fixture
def graph_long_graph_name(d: Path) -> None:
    """A 1 MB graph name (graph names become file names: <graph>.graph.json)."""
    (d / "long.graph").write_text(f"graph {'g' * MEGABYTE}(x: float32[4]) {{\n  return x\n}}\n")


@fixture
def graph_long_region_name(d: Path) -> None:
    """A 10k-character region name (it would be a C symbol)."""
    (d / "long.graph").write_text(
        _graph(f"  s = @ccompiler as {'r' * 10_000} {{ return add(x, x) }}\n  return s")
    )


@fixture
def graph_long_comment_is_fine_but_bad_op(d: Path) -> None:
    """A 1 MB comment is not a name: the error is the unknown op after it."""
    (d / "comment.graph").write_text(_graph(f"  # {'c' * MEGABYTE}\n  y = ad(x, x)\n  return y"))


@fixture
def graph_non_utf8(d: Path) -> None:
    (d / "latin1.graph").write_bytes(_graph("  # caf\xe9\n  return x").encode("latin-1"))


@fixture
def graph_nul_byte(d: Path) -> None:
    (d / "nul.graph").write_bytes(_graph("  y = add(x,\0 x)\n  return y").encode())


@fixture
def graph_huge_integer_literal(d: Path) -> None:
    """A 5000-digit integer (Python's int() refuses more than 4300 digits)."""
    (d / "int.graph").write_text(_graph(f"  k = const int64[4] {'7' * 5000}\n  return x"))


@fixture
def graph_huge_dim_digits(d: Path) -> None:
    (d / "dim.graph").write_text(_graph("  return x", f"x: float32[{'9' * 5000}]"))


@fixture
def graph_huge_attribute(d: Path) -> None:
    (d / "attr.graph").write_text(_graph(f"  return concatenate(x, x, axis={'1' * 5000})"))


# ----------------------------------------------------------------- ExampleJSON


@fixture
def examplejson_long_header(d: Path) -> None:
    (d / "long.examplejson").write_text(f"{'s' * MEGABYTE}\n  input 0 4\n  add 1 inputs: 0 0 shape: 4\n")


@fixture
def examplejson_long_id(d: Path) -> None:
    """An id of 5000 digits, mostly leading zeros (int() of it used to raise)."""
    (d / "id.examplejson").write_text(f"sg\n  input {'0' * 4999}1 4\n  add 1 inputs: 1 1 shape: 4\n")


@fixture
def examplejson_huge_dim_digits(d: Path) -> None:
    (d / "dim.examplejson").write_text(f"sg\n  input 0 {'9' * 5000}\n  add 1 inputs: 0 0 shape: 4\n")


@fixture
def examplejson_non_utf8(d: Path) -> None:
    (d / "bad.examplejson").write_bytes(b"sg\n  input 0 4\n  add 1 inputs: 0 0 shape: 4 \xff\xfe\n")


@fixture
def examplejson_nul_byte(d: Path) -> None:
    (d / "nul.examplejson").write_bytes(b"sg\n  input 0 4\n  add 1 inputs: 0 \x00 shape: 4\n")


@fixture
def examplejson_long_cycle(d: Path) -> None:
    """10k op lines, each using the next; the last uses the first: one 10k-node cycle."""
    lines = ["sg", "  input 0 4"]
    lines += [f"  add {i} inputs: 0 {i + 1 if i < DEPTH else 1} shape: 4" for i in range(1, DEPTH + 1)]
    (d / "cycle.examplejson").write_text("\n".join(lines) + "\n")


@fixture
def examplejson_wide_op(d: Path) -> None:
    """An add with 10k inputs."""
    (d / "wide.examplejson").write_text("sg\n  input 0 4\n  add 1 inputs: " + " 0" * DEPTH + " shape: 4\n")


@fixture
def graph_long_cycle(d: Path) -> None:
    """10k statements in one dependency cycle, written in reverse order."""
    body = "".join(f"  v{i} = add(x, v{(i + 1) % DEPTH})\n" for i in range(DEPTH))
    (d / "cycle.graph").write_text(_graph(body + "  return v0"))


# -------------------------------------------------------------------- specs


@fixture
def spec_non_utf8(d: Path) -> None:
    (d / "latin1.yaml").write_bytes("version: 1\nname: latin1\n# caf\xe9\nkind: json\n".encode("latin-1"))


@fixture
def spec_deep_nesting(d: Path) -> None:
    """1000 nested flow sequences (ruamel.yaml's scanner is quadratic in the depth: 10k
    takes seconds; specs are trusted input, so this only checks for a clean error)."""
    depth = 1000
    (d / "deep.yaml").write_text(
        "version: 1\nname: deep\nkind: json\nranks: " + "[" * depth + "]" * depth + "\n"
    )


@fixture
def spec_long_key(d: Path) -> None:
    (d / "long.yaml").write_text(f"version: 1\nname: long\nkind: json\n{'k' * MEGABYTE}: 1\n")
