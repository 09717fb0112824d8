"""byoc/float_text.py writes every float32 exactly as the printer's value-by-value
formula does (``reference_text``: numpy's shortest decimal read back as a double and
``repr``-ed, ``nan``/``-nan`` by the sign bit): arbitrary bit patterns, the values at
the edges of the algorithm (powers of two, subnormals, the ends of the range, the
point positions where Python switches to an exponent), and a few million random
patterns. The vectorised path is called directly (``vector_join``), so small arrays
test it too."""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import byoc.float_text as ft
from byoc.float_text import float32_decimals, float32_texts, join_float32, reference_text, vector_join
from byoc.grammar.graph_printer import number_list, number_texts


def as_float32(bits) -> np.ndarray:
    return np.asarray(bits, dtype=np.uint64).astype(np.uint32).view(np.float32)


def old_text(value: np.float32) -> str:
    """The printer's text before byoc/float_text.py (number_texts at a4e4f8c): the double
    of numpy's shortest text, its sign from the bits, ``repr`` or ``nan``/``-nan``."""
    x = math.copysign(float(str(value)), -1.0 if np.signbit(value) else 1.0)
    if x != x:
        return "-nan" if math.copysign(1.0, x) < 0 else "nan"
    return repr(x)


def assert_same(values: np.ndarray, sep: str = ",") -> int:
    """The vectorised texts of ``values`` equal the reference's, one by one; returns
    how many took the per-element path."""
    text, slow = vector_join(values, sep)
    got = text.split(sep) if len(values) else []
    want = [old_text(v) for v in values]
    if got != want:
        wrong = [(hex(int(b)), g, w) for b, g, w in zip(values.view(np.uint32), got, want) if g != w]
        raise AssertionError(f"{len(wrong)} of {len(values)} differ, e.g. {wrong[:5]}")
    return slow


def neighbours(values: np.ndarray, ulps: int = 2) -> np.ndarray:
    """``values`` with the float32s up to ``ulps`` steps either side, both signs, as
    bit patterns (only finite ones and infinities)."""
    bits = values.astype(np.float32).view(np.uint32).astype(np.int64) & 0x7FFFFFFF
    near = (bits[:, None] + np.arange(-ulps, ulps + 1)[None, :]).reshape(-1)
    near = near[(near >= 0) & (near <= 0x7F800000)]
    return np.unique(np.concatenate([near, near | 0x80000000]))


def test_the_reference_is_the_old_formula():
    for v in as_float32([0, 0x80000000, 0x7FC00000, 0xFFC00000, 0x7F800000, 0x3DCCCCCD, 0xBF800000]):
        assert reference_text(v) == old_text(v)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=200))
def test_arbitrary_bit_patterns(bits):
    assert_same(as_float32(bits))


@settings(max_examples=100, deadline=None)
@given(
    st.lists(st.integers(0, 2**32 - 1), min_size=0, max_size=100),
    st.sampled_from([", ", ",", " ", ";\n", "?", "0", " <sep 123?> "]),
)
def test_joined_with_any_separator(bits, sep):
    values = as_float32(bits)
    want = sep.join(old_text(v) for v in values)
    assert vector_join(values, sep)[0] == want
    assert join_float32(values, sep) == want
    assert vector_join(values, sep, "[", "]")[0] == "[" + want + "]"
    assert join_float32(values, sep, "(", ")\n") == "(" + want + ")\n"


@pytest.mark.parametrize("sep", [", ", " <sep 123?> ", "0123456789abcdef"])
def test_zeros_infinities_and_nans_leave_a_long_separator_alone(sep):
    """A value without digits (0.0, inf, nan, with either sign) writes no digit into
    the bytes after its text, where a long separator lies."""
    values = as_float32([0x00000000, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000] * 20)
    want = sep.join(old_text(v) for v in values)
    assert vector_join(values, sep)[0] == want


def test_powers_of_two_and_their_neighbours():
    powers = np.array([2.0**e for e in range(-149, 128)])
    slow = assert_same(as_float32(neighbours(powers, ulps=3)))
    assert slow == 0


def test_subnormals_and_the_ends_of_the_range():
    info = np.finfo(np.float32)
    edges = [
        *range(1, 300),  # the smallest subnormals, one to a few significant bits
        *range(0x007FFF00, 0x00800100),  # the largest subnormals and the smallest normals
        *range(0x7F7FFF00, 0x7F800001),  # up to float32's largest value and inf
    ]
    values = as_float32(edges)
    assert_same(np.concatenate([values, -values]))
    special = np.array([info.max, -info.max, info.tiny, -info.tiny, info.smallest_subnormal], np.float32)
    assert_same(special)
    assert (
        vector_join(special, ", ")[0] == "3.4028235e+38, -3.4028235e+38, 1.1754944e-38, -1.1754944e-38, 1e-45"
    )


def test_zeros_infinities_and_nans():
    bits = [0, 0x80000000, 0x7F800000, 0xFF800000, 0x7FC00000, 0xFFC00000, 0x7F800001, 0xFFFFFFFF, 0x7FBFFFFF]
    values = as_float32(bits)
    assert vector_join(values, " ")[0] == "0.0 -0.0 inf -inf nan -nan nan -nan nan"
    assert_same(np.tile(values, 10))


def test_where_python_switches_to_an_exponent():
    # point positions -4/-3 (1e-05 against 0.0001) and 16/17 (1e+16 against 1e15), every
    # power of ten, and the float32s around them
    powers = np.array([10.0**e for e in range(-45, 39)])
    slow = assert_same(as_float32(neighbours(powers, ulps=50)))
    assert slow == 0
    assert vector_join(np.array([1e-4, 1e-5, 1e15, 1e16, 1.5e16, 123456789e7], np.float32), ",")[0] == (
        "0.0001,1e-05,1000000000000000.0,1e+16,1.5e+16,1234568000000000.0"
    )


def test_short_decimals_and_their_neighbours():
    digits = np.arange(1, 1000, dtype=np.float64)
    values = np.concatenate([digits * 10.0**e for e in range(-45, 36)])
    with np.errstate(over="ignore"):
        assert_same(as_float32(neighbours(values, ulps=1)))


def test_a_few_million_random_bit_patterns():
    bits = np.random.default_rng(20261129).integers(0, 2**32, 1 << 21, dtype=np.uint64)
    assert assert_same(as_float32(bits)) == 0  # no value needed the per-element path


@pytest.mark.parametrize("scale", [1.0, 1e-3, 1e-5, 1e3, 1e7])
def test_model_like_values_take_the_vectorised_path(scale, monkeypatch):
    rng = np.random.default_rng(7)
    normal = (rng.standard_normal(100_000) * scale).astype(np.float32)
    values = np.concatenate([normal, np.round(normal, 3), np.round(normal * 1000)]).astype(np.float32)
    want = ",".join(old_text(v) for v in values)

    def refuse(value):
        raise AssertionError(f"{value} went the per-element way")

    monkeypatch.setattr(ft, "reference_text", refuse)
    assert vector_join(values, ",") == (want, 0)


def test_the_per_element_path_gives_the_same_decimals():
    values = as_float32(np.random.default_rng(3).integers(0, 0x7F800000, 5000, dtype=np.uint64))
    d = float32_decimals(values)
    digits9, ndigits, point = d.digits9.copy(), d.ndigits.copy(), d.point.copy()
    rows = np.arange(len(values))
    ft._settle(values.view(np.uint32), digits9, ndigits, point, rows)
    assert (digits9 == d.digits9).all() and (ndigits == d.ndigits).all() and (point == d.point).all()


def test_decimals_read_back():
    values = as_float32(np.random.default_rng(5).integers(1, 0x7F800000, 20000, dtype=np.uint64))
    d = float32_decimals(values)
    for v, m, nd, pt in zip(values, d.digits9.tolist(), d.ndigits.tolist(), d.point.tolist()):
        assert 10**8 <= m < 10**9 and m % 10 ** (9 - nd) == 0
        assert np.float32(float(Fraction(m, 10**9) * Fraction(10) ** pt)) == v


def test_the_tables():
    tab = ft._tables()
    for e2 in range(-149, 128):
        e = e2 + 1023
        lowest = Fraction(2) ** e2
        est = 0
        while Fraction(10) ** (est + 1) <= lowest:
            est += 1
        while Fraction(10) ** est > lowest:
            est -= 1
        power = Fraction(10) ** (est + 1)
        thr = tab.thr[e]
        if math.isinf(thr):
            assert power > Fraction(float(np.finfo(np.float32).max))
        else:
            assert Fraction(thr) >= power and np.float32(thr) == thr
            below = np.nextafter(np.float32(thr), np.float32(0))
            assert Fraction(float(below)) < power
    r, d = np.arange(1000)[:, None], np.arange(256)[None, :]
    want = np.zeros((1000, 256), np.int64)
    for j in (1, 2, 3):
        want[(r % 10**j) <= d] = j
    assert (tab.jt.reshape(1000, 256) == want).all()
    z = np.arange(1, 10**6 + 1)
    tz = np.zeros_like(z)
    for i in range(1, 7):
        tz += z % 10**i == 0
    assert (tab.tz[1:] == tz).all()


def test_eight_digits_in_ascii():
    x = np.array([0, 1, 9999, 10000, 12345678, 99999999, 10000001, 90909090], np.uint64)
    x = np.concatenate([x, np.random.default_rng(1).integers(0, 10**8, 100000).astype(np.uint64)])
    want = [f"{v:08d}".encode() for v in x.tolist()]
    ft._ascii8(x)
    assert [w.tobytes() for w in x.view("V8")] == want


def test_the_printer_and_number_texts():
    values = np.concatenate(
        [
            as_float32([0, 0x80000000, 0x7FC00000, 0xFFC00000, 0x7F800000, 0xFF800000]),
            np.float32([0.1, -2.5, 3e38]),
        ]
    )
    for n in (1, 5, ft.SMALL - 1, ft.SMALL, 1000):
        array = np.resize(values, n)
        want = [old_text(v) for v in array]
        assert number_texts(array) == want
        assert float32_texts(array) == want
        assert number_list(array) == "[" + ", ".join(want) + "]"
