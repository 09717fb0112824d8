"""The polynomials of fused_math.h: Chebyshev fits by mpmath (not a byoc dependency:
``pip install mpmath``). Run ``python spec/backends/fused/fused_math_fit.py``; it prints
each polynomial's coefficients, highest degree first, as fused_math.h evaluates them
(Horner's rule), with the fit's largest relative error."""

from __future__ import annotations

import mpmath as mp

mp.mp.dps = 40


def _erfc_scaled(a):
    """erfc(a) e**(a^2): smooth where erfc itself falls by 49 decades."""
    return mp.erfc(a) * mp.exp(a * a)


def _at_zero(f, limit):
    return lambda v: f(v) if v != 0 else mp.mpf(limit)


HALF_LN2 = mp.log(2) / 2
FITS = {
    # name: (the function fitted, interval, number of coefficients, scale of its error)
    "exp P(r), e**r = 1 + r + r^2 P(r)": (
        _at_zero(lambda r: (mp.exp(r) - 1 - r) / r**2, 0.5),
        [-HALF_LN2 * 1.001, HALF_LN2 * 1.001],
        9,
        HALF_LN2**2,
    ),
    "tanh P(z), tanh x = x + x^3 P(x^2), |x| < 0.55": (
        _at_zero(lambda z: (mp.tanh(mp.sqrt(z)) / mp.sqrt(z) - 1) / z, -mp.mpf(1) / 3),
        [0, 0.3025],
        9,
        0.3025 / 0.33,
    ),
    "erf E(z), erf x = x E(x^2), |x| < 1": (
        _at_zero(lambda z: mp.erf(mp.sqrt(z)) / mp.sqrt(z), 2 / mp.sqrt(mp.pi)),
        [0, 1],
        11,
        1 / 0.84,
    ),
    "erfc M(u), erfc a = e**(-a^2) M(a - 1.75), 1 <= a < 2.5": (
        lambda u: _erfc_scaled(u + mp.mpf(1.75)),
        [-0.75, 0.75],
        14,
        1 / _erfc_scaled(2.5),
    ),
    "erfc T(v), erfc a = e**(-a^2) T(1/a), 2.5 <= a <= 10.5": (
        lambda v: _erfc_scaled(1 / v),
        [1 / mp.mpf(10.5), 1 / mp.mpf(2.5)],
        12,
        1 / _erfc_scaled(10.5),
    ),
}


def main() -> None:
    for name, (f, interval, n, scale) in FITS.items():
        poly, error = mp.chebyfit(f, interval, n, error=True)
        print(f"{name}: relative error {float(error * scale):.1e}")
        print("  " + ", ".join(mp.nstr(c, 17) for c in poly))


if __name__ == "__main__":
    main()
