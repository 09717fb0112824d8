"""A constant's list of numbers is one token (NUMBER_LIST in grammar/graph.lark, read in
grammar/graph_constants.py): it must give exactly what the word-level rules give, which
a comment inside the list forces, and refuse a malformed number at its column."""

from __future__ import annotations

import numpy as np
import pytest
from conftest import parse_graph_text
from hypothesis import given, settings
from hypothesis import strategies as st

from byoc.errors import ByocError, GraphError, ParseError

DTYPES = ("float32", "float64", "float16", "int32", "int64", "uint8", "bool")


def graph(dtype: str, count: int, values: str) -> str:
    return f"graph main(x: {dtype}[{count}]) {{\n  k = const {dtype}[{count}] {values}\n  return x, k\n}}\n"


def outcome(text: str):
    """The constant's dtype and bytes, or the error's type, message and place."""
    try:
        program = parse_graph_text(text)
    except ByocError as exc:
        return type(exc).__name__, exc.message, exc.location.line, exc.location.column
    (constant,) = program.functions[0].constants
    return str(constant.array.dtype), constant.array.tobytes()


def word_level(text: str) -> str:
    """``text`` with a comment after the first "[" of the constant, which the one-token
    reading does not take: the word-level rules read the list."""
    head, _, tail = text.partition("] [")
    return f"{head}] [  # word by word\n{tail}"


_int = st.integers(-(10**20), 10**20).map(str)
_float = st.floats(allow_nan=False, allow_infinity=False, width=64).map(repr)
_spelled = st.sampled_from(
    ["1.", ".5", "-.25", "+3", "+2.5e-3", "1E5", "007", "-0", "0.0", "1e+2", "6.02E23"]
)
_sign = st.sampled_from(["", "+", "-"])
_gap = st.sampled_from(["", " ", "  ", "\n    ", "\t"])


@st.composite
def number_lists(draw):
    numbers = draw(st.lists(st.one_of(_int, _float, _spelled), min_size=1, max_size=12))
    parts = [draw(_gap) + n + draw(_gap) for n in numbers]
    trailing = draw(st.sampled_from(["", ",", ", "]))
    return len(numbers), "[" + ",".join(parts) + trailing + "]"


@settings(max_examples=300, deadline=None)
@given(number_lists(), st.sampled_from(DTYPES))
def test_one_token_reads_what_the_word_level_rules_read(case, dtype):
    count, values = case
    text = graph(dtype, count, values)
    fast = outcome(text)
    slow = outcome(word_level(text))
    if fast[0] in ("ParseError", "GraphError") and fast[0] == slow[0]:
        assert fast[1] == slow[1]  # the same message; the word-level place follows the comment's line
    else:
        assert fast == slow


@pytest.mark.parametrize(
    ("values", "word", "column"),
    [
        ("[1, 2.5.1, 3]", "'2.5.1' is not a number", 28),
        ("[1,, 3]", "a value is missing between two commas", 27),
        ("[1, 2e, 3]", "'2e' is not a number", 28),
        ("[1, --2, 3]", "'--2' is not a number", 28),
        ("[1, 2 3]", "'2 3' is not a number", 28),
    ],
)
def test_a_malformed_number_is_refused_at_its_column(values, word, column):
    text = graph("float32", 3, values)
    with pytest.raises(ParseError) as info:
        parse_graph_text(text)
    assert info.value.message == word and (info.value.location.line, info.value.location.column) == (
        2,
        column,
    )
    assert text.splitlines()[1][column - 1 :].startswith(word.split("'")[1] if "'" in word else ",")


def test_a_malformed_number_on_a_later_line_is_refused_there():
    text = graph("float32", 4, "[1,\n    2,\n    3..0, 4]")
    with pytest.raises(ParseError) as info:
        parse_graph_text(text)
    assert (info.value.location.line, info.value.location.column) == (4, 5)


def test_an_integer_too_long_for_any_dtype_is_refused_as_the_word_level_rules_do():
    long = "9" * 41
    text = graph("int64", 2, f"[1, {long}]")
    with pytest.raises(GraphError) as fast:
        parse_graph_text(text)
    with pytest.raises(GraphError) as slow:
        parse_graph_text(graph("int64", 2, f"[1, # word by word\n {long}]"))
    assert fast.value.message == slow.value.message
    column = text.splitlines()[1].index(long) + 1
    assert (fast.value.location.line, fast.value.location.column) == (2, column)


def test_an_empty_list_reads_as_no_values():
    with pytest.raises(GraphError) as info:
        parse_graph_text(graph("float32", 2, "[ ]"))
    assert "needs 2 values, got 0" in info.value.message


def test_a_large_constant_reads_back_exactly():
    values = np.random.default_rng(7).standard_normal(50_000).astype(np.float32)
    text = graph("float32", values.size, "[" + ", ".join(map(str, values.tolist())) + "]")
    (constant,) = parse_graph_text(text).functions[0].constants
    np.testing.assert_array_equal(constant.array, values)
