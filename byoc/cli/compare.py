"""How ``byoc run`` compares outputs with the numpy reference (or with stored
output_*.pb files): the default tolerances, the comparison, and the printed table."""

from __future__ import annotations

import math
import sys

import numpy as np

from ..ir import is_float, is_half, is_integer

STORED_RTOL, STORED_ATOL = 1e-3, 1e-7
"""The default tolerances against stored output_*.pb files: ONNX's backend tests' own,
for float32 and float64. A float16 or bfloat16 output, whose last place is coarser
than 1e-3, is held to its dtype's defaults (:data:`DEFAULT_TOLERANCES`) instead."""


def _or(value: float | None, default: float) -> float:
    return default if value is None else value


def report(
    outputs,
    expected,
    rtol: float | None,
    atol: float | None,
    steps: list[float] | None = None,
    *,
    stored: bool = False,
) -> int:
    """Print a table of ``outputs`` against ``expected``; the number that differ.
    ``steps``: how far each output may lie, in steps of a quantization
    (:mod:`byoc.output_steps`; default: none). ``stored``: ``expected`` came from
    output_*.pb files (see :data:`STORED_RTOL`)."""
    rows = [("output", "shape", "dtype", "max abs error", "status")]
    failed = 0
    stepped, worst = [], []
    for k, (got, want, step) in enumerate(zip(outputs, expected, steps or [0.0] * len(outputs))):
        rt, at = (
            (_or(rtol, STORED_RTOL), _or(atol, STORED_ATOL))
            if stored and not is_half(str(got.dtype))
            else (rtol, atol)
        )
        status, error = compare(got, want, rt, at, step)
        failed += status != "ok"
        if status == "ok" and step and compare(got, want, rt, at)[0] != "ok":  # the step was needed
            stepped.append(f"{k} (one step: {step:.3g})")
        rows.append((str(k), str(list(got.shape)), str(got.dtype), error, status))
        if status == "MISMATCH":
            detail = worst_element(got, want, rt, at, step)
            if detail is not None:
                worst.append(f"  output {k}: the element furthest outside the tolerance is {detail}\n")
    widths = [max(len(r[i]) for r in rows) for i in range(5)]
    for row in rows:
        sys.stdout.write("  " + "  ".join(c.ljust(w) for c, w in zip(row, widths)).rstrip() + "\n")
    sys.stdout.write("".join(worst))
    if stepped:
        sys.stdout.write(
            f"  within one step of a quantization: output {', '.join(stepped)}; a quantize_linear "
            "rounds a float whose order of summation ONNX leaves to the implementation\n"
        )
    return failed


DEFAULT_TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-12, 1e-12),
    "float32": (1e-4, 1e-5),
    "float16": (5e-3, 1e-3),
    "bfloat16": (4e-2, 8e-3),
}
"""``(rtol, atol)`` of each float dtype when --rtol/--atol are not given; the atol is
scaled by the output's largest magnitude above 1 (see :func:`compare`).

float16 and bfloat16 are computed in float32 and each node's result is rounded once
to the dtype, as the numpy reference rounds its float64 result: the two roundings
start from values a float32 rounding apart, so they land on the same or neighbouring
16-bit values, one unit in the last place (ulp) apart per node, and a chain of nodes
carries its inputs' differences along. A ulp is 2**-10 of a float16 value at most
(11 significant bits: 9.8e-4 relative at 1.0) and 2**-7 of a bfloat16 (8 bits:
7.8e-3), so the relative tolerances allow about 5 ulps (5e-3, 4e-2) and the absolute
ones about one ulp of the output's largest magnitude (1e-3, 8e-3), for an element
where a sum cancels. float32's are for kernels that sum in float32, as BLAS libraries,
oneDNN and ``fused`` do: a float sum of k terms may be k * 2**-24 of the sum of their
magnitudes from the exact one (768 terms, a transformer's projection: 4.6e-5), and a
network carries those differences through its layers (a BERT-base forward pass on
``fused``: up to 3.1e-6 off on outputs below 1, 5e-5 of such an element). 1e-4
relative and 1e-5 of the largest magnitude absolute accept that, while a wrong index
or a lost term is off by the order of the values themselves. bool and integer outputs must be equal, but for
a quantization's step (:mod:`byoc.output_steps`)."""


def compare(
    got: np.ndarray, want: np.ndarray, rtol: float | None, atol: float | None, step: float = 0.0
) -> tuple[str, str]:
    """(status, max abs error) of ``got`` against ``want``: integers equal (or within
    ``step``), floats close as their dtype's tolerances say (plus ``step``)."""
    if got.shape != want.shape or got.dtype != want.dtype:
        return f"MISMATCH (expected {want.dtype}{list(want.shape)})", "-"
    if got.size == 0:
        return "ok", "0"
    dtype = str(got.dtype)
    if dtype == "bool" or is_integer(dtype):  # exact; the difference without wrapping (uint64)
        differ = got != want
        if not differ.any():
            return "ok", "0"
        big, small = np.maximum(got[differ], want[differ]), np.minimum(got[differ], want[differ])
        error = max(int(b) - int(s) for b, s in zip(big.tolist(), small.tolist()))
        return ("ok" if error <= step else "MISMATCH"), str(error)
    # np.allclose on a bfloat16 array computes in bfloat16: compare doubles
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    rtol, atol = _tolerances(want64, dtype, rtol, atol, step)
    with np.errstate(invalid="ignore"):  # inf - inf: equal values, no error
        diff = np.abs(got64 - want64)
    error = float(np.max(np.where(_same(got64, want64), 0.0, diff), initial=0.0))
    ok = np.allclose(got64, want64, rtol=rtol, atol=atol, equal_nan=True)
    return ("ok" if ok else "MISMATCH"), f"{error:.3g}"


def _tolerances(want64: np.ndarray, dtype: str, rtol: float | None, atol: float | None, step: float):
    """(rtol, atol) for an output of ``dtype`` expected to be ``want64``: the given ones,
    or the dtype's defaults (:data:`DEFAULT_TOLERANCES`); the atol plus ``step``."""
    default_rtol, default_atol = DEFAULT_TOLERANCES[dtype]
    if atol is None:
        # A kernel that sums in its own order (a library's blocked conv, a tree
        # reduction) leaves an element where the sum cancels with the rounding of its
        # larger terms: the default allows each element a few units of the output's
        # largest magnitude besides its own relative error.
        finite = np.abs(want64[np.isfinite(want64)])
        largest = float(finite.max()) if finite.size else 0.0
        atol = default_atol * max(1.0, largest)
    atol += step * (1 + 1e-6)  # a step of a dequantized value, and its float32 rounding
    return _or(rtol, default_rtol), atol


def worst_element(
    got: np.ndarray, want: np.ndarray, rtol: float | None, atol: float | None, step: float = 0.0
) -> str | None:
    """For float outputs of one shape that :func:`compare` finds apart: the element
    furthest outside the tolerance, what it is and should be, and the --atol that would
    accept every element at this rtol (none, for a NaN or an infinity out of place)."""
    if got.shape != want.shape or got.dtype != want.dtype or not got.size or not is_float(str(got.dtype)):
        return None
    got64, want64 = got.astype(np.float64), want.astype(np.float64)
    rt, at = _tolerances(want64, str(got.dtype), rtol, atol, step)
    with np.errstate(invalid="ignore", over="ignore"):
        excess = np.abs(got64 - want64) - (at + rt * np.abs(want64))
    excess = np.where(_same(got64, want64), -np.inf, np.where(np.isnan(excess), np.inf, excess))
    k = int(np.argmax(excess))
    where = [int(i) for i in np.unravel_index(k, got.shape)] if got.ndim else []
    g, w = got64.flat[k], want64.flat[k]
    line = f"at {where}: got {g:.7g}, expected {w:.7g} (atol {at:.3g}, rtol {rt:.3g})"
    if not np.isfinite(excess.flat[k]):
        return line + "; no tolerance accepts it"
    return line + f"; --atol {_up(float(np.max(excess)) + at):.2g} would accept every element"


def _same(got64: np.ndarray, want64: np.ndarray) -> np.ndarray:
    """Where the two are the same value: equal, infinities of one sign, or both NaN."""
    return (got64 == want64) | (np.isnan(got64) & np.isnan(want64))


def _up(x: float) -> float:
    """``x`` rounded up to two significant digits, so that the value printed suffices."""
    if x <= 0:
        return x
    unit = 10.0 ** (math.floor(math.log10(x)) - 1)
    return math.ceil(x / unit * (1 - 1e-12)) * unit
