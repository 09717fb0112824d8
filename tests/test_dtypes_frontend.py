"""The dtypes of issue 29 in the graph DSL and its weights files: ``bool`` with the
literals ``true``/``false``, ``float16`` and ``bfloat16`` (range-checked by rounding,
printed as the shortest text that reads back to the same bits), and the integer
dtypes ``int16``, ``uint16``, ``uint32``, ``uint64`` (range-checked by ``np.iinfo``);
bfloat16 entries of ``.npz`` files, stored as uint16 bits listed in
``__byoc_bfloat16__`` (byoc/npz_files.py)."""

from __future__ import annotations

import io

import ml_dtypes
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from byoc.api import load_catalog, parse
from byoc.errors import ByocError, GraphError, ParseError
from byoc.grammar.graph_printer import half_text, print_graph
from byoc.grammar.weights_file import externalize
from byoc.ir import DTYPES, Constant, TensorType
from byoc.npz_files import BFLOAT16_MARKER, npz_bytes, read_npz, sha256_hex

CATALOG = load_catalog()
BF16 = np.dtype(ml_dtypes.bfloat16)
NEW_DTYPES = ("bool", "float16", "bfloat16", "int16", "uint16", "uint32", "uint64")
INTEGERS = ("int16", "uint16", "uint32", "uint64", "int8", "uint8", "int32", "int64")


def _parse(text: str, **kw):
    return parse(text, "graph", catalog=CATALOG, **kw)


def _constant_program(dtype: str, values: np.ndarray) -> str:
    """A graph returning one literal constant of ``dtype`` with ``values``."""
    texts = _texts(values)
    return f"graph main() {{\n  k = const {dtype}[{len(values)}] [{', '.join(texts)}]\n  return k\n}}\n"


def _texts(values: np.ndarray) -> list[str]:
    from byoc.grammar.graph_printer import number_texts

    return number_texts(values)


def _const(program) -> Constant:
    (c,) = program.functions[0].constants
    return c


def _error(text: str, kind=ByocError) -> ByocError:
    with pytest.raises(kind) as info:
        _parse(text)
    return info.value


def _graph(line: str) -> str:
    return f"graph main(x: float32[4]) {{\n  {line}\n  return x\n}}\n"


# ------------------------------------------------------------------ types and literals


def test_every_dtype_is_a_parameter_type_and_prints_back():
    params = ", ".join(f"p{k}: {d}[2, 3]" for k, d in enumerate(DTYPES))
    text = f"graph main({params}) {{\n  return {', '.join(f'p{k}' for k in range(len(DTYPES)))}\n}}\n"
    program = _parse(text)
    assert [p.type.dtype for p in program.functions[0].params] == list(DTYPES)
    assert _parse(print_graph(program)) == program


def test_bool_literals_list_and_fill():
    program = _parse(
        "graph main() {\n  a = const bool[3] [true, false, true]\n  b = const bool[2, 2] false\n"
        "  c = const bool[1] true\n  return a, b, c\n}\n"
    )
    a, b, c = program.functions[0].constants
    assert a.values.dtype == np.bool_ and a.values.tolist() == [True, False, True]
    assert b.array.shape == (2, 2) and not b.values.any()
    assert c.values.tolist() == [True]
    text = print_graph(program)
    assert "[true, false, true]" in text and "const bool[2, 2] false" in text
    assert _parse(text) == program


@pytest.mark.parametrize(
    "line, column, message",
    [
        ("k = const float32[2] [1, true]", 28, "a float32 constant takes numbers, not true"),
        ("k = const float16[1] false", 24, "a float16 constant takes numbers, not false"),
        ("k = const uint8[3] [1, 2, false]", 29, "a uint8 constant takes numbers, not false"),
        ("k = const bfloat16[2] [true, 1]", 26, "a bfloat16 constant takes numbers, not true"),
    ],
)
def test_a_bool_literal_in_a_number_constant_is_located_at_the_literal(line, column, message):
    error = _error(_graph(line), GraphError)
    assert message in error.message
    assert (error.location.line, error.location.column) == (2, column)
    assert "true and false" in error.hint


@pytest.mark.parametrize("values", ["[true, 1]", "[0]", "1", "[false, 0.5]", "[-1, true]"])
def test_a_number_in_a_bool_constant_is_an_error_at_the_constant(values):
    error = _error(_graph(f"k = const bool[2] {values}"), GraphError)
    assert "a bool constant takes true or false, not" in error.message
    assert (error.location.line, error.location.column) == (2, 7)


def test_a_stray_word_is_located_at_the_word():
    error = _error(_graph("k = const bool[2] [true, yes]"), ParseError)
    assert "unexpected name 'yes' as a constant's values" in error.message
    assert (error.location.line, error.location.column) == (2, 28)


def test_weights_refs_still_parse_beside_bool_words():
    error = _error(_graph('k = const bool[2] weigths["a"]'), ParseError)
    assert "unexpected name 'weigths'" in error.message


# ------------------------------------------------------------------ ranges


@pytest.mark.parametrize("dtype", INTEGERS)
def test_integer_limits_are_accepted_and_one_past_them_refused(dtype):
    info = np.iinfo(dtype)
    low, high = int(info.min), int(info.max)
    program = _parse(_graph(f"k = const {dtype}[2] [{low}, {high}]"))
    assert _const(program).values.tolist() == [low, high]
    for bad in (low - 1, high + 1):
        error = _error(_graph(f"k = const {dtype}[2] [0, {bad}]"), GraphError)
        assert f"constant value {bad} is out of range for {dtype}" in error.message
        assert (error.location.line, error.location.column) == (2, 7)
        assert f"[{low}, {high}]" in error.hint


@pytest.mark.parametrize("dtype", ["float16", "bfloat16", "float32", "float64"])
def test_a_float_literal_is_in_range_when_it_rounds_to_a_finite_value(dtype):
    largest = float(ml_dtypes.finfo(dtype).max)
    below = float(np.nextafter(np.array(largest, dtype), np.array(0, dtype)).astype(np.float64))
    half_ulp = (largest - below) / 2
    # just under half a unit past the largest value rounds down to it; half a unit rounds
    # (to even: the largest value's last bit is 1) to infinity
    fits = largest + half_ulp * 0.99 if dtype != "float64" else largest
    for value in (largest, -largest, fits):
        program = _parse(_graph(f"k = const {dtype}[1] {value!r}"))
        assert float(_const(program).values.astype(np.float64)[0]) == np.copysign(largest, value)
    overflow = [repr(largest + half_ulp)] if dtype != "float64" else []
    for text in [*overflow, repr(-(largest * 4)) if dtype != "float64" else "-1e309", "1e400"]:
        error = _error(_graph(f"k = const {dtype}[2] [1, {text}]"), GraphError)
        assert f"is out of range for {dtype}" in error.message
        assert (error.location.line, error.location.column) == (2, 7)


def test_float32_largest_value_as_printed_reads_back():
    """The old check compared with finfo.max as a double and refused 3.4028235e+38, the
    text that numpy (and byoc's printer) writes for it."""
    largest = np.finfo(np.float32).max
    text = str(largest)
    program = _parse(_graph(f"k = const float32[1] {text}"))
    assert _const(program).values[0] == largest
    assert _parse(print_graph(program)) == program


def test_float16_65504_fits_and_65520_does_not():
    assert _const(_parse(_graph("k = const float16[1] 65519"))).values[0] == 65504
    error = _error(_graph("k = const float16[1] 65520"), GraphError)
    assert "65504" in error.hint


# ------------------------------------------------------------------ printing


def _all_finite(dtype) -> np.ndarray:
    values = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16).view(dtype)
    with np.errstate(invalid="ignore"):
        return values[np.isfinite(values.astype(np.float64))]


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=["float16", "bfloat16"])
def test_every_finite_half_value_prints_and_reads_back_bit_for_bit(dtype):
    values = _all_finite(dtype)
    program = _parse(_constant_program(str(dtype), values))
    assert _const(program).values.tobytes() == values.tobytes()  # -0.0 kept
    assert _parse(print_graph(program)) == program


@pytest.mark.parametrize("dtype", [np.dtype(np.float16), BF16], ids=["float16", "bfloat16"])
def test_half_text_is_no_longer_than_any_text_of_fewer_digits(dtype):
    """Shortest: no text of fewer significant digits reads back as the value."""
    values = _all_finite(dtype)[::97]
    for v in values:
        text = half_text(v)
        digits = len(text.split("e")[0].replace("-", "").replace(".", "").strip("0"))
        if digits > 1:
            shorter = float(f"{float(v):.{digits - 1}g}")
            assert np.array(shorter).astype(dtype).tobytes() != v.tobytes(), (text, shorter)


def test_float16_nearest_to_a_tenth_prints_as_0_1():
    program = _parse(_graph("k = const float16[2] [0.1, -0.0]"))
    assert "[0.1, -0.0]" in print_graph(program)


FLOAT_BITS = {
    "float16": (np.uint16, np.float16),
    "bfloat16": (np.uint16, BF16),
    "float32": (np.uint32, np.float32),
}


@st.composite
def new_dtype_constants(draw, finite: bool = True):
    """(dtype, values) of a dtype byoc added, or float32, any bits for the floats."""
    dtype = draw(st.sampled_from([*NEW_DTYPES, "float32"]))
    n = draw(st.integers(1, 6))
    if dtype == "bool":
        return dtype, np.array(draw(st.lists(st.booleans(), min_size=n, max_size=n)), np.bool_)
    if dtype in INTEGERS:
        info = np.iinfo(dtype)
        ints = st.integers(int(info.min), int(info.max))
        return dtype, np.array(draw(st.lists(ints, min_size=n, max_size=n)), dtype)
    bits_type, float_type = FLOAT_BITS[dtype]
    bits = st.integers(0, int(np.iinfo(bits_type).max))
    values = np.array(draw(st.lists(bits, min_size=n, max_size=n)), bits_type).view(float_type)
    if finite:
        with np.errstate(invalid="ignore"):
            values = values[np.isfinite(values.astype(np.float64))]
        if values.size == 0:
            values = np.array([-0.0], float_type)
    return dtype, values


@settings(max_examples=300, deadline=None)
@given(new_dtype_constants(), st.booleans())
def test_printed_constants_read_back_bit_for_bit(case, fill):
    dtype, values = case
    if fill:
        values = np.repeat(values[:1], 3)  # printed as one value that fills the tensor
    program = _parse(_constant_program(dtype, values))
    assert _const(program).values.tobytes() == values.tobytes()
    text = print_graph(program)
    again = _parse(text)
    assert again == program
    assert print_graph(again) == text


@settings(max_examples=150, deadline=None)
@given(new_dtype_constants(finite=False))
def test_constants_with_nan_and_infinity_round_trip_through_a_weights_file(case):
    """The DSL has no literal for NaN or an infinity; such constants (any bits) live in
    the weights file, which keeps every bit, bfloat16 included."""
    dtype, values = case
    base = _parse(_constant_program(dtype, np.zeros(len(values), values.dtype)))
    c = _const(base)
    fn = base.functions[0]
    program = type(base)(
        (type(fn)(fn.name, fn.params, (Constant(c.name, c.type, values),), fn.nodes, fn.outputs),)
    )
    external, data = externalize(program, "w.npz", 0)
    assert data is not None
    text = print_graph(external)
    again = _parse(text, weights_files={"w.npz": data})
    assert again == program
    assert _const(again).values.tobytes() == values.tobytes()


# ------------------------------------------------------------------ npz files and weights


def _npz(**arrays) -> bytes:
    buffer = io.BytesIO()
    np.savez(buffer, **arrays)
    return buffer.getvalue()


def _read(data: bytes) -> dict[str, np.ndarray]:
    return read_npz(io.BytesIO(data), "test.npz", GraphError)


def test_npz_bytes_store_bfloat16_as_listed_bits_and_read_them_back():
    h = np.array([[1.5, -0.0], [np.nan, np.inf]], np.float32).astype(ml_dtypes.bfloat16)
    g = np.array([3.25], np.float32).astype(ml_dtypes.bfloat16)
    arrays = {"h": h, "b": np.array([True, False]), "f": np.array([0.1, -65504], np.float16), "g": g}
    data = npz_bytes(arrays)
    raw = np.load(io.BytesIO(data), allow_pickle=False)
    assert raw["h"].dtype == np.uint16 and raw["h"].tobytes() == h.tobytes()
    assert list(raw[BFLOAT16_MARKER]) == ["g", "h"]
    back = _read(data)
    assert set(back) == set(arrays)
    for name, array in arrays.items():
        assert back[name].dtype == array.dtype and back[name].shape == array.shape
        assert back[name].tobytes() == array.tobytes()
    assert npz_bytes(arrays) == data  # deterministic: a digest names these bytes


def test_npz_bytes_refuses_the_reserved_name():
    with pytest.raises(ValueError, match="reserved"):
        npz_bytes({BFLOAT16_MARKER: np.zeros(2)})


@pytest.mark.parametrize(
    "arrays, message",
    [
        (
            {"k": np.ones(2, np.float32), BFLOAT16_MARKER: np.array(["k"])},
            "must hold uint16 bits, but it is float32",
        ),
        (
            {"k": np.ones(2, np.uint16), BFLOAT16_MARKER: np.array(["k", "z"])},
            "names the entry 'z', which it lacks",
        ),
        ({"k": np.ones(2, np.uint16), BFLOAT16_MARKER: np.array([1])}, "not a list of entry names"),
        ({"k": np.ones(2, np.uint16), BFLOAT16_MARKER: np.array([["k"]])}, "not a list of entry names"),
        ({"k": np.ones(2, ml_dtypes.bfloat16)}, "entry 'k' holds raw |V2 values"),
    ],
)
def test_npz_files_not_in_the_bfloat16_form_are_errors(arrays, message):
    with pytest.raises(GraphError) as info:
        _read(_npz(**arrays))
    assert message in info.value.message
    assert BFLOAT16_MARKER in info.value.hint


WEIGHTS = """\
weights "w.npz" sha256 "{digest}"

graph main(x: {dtype}[2, 3]) {{
  k = const {dtype}[2, 3] weights["k"]
  return k
}}
"""


@pytest.mark.parametrize("dtype", NEW_DTYPES)
def test_external_constants_of_each_new_dtype(dtype):
    rng = np.random.default_rng(7)
    values = rng.uniform(-3, 3, size=(2, 3)).astype(np.float32)
    array = values.astype(np.dtype(dtype)) if dtype != "bool" else values > 0
    if dtype.startswith("u"):
        array = np.abs(values * 9).astype(dtype)
    data = npz_bytes({"k": array})
    text = WEIGHTS.format(digest=sha256_hex(data), dtype=dtype)
    program = _parse(text, weights_files={"w.npz": data})
    c = _const(program)
    assert c.type == TensorType((2, 3), dtype)
    assert c.array.dtype == array.dtype and c.array.tobytes() == array.tobytes()
    assert print_graph(program) == text
    inline = print_graph(program, inline_weights=True)
    assert _parse(inline) == program


def test_a_bfloat16_constant_reads_listed_bits_only():
    bits = np.ones((2, 3), ml_dtypes.bfloat16).view(np.uint16)
    data = _npz(k=bits)
    with pytest.raises(GraphError) as info:
        _parse(WEIGHTS.format(digest=sha256_hex(data), dtype="bfloat16"), weights_files={"w.npz": data})
    assert "weights entry 'k' is uint16[2, 3], but the constant declares bfloat16[2, 3]" in info.value.message
    assert (info.value.location.line, info.value.location.column) == (4, 36)


def _positive_bfloat16() -> tuple[np.ndarray, np.ndarray]:
    """Every finite non-negative bfloat16 as doubles, ascending, and its bits."""
    finite = _all_finite(BF16)
    finite = finite[finite.view(np.uint16) < 0x8000]
    order = np.argsort(finite.astype(np.float64))
    return finite.astype(np.float64)[order], finite.view(np.uint16)[order]


POSITIVE_BFLOAT16 = _positive_bfloat16()


def _nearest_bfloat16_bits(x: float) -> int:
    """The bits of the bfloat16 nearest ``x`` (ties to even), by exact arithmetic."""
    from fractions import Fraction

    doubles, bits = POSITIVE_BFLOAT16
    i = int(np.searchsorted(doubles, abs(x)))
    candidates = [j for j in (i - 1, i) if 0 <= j < len(doubles)]
    exact = Fraction(abs(x))
    best = min(candidates, key=lambda j: (abs(Fraction(float(doubles[j])) - exact), int(bits[j]) & 1))
    return int(bits[best]) | (0x8000 if np.signbit(x) else 0)


@settings(max_examples=300, deadline=None)
@given(st.floats(-3e38, 3e38, allow_nan=False, allow_infinity=False), st.integers(-40, 40))
def test_bfloat16_literals_round_once_to_the_nearest(x, extra):
    """ml_dtypes rounds a double to bfloat16 through float32 (twice); a literal is
    rounded once, to the nearest bfloat16."""
    value = x + extra * 2.0**-40 if abs(x) < 1e30 else x
    program = _parse(_graph(f"k = const bfloat16[1] {value!r}"))
    got = int(_const(program).values.view(np.uint16)[0])
    assert got == _nearest_bfloat16_bits(value), value


def test_a_double_rounding_case_rounds_up():
    text = repr(1 + 2**-8 + 2**-40)  # float32 rounds it to the tie 1 + 2**-8
    program = _parse(_graph(f"k = const bfloat16[1] {text}"))
    assert float(_const(program).values[0]) == 1 + 2**-7
