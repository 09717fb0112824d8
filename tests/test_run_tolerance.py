"""`byoc run`'s default comparison of float outputs with the numpy reference: each
element within its own relative tolerance, or within a few units of the output's
largest magnitude (what a sum that cancels keeps of its terms' rounding)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest
from conftest import EXAMPLES
from libraries import missing_library

from byoc.cli.compare import DEFAULT_TOLERANCES, compare

WANT = np.array([260.0, 0.5, -3.0], dtype=np.float32)


def _with_error(index: int, error: float) -> np.ndarray:
    got = WANT.astype(np.float64)
    got[index] += error
    return got.astype(np.float32)


def test_a_cancelled_element_may_carry_the_rounding_of_the_largest():
    status, _ = compare(_with_error(1, 6e-5), WANT, None, None)
    assert status == "ok"


def test_an_explicit_atol_is_taken_as_given():
    status, _ = compare(_with_error(1, 6e-5), WANT, None, 1e-6)
    assert status == "MISMATCH"


@pytest.mark.parametrize(("index", "times"), [(1, 1.5), (0, 1.2), (2, -2.0), (1, 0.8)])
def test_errors_beyond_the_bound_are_mismatches(index, times):
    """The bound of an element: rtol of its value, plus atol of the largest magnitude."""
    rtol, atol = DEFAULT_TOLERANCES["float32"]
    bound = rtol * abs(float(WANT[index])) + atol * float(np.abs(WANT).max())
    status, _ = compare(_with_error(index, times * bound), WANT, None, None)
    assert status == ("MISMATCH" if abs(times) > 1 else "ok")


def test_equal_infinities_and_nans_are_no_error_and_warn_nothing():
    want = np.array([np.inf, -np.inf, np.nan, 1.0], dtype=np.float32)
    with np.errstate(all="raise"):  # inf - inf would be an invalid operation
        assert compare(want.copy(), want, None, None) == ("ok", "0")
        got = want.copy()
        got[0] = 3.0
        assert compare(got, want, None, None) == ("MISMATCH", "inf")


def test_float64_keeps_its_own_bound():
    want = WANT.astype(np.float64)
    got = want.copy()
    got[1] += 1e-9
    assert compare(got, want, None, None)[0] == "MISMATCH"
    got[1] = want[1] + 1e-11  # within 1e-12 of the largest magnitude, 260
    assert compare(got, want, None, None)[0] == "ok"


@pytest.mark.skipif(bool(missing_library("dnnl")), reason=str(missing_library("dnnl")))
def test_the_resnet_block_on_dnnl_matches_by_default():
    """oneDNN's convolutions sum in their own order; the default tolerance accepts that."""
    graph = EXAMPLES / "resnet_basic_block.graph"
    code = (
        f"from byoc.cli import main; import sys; sys.exit(main(['run', {str(graph)!r}, '--backend', 'dnnl']))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "every output matches the numpy reference" in out.stdout
