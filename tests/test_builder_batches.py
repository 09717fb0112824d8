"""The function builder types statements in batches as it reads them (while the text
defines each name before using it), and the rest in ``finish``. Where the batches
fall must not show: any text, valid or with one error, parses to the same program,
or fails with the same located error, whatever the batch size."""

from __future__ import annotations

from unittest import mock

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import byoc.builder
from byoc.api import parse
from byoc.errors import ByocError

BATCHES = (1, 2, 7, byoc.builder.TYPING_BATCH, 1 << 40)
"""Batch sizes compared: every statement at once, small odd ones, the default, and
one that is never reached (everything typed in ``finish``)."""

SETTINGS = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
OPS = ("add", "subtract", "multiply", "maximum")
ERRORS = ("none", "shape", "undefined", "cycle", "duplicate", "unknown-op")


def _outcome(text: str, language: str, batch: int):
    """The parsed program, or the error's class, message and location."""
    with mock.patch.object(byoc.builder, "TYPING_BATCH", batch):
        try:
            return parse(text, language)
        except ByocError as exc:
            return type(exc).__name__, exc.message, exc.location


@st.composite
def dsl_texts(draw) -> str:
    """A graph of up to 200 statements, each using earlier-ranked values; the text's
    order is the rank order with a few statements moved (uses before definitions),
    perhaps a region, and at most one error somewhere."""
    count = draw(st.integers(1, 200))
    ranked = [f"t{i}" for i in range(count)]
    lines = []
    for i, name in enumerate(ranked):
        values = ["x", "y", *ranked[:i]]
        a, b = draw(st.sampled_from(values)), draw(st.sampled_from(values))
        op = OPS[draw(st.integers(0, len(OPS) - 1))]
        nested = draw(st.booleans())
        call = f"{op}(negative({a}), {b})" if nested else f"{op}({a}, {b})"
        lines.append(f"  {name} = {call}")
    for _ in range(draw(st.integers(0, 3))):  # move a statement up: a use before a definition
        i = draw(st.integers(0, count - 1))
        j = draw(st.integers(0, i))
        lines.insert(j, lines.pop(i))
    error = draw(st.sampled_from(ERRORS))
    at = draw(st.integers(0, count - 1))
    if error == "shape":
        lines[at] = f"  {ranked[at]} = add(z, x)"
    elif error == "undefined":
        lines[at] = f"  {ranked[at]} = add(nowhere, x)"
    elif error == "cycle":
        lines[at] = f"  {ranked[at]} = add({ranked[-1]}, {ranked[at]})"
    elif error == "duplicate":
        lines.insert(at, f"  {ranked[at]} = negative(x)")
    elif error == "unknown-op":
        lines[at] = f"  {ranked[at]} = frobnicate(x)"
    region = draw(st.sampled_from(("none", "region", "shadowing region")))
    if region != "none":  # typed in finish, with every outer name known (the shadowing check)
        inner = "inner" if region == "region" else ranked[draw(st.integers(0, count - 1))]
        at = draw(st.integers(0, len(lines)))
        lines.insert(at, f"  rg = @ccompiler {{\n    {inner} = add(x, y)\n    return {inner}\n  }}")
    body = "\n".join(lines)
    return f"graph main(x: float32[2, 3], y: float32[2, 3], z: float32[4]) {{\n{body}\n  return {ranked[-1]}\n}}\n"


@SETTINGS
@given(dsl_texts())
def test_where_the_batches_fall_does_not_change_a_parse(text):
    outcomes = [_outcome(text, "graph", batch) for batch in BATCHES]
    assert all(o == outcomes[0] for o in outcomes[1:]), text


@SETTINGS
@given(count=st.integers(1, 150), moved=st.integers(0, 150), up=st.integers(0, 150), error=st.booleans())
def test_examplejson_parses_alike_at_every_batch_size(count, moved, up, error):
    """A chain of ``count`` op lines with one line moved ``up`` lines earlier (a use
    before a definition), and perhaps one wrong declared shape."""
    ops = [f"  add {i} inputs: {i - 1} 0 shape: 2 3" for i in range(1, count + 1)]
    if error:
        ops[moved % count] = ops[moved % count].replace("shape: 2 3", "shape: 3 2")
    i = moved % count
    ops.insert(max(0, i - up), ops.pop(i))
    text = "\n".join(["subgraph_0", "  input 0 2 3", *ops]) + "\n"
    outcomes = [_outcome(text, "examplejson", batch) for batch in BATCHES]
    assert all(o == outcomes[0] for o in outcomes[1:]), text


def test_a_statement_after_several_batches_that_uses_a_later_name_is_sorted():
    """Typing stops at the first use before a definition, many batches in, and
    ``finish`` orders the whole body: the program is the one the same text written
    in dependency order gives."""
    n = 5 * byoc.builder.TYPING_BATCH
    chain = [f"  t{i} = add(t{i - 1}, x)" for i in range(1, n)]
    head = "graph main(x: float32[4]) {\n  t0 = negative(x)\n"
    in_order = head + "\n".join(chain) + f"\n  return t{n - 1}\n}}\n"
    moved = chain[:]
    moved.insert(3 * byoc.builder.TYPING_BATCH, moved.pop(-1))  # the last link, read early
    late = head + "\n".join(moved) + f"\n  return t{n - 1}\n}}\n"
    assert parse(late, "graph") == parse(in_order, "graph")


def test_a_type_error_many_batches_in_is_located_at_its_statement():
    n = 4 * byoc.builder.TYPING_BATCH
    bad = 3 * byoc.builder.TYPING_BATCH + 5
    lines = [f"  t{i} = add(t{i - 1}, x)" if i != bad else f"  t{i} = add(t{i - 1}, z)" for i in range(1, n)]
    text = "graph main(x: float32[4], z: float32[5]) {\n  t0 = negative(x)\n" + "\n".join(lines)
    text += f"\n  return t{n - 1}\n}}\n"
    try:
        parse(text, "graph")
    except ByocError as exc:
        assert exc.location.line == bad + 2 and "add(" in exc.message
    else:
        raise AssertionError("a shape mismatch parsed")


def test_a_region_is_checked_against_outer_names_defined_after_it():
    """A region is typed in ``finish``, once the enclosing graph has defined every
    name: one that its body redefines is reported even when the graph defines it
    further down, past the batch the region was read in."""
    text = (
        "graph main(x: float32[2, 3], y: float32[2, 3]) {\n  t0 = add(x, y)\n"
        "  rg = @ccompiler {\n    t2 = add(x, y)\n    return t2\n  }\n"
        "  t1 = add(t0, y)\n  t2 = add(t1, rg)\n  return t2\n}\n"
    )
    for batch in BATCHES:
        outcome = _outcome(text, "graph", batch)
        assert outcome[1:] == ("'t2' in this region shadows 't2' of the enclosing graph", mock.ANY), batch
        assert (outcome[2].line, outcome[2].column) == (4, 5)
