"""When `byoc run` finds a float output outside its tolerance, it names the element
furthest outside, with both values and the tolerances used, and the --atol that would
accept every element (byoc/cli/compare.py: worst_element)."""

from __future__ import annotations

import re

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from byoc.cli.compare import compare, report, worst_element


def suggested_atol(line: str) -> float:
    return float(re.search(r"--atol (\S+) would accept", line).group(1))


@settings(max_examples=60, deadline=None)
@given(
    st.integers(1, 40),
    st.integers(0, 2**32 - 1),
    st.floats(1e-7, 1e-2),
    st.sampled_from([None, 0.0, 1e-5, 1e-3]),
)
def test_the_suggested_atol_accepts_every_element(n, seed, size, rtol):
    rng = np.random.default_rng(seed)
    want = rng.uniform(-2, 2, n).astype(np.float32)
    got = (want + rng.uniform(-size, size, n)).astype(np.float32)
    if compare(got, want, rtol, None)[0] == "ok":
        return  # nothing to explain
    line = worst_element(got, want, rtol, None)
    assert line is not None
    atol = suggested_atol(line)
    assert compare(got, want, rtol, atol)[0] == "ok"
    assert compare(got, want, rtol, atol / 2)[0] == "MISMATCH" or atol / 2 < 1e-12


def test_it_names_the_element_and_both_values():
    want = np.array([[1.0, 0.5, 1e-3]], np.float32)
    got = want.copy()
    got[0, 2] += np.float32(3e-5)
    line = worst_element(got, want, None, None)
    assert line.startswith("at [0, 2]: got 0.00103, expected 0.001 (atol 1e-05, rtol 0.0001)")


def test_a_nan_out_of_place_is_accepted_by_no_tolerance():
    want = np.array([1.0, 0.5], np.float32)
    got = np.array([1.0, np.nan], np.float32)
    assert worst_element(got, want, None, None).endswith("no tolerance accepts it")


def test_integers_and_other_shapes_have_nothing_to_explain():
    assert worst_element(np.array([1, 2]), np.array([1, 3]), None, None) is None
    assert worst_element(np.zeros(2, np.float32), np.zeros(3, np.float32), None, None) is None


def test_the_report_prints_it_under_the_table(capsys):
    want = [np.linspace(-1, 1, 8, dtype=np.float32)]
    got = [want[0] + np.float32(1e-4)]
    assert report(got, want, None, None) == 1
    out = capsys.readouterr().out
    assert "MISMATCH" in out and "output 0: the element furthest outside the tolerance is at [" in out
    assert "--atol" in out
